"""``bodyFormat=avro``: one binary-encoded datum per body, read with fastavro, as Spark's
``from_avro(body, schema)`` gives it: the types of Spark's SchemaConverters.toSqlType (docs/bodies.md
"Columns") and the values its AvroDeserializer makes.

The schema handed to fastavro is the user's, rewritten so fastavro returns raw values we convert once:
logical types are dropped (a date is its days, a timestamp its millis / micros, a decimal its unscaled
bytes), and every non-null branch of a union is wrapped in a one-field record, whose binary encoding is the
branch's own, so the name fastavro returns for it says which branch a value took (a union of several types
is a struct ``member0``, ``member1``, ... with the taken branch set).
"""

from __future__ import annotations

import decimal
import io
import json
from typing import Callable, Optional

from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DataType, DateType, DecimalType, DoubleType,
                               FloatType, IntegerType, LongType, MapType, NullType, StringType, StructField,
                               StructType, TimestampNTZType, TimestampType)

from ...errors import OptionError
from .errors import BadBody

INSTALL_HINT = "bodyFormat=avro needs fastavro on the Python data source: pip install 'rmqsource[avro]'"
_BRANCH = "rmqsource_union_branch_"
_PRIMITIVES = {"null": NullType, "boolean": BooleanType, "int": IntegerType, "long": LongType, "float": FloatType,
               "double": DoubleType, "bytes": BinaryType, "string": StringType}
_NAMED = ("record", "enum", "fixed", "error")
Converter = Callable[[object], object]


def _same(v):
    return v


class _Walk:
    """One pass over an Avro schema: (Spark type, nullable, converter, fastavro's schema) per node."""

    def __init__(self):
        self.named: dict[str, tuple] = {}      # full name -> (type, converter)
        self.open: set[str] = set()            # records being walked (a reference to one is recursion)
        self.branches = 0

    def full_name(self, name: str, namespace: str) -> str:
        return name if "." in name or not namespace else f"{namespace}.{name}"

    def node(self, s, ns: str):
        if isinstance(s, str):
            if s in _PRIMITIVES:
                return _PRIMITIVES[s](), s == "null", _same, s
            full = s if s in self.named or s in self.open else self.full_name(s, ns)
            if full in self.open or s in self.open:
                raise OptionError(f"the Avro schema is recursive (through {s!r}); Spark's from_avro does not take "
                                  f"recursive schemas")
            if full not in self.named and s not in self.named:
                raise OptionError(f"the Avro schema names an unknown type {s!r}")
            t, conv = self.named.get(full) or self.named[s]
            return t, False, conv, s
        if isinstance(s, list):
            return self.union(s, ns)
        if not isinstance(s, dict) or "type" not in s:
            raise OptionError(f"not an Avro schema: {json.dumps(s)[:100]}")
        kind, logical = s["type"], s.get("logicalType")
        if isinstance(kind, (dict, list)) or (kind in _PRIMITIVES and logical is None):
            return self.node(kind, ns)
        if kind in _PRIMITIVES:
            return self.logical(s, kind, logical, ns)
        if kind in ("record", "error"):
            return self.record(s, ns)
        if kind == "enum":
            return self.register(s, ns, StringType(), _same), False, _same, s
        if kind == "fixed":
            if logical == "decimal":
                t, conv = self.decimal(s)
                return self.register(s, ns, t, conv), False, conv, {k: v for k, v in s.items() if k != "logicalType"}
            return self.register(s, ns, BinaryType(), _same), False, _same, s
        if kind == "array":
            t, nullable, conv, read = self.node(s.get("items"), ns)
            return (ArrayType(t, nullable), False, lambda v: None if v is None else [conv(x) for x in v],
                    {**s, "items": read})
        if kind == "map":
            t, nullable, conv, read = self.node(s.get("values"), ns)
            return (MapType(StringType(), t, nullable), False,
                    lambda v: None if v is None else [(k, conv(x)) for k, x in v.items()], {**s, "values": read})
        return self.node(kind, ns)             # {"type": "SomeNamedType"}

    def register(self, s: dict, ns: str, t: DataType, conv) -> DataType:
        self.named[self.full_name(s["name"], s.get("namespace", ns))] = (t, conv)
        return t

    def logical(self, s: dict, kind: str, logical: str, ns: str):
        plain = {k: v for k, v in s.items() if k != "logicalType"}
        if kind == "int" and logical == "date":
            return DateType(), False, _same, plain
        if kind == "long" and logical in ("timestamp-millis", "local-timestamp-millis"):
            t = TimestampType() if logical == "timestamp-millis" else TimestampNTZType()
            return t, False, lambda v: None if v is None else v * 1000, plain
        if kind == "long" and logical in ("timestamp-micros", "local-timestamp-micros"):
            return TimestampType() if logical == "timestamp-micros" else TimestampNTZType(), False, _same, plain
        if kind == "bytes" and logical == "decimal":
            t, conv = self.decimal(s)
            return t, False, conv, plain
        return self.node(kind, ns)             # other logical types: their underlying type, as Spark

    def decimal(self, s: dict):
        precision, scale = s.get("precision"), s.get("scale", 0)
        if not isinstance(precision, int) or not 1 <= precision <= 38 or not isinstance(scale, int) \
                or not 0 <= scale <= precision:
            raise OptionError(f"Avro decimal(precision={precision}, scale={scale}): Spark takes precision 1..38 "
                              f"and scale 0..precision")

        def conv(v):
            if v is None:
                return None
            return decimal.Decimal(int.from_bytes(v, "big", signed=True)).scaleb(-scale)
        return DecimalType(precision, scale), conv

    def record(self, s: dict, ns: str):
        name = s.get("name")
        if not isinstance(name, str):
            raise OptionError("an Avro record needs a name")
        ns = s.get("namespace", ns) if "." not in name else name.rsplit(".", 1)[0]
        full = self.full_name(name, ns)
        self.open.add(full)
        fields, convs, reads = [], [], []
        for f in s.get("fields", []):
            t, nullable, conv, read = self.node(f.get("type"), ns)
            fields.append(StructField(f["name"], t, nullable))
            convs.append((f["name"], conv))
            reads.append({**f, "type": read})
        self.open.discard(full)
        t = StructType(fields)

        def conv(v):
            return None if v is None else {n: c(v.get(n)) for n, c in convs}
        self.named[full] = (t, conv)
        return t, False, conv, {**s, "fields": reads}

    def union(self, branches: list, ns: str):
        nodes = [(b, self.node(b, ns)) for b in branches]
        has_null = any(b == "null" for b in branches)
        real = [(i, b, n) for i, (b, n) in enumerate(nodes) if b != "null"]
        reads, by_name = [], {}
        for i, (b, (t, nullable, conv, read)) in enumerate(nodes):
            if b == "null":
                reads.append("null")
                continue
            self.branches += 1
            name = f"{_BRANCH}{self.branches}"
            by_name[name] = i
            reads.append({"type": "record", "name": name, "fields": [{"name": "v", "type": read}]})
        kinds = {_base(b) for _, b, _ in real}
        if not real:
            return NullType(), True, lambda v: None, reads
        if len(real) == 1:
            t, _, conv, _ = real[0][2]
            return t, True, _branch_value(by_name, {real[0][0]: conv}), reads
        if len(real) == 2 and kinds in ({"int", "long"}, {"float", "double"}):
            t = LongType() if "long" in kinds else DoubleType()
            return t, True, _branch_value(by_name, {i: n[2] for i, _, n in real}), reads
        members = [StructField(f"member{k}", n[0], True) for k, (_, _, n) in enumerate(real)]
        slots = {i: k for k, (i, _, _) in enumerate(real)}
        convs = {i: n[2] for i, _, n in real}

        def conv(v):
            if v is None:
                return None
            name, wrapped = v
            i = by_name[name.rsplit(".", 1)[-1]]
            out = {f"member{k}": None for k in range(len(members))}
            out[f"member{slots[i]}"] = convs[i](wrapped["v"])
            return out
        return StructType(members), has_null, conv, reads


