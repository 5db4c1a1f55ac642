"""Spark schemas as text, without a JVM: a DDL (``id BIGINT, amount DOUBLE``) or Spark's JSON form of a struct
(``{"type":"struct","fields":[...]}``) to a ``pyspark.sql.types.StructType``, and a StructType back to DDL.

PySpark's own ``_parse_datatype_string`` asks the JVM, and ``DataSource.schema()`` runs in a Python worker
that has none; the types themselves are plain Python. The grammar is the subset of Spark's a body schema
needs: ``name TYPE [NOT NULL] [COMMENT '...'], ...`` with back-quoted names and the types listed in
:data:`_SIMPLE`, ``decimal(p, s)``, ``varchar(n)`` / ``char(n)`` (read as string, as from_json does),
``array<T>``, ``map<K, V>`` and ``struct<name: T, ...>`` (or ``struct<name T>``).
"""

from __future__ import annotations

import json
import re

from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, ByteType, DataType, DateType, DecimalType,
                               DoubleType, FloatType, IntegerType, LongType, MapType, NullType, ShortType,
                               StringType, StructField, StructType, TimestampNTZType, TimestampType)

from ...errors import OptionError

_SIMPLE = {
    "boolean": BooleanType, "tinyint": ByteType, "byte": ByteType, "smallint": ShortType, "short": ShortType,
    "int": IntegerType, "integer": IntegerType, "bigint": LongType, "long": LongType, "float": FloatType,
    "real": FloatType, "double": DoubleType, "string": StringType, "binary": BinaryType, "date": DateType,
    "timestamp": TimestampType, "timestamp_ltz": TimestampType, "timestamp_ntz": TimestampNTZType,
    "void": NullType,
}
_DECIMAL = ("decimal", "dec", "numeric")
_TOKEN = re.compile(r"\s*(?:(`(?:[^`]|``)*`)|('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")|([A-Za-z0-9_]+)|([<>(),:])|(\S))",
                    re.S)


class _Tokens:
    def __init__(self, text: str):
        self.text = text
        self.items: list[tuple[str, str]] = []      # (kind, text): name | quoted | string | punct
        for m in _TOKEN.finditer(text):
            quoted, string, word, punct, other = m.groups()
            if other is not None:
                raise self.error(f"unexpected character {other!r}")
            if quoted is not None:
                self.items.append(("quoted", quoted[1:-1].replace("``", "`")))
            elif string is not None:
                self.items.append(("string", string[1:-1]))
            elif word is not None:
                self.items.append(("word", word))
            elif punct is not None:
                self.items.append(("punct", punct))
        self.pos = 0

    def error(self, what: str) -> OptionError:
        return OptionError(f"cannot parse the schema {self.text!r} as a Spark DDL (e.g. 'id BIGINT, name "
                           f"STRING'): {what}")

    def peek(self, k: int = 0):
        i = self.pos + k
        return self.items[i] if i < len(self.items) else (None, None)

    def take(self):
        item = self.peek()
        if item[0] is None:
            raise self.error("it ends early")
        self.pos += 1
        return item

    def word(self, *words: str) -> bool:
        """Takes the next token when it is one of ``words`` (case-insensitive)."""
        kind, text = self.peek()
        if kind == "word" and text.lower() in words:
            self.pos += 1
            return True
        return False

    def expect(self, punct: str) -> None:
        kind, text = self.take()
        if kind != "punct" or text != punct:
            raise self.error(f"expected {punct!r}, found {text!r}")

    def name(self) -> str:
        kind, text = self.take()
        if kind not in ("word", "quoted"):
            raise self.error(f"expected a column name, found {text!r}")
        return text

    def integer(self) -> int:
        kind, text = self.take()
        if kind != "word" or not text.isdigit():
            raise self.error(f"expected a number, found {text!r}")
        return int(text)


