"""Write side of the ``rmq`` source: batch sink and idempotent streaming sink.

``df.write.format("rmq").mode("append").save("/path/to/store")`` appends one
message per row through the store writer
(:class:`rmqsource.store.writer.MessageStoreWriter`), which dispatches the
ConsumeQueues and IndexFile before a put returns, so a message is readable
(and visible to a broker opening the store) once its task has finished.

Columns: ``topic`` (string, required), ``body`` (binary or string, required),
and optionally ``queueId`` (int), ``tags`` (string), ``keys`` (string, or
array of strings joined by spaces), ``properties`` (map<string,string>; a
wire-form string with ``preserveStoreFields``, see below),
``flag`` (int), ``bornTimestamp`` (timestamp or epoch ms), ``bornHost``
(string).  The other columns of the rmq read schema (queueOffset, msgId ...)
are ignored, so a DataFrame read from one store can be appended to another;
any other column is refused.

Queue choice, per row: ``queueId`` when set; else, when the row has keys,
``hash(keys) % queueNums`` (RocketMQ's SelectMessageQueueByHash on the KEYS
string); else round-robin over the topic's queues.  ``queueNums`` (option)
defaults to the topic's ``writeQueueNums`` in ``config/topics.json``, else 4.

Concurrency: a task first takes in all its rows (:class:`~rmqsource.spark.spill.RowSpill`:
in memory up to a budget, the rest spilled to local disk, so an upstream
error appends nothing and a task's memory stays bounded), then opens the
writer, which takes the store's exclusive ``lock`` (waiting up to
``lockTimeout``, default 120s), appends, and closes it (clean shutdown:
flushed, checkpoint written).  Tasks of one job, or of concurrent jobs on one
machine, therefore append one after the other and never interleave partial
records; a broker or another writer holding the lock longer than the timeout
makes the task fail with a clear :class:`~rmqsource.errors.StoreLockedError`.

Batch writes are retry-safe: each message carries ``__RMQSOURCE_BATCH`` =
``write:<writeId>`` (option ``writeId``) or ``job:<id of this write>``, and
``__RMQSOURCE_SEQ`` = ``partitionId:rowIndex``; the sink log records, per
write and partition, where the append started and whether it finished.  A
retried task skips the rows its earlier attempts appended (found in the
CommitLog by those properties); with a ``writeId`` the entries outlive the job,
so running the same write again appends only the partitions, and rows, that
are missing.  An error while appending (a full disk) is one
:class:`~rmqsource.errors.StoreError` naming the file; a failing close does
not hide the error that came first.

Streaming (``writeStream.format("rmq")``) is exactly-once into the store: each
message carries ``__RMQSOURCE_BATCH`` = ``queryId:batchId`` and
``__RMQSOURCE_SEQ`` = ``partitionId:rowIndex``, and the sink log
``{root}/config/rmqsourceSinkLog.json`` (written with the crash-safe
``string2file`` protocol, always under the store lock) records, per query,
the last committed batch and, per task, where its append started and whether
it finished.  A replayed batch (query restarted after a failure between the
appends and Spark's commit) is skipped when it was committed or its task
finished; a task that died in the middle of its append resumes after the
rows found in the CommitLog with its own batch/partition tag.

``preserveStoreFields`` (option, default false) replays messages as they were: the columns
storeTimestamp, storeHost, sysFlag, reconsumeTimes and preparedTransactionOffset (otherwise
ignored) are written as given, the properties map in its order, and no stamps are added (a golden
corpus written through the sink gives the engine's bytes).  A retried task then finds what an
earlier attempt appended by comparing the records from that attempt's logged start offset, in
order, with its own rows: the attempt held the lock for its whole append, so they are contiguous.
With preserveStoreFields, ``properties`` may be a string in RocketMQ's wire form
(``name\\x01value\\x02...``), written verbatim (duplicate or empty keys, junk entries stay as given);
TAGS and KEYS are inside it, so the ``tags`` / ``keys`` columns are refused with it, and without
preserveStoreFields a string ``properties`` column is refused (texts: :data:`SINK_ERRORS`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Optional

import numpy as np
import pyarrow as pa

from .compat import require_python_data_source

require_python_data_source()     # pyspark 3.5: one line saying the jar is required there

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage  # noqa: E402

from ..errors import FormatError, OptionError, RmqError, StoreError, StoreLockedError
from ..format.configjson import loads_fastjson
from ..format.record import Kind
from ..io import files
from ..io.durable import load_with_bak, string2file
from ..io.lock import StoreLock
from ..store.config import StoreConfig
from ..store.file_sizes import fit_config_to_files, given_keys
from ..store.queue_select import DEFAULT_QUEUE_NUMS, QueueChooser, keys_string, read_topic_queue_nums
from .compat import DataSourceStreamArrowWriter
from .options import SQL_TABLE_HINT, store_path
from .spill import RowSpill, put_chunks

BATCH_PROPERTY = "__RMQSOURCE_BATCH"
SEQ_PROPERTY = "__RMQSOURCE_SEQ"
SINK_LOG_NAME = "rmqsourceSinkLog.json"
# Fault injection for the replay tests, outside the store: only when this environment variable names a
# file (test code sets it before Spark starts its workers) holding "<point> <store root>", where point is
# "mid-append:<batchId>" or "commit:<batchId>" (stream sink), "kill:<partitionId>" (the batch sink's
# worker is SIGKILLed half-way through its append) or "disk-full:<partitionId>" (the disk fills half-way
# through the append and stays full until the task has failed), does that step fail once (the file is
# removed first).  Nothing in a store can trigger it.
FAULT_ENV = "RMQSOURCE_TEST_SINK_FAULT_FILE"
DEFAULT_LOCK_TIMEOUT_S = 120.0
PUT_CHUNK = 65536

# Columns of the read schema that a sink ignores (the store assigns them).
READ_ONLY_COLUMNS = frozenset({
    "queueOffset", "commitLogOffset", "msgId", "uniqKey", "storeTimestamp", "storeHost", "sysFlag",
    "reconsumeTimes", "bodyCRC", "preparedTransactionOffset", "transactionType", "storeSize", "tagsCode",
    "broker", "storePath",
})
WRITABLE_COLUMNS = ("topic", "body", "queueId", "tags", "keys", "properties", "flag", "bornTimestamp", "bornHost")
# Written only with preserveStoreFields.
STORE_FIELD_COLUMNS = ("storeTimestamp", "storeHost", "sysFlag", "reconsumeTimes", "preparedTransactionOffset")
# Refusals of a string properties column (RocketMQ's wire form); the JVM sink reads the same texts from
# contract.json (tests/test_contract.py checks they agree).
SINK_ERRORS = {
    "stringPropertiesWithoutPreserveStoreFields":
        "column 'properties' is a string (RocketMQ's wire form name\\x01value\\x02...), which the rmq sink "
        "writes only with option preserveStoreFields=true; otherwise give it as a map<string,string>",
    "stringPropertiesWithTagsOrKeys":
        "column 'properties' is a string, which holds TAGS and KEYS itself (RocketMQ's wire form): "
        "drop the columns 'tags' and 'keys'",
}

SINK_OPTIONS = {
    "path": "path",
    "config": "config",
    "queuenums": "queueNums",
    "locktimeout": "lockTimeout",
    "checkpointlocation": "checkpointLocation",
    "writeid": "writeId",
    "preservestorefields": "preserveStoreFields",
}
MAX_WRITE_ID_CHARS = 200
ANONYMOUS_ENTRY_DAYS = 7          # sink log entries of writes without writeId whose job never ended


# --------------------------------------------------------------------------- options

@dataclass(frozen=True)
class SinkOptions:
    root: str
    config: StoreConfig
    queue_nums: Optional[int] = None                  # None: topics.json, else DEFAULT_QUEUE_NUMS
    topic_queue_nums: Mapping[str, int] = field(default_factory=dict)
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S
    write_id: Optional[str] = None                    # batch sink: names the write across jobs (re-runs)
    preserve_store_fields: bool = False               # store fields as given, no stamps (golden replays)

    def queues_of(self, topic: str) -> int:
        if self.queue_nums is not None:
            return self.queue_nums
        return self.topic_queue_nums.get(topic, DEFAULT_QUEUE_NUMS)


def _duration_s(name: str, value: str) -> float:
    from .stream import parse_duration_ms
    return parse_duration_ms(name, value) / 1000.0


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    from .options import _STORE_KEYS
    opts = {str(k).lower(): ("" if v is None else str(v)) for k, v in dict(options).items()}
    overrides = {}
    for key, value in opts.items():
        if key in SINK_OPTIONS:
            continue
        if key in _STORE_KEYS:
            overrides[_STORE_KEYS[key]] = value
            continue
        raise OptionError(f"unknown option {key!r} for the rmq sink; options are: "
                          f"{', '.join(sorted(SINK_OPTIONS.values()))}, plus RocketMQ MessageStoreConfig keys")
    root = opts.get("path", "").strip()
    if not root:
        raise OptionError("no store path: use df.write.format('rmq').mode('append').save('/path/to/store')"
                          + SQL_TABLE_HINT)
    if "," in root:
        raise OptionError(f"the rmq sink writes one store; got {root!r}")
    root = store_path(root, write=True)      # plain path or file:// URI
    if opts.get("config"):
        if not os.path.isfile(opts["config"]):
            raise OptionError(f"option config: {opts['config']} is not a file")
        config = StoreConfig.from_properties_file(opts["config"], overrides or None)
    else:
        config = StoreConfig().with_overrides(overrides)
    # An existing store's segment sizes unless given (a given size that differs from the files fails).
    config = fit_config_to_files(config, root, given_keys(opts.get("config"), overrides))
    queue_nums = None
    if opts.get("queuenums"):
        try:
            queue_nums = int(opts["queuenums"])
        except ValueError:
            raise OptionError(f"option queueNums must be a positive integer, got {opts['queuenums']!r}") from None
        if not 1 <= queue_nums <= 65535:
            raise OptionError(f"option queueNums must be in [1, 65535], got {queue_nums}")
    lock_timeout = DEFAULT_LOCK_TIMEOUT_S
    if opts.get("locktimeout"):
        lock_timeout = _duration_s("lockTimeout", opts["locktimeout"])
    if os.path.exists(root) and not os.path.isdir(root):
        raise OptionError(f"store path {root} exists and is not a directory")
    write_id = opts.get("writeid") or None
    if write_id is not None and (len(write_id) > MAX_WRITE_ID_CHARS or not write_id.isprintable()):
        raise OptionError(f"option writeId must be at most {MAX_WRITE_ID_CHARS} printable characters, "
                          f"got {write_id[:80]!r}")
    preserve = opts.get("preservestorefields", "").strip().lower()
    if preserve not in ("", "true", "false"):
        raise OptionError(f"option preserveStoreFields must be true or false, got {opts['preservestorefields']!r}")
    return SinkOptions(root=root, config=config, queue_nums=queue_nums,
                       topic_queue_nums=read_topic_queue_nums(root), lock_timeout_s=lock_timeout,
                       write_id=write_id, preserve_store_fields=preserve == "true")


def check_schema(schema, store_fields: bool = False) -> tuple[str, ...]:
    """The writable columns present in ``schema``; OptionError for missing / unknown ones.

    ``store_fields`` (preserveStoreFields): the store-field columns are written too, so typed."""
    from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, MapType, ShortType, StringType,
                                   TimestampNTZType, TimestampType, ByteType)
    fields = {f.name: f.dataType for f in schema.fields}
    for required in ("topic", "body"):
        if required not in fields:
            raise OptionError(f"the rmq sink needs a column {required!r}; columns are: {', '.join(fields)}")
    ints = (IntegerType, LongType, ShortType, ByteType)
    allowed = {
        "topic": (StringType,), "body": (BinaryType, StringType), "queueId": ints, "tags": (StringType,),
        "keys": (StringType, ArrayType), "properties": (MapType,), "flag": ints,
        "bornTimestamp": (TimestampType, TimestampNTZType) + ints, "bornHost": (StringType,),
    }
    if store_fields:
        allowed.update({"storeTimestamp": (TimestampType, TimestampNTZType) + ints, "storeHost": (StringType,),
                        "sysFlag": ints, "reconsumeTimes": ints, "preparedTransactionOffset": ints})
    for name, dt in fields.items():
        if name in READ_ONLY_COLUMNS and name not in allowed:
            continue
        if name == "properties" and isinstance(dt, StringType):
            # Verbatim wire form (duplicate or empty keys, junk entries): a replay of stored records only.
            if not store_fields:
                raise OptionError(SINK_ERRORS["stringPropertiesWithoutPreserveStoreFields"])
            if "tags" in fields or "keys" in fields:
                raise OptionError(SINK_ERRORS["stringPropertiesWithTagsOrKeys"])
            continue
        if name not in allowed:
            raise OptionError(f"the rmq sink does not know column {name!r}; writable columns are: "
                              f"{', '.join(WRITABLE_COLUMNS)}")
        if not isinstance(dt, allowed[name]):
            raise OptionError(f"column {name!r} has type {dt.simpleString()}, which the rmq sink cannot write")
        if name == "keys" and isinstance(dt, ArrayType) and not isinstance(dt.elementType, StringType):
            raise OptionError("column 'keys' must be a string or an array of strings")
        if name == "properties" and not (isinstance(dt.keyType, StringType) and isinstance(dt.valueType, StringType)):
            raise OptionError("column 'properties' must be a map<string,string>")
    return tuple(c for c in WRITABLE_COLUMNS + (STORE_FIELD_COLUMNS if store_fields else ()) if c in fields)


# --------------------------------------------------------------------------- rows -> messages

def _ms(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    import datetime as dt
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return int(value.timestamp() * 1000)
    return int(value)


MESSAGE_SCHEMA = pa.schema([
    ("topic", pa.string()), ("queueId", pa.int32()), ("body", pa.binary()), ("flag", pa.int32()),
    ("tags", pa.string()), ("keys", pa.string()), ("properties", pa.map_(pa.string(), pa.string())),
    ("bornTimestamp", pa.int64()), ("bornHost", pa.string()),
])
# MESSAGE_SCHEMA plus the store fields (preserveStoreFields); nulls take the writer's defaults.
STORE_FIELDS_SCHEMA = pa.schema(list(MESSAGE_SCHEMA) + [
    ("storeTimestamp", pa.int64()), ("storeHost", pa.string()), ("sysFlag", pa.int32()),
    ("reconsumeTimes", pa.int32()), ("preparedTransactionOffset", pa.int64()),
])
# STORE_FIELDS_SCHEMA with the properties as a verbatim string (a string properties column).
STORE_FIELDS_STRING_SCHEMA = STORE_FIELDS_SCHEMA.set(STORE_FIELDS_SCHEMA.get_field_index("properties"),
                                                     pa.field("properties", pa.string()))


def table_from_batch(batch: pa.RecordBatch, chooser: QueueChooser, *, extra_props=None,
                     seq_start: int = 0, skip=None, stamp: Optional[tuple[str, int]] = None,
                     store_fields: bool = False) -> pa.Table:
    """The rows as the writer's input columns (:data:`MESSAGE_SCHEMA`).

    ``stamp=(tag, partition)`` adds ``__RMQSOURCE_BATCH`` = tag and ``__RMQSOURCE_SEQ`` =
    ``partition:index`` (index = ``seq_start + i``) to row i; ``extra_props(index)`` adds any
    properties; rows whose index is in ``skip`` are left out (after their queue is chosen: each row
    takes its round-robin turn, so a resumed task puts every row where its first attempt would have).  ``store_fields`` adds the store-field
    columns (:data:`STORE_FIELDS_SCHEMA`; :data:`STORE_FIELDS_STRING_SCHEMA` when the properties
    column is a verbatim string, passed through as given).  Rows without a properties map or key lists take a
    columnar path; the others run per row in Python (queue choice, merges).
    """
    names = batch.schema.names
    if store_fields:
        pass                              # per row: the store fields ride along
    elif "properties" not in names or batch.column(names.index("properties")).null_count == batch.num_rows:
        if extra_props is None and not ("keys" in names and pa.types.is_list(batch.schema.field("keys").type)):
            return _columnar_table(batch, chooser, seq_start, skip, stamp)
    if stamp is not None:
        tag, part = stamp
        extra = extra_props
        extra_props = (lambda s: {BATCH_PROPERTY: tag, SEQ_PROPERTY: f"{part}:{s}"}) if extra is None else \
            (lambda s: {**extra(s), BATCH_PROPERTY: tag, SEQ_PROPERTY: f"{part}:{s}"})
    n = batch.num_rows

    def col(name):
        if name not in names:
            return [None] * n
        arr = batch.column(names.index(name))
        if name in ("bornTimestamp", "storeTimestamp") and pa.types.is_timestamp(arr.type):
            arr = arr.cast(pa.timestamp("ms", tz=arr.type.tz), safe=False).cast(pa.int64())   # Spark: us
        return arr.to_pylist()

    topics, bodies, qids = col("topic"), col("body"), col("queueId")
    tags, keys, props = col("tags"), col("keys"), col("properties")
    flags, borns, hosts = col("flag"), col("bornTimestamp"), col("bornHost")
    verbatim = "properties" in names and pa.types.is_string(batch.schema.field("properties").type)
    schema = (STORE_FIELDS_STRING_SCHEMA if verbatim else STORE_FIELDS_SCHEMA) if store_fields else MESSAGE_SCHEMA
    out = {c: [] for c in schema.names}
    stored = {c: col(c) for c in STORE_FIELD_COLUMNS} if store_fields else {}
    for i in range(n):
        seq = seq_start + i
        topic = topics[i]
        if topic is None:
            raise OptionError(f"row {seq}: topic is null")
        body = bodies[i]
        if body is None:
            body = b""
        elif isinstance(body, str):
            body = body.encode("utf-8")
        k = keys_string(keys[i])
        pmap = dict(props[i]) if props[i] and not verbatim else None
        if pmap:
            # TAGS / KEYS come from their own columns when present.
            if "tags" in names:
                pmap.pop("TAGS", None)
            if "keys" in names:
                pmap.pop("KEYS", None)
        if extra_props is not None:
            pmap = dict(pmap or {})
            pmap.update(extra_props(seq))
        queue_id = chooser.choose(topic, qids[i], k)      # skipped rows take their turn too
        if skip is not None and seq in skip:
            continue
        out["topic"].append(topic)
        out["queueId"].append(queue_id)
        out["body"].append(body)
        out["flag"].append(int(flags[i] or 0))
        if store_fields:                  # as given: "" is a value, not an absent one
            out["tags"].append(tags[i])
            out["keys"].append(keys[i] if isinstance(keys[i], str) else k)
        else:
            out["tags"].append(tags[i] or None)
            out["keys"].append(k or None)
        out["properties"].append(props[i] if verbatim else list(pmap.items()) if pmap else None)
        out["bornTimestamp"].append(_ms(borns[i]))
        out["bornHost"].append(hosts[i] or None)
        for c, values in stored.items():
            out[c].append(values[i] if values[i] != "" else None)
    return pa.table([pa.array(out[f.name], f.type) for f in schema], schema=schema)


def _columnar_table(batch: pa.RecordBatch, chooser: QueueChooser, seq_start: int, skip,
                    stamp: Optional[tuple[str, int]]) -> pa.Table:
    """table_from_batch for rows without properties maps or key lists, column by column."""
    import pyarrow.compute as pc
    names = batch.schema.names
    seqs = np.arange(seq_start, seq_start + batch.num_rows, dtype=np.int64)
    n = batch.num_rows

    def column(name, typ=None):
        if name not in names:
            return pa.nulls(n, typ or pa.string())
        arr = batch.column(names.index(name))
        return arr.cast(typ) if typ is not None and arr.type != typ else arr

    def empty_as_null(arr):          # "" counts as absent, as ``value or None`` does per row
        return pc.if_else(pc.equal(arr, ""), pa.nulls(n, arr.type), arr) if arr.null_count < n else arr

    topic = column("topic", pa.string())
    if topic.null_count:
        first = int(np.flatnonzero(topic.is_null().to_numpy(zero_copy_only=False))[0])
        raise OptionError(f"row {seqs[first]}: topic is null")
    keys = empty_as_null(column("keys", pa.string()))
    body = column("body")
    body = (body.cast(pa.binary()) if pa.types.is_string(body.type) else body).fill_null(b"")
    born = column("bornTimestamp", None) if "bornTimestamp" in names else pa.nulls(n, pa.int64())
    if pa.types.is_timestamp(born.type):
        born = born.cast(pa.timestamp("ms", tz=born.type.tz), safe=False).cast(pa.int64())
    table = pa.table({
        "topic": topic,
        "queueId": _queue_ids(topic, column("queueId", pa.int64()), keys, chooser),
        "body": body,
        "flag": column("flag", pa.int32()).fill_null(0),
        "tags": empty_as_null(column("tags", pa.string())),
        "keys": keys,
        "properties": _stamps(seqs, stamp),
        "bornTimestamp": born.cast(pa.int64()).fill_null(0),
        "bornHost": empty_as_null(column("bornHost", pa.string())),
    })
    if skip:       # left out after the queue choice: every row takes its round-robin turn, as on the first attempt
        table = table.filter(pa.array(~np.isin(seqs, np.fromiter(skip, np.int64, len(skip)))))
    return table if table.schema == MESSAGE_SCHEMA else table.cast(MESSAGE_SCHEMA)


def _queue_ids(topic: pa.Array, qid: pa.Array, keys: pa.Array, chooser: QueueChooser) -> pa.Array:
    """The queue of every row by the chooser's rule, in row order (round-robin per topic)."""
    import pyarrow.compute as pc
    n = len(topic)
    out = qid.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64) if qid.null_count < n \
        else np.full(n, -1, np.int64)
    given = ~qid.is_null().to_numpy(zero_copy_only=False)
    if given.any() and (out[given] < 0).any():
        i = int(np.flatnonzero(given & (out < 0))[0])
        raise OptionError(f"queueId {out[i]} is negative (topic {topic[i].as_py()})")
    has_keys = ~keys.is_null().to_numpy(zero_copy_only=False)
    hashed = np.flatnonzero(~given & has_keys)
    if hashed.size:
        tl, kl = topic.take(pa.array(hashed)).to_pylist(), keys.take(pa.array(hashed)).to_pylist()
        out[hashed] = [chooser.choose(t, None, k) for t, k in zip(tl, kl)]
    turns = np.flatnonzero(~given & ~has_keys)
    if turns.size:
        codes = pc.dictionary_encode(topic.take(pa.array(turns)))
        indices = codes.indices.to_numpy(zero_copy_only=False)
        for u, name in enumerate(codes.dictionary.to_pylist()):
            rows = turns[indices == u]
            out[rows] = chooser.round_robin(name, rows.size)
    return pa.array(out.astype(np.int32), pa.int32())


