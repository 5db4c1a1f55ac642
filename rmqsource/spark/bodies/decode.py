"""Decoding in the read tasks: the message batches a read yields, with the decoded columns of their bodies
and the bad-record policy (docs/bodies.md). Used by the batch read, the stream and ``rmq export``."""

from __future__ import annotations

import functools
from typing import Iterator, Optional

import pyarrow as pa

from ...errors import BodyDecodeError
from ..schema import ARROW_SCHEMA, COLUMNS
from .columns import decoded_struct, topic_schemas
from .errors import BadBody
from .constants import DECODE_ERROR_COLUMN

# read with every body decoding: the body, its topic (which schema) and where it is (a BodyDecodeError)
NEEDED_COLUMNS = ("body", "topic", "queueId", "queueOffset", "commitLogOffset")
CONFLUENT_HEADER = 5            # magic byte 0, then a 4-byte big-endian schema id


def message_columns(columns, spec: "BodySpec") -> tuple:
    """The message columns to read for output ``columns``: the message columns asked for, then those
    decoding needs."""
    wanted = [c for c in columns if c in COLUMNS]
    return tuple(wanted + [c for c in NEEDED_COLUMNS if c not in wanted])


@functools.lru_cache(maxsize=16)
def arrow_schema(spec: "BodySpec") -> pa.Schema:
    """The Arrow schema of the decoded columns (and _decodeError), as PySpark converts their Spark types."""
    from ..compat import to_arrow_schema
    return to_arrow_schema(spec.columns)


def output_schema(columns, spec: "BodySpec") -> pa.Schema:
    decoded = arrow_schema(spec)
    return pa.schema([ARROW_SCHEMA.field(c) if c in COLUMNS else decoded.field(c) for c in columns])


class Decoders:
    """The decoders of a spec, built once per process: one per schema, and where its fields go among the
    decoded columns."""

    def __init__(self, spec: "BodySpec"):
        self.spec = spec
        self.names = [f.name for f in decoded_struct(spec).fields]
        index = {n: i for i, n in enumerate(self.names)}
        self.default: Optional[tuple] = None
        self.by_topic: dict[str, tuple] = {}
        for topic, struct in topic_schemas(spec):
            positions = [index[spec.prefix + f.name] for f in struct.fields]
            entry = (_decoder(spec, topic), positions)
            if topic is None:
                self.default = entry
            else:
                self.by_topic[topic] = entry

    def decode(self, body: Optional[bytes], topic: str) -> Optional[tuple]:
        """(values, positions) of one body, None when its topic has no schema or it decodes to null."""
        entry = self.by_topic.get(topic, self.default)
        if entry is None or body is None:
            return None
        if self.spec.wire_format == "confluent":
            if len(body) < CONFLUENT_HEADER or body[0] != 0:
                raise BadBody("no Confluent header (a 0 byte, then a 4-byte schema id)")
            body = body[CONFLUENT_HEADER:]
        values = entry[0].decode(body)
        return None if values is None else (values, entry[1])


def _decoder(spec: "BodySpec", topic):
    text = spec.schema if topic is None else dict(spec.by_topic)[topic]
    if spec.format == "json":
        from .columns import schema_struct
        from .json_body import JsonBody
        return JsonBody(schema_struct("json", text))
    if spec.format == "avro":
        from .avro_body import AvroBody
        return AvroBody(text)
    from .text_body import TextBody
    return TextBody()


@functools.lru_cache(maxsize=16)
def decoders(spec: "BodySpec") -> Decoders:
    return Decoders(spec)


def decode_batch(spec: "BodySpec", columns, batch: pa.RecordBatch) -> pa.RecordBatch:
    """``columns`` of one batch of message rows (read with :func:`message_columns`)."""
    dec = decoders(spec)
    n = batch.num_rows
    values: list[list] = [[None] * n for _ in dec.names]
    errors: list = [None] * n
    keep: Optional[list] = None
    bodies = batch.column("body").to_pylist()
    topics = batch.column("topic").to_pylist()
    for i in range(n):
        try:
            out = dec.decode(bodies[i], topics[i])
        except BadBody as exc:
            if spec.on_bad_record == "fail":
                raise BodyDecodeError(exc.reason, body_format=spec.format, topic=topics[i],
                                      queue_id=batch.column("queueId")[i].as_py(),
                                      queue_offset=batch.column("queueOffset")[i].as_py(),
                                      commit_log_offset=batch.column("commitLogOffset")[i].as_py()) from None
            if spec.on_bad_record == "skip":
                if keep is None:
                    keep = [True] * n
                keep[i] = False
            errors[i] = exc.reason
            continue
        if out is not None:
            for v, pos in zip(*out):
                values[pos][i] = v
    decoded = arrow_schema(spec)
    arrays = {name: pa.array(values[k], type=decoded.field(name).type) for k, name in enumerate(dec.names)}
    if spec.on_bad_record == "null":
        arrays[DECODE_ERROR_COLUMN] = pa.array(errors, type=pa.string())
    schema = output_schema(columns, spec)
    out = pa.RecordBatch.from_arrays([batch.column(c) if c in COLUMNS else arrays[c] for c in columns],
                                     schema=schema)
    return out if keep is None else out.filter(pa.array(keep, type=pa.bool_()))


def decode_batches(spec: "BodySpec", columns, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The batches of a read with ``columns`` (message and decoded columns) from its message batches."""
    columns = tuple(columns)
    for batch in batches:
        if batch.num_rows == 0:
            continue
        out = decode_batch(spec, columns, batch)
        if out.num_rows:
            yield out
