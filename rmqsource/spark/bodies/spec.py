"""The body options (docs/bodies.md) parsed into a :class:`BodySpec`: plain values (format, schema texts,
prefix, wire format, policy) that pickle to the read tasks, which build their decoders from it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping, Optional

from ...errors import OptionError
from ...names import local_file_path, remote_scheme
from .columns import body_columns

from .constants import BODY_OPTIONS, FORMATS, POLICIES, TEXT_COLUMN, WIRE_FORMATS


@dataclass(frozen=True)
class BodySpec:
    format: str                                   # json | avro | text
    schema: Optional[str] = None                  # bodySchema, or the text of bodySchemaFile
    by_topic: tuple[tuple[str, str], ...] = ()    # bodySchemaByTopic, in the order given
    wire_format: str = "plain"
    prefix: str = ""
    on_bad_record: str = "fail"

    @property
    def columns(self):
        """The decoded columns (a StructType, prefixed, every level nullable), then ``_decodeError`` under
        onBadRecord=null; checked when the spec is made (:func:`parse_body_options`)."""
        return body_columns(self)


def parse_body_options(opts: Mapping[str, str], *, refuse_with: Optional[str] = None) -> Optional[BodySpec]:
    """The body options of ``opts`` (lower-case keys) as a BodySpec; None without ``bodyFormat``.
    ``refuse_with``: the view / metadata option the read also has (bodyFormat applies to message reads)."""
    given = {k: str(v) for k, v in opts.items() if k in BODY_OPTIONS}
    if "bodyformat" not in given or not given["bodyformat"].strip():
        others = sorted(BODY_OPTIONS[k] for k in given if k != "bodyformat")
        if others:
            raise OptionError(f"option {', '.join(others)} applies to decoded bodies: give bodyFormat "
                              f"(json, avro or text) too")
        return None
    fmt = given["bodyformat"].strip().lower()
    if fmt == "protobuf":
        raise OptionError("bodyFormat=protobuf is not supported yet: read the body column and decode it with "
                          "from_protobuf(body, ...) (pyspark.sql.protobuf.functions)")
    if fmt not in FORMATS:
        raise OptionError(f"option bodyFormat must be one of {', '.join(FORMATS)}, got {given['bodyformat']!r}")
    if refuse_with:
        raise OptionError(f"option bodyFormat applies to message reads; it cannot be combined with {refuse_with}")
    wire = given.get("bodywireformat", "plain").strip().lower()
    if wire not in WIRE_FORMATS:
        raise OptionError(f"option bodyWireFormat must be plain or confluent, got {given['bodywireformat']!r}")
    policy = given.get("onbadrecord", "fail").strip().lower()
    if policy not in POLICIES:
        raise OptionError(f"option onBadRecord must be fail, null or skip, got {given['onbadrecord']!r}")
    prefix = given.get("bodycolumnprefix", "")
    if "bodyschema" in given and "bodyschemafile" in given:
        raise OptionError("give at most one of the options bodySchema and bodySchemaFile")
    schema = given.get("bodyschema")
    if "bodyschemafile" in given:
        schema = _read_schema_file(given["bodyschemafile"])
    by_topic = _by_topic(given["bodyschemabytopic"]) if "bodyschemabytopic" in given else ()
    if fmt == "text":
        named = [BODY_OPTIONS[k] for k in ("bodyschema", "bodyschemafile", "bodyschemabytopic") if k in given]
        if named:
            raise OptionError(f"bodyFormat=text takes no schema (its one column is {TEXT_COLUMN}); "
                              f"drop {', '.join(named)}")
    elif (schema is None or not schema.strip()) and not by_topic:
        raise OptionError(f"bodyFormat={fmt} needs the bodies' schema: option bodySchema, bodySchemaFile or "
                          f"bodySchemaByTopic")
    spec = BodySpec(fmt, schema if schema and schema.strip() else None, by_topic, wire, prefix, policy)
    spec.columns            # the schemas parse, the columns union and clash with no message column
    return spec


def _read_schema_file(value: str) -> str:
    path = value.strip()
    scheme = remote_scheme(path)
    if scheme:
        raise OptionError(f"option bodySchemaFile {path!r}: the Python rmq source reads schema files from local "
                          f"or mounted paths, not {scheme}: URIs (the JVM scan reads them); give the schema's "
                          f"text in bodySchema instead")
    path = local_file_path(path, "option bodySchemaFile")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise OptionError(f"option bodySchemaFile: cannot read {path}: {exc}") from None


def _by_topic(value: str) -> tuple[tuple[str, str], ...]:
    try:
        doc = json.loads(value)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option bodySchemaByTopic must be a JSON object of topic -> schema text, e.g. "
                          f"{{\"Orders\": \"id BIGINT\"}}; cannot parse it: {exc.msg}") from None
    if not isinstance(doc, dict) or not doc:
        raise OptionError("option bodySchemaByTopic must be a non-empty JSON object of topic -> schema text")
    out = []
    for topic, schema in doc.items():
        if isinstance(schema, (dict, list)):          # an Avro or Spark JSON schema given inline, not as text
            schema = json.dumps(schema)
        if not isinstance(schema, str) or not schema.strip():
            raise OptionError(f"option bodySchemaByTopic: topic {topic!r} must map to a schema text, got "
                              f"{schema!r}")
        out.append((topic, schema))
    return tuple(out)