def _stamps(seqs: np.ndarray, stamp: Optional[tuple[str, int]]) -> pa.Array:
    """The properties column: null, or {__RMQSOURCE_BATCH: tag, __RMQSOURCE_SEQ: "partition:index"}."""
    n = len(seqs)
    if stamp is None:
        return pa.nulls(n, pa.map_(pa.string(), pa.string()))
    import pyarrow.compute as pc
    tag, part = stamp
    seq_values = pc.binary_join_element_wise(f"{part}:", pc.cast(pa.array(seqs), pa.string()), "")
    both = pa.concat_arrays([pa.array([tag], pa.string()), seq_values.cast(pa.string())])
    order = np.zeros(2 * n, dtype=np.int64)            # tag, seq, tag, seq ...
    order[1::2] = np.arange(1, n + 1)
    keys = pa.array([BATCH_PROPERTY, SEQ_PROPERTY], pa.string()).take(pa.array(np.tile([0, 1], n)))
    return pa.MapArray.from_arrays(pa.array(np.arange(0, 2 * n + 1, 2, dtype=np.int32)), keys, both.take(order))


def _put_all(writer, table: pa.Table) -> tuple[int, int, int]:
    """Put the rows through the writer's columnar path; (count, first CommitLog offset, end offset).

    Raises on a refused put (nothing of the task is acknowledged to Spark then)."""
    first = -1
    end = -1
    for i in range(0, table.num_rows, PUT_CHUNK):
        chunk = table.slice(i, PUT_CHUNK)
        results = writer.put_arrow_batch(chunk)
        if results.ok_count != chunk.num_rows:
            j = int(np.flatnonzero(~results.ok_mask)[0])
            r = results[j]
            raise StoreError(f"rmq sink: put of a message to {r.topic}:{r.queue_id} failed with "
                             f"{r.status.value}: {r.reason or r.append_status}")
        if first < 0:
            first = results[0].commit_log_offset
        last = results[chunk.num_rows - 1]
        end = last.commit_log_offset + last.size
    return table.num_rows, first, end