def _data_type(t: _Tokens) -> DataType:
    kind, text = t.take()
    if kind != "word":
        raise t.error(f"expected a type, found {text!r}")
    low = text.lower()
    if low in _SIMPLE:
        return _SIMPLE[low]()
    if low in _DECIMAL:
        precision, scale = 10, 0                     # Spark's DECIMAL without arguments
        if t.peek() == ("punct", "("):
            t.take()
            precision = t.integer()
            if t.peek() == ("punct", ","):
                t.take()
                scale = t.integer()
            t.expect(")")
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            raise t.error(f"decimal({precision}, {scale}): precision must be 1..38 and scale 0..precision")
        return DecimalType(precision, scale)
    if low in ("varchar", "char"):
        t.expect("(")
        t.integer()
        t.expect(")")
        return StringType()
    if low == "array":
        t.expect("<")
        element = _data_type(t)
        t.expect(">")
        return ArrayType(element, True)
    if low == "map":
        t.expect("<")
        key = _data_type(t)
        t.expect(",")
        value = _data_type(t)
        t.expect(">")
        return MapType(key, value, True)
    if low == "struct":
        t.expect("<")
        fields = []
        if t.peek() != ("punct", ">"):
            fields = _fields(t, nested=True)
        t.expect(">")
        return StructType(fields)
    raise t.error(f"type {text!r} is not supported in a body schema")


def _fields(t: _Tokens, nested: bool) -> list[StructField]:
    fields = []
    while True:
        name = t.name()
        if nested and t.peek() == ("punct", ":"):
            t.take()
        data_type = _data_type(t)
        nullable, comment = True, None
        while True:
            if t.word("not"):
                if not t.word("null"):
                    raise t.error("expected NULL after NOT")
                nullable = False
            elif t.word("comment"):
                kind, text = t.take()
                if kind != "string":
                    raise t.error(f"expected a quoted comment, found {text!r}")
                comment = text
            else:
                break
        fields.append(StructField(name, data_type, nullable, {"comment": comment} if comment else None))
        if t.peek() != ("punct", ","):
            return fields
        t.take()


def parse_ddl(text: str) -> StructType:
    """A DDL column list (``a INT, b STRUCT<c: STRING>``) as a StructType."""
    t = _Tokens(text)
    if t.peek()[0] is None:
        raise t.error("it is empty")
    fields = _fields(t, nested=False)
    if t.peek()[0] is not None:
        raise t.error(f"unexpected {t.peek()[1]!r}")
    return StructType(fields)


def parse_spark_schema(text: str) -> StructType:
    """A Spark schema given as a DDL or as Spark's JSON form of a struct (``StructType.json()``)."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return parse_ddl(stripped)
    try:
        doc = json.loads(stripped)
        schema = StructType.fromJson(doc) if isinstance(doc, dict) and doc.get("type") == "struct" else None
    except (ValueError, KeyError, TypeError) as exc:
        raise OptionError(f"cannot parse the schema as Spark's JSON form of a struct "
                          f"({{\"type\":\"struct\",\"fields\":[...]}}): {exc}") from None
    if schema is None:
        raise OptionError('a JSON schema must be Spark\'s form of a struct: {"type":"struct","fields":[...]}')
    return schema


def as_nullable(t: DataType) -> DataType:
    """Every level nullable, as from_json's result type (a missing field or a bad record is null)."""
    if isinstance(t, StructType):
        return StructType([StructField(f.name, as_nullable(f.dataType), True, f.metadata) for f in t.fields])
    if isinstance(t, ArrayType):
        return ArrayType(as_nullable(t.elementType), True)
    if isinstance(t, MapType):
        return MapType(as_nullable(t.keyType), as_nullable(t.valueType), True)
    return t


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def type_ddl(t: DataType) -> str:
    """The DDL of a type, which Spark's parser reads back to the same type."""
    if isinstance(t, StructType):
        return "struct<" + ",".join(f"{quote(f.name)}:{type_ddl(f.dataType)}" + ("" if f.nullable else " not null")
                                    for f in t.fields) + ">"
    if isinstance(t, ArrayType):
        return f"array<{type_ddl(t.elementType)}>"
    if isinstance(t, MapType):
        return f"map<{type_ddl(t.keyType)},{type_ddl(t.valueType)}>"
    if isinstance(t, DecimalType):
        return f"decimal({t.precision},{t.scale})"
    if isinstance(t, NullType):
        return "void"
    return t.simpleString()


def struct_ddl(schema: StructType) -> str:
    return ", ".join(f"{quote(f.name)} {type_ddl(f.dataType)}" + ("" if f.nullable else " NOT NULL")
                     for f in schema.fields)
