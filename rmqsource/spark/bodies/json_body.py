"""``bodyFormat=json``: a body as Spark's ``from_json(CAST(body AS STRING), schema)`` reads it with its default
options (JacksonParser's conversions), from the standard library's ``json`` values.

A value the column's type cannot take makes the record bad (from_json would keep the other fields: a read
decodes a body whole or not at all). Known differences on malformed input: Spark also takes single-quoted
strings and names (allowSingleQuotes), which ``json`` refuses.
"""

from __future__ import annotations

import base64
import binascii
import decimal
import json
import math
import re
from typing import Callable, Optional

from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, ByteType, DataType, DateType, DecimalType,
                               DoubleType, FloatType, IntegerType, LongType, MapType, NullType, ShortType,
                               StringType, StructType, TimestampNTZType, TimestampType)

from .errors import BadBody
from .spark_time import parse_date, parse_timestamp

_DECODER = json.JSONDecoder(parse_float=decimal.Decimal)     # exact numbers: decimals, and Java's double text
_CONTEXT = decimal.Context(prec=400, rounding=decimal.ROUND_HALF_UP, Emax=10 ** 6, Emin=-10 ** 6)
_DECIMAL_TEXT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INFINITIES = {"NaN": math.nan, "Infinity": math.inf, "+Infinity": math.inf, "+INF": math.inf,
               "-Infinity": -math.inf, "-INF": -math.inf}
_INT_RANGES = {ByteType: (-128, 255), ShortType: (-2 ** 15, 2 ** 15 - 1), IntegerType: (-2 ** 31, 2 ** 31 - 1),
               LongType: (-2 ** 63, 2 ** 63 - 1)}       # Jackson's getByteValue also takes 128..255 (wrapped)
Converter = Callable[[object], object]


def _kind(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, decimal.Decimal, float)):
        return "a number"
    return {str: "a string", dict: "an object", list: "an array"}.get(type(v), type(v).__name__)


def _bad(v, t: DataType) -> BadBody:
    return BadBody(f"{_kind(v)} ({java_text(v)[:60]}) cannot be read as {t.simpleString()}")