def refuse_unsupported_layout(opts: SinkOptions) -> None:
    """At planning, on the driver: a store of another layout fails the write before any task runs."""
    from ..store.layout import StoreLayout
    StoreLayout.for_config(opts.root, opts.config).check_writable()


def open_store_writer(opts: SinkOptions):
    """Open the store writer under the lock, with a clear error when another process keeps it."""
    from ..store.writer import MessageStoreWriter
    os.makedirs(opts.root, exist_ok=True)
    try:
        return MessageStoreWriter(opts.root, opts.config, lock_timeout_s=opts.lock_timeout_s)
    except StoreLockedError as exc:
        raise StoreLockedError(f"rmq sink: could not lock the store {opts.root} within {opts.lock_timeout_s:g} s "
                               f"(option lockTimeout): another process - a broker or another writer - holds "
                               f"{os.path.join(opts.root, 'lock')}. ({exc})") from None
    except OSError as exc:
        raise StoreError(f"rmq sink: could not open the store {opts.root} for writing: {exc}") from exc


@contextlib.contextmanager
def appending(writer, root: str):
    """Append under ``writer``, then close it; one typed error for whatever fails.

    An OSError while appending (a full disk: the sink log, a put) becomes a StoreError that names
    the file.  When the append failed, an error of the close that follows is dropped: the first
    error is the one that explains, and the next writer's open recovers the store."""
    try:
        yield writer
    except BaseException as exc:
        try:
            writer.close()
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise StoreError(f"rmq sink: writing to the store {root} failed: {exc}") from exc
        raise
    try:
        writer.close()
    except OSError as exc:
        raise StoreError(f"rmq sink: the store {root} could not be closed cleanly ({exc}); the appended "
                         f"messages are in its CommitLog and its next writer recovers it") from exc


