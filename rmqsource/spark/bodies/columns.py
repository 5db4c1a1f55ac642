"""The decoded columns of a BodySpec (:mod:`rmqsource.spark.bodies.spec`): each schema's top-level fields,
their union over bodySchema and bodySchemaByTopic (docs/bodies.md "Columns"), the prefix, and the refusals
(a type that differs between two schemas, a name that clashes with a message column)."""

from __future__ import annotations

import functools

from pyspark.sql.types import MapType, StringType, StructField, StructType

from ...errors import OptionError
from ..schema import COLUMNS
from .ddl import as_nullable, parse_spark_schema, type_ddl
from .constants import DECODE_ERROR_COLUMN, TEXT_COLUMN


@functools.lru_cache(maxsize=64)
def schema_struct(fmt: str, text: str) -> StructType:
    """The Spark struct one schema text decodes to (every level nullable, as from_json / a bad record make it)."""
    if fmt == "text":
        return StructType([StructField(TEXT_COLUMN, StringType(), True)])
    if fmt == "avro":
        from .avro_body import avro_struct
        return as_nullable(avro_struct(text))
    schema = as_nullable(parse_spark_schema(text))
    _check_json_types(schema)
    return schema


def _check_json_types(t) -> None:
    if isinstance(t, StructType):
        for f in t.fields:
            _check_json_types(f.dataType)
    elif isinstance(t, MapType):
        if not isinstance(t.keyType, StringType):
            raise OptionError(f"bodyFormat=json: map keys are JSON field names, so a map's key type must be "
                              f"string, not {type_ddl(t.keyType)}")
        _check_json_types(t.valueType)
    elif hasattr(t, "elementType"):
        _check_json_types(t.elementType)


def topic_schemas(spec) -> list[tuple[object, StructType]]:
    """(topic or None for bodySchema, its struct), bodySchema first, then the topics in the order given."""
    out = []
    if spec.format == "text":
        out.append((None, schema_struct("text", "")))
    elif spec.schema is not None:
        out.append((None, _struct(spec, "bodySchema", spec.schema)))
    for topic, text in spec.by_topic:
        out.append((topic, _struct(spec, f"bodySchemaByTopic[{topic!r}]", text)))
    return out


def _struct(spec, where: str, text: str) -> StructType:
    try:
        struct = schema_struct(spec.format, text)
    except OptionError as exc:
        raise OptionError(f"option {where}: {exc}") from None
    seen: dict[str, str] = {}
    for f in struct.fields:
        if f.name.lower() in seen:
            raise OptionError(f"option {where}: the body schema has two fields named {seen[f.name.lower()]!r} "
                              f"and {f.name!r} (Spark compares column names case-insensitively)")
        seen[f.name.lower()] = f.name
    return struct


@functools.lru_cache(maxsize=64)
def decoded_struct(spec) -> StructType:
    """The decoded columns, prefixed: the union by name of every schema's top-level fields."""
    fields: dict[str, StructField] = {}
    origin: dict[str, str] = {}
    for topic, struct in topic_schemas(spec):
        where = "bodySchema" if topic is None else f"bodySchemaByTopic[{topic!r}]"
        for f in struct.fields:
            name = spec.prefix + f.name
            key = name.lower()
            if key in fields:
                if fields[key].name != name:
                    raise OptionError(f"decoded columns {fields[key].name!r} ({origin[key]}) and {name!r} ({where}) "
                                      f"differ only in case; Spark compares column names case-insensitively")
                if _plain(fields[key].dataType) != _plain(f.dataType):
                    raise OptionError(f"decoded column {name!r} has type {type_ddl(fields[key].dataType)} in "
                                      f"{origin[key]} but {type_ddl(f.dataType)} in {where}; the schemas of "
                                      f"bodySchemaByTopic must agree on the fields they share")
                continue
            fields[key] = StructField(name, f.dataType, True)
            origin[key] = where
    message = {c.lower(): c for c in COLUMNS}
    reserved = {DECODE_ERROR_COLUMN.lower()} if spec.on_bad_record == "null" else set()
    for key, f in fields.items():
        if key in message:
            raise OptionError(f"decoded column {f.name!r} has the name of the message column {message[key]!r}; "
                              f"set bodyColumnPrefix (e.g. 'body_') to tell them apart")
        if key in reserved:
            raise OptionError(f"decoded column {f.name!r} has the name of the column onBadRecord=null adds; set "
                              f"bodyColumnPrefix to tell them apart")
    return StructType(list(fields.values()))


def _plain(t):
    """A type without field metadata (comments), for comparing two schemas' fields."""
    return type_ddl(t)


def body_columns(spec) -> StructType:
    struct = decoded_struct(spec)
    if spec.on_bad_record == "null":
        return StructType(struct.fields + [StructField(DECODE_ERROR_COLUMN, StringType(), True)])
    return struct