def java_double(x: float) -> str:
    """Java's Double.toString, as Jackson writes a double (shortest digits; JDK 17 is not always shortest)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign, digits, exp = decimal.Decimal(repr(x)).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    point = len(digits) + exp                     # the value is 0.ds * 10**point
    out = "-" if sign else ""
    if 1e-3 <= abs(x) < 1e7:
        if point <= 0:
            return out + "0." + "0" * -point + ds
        whole, frac = ds[:point].ljust(point, "0"), ds[point:]
        return out + whole + "." + (frac or "0")
    return out + ds[0] + "." + (ds[1:] or "0") + "E" + str(point - 1)


def _json_string(s: str) -> str:
    # Jackson escapes control characters as \u00XX with upper-case hex digits
    return re.sub(r"\\u00([0-9a-f]{2})", lambda m: "\\u00" + m.group(1).upper(), json.dumps(s, ensure_ascii=False))


def java_text(v) -> str:
    """A JSON value as Jackson copies it into a string column: compact, numbers as Java writes them."""
    if v is None:
        return "null"
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, decimal.Decimal):
        return java_double(float(v))
    if isinstance(v, float):                      # NaN / Infinity: Jackson quotes non-numeric numbers
        return '"' + java_double(v) + '"'
    if isinstance(v, str):
        return _json_string(v)
    if isinstance(v, list):
        return "[" + ",".join(java_text(x) for x in v) + "]"
    return "{" + ",".join(_json_string(k) + ":" + java_text(x) for k, x in v.items()) + "}"


def converter(t: DataType) -> Converter:
    """value -> what Spark holds (ints for date / timestamp: days / microseconds); BadBody when it cannot."""
    if isinstance(t, StringType):
        return lambda v: v if v is None or isinstance(v, str) else java_text(v)
    if isinstance(t, BooleanType):
        def boolean(v):
            if v is None or isinstance(v, bool):
                return v
            raise _bad(v, t)
        return boolean
    if type(t) in _INT_RANGES:
        lo, hi = _INT_RANGES[type(t)]
        wrap = isinstance(t, ByteType)

        def integral(v):
            if v is None:
                return None
            if isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi:
                return v - 256 if wrap and v > 127 else v
            raise _bad(v, t)
        return integral
    if isinstance(t, (FloatType, DoubleType)):
        def floating(v):
            if v is None or isinstance(v, float):
                return v
            if isinstance(v, (int, decimal.Decimal)) and not isinstance(v, bool):
                try:
                    return float(v)
                except OverflowError:
                    return math.copysign(math.inf, v)
            if isinstance(v, str) and v in _INFINITIES:
                return _INFINITIES[v]
            raise _bad(v, t)
        return floating
    if isinstance(t, DecimalType):
        return _decimal_converter(t)
    if isinstance(t, (TimestampType, TimestampNTZType, DateType)):
        return _datetime_converter(t)
    if isinstance(t, BinaryType):
        def binary(v):
            if v is None:
                return None
            if isinstance(v, str):
                try:
                    return base64.b64decode(v, validate=True)
                except (binascii.Error, ValueError):
                    pass
            raise _bad(v, t)
        return binary
    if isinstance(t, ArrayType):
        element = converter(t.elementType)

        def array(v):
            if v is None or isinstance(v, list):
                return v if v is None else [element(x) for x in v]
            raise _bad(v, t)
        return array
    if isinstance(t, MapType):
        value = converter(t.valueType)

        def mapping(v):
            if v is None or isinstance(v, dict):
                return v if v is None else [(k, value(x)) for k, x in v.items()]
            raise _bad(v, t)
        return mapping
    if isinstance(t, StructType):
        fields = [(f.name, converter(f.dataType)) for f in t.fields]

        def struct(v):
            if v is None or isinstance(v, dict):
                return v if v is None else {name: conv(v.get(name)) for name, conv in fields}
            raise _bad(v, t)
        return struct
    if isinstance(t, NullType):
        return lambda v: None
    raise TypeError(f"no JSON conversion to {t}")


def _decimal_converter(t: DecimalType) -> Converter:
    quantum = decimal.Decimal(1).scaleb(-t.scale)

    def to_decimal(v):
        if v is None:
            return None
        if isinstance(v, str) and _DECIMAL_TEXT.fullmatch(v.replace(",", "")):
            v = decimal.Decimal(v.replace(",", ""))           # Spark's US-locale parser drops the commas
        if isinstance(v, (int, decimal.Decimal)) and not isinstance(v, bool):
            try:
                d = _CONTEXT.quantize(decimal.Decimal(v), quantum)
            except decimal.InvalidOperation:
                d = None
            if d is not None and len(d.as_tuple().digits) <= t.precision:
                return d
            raise BadBody(f"{java_text(v)[:60]} does not fit {t.simpleString()}")
        raise _bad(v, t)
    return to_decimal


def _datetime_converter(t: DataType) -> Converter:
    date, ntz = isinstance(t, DateType), isinstance(t, TimestampNTZType)

    def to_datetime(v):
        if v is None:
            return None
        if isinstance(v, str) and v:
            try:
                return parse_date(v) if date else parse_timestamp(v, ntz)
            except ValueError:
                pass
        elif isinstance(t, TimestampType) and isinstance(v, int) and not isinstance(v, bool) \
                and -2 ** 63 <= v * 1_000_000 < 2 ** 63:
            return v * 1_000_000                         # an integral number is seconds since the epoch
        raise _bad(v, t)
    return to_datetime


class JsonBody:
    """Decodes bodies to the values of ``schema``'s top-level fields, in order."""

    def __init__(self, schema: StructType):
        self.names = [f.name for f in schema.fields]
        self.fields = [(f.name, converter(f.dataType)) for f in schema.fields]

    def decode(self, data: bytes) -> Optional[list]:
        """The fields' values; None for an empty (or white space) body, which from_json reads as null."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadBody(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        start = len(text) - len(text.lstrip())
        if start == len(text):
            return None
        try:
            doc, _ = _DECODER.raw_decode(text, start)     # what follows the first value is ignored, as by Spark
        except json.JSONDecodeError as exc:
            raise BadBody(f"not JSON: {exc.msg} at character {exc.pos}") from None
        except RecursionError:
            raise BadBody("not JSON this parser can read: nested too deeply") from None
        if not isinstance(doc, dict):
            raise BadBody(f"the JSON value is {_kind(doc)}, not an object")
        out = []
        for name, conv in self.fields:
            try:
                out.append(conv(doc.get(name)))
            except BadBody as exc:
                raise BadBody(f"field {name!r}: {exc.reason}") from None
        return out