# --------------------------------------------------------------------------- batch sink

@dataclass
class SinkCommitMessage(WriterCommitMessage):
    partition_id: int = -1
    rows: int = 0
    appended: int = 0
    skipped: int = 0
    first_offset: int = -1
    end_offset: int = -1
    batch_id: int = -1
    query_id: Optional[str] = None
    lock_wait_s: float = 0.0
    append_s: float = 0.0


def _task_partition_id() -> int:
    from pyspark import TaskContext
    tc = TaskContext.get()
    return tc.partitionId() if tc is not None else 0


class RmqBatchWriter(DataSourceArrowWriter):
    """``df.write.format("rmq").mode("append")``: each task appends its rows under the store lock, once.

    The writer object is made once per write on the driver and shipped to every task attempt, so
    its ``write_key`` names this write in every attempt (``write:<writeId>`` across jobs).
    """

    def __init__(self, options: Mapping[str, str], schema, overwrite: bool):
        if overwrite:
            raise OptionError("the rmq sink only appends (a message store cannot be overwritten); "
                              "use .mode('append')")
        self.opts = parse_sink_options(options)
        self.columns = check_schema(schema, self.opts.preserve_store_fields)
        refuse_unsupported_layout(self.opts)
        self.write_key = f"write:{self.opts.write_id}" if self.opts.write_id else f"job:{uuid.uuid4().hex}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        pid = _task_partition_id()
        msg = SinkCommitMessage(partition_id=pid)
        chooser = QueueChooser(self.opts, seed=pid)
        rows = RowSpill()
        try:
            for b in iterator:                # all of the partition first: an upstream error appends nothing
                if b.num_rows:
                    rows.add(table_from_batch(b, chooser, seq_start=rows.rows, store_fields=self.opts.preserve_store_fields,
                                              stamp=None if self.opts.preserve_store_fields else (self.write_key, pid)))
            msg.rows = rows.rows
            if rows.rows == 0:
                return msg
            with _injected_disk_fault(self.opts.root, pid, rows):
                t0 = time.monotonic()
                writer = open_store_writer(self.opts)
                t1 = time.monotonic()
                with appending(writer, self.opts.root):
                    self._append(writer, rows, pid, msg)
            msg.lock_wait_s, msg.append_s = t1 - t0, time.monotonic() - t1
            return msg
        finally:
            rows.close()

    def _append(self, writer, rows: RowSpill, pid: int, msg: SinkCommitMessage) -> None:
        """Append the rows that no earlier attempt of this write appended (under the store lock)."""
        log = SinkLog(self.opts.root)
        doc = log.load()
        writes = doc.setdefault("writes", {})
        now_ms = int(time.time() * 1000)
        for key in [k for k, w in writes.items() if k.startswith("job:")
                    and now_ms - w.get("startedMs", now_ms) > ANONYMOUS_ENTRY_DAYS * 86_400_000]:
            del writes[key]               # left by a job whose driver died: nothing can run it again
        tasks = writes.setdefault(self.write_key, {"tasks": {}, "startedMs": now_ms})["tasks"]
        entry = tasks.get(str(pid))
        n = rows.rows
        present = np.zeros(n, dtype=bool)
        end = writer.commit_log_max_offset
        if entry is None:
            entry = {"start": end, "below": 0, "done": False, "rows": n}
        elif entry["done"]:
            if n <= entry["rows"]:
                msg.skipped = n
                return
            entry = {"start": end, "below": entry["rows"], "done": False, "rows": n}   # a re-run with more rows
        else:
            # An earlier attempt died while appending: keep what it wrote.
            if self.opts.preserve_store_fields:
                present |= rows_put_from(self.opts, int(entry["start"]), end, rows.tables(), n,
                                         min(int(entry.get("below", 0)), n))
            else:
                for seq in appended_seqs(self.opts.root, self.opts.config, int(entry["start"]), end, self.write_key,
                                         pid):
                    if seq < n:
                        present[seq] = True
        present[:min(int(entry.get("below", 0)), n)] = True
        tasks[str(pid)] = entry
        log.save(doc)
        msg.skipped = int(present.sum())
        kill_at = n // 2 if _take_fault(self.opts.root, f"kill:{pid}") else -1
        seq = appended = 0
        first = end_offset = -1

        def missing():
            nonlocal seq
            for table in rows.tables():
                k = table.num_rows
                there = present[seq:seq + k]
                seq += k
                if there.all():
                    continue
                yield table.filter(pa.array(~there)) if there.any() else table

        for chunk in put_chunks(missing()):
            if 0 <= kill_at < appended + chunk.num_rows:
                _put_all(writer, chunk.slice(0, max(kill_at - appended, 1)))
                os.kill(os.getpid(), signal.SIGKILL)        # the test's worker dies holding the lock
            k, f, e = _put_all(writer, chunk)
            appended += k
            first = f if first < 0 else first
            end_offset = e
        writer.flush()
        entry["done"] = True
        entry["rows"] = max(n, int(entry.get("rows", 0)))
        log.save(doc)
        msg.appended, msg.first_offset, msg.end_offset = appended, first, end_offset

    def commit(self, messages) -> None:
        # Every task appended and dispatched its rows before reporting success.  A write without a
        # writeId forgets its task entries (nothing can run it again); a named write keeps them.
        self._forget_anonymous()

    def abort(self, messages) -> None:
        # A message store is append-only: rows of tasks that succeeded stay in the store (running the
        # write again with the same writeId appends only what is missing).
        self._forget_anonymous()

    def _forget_anonymous(self) -> None:
        """Best effort: an entry left behind (disk full, store locked) is never used again and is
        dropped by a later write after ANONYMOUS_ENTRY_DAYS; it must not fail the job or hide its error."""
        root = self.opts.root
        if self.opts.write_id or not os.path.isfile(SinkLog(root).path):
            return
        try:
            with StoreLock(root, timeout_s=self.opts.lock_timeout_s):
                log = SinkLog(root)
                doc = log.load()
                if doc.get("writes", {}).pop(self.write_key, None) is not None:
                    log.save(doc)
        except (OSError, RmqError):
            pass