def _base(s) -> Optional[str]:
    if isinstance(s, dict):
        return s.get("type") if isinstance(s.get("type"), str) else None
    return s if isinstance(s, str) else None


def _branch_value(by_name: dict, convs: dict) -> Converter:
    def conv(v):
        if v is None:
            return None
        name, wrapped = v
        return convs[by_name[name.rsplit(".", 1)[-1]]](wrapped["v"])
    return conv


def _walk(text: str):
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"the Avro schema is not JSON: {exc.msg} at character {exc.pos}") from None
    if not isinstance(doc, dict) or doc.get("type") not in ("record", "error"):
        raise OptionError("an Avro body schema must be a record at its top level "
                          '({"type": "record", "name": ..., "fields": [...]})')
    t, _, conv, read = _Walk().node(doc, "")
    return t, conv, read


def avro_struct(text: str) -> StructType:
    """The Spark struct from_avro gives an Avro record schema (needs no fastavro)."""
    return _walk(text)[0]


class AvroBody:
    """Decodes bodies to the values of the record's fields, in order."""

    def __init__(self, text: str):
        try:
            import fastavro
        except ImportError:
            raise OptionError(INSTALL_HINT) from None
        t, self.convert, read = _walk(text)
        self.names = [f.name for f in t.fields]
        try:
            self.schema = fastavro.parse_schema(read)
        except Exception as exc:           # fastavro's SchemaParseException and friends
            raise OptionError(f"not a valid Avro schema: {exc}") from None
        self.read = fastavro.schemaless_reader

    def decode(self, data: bytes) -> list:
        try:
            datum = self.read(io.BytesIO(data), self.schema, None, return_named_type=True)
        except Exception as exc:           # EOFError, IndexError (union / enum index), ValueError, ...
            raise BadBody(f"not a datum of the Avro schema ({type(exc).__name__}: {exc})"[:300]) from None
        row = self.convert(datum)
        return [row[n] for n in self.names]