@contextlib.contextmanager
def _injected_disk_fault(root: str, pid: int, rows: RowSpill):
    """Test hook (FAULT_ENV "disk-full:<partition>"): the disk fills after about half of the task's
    bytes, for every file operation of this attempt (the close's checkpoint too); freed afterwards."""
    if not _take_fault(root, f"disk-full:{pid}"):
        yield
        return
    from ..io.faults import FaultyFileOps, disk_space
    total = sum(t.column("body").nbytes for t in rows.tables())
    with files.installed(FaultyFileOps(disk_space(total // 2))):
        yield


# --------------------------------------------------------------------------- sink log

class SinkLog:
    """``{root}/config/rmqsourceSinkLog.json``; read and written only while holding the store lock.

    ``{"queries": {queryId: {"committedBatch": N, "tasks": {"batch:partition":
    {"start": commitLogOffset, "done": bool, "rows": n}}}}}``
    """

    def __init__(self, root: str):
        self.path = os.path.join(root, "config", SINK_LOG_NAME)

    def load(self) -> dict:
        doc = load_with_bak(self.path, parse_sink_log)
        return doc if doc is not None else {"queries": {}}

    def save(self, doc: dict) -> None:
        def valid(old: bytes) -> bool:
            try:
                parse_sink_log(old.decode("utf-8"), self.path)
                return True
            except (FormatError, UnicodeDecodeError):
                return False
        string2file(self.path, json.dumps(doc, indent=1, sort_keys=True), validate_previous=valid)


def parse_sink_log(text: str, file: str) -> dict:
    """The sink log, shape-checked; FormatError (never RecursionError, KeyError ...) for anything else.

    Parsed with the bounded config-JSON parser (nesting depth capped).
    """
    doc = loads_fastjson(text, file=file)

    def bad(what: str):
        raise FormatError(f"sink log: {what}", file=file, offset=0)

    def is_int(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if not isinstance(doc, dict) or not isinstance(doc.get("queries", {}), dict) or \
            not isinstance(doc.get("writes", {}), dict):
        bad('expected {"queries": {...}, "writes": {...}}')
    for wid, w in doc.get("writes", {}).items():
        if not isinstance(w, dict) or not isinstance(w.get("tasks"), dict) or not is_int(w.get("startedMs", 0)):
            bad(f"write {str(wid)[:80]!r}: expected {{\"tasks\": {{...}}}}")
        for key, task in w["tasks"].items():
            if not (str(key).isdecimal() and str(key).isascii()):
                bad(f"write {str(wid)[:80]!r}: task key {str(key)[:80]!r} is not a partition id")
            if not isinstance(task, dict) or not all(is_int(task.get(f)) for f in ("start", "below", "rows")) \
                    or not isinstance(task.get("done"), bool):
                bad(f"write {str(wid)[:80]!r}: task {str(key)[:80]!r} needs int start, below, rows and a bool done")
    for qid, q in doc.get("queries", {}).items():
        if not isinstance(q, dict) or not is_int(q.get("committedBatch", -1)) or not isinstance(q.get("tasks", {}),
                                                                                                  dict):
            bad(f"query {str(qid)[:80]!r}: expected {{\"committedBatch\": int, \"tasks\": {{...}}}}")
        for key, task in q.get("tasks", {}).items():
            batch, sep, part = str(key).partition(":")
            if not (sep and batch.lstrip("-").isdecimal() and part.isdecimal() and batch.isascii() and part.isascii()):
                bad(f"query {str(qid)[:80]!r}: task key {str(key)[:80]!r} is not batch:partition")
            if not isinstance(task, dict) or not is_int(task.get("start")) or not isinstance(task.get("done"), bool):
                bad(f"query {str(qid)[:80]!r}: task {str(key)[:80]!r} needs an int start and a bool done")
    return doc


def _take_fault(root: str, point: str) -> bool:
    path = os.environ.get(FAULT_ENV)
    if not path:
        return False
    try:
        with open(path, "r", encoding="utf-8") as f:
            spec = f.read().strip()
    except OSError:
        return False
    if spec != f"{point} {os.path.realpath(root)}":
        return False
    try:
        os.unlink(path)
    except OSError:
        return False
    return True


def _stream_ids() -> tuple[str, int, int]:
    from pyspark import TaskContext
    tc = TaskContext.get()
    if tc is None:
        raise StoreError("the rmq streaming sink must run inside a Spark task")
    qid = tc.getLocalProperty("sql.streaming.queryId")
    bid = tc.getLocalProperty("streaming.sql.batchId")
    if not qid or bid is None:
        raise StoreError("the rmq streaming sink needs the Spark local properties sql.streaming.queryId and "
                         "streaming.sql.batchId (micro-batch queries set them)")
    return qid, int(bid), tc.partitionId()


def find_appended(root: str, config: StoreConfig, start: int, end: int, tag: str, partition: int) -> set[int]:
    """Row indexes already in the CommitLog range [start, end) with ``__RMQSOURCE_BATCH == tag``."""
    return set(appended_seqs(root, config, start, end, tag, partition))


def appended_seqs(root: str, config: StoreConfig, start: int, end: int, tag: str, partition: int) -> Iterator[int]:
    """The row indexes of ``partition`` in the CommitLog range [start, end) with ``__RMQSOURCE_BATCH == tag``."""
    from ..store.commitlog import CommitLog
    from ..store.layout import StoreLayout
    layout = StoreLayout.for_config(root, config)
    cl = CommitLog(layout)
    prefix = f"{partition}:"
    try:
        for step in cl.walk(max(start, cl.min_offset), stop_offset=end):
            if step.decoded.kind is not Kind.MESSAGE:
                if step.decoded.kind is Kind.BLANK:
                    continue
                break
            props = step.decoded.record.properties
            if props.get(BATCH_PROPERTY) == tag:
                seq = props.get(SEQ_PROPERTY, "")
                if seq.startswith(prefix) and seq[len(prefix):].isdigit():
                    yield int(seq[len(prefix):])
    finally:
        cl.close()


def rows_put_from(opts: SinkOptions, start: int, end: int, tables: Iterator[pa.Table], n: int, below: int) -> np.ndarray:
    """preserveStoreFields: which of the task's ``n`` rows (from ``below`` on) an earlier attempt put from
    CommitLog offset ``start``.  That attempt held the lock for its whole append, so its records come
    first and in row order; the first row that differs from the next record ends them (what follows is
    other tasks')."""
    from ..store.commitlog import CommitLog
    from ..store.layout import StoreLayout
    present = np.zeros(n, dtype=bool)
    cl = CommitLog(StoreLayout.for_config(opts.root, opts.config))

    def records():
        for step in cl.walk(max(start, cl.min_offset), stop_offset=end):
            if step.decoded.kind is Kind.BLANK:
                continue
            if step.decoded.kind is not Kind.MESSAGE:
                return
            yield step.decoded.record

    try:
        walk = records()
        seq = 0
        for table in tables:
            for row in table.to_pylist():
                i, seq = seq, seq + 1
                if i < below:
                    continue
                rec = next(walk, None)
                if rec is None or not _same_message(rec, row):
                    return present
                present[i] = True
    finally:
        cl.close()
    return present


def _same_message(rec, row: dict) -> bool:
    """Whether putting ``row`` (a STORE_FIELDS_SCHEMA row) wrote the record ``rec``."""
    if (rec.topic, rec.queue_id, rec.body, rec.flag, rec.born_timestamp_ms) != \
            (row["topic"], row["queueId"], row["body"], row["flag"], row["bornTimestamp"]):
        return False
    if row.get("storeTimestamp") is not None and rec.store_timestamp_ms != row["storeTimestamp"]:
        return False
    if isinstance(row["properties"], str):
        return same_verbatim(rec.properties_raw, row["properties"])
    props = rec.properties
    wanted = dict(row["properties"] or [])
    for name in ("tags", "keys"):
        if row[name] is not None:
            wanted[name.upper()] = row[name]
    return all(props.get(k) == v for k, v in wanted.items())


# The entry a store with enabledAppendPropCRC appends: __CRC32#\x01 and ten digits, then \x02.
_CRC_ENTRY_BYTES = 20


def same_verbatim(stored: bytes, given: str) -> bool:
    """Whether a verbatim properties string ``given``, put, was stored as ``stored``: as given, or with the
    CRC entry appended (after the 0x02 the writer adds when ``given`` does not end with one)."""
    g = given.encode("utf-8", "surrogatepass")
    if stored == g:
        return True
    head, tail = stored[:-_CRC_ENTRY_BYTES], stored[-_CRC_ENTRY_BYTES:]
    if len(stored) < _CRC_ENTRY_BYTES or not tail.startswith(b"__CRC32#\x01") or not tail.endswith(b"\x02"):
        return False
    return head == g or (g != b"" and not g.endswith(b"\x02") and head == g + b"\x02")


class RmqStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("rmq")``: exactly-once appends per micro-batch (see the module docstring)."""

    def __init__(self, options: Mapping[str, str], schema, overwrite: bool):
        self.opts = parse_sink_options(options)
        self.columns = check_schema(schema, self.opts.preserve_store_fields)
        refuse_unsupported_layout(self.opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        query_id, batch_id, pid = _stream_ids()
        batches = [b for b in iterator if b.num_rows]
        rows = sum(b.num_rows for b in batches)
        tag = f"{query_id}:{batch_id}"
        task_key = f"{batch_id}:{pid}"
        msg = SinkCommitMessage(partition_id=pid, rows=rows, batch_id=batch_id, query_id=query_id)
        if rows == 0:
            return msg
        t0 = time.monotonic()
        writer = open_store_writer(self.opts)
        t1 = time.monotonic()
        msg.lock_wait_s = t1 - t0
        with appending(writer, self.opts.root):
            log = SinkLog(self.opts.root)
            doc = log.load()
            q = doc["queries"].setdefault(query_id, {"committedBatch": -1, "tasks": {}})
            if batch_id <= q.get("committedBatch", -1):
                msg.skipped = rows
                return msg
            entry = q["tasks"].get(task_key)
            if entry is not None and entry.get("done"):
                msg.skipped = rows
                return msg
            skip: set[int] = set()
            preserve = self.opts.preserve_store_fields
            if entry is not None and preserve:
                # An earlier attempt died while appending: keep what it wrote (found by content).
                tables = (table_from_batch(b, QueueChooser(self.opts, seed=pid), store_fields=True) for b in batches)
                put = rows_put_from(self.opts, int(entry["start"]), writer.commit_log_max_offset, tables, rows, 0)
                skip = set(np.flatnonzero(put).tolist())
            elif entry is not None:
                # An earlier attempt died while appending: keep what it wrote.
                skip = find_appended(self.opts.root, self.opts.config, int(entry["start"]),
                                     writer.commit_log_max_offset, tag, pid)
            else:
                entry = {"start": writer.commit_log_max_offset, "done": False, "rows": rows}
                q["tasks"][task_key] = entry
                log.save(doc)
            chooser = QueueChooser(self.opts, seed=pid)
            tables = []
            seq = 0
            for b in batches:
                tables.append(table_from_batch(b, chooser, seq_start=seq, skip=skip, store_fields=preserve,
                                               stamp=None if preserve else (tag, pid)))
                seq += b.num_rows
            msgs = pa.concat_tables(tables)
            if msgs.num_rows > 1 and _take_fault(self.opts.root, f"mid-append:{batch_id}"):
                _put_all(writer, msgs.slice(0, msgs.num_rows // 2))
                writer.flush()
                os._exit(17)          # the task dies half-way through its append
            n, first, end = _put_all(writer, msgs)
            writer.flush()
            entry["done"] = True
            entry["appended"] = n + len(skip)
            log.save(doc)
            msg.appended, msg.skipped = n, len(skip)
            msg.first_offset, msg.end_offset = first, end
        msg.append_s = time.monotonic() - t1
        return msg

    def commit(self, messages, batchId: int) -> None:
        """Record the batch as committed and forget its task entries (under the store lock)."""
        root = self.opts.root
        query_ids = {m.query_id for m in messages if isinstance(m, SinkCommitMessage) and m.query_id}
        if not query_ids or not os.path.isdir(root):
            return
        if _take_fault(root, f"commit:{batchId}"):
            raise StoreError(f"injected fault before committing batch {batchId} (test hook {FAULT_ENV})")
        lock = StoreLock(root, timeout_s=self.opts.lock_timeout_s)
        try:
            lock.acquire()
        except StoreLockedError as exc:
            raise StoreLockedError(f"rmq sink: could not lock the store {root} to commit batch {batchId} "
                                   f"within {self.opts.lock_timeout_s:g} s: {exc}") from None
        try:
            log = SinkLog(root)
            doc = log.load()
            for query_id in sorted(query_ids):
                q = doc["queries"].setdefault(query_id, {"committedBatch": -1, "tasks": {}})
                q["committedBatch"] = max(int(q.get("committedBatch", -1)), int(batchId))
                q["tasks"] = {k: v for k, v in q.get("tasks", {}).items() if int(k.split(":")[0]) > batchId}
            log.save(doc)
        finally:
            lock.release()

    def abort(self, messages, batchId: int) -> None:
        # Nothing to undo: finished tasks are recorded as done and are skipped when the batch is retried.
        return None


__all__ = ["RmqBatchWriter", "RmqStreamWriter", "SinkLog", "SinkOptions", "parse_sink_options",
           "BATCH_PROPERTY", "SEQ_PROPERTY", "RmqError"]
