"""Typed bodies without Spark (rmqsource.spark.bodies): options, json / avro / text decoding, the Confluent
header, per-topic schemas and the bad-record policies. tests/spark/test_bodies.py compares with Spark's
from_json / from_avro."""

from __future__ import annotations

import decimal
import io
import json
import math

import pyarrow as pa
import pytest

from rmqsource.errors import BodyDecodeError, OptionError
from rmqsource.spark.bodies.decode import decode_batches, message_columns
from rmqsource.spark.bodies.json_body import JsonBody, java_double
from rmqsource.spark.bodies.spec import parse_body_options
from rmqsource.spark.bodies.ddl import parse_ddl
from rmqsource.spark.bodies.errors import BadBody
from rmqsource.spark.options import parse_options
from rmqsource.spark.schema import ARROW_SCHEMA

pytestmark = pytest.mark.unit
US = 1_000_000


def spec(**options):
    return parse_body_options({k.lower(): v for k, v in options.items()})


def batch(bodies, topics=None):
    """Message rows read with message_columns: topic, body, queueId, queueOffset, commitLogOffset."""
    n = len(bodies)
    cols = ("topic", "body", "queueId", "queueOffset", "commitLogOffset")
    arrays = [pa.array(topics or ["T"] * n), pa.array(bodies, pa.binary()), pa.array([1] * n, pa.int32()),
              pa.array(range(n), pa.int64()), pa.array([100 * i for i in range(n)], pa.int64())]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema([ARROW_SCHEMA.field(c) for c in cols]))


def rows(s, bodies, columns=None, topics=None):
    columns = columns or ("queueOffset",) + tuple(s.columns.names)
    assert set(message_columns(columns, s)) >= {"body", "topic", "queueId", "queueOffset", "commitLogOffset"}
    return [r for b in decode_batches(s, columns, iter([batch(bodies, topics)])) for r in b.to_pylist()]


def one(ddl, body):
    return JsonBody(parse_ddl(ddl)).decode(body.encode() if isinstance(body, str) else body)


# -- options --------------------------------------------------------------------------------------------

def test_no_body_format_no_spec_and_lone_body_options_refused():
    assert spec() is None
    with pytest.raises(OptionError, match="bodyFormat"):
        spec(bodySchema="a int")


@pytest.mark.parametrize("options, match", [
    ({"bodyFormat": "protobuf"}, "from_protobuf"),
    ({"bodyFormat": "xml"}, "json, avro, text"),
    ({"bodyFormat": "json"}, "needs the bodies' schema"),
    ({"bodyFormat": "json", "bodySchema": "a int", "bodySchemaFile": "/x"}, "at most one"),
    ({"bodyFormat": "text", "bodySchema": "a int"}, "takes no schema"),
    ({"bodyFormat": "json", "bodySchema": "a int", "onBadRecord": "drop"}, "fail, null or skip"),
    ({"bodyFormat": "json", "bodySchema": "a int", "bodyWireFormat": "kafka"}, "plain or confluent"),
    ({"bodyFormat": "json", "bodySchema": "topic string"}, "'topic'.*bodyColumnPrefix"),
    ({"bodyFormat": "json", "bodySchema": "QUEUEID int"}, "queueId"),
    ({"bodyFormat": "json", "bodySchema": "a int, A int"}, "case"),
    ({"bodyFormat": "json", "bodySchema": "_decodeError string", "onBadRecord": "null"}, "onBadRecord=null"),
    ({"bodyFormat": "json", "bodySchema": "m map<int, int>"}, "key type must be string"),
    ({"bodyFormat": "json", "bodySchemaFile": "s3a://b/schema.ddl"}, "s3a"),
    ({"bodyFormat": "json", "bodySchemaByTopic": "[1]"}, "JSON object"),
    ({"bodyFormat": "avro", "bodySchema": '{"type": "string"}'}, "record"),
])
def test_option_refusals(options, match):
    with pytest.raises(OptionError, match=match):
        spec(**options)


def test_prefix_resolves_a_clash_and_schema_file(tmp_path):
    f = tmp_path / "schema.ddl"
    f.write_text("topic STRING, amount DOUBLE")
    s = spec(bodyFormat="JSON", bodySchemaFile=str(f), bodyColumnPrefix="b_", onBadRecord="null")
    assert s.columns.names == ["b_topic", "b_amount", "_decodeError"]


def test_parse_options_takes_body_options_and_refuses_them_with_a_view(tmp_path):
    opts = parse_options({"path": str(tmp_path), "bodyFormat": "text"})
    assert opts.body.format == "text" and opts.body.columns.names == ["bodyText"]
    with pytest.raises(OptionError, match="view=timers"):
        parse_options({"path": str(tmp_path), "bodyFormat": "text", "view": "timers"})
    with pytest.raises(OptionError, match="metadata=queues"):
        parse_options({"path": str(tmp_path), "bodyFormat": "text", "metadata": "queues"})


# -- json ------------------------------------------------------------------------------------------------

def test_json_matches_from_json_conversions():
    ddl = ("s string, o string, n string, b tinyint, d decimal(5,2), t timestamp, a array<int>, "
           "m map<string,int>, st struct<x: int, y: string>, bi binary, f float, g double, dt date, bo boolean")
    body = ('{"s": "x", "o": {"x" : 1.50, "y": [1, 2e3, NaN]}, "n": 1e20, "b": 200, "d": 1.005, "t": 1700000000, '
            '"a": [1, null], "m": {"k": 1}, "st": {"x": 1, "z": 2}, "bi": "aGVsbG8=", "f": "-Infinity", '
            '"g": "NaN", "dt": "2024-01-02T10:00:00Z", "bo": false, "unknown": [1]} trailing text is ignored')
    out = one(ddl, body)
    assert out[:6] == ["x", '{"x":1.5,"y":[1,2000.0,"NaN"]}', "1.0E20", -56, decimal.Decimal("1.01"),
                       1_700_000_000 * US]
    assert out[6:11] == [[1, None], [("k", 1)], {"x": 1, "y": None}, b"hello", -math.inf]
    assert math.isnan(out[11]) and out[12] == 19724 and out[13] is False


def test_json_missing_fields_null_and_empty_bodies_null():
    assert one("a int, b string", '{"a": null}') == [None, None]
    assert one("a int", b"") is None and one("a int", b" \n\t ") is None


@pytest.mark.parametrize("text, micros", [
    ("2024-01-02T03:04:05Z", 1704164645 * US), ("2024-01-02 03:04:05.1234567", 1704164645 * US + 123456),
    ("2024-01", 1704067200 * US), ("2024-01-02T03:04:05+05:30", (1704164645 - 19800) * US),
    ("2024-01-02T03:04:05 America/New_York", (1704164645 + 5 * 3600) * US),
    ("2024-1-2T3:4:5.Z", 1704164645 * US), ("2024-01-02T03:04:05UTC+01:00", (1704164645 - 3600) * US)])
def test_json_timestamps_as_spark_parses_them(text, micros):
    assert one("t timestamp", json.dumps({"t": text})) == [micros]


@pytest.mark.parametrize("ddl, value, reason", [
    ("b tinyint", 256, "tinyint"), ("i int", 2 ** 31, "int"), ("i int", 1.0, "int"), ("i int", "1", "int"),
    ("l bigint", True, "bigint"), ("d double", "1.5", "double"), ("d double", "", "double"),
    ("x decimal(5,2)", 999.995, "does not fit"), ("x decimal(4,4)", 1, "does not fit"),
    ("t timestamp", 1.5, "timestamp"), ("n timestamp_ntz", "2024-01-02T03:04:05Z", "timestamp_ntz"),
    ("dt date", 18000, "date"), ("dt date", "2024-01-02junk", "date"), ("bi binary", "aGVsbG8", "binary"),
    ("bo boolean", "true", "boolean"), ("a array<int>", 1, "array"), ("st struct<x: int>", [1], "struct"),
    ("m map<string,int>", {"k": "v"}, "int")])
def test_json_values_a_type_cannot_take_are_bad(ddl, value, reason):
    with pytest.raises(BadBody, match=reason):
        one(ddl, json.dumps({ddl.split()[0]: value}))


@pytest.mark.parametrize("body, reason", [(b"\xff{}", "UTF-8"), (b"{bad", "not JSON"), (b"null", "not an object"),
                                          (b"[1]", "not an object"), (b'"s"', "not an object")])
def test_json_bad_bodies(body, reason):
    with pytest.raises(BadBody, match=reason):
        one("a int", body)


def test_java_double_text():
    assert [java_double(x) for x in (1e20, 1e-5, 1234567.0, 12345678.0, 0.001, -0.0, 100.0)] == [
        "1.0E20", "1.0E-5", "1234567.0", "1.2345678E7", "0.001", "-0.0", "100.0"]


# -- policies ------------------------------------------------------------------------------------------------

BODIES = [b'{"seq": 1, "event": "pay"}', b'{"seq": "x"}', b"", b"not json"]


def test_fail_names_the_message():
    s = spec(bodyFormat="json", bodySchema="seq BIGINT, event STRING")
    with pytest.raises(BodyDecodeError) as err:
        rows(s, BODIES)
    e = err.value
    assert (e.topic, e.queue_id, e.queue_offset, e.commit_log_offset, e.body_format) == ("T", 1, 1, 100, "json")
    assert "field 'seq'" in e.reason and "commitLogOffset 100" in str(e)


def test_null_keeps_the_row_with_the_reason():
    s = spec(bodyFormat="json", bodySchema="seq BIGINT, event STRING", onBadRecord="null")
    out = rows(s, BODIES)
    assert [(r["queueOffset"], r["seq"], r["event"]) for r in out] == [(0, 1, "pay"), (1, None, None),
                                                                       (2, None, None), (3, None, None)]
    assert out[0]["_decodeError"] is None and out[2]["_decodeError"] is None
    assert "seq" in out[1]["_decodeError"] and "not JSON" in out[3]["_decodeError"]


def test_skip_drops_bad_rows_and_output_follows_the_columns_asked():
    s = spec(bodyFormat="json", bodySchema="seq BIGINT, event STRING", onBadRecord="skip")
    out = rows(s, BODIES, columns=("event", "topic", "queueOffset"))
    assert out == [{"event": "pay", "topic": "T", "queueOffset": 0}, {"event": None, "topic": "T", "queueOffset": 2}]
    assert list(decode_batches(s, ("seq",), iter([batch([b"x"])]))) == []


# -- avro, text, confluent -------------------------------------------------------------------------------

AVRO = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"]},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
    {"name": "raw", "type": {"type": "fixed", "name": "Two", "size": 2}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 7, "scale": 2}},
    {"name": "labels", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "int"}},
    {"name": "either", "type": ["int", "string", "Two"]},
    {"name": "wide", "type": ["null", "int", "long"]},
    {"name": "item", "type": {"type": "record", "name": "Item", "fields": [{"name": "sku", "type": "string"}]}}]}


def avro_bytes(datum, schema=AVRO):
    fastavro = pytest.importorskip("fastavro")
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), datum)
    return buf.getvalue()


def test_avro_round_trip_with_from_avro_types():
    import datetime as dt
    datum = {"id": 7, "note": None, "kind": "B", "raw": b"ab", "day": dt.date(2024, 1, 2),
             "at": dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc), "local": dt.datetime(2024, 1, 2, 0, 0, 0, 5),
             "price": decimal.Decimal("12.34"), "labels": ["x"], "attrs": {"k": 1}, "either": "s", "wide": 3,
             "item": {"sku": "q"}}
    s = spec(bodyFormat="avro", bodySchema=json.dumps(AVRO))
    assert [f.dataType.simpleString() for f in s.columns.fields] == [
        "bigint", "string", "string", "binary", "date", "timestamp", "timestamp_ntz", "decimal(7,2)",
        "array<string>", "map<string,int>", "struct<member0:int,member1:string,member2:binary>", "bigint",
        "struct<sku:string>"]
    (row,) = rows(s, [avro_bytes(datum) + b"ignored"], columns=tuple(s.columns.names))
    assert row["either"] == {"member0": None, "member1": "s", "member2": None}
    assert (row["id"], row["note"], row["kind"], row["raw"], row["day"], row["price"], row["labels"]) == (
        7, None, "B", b"ab", dt.date(2024, 1, 2), decimal.Decimal("12.34"), ["x"])
    assert row["at"] == dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc) and row["attrs"] == [("k", 1)]
    assert row["local"] == dt.datetime(2024, 1, 2, 0, 0, 0, 5) and row["wide"] == 3 and row["item"] == {"sku": "q"}


def test_avro_bad_datum_and_recursive_schema():
    s = spec(bodyFormat="avro", bodySchema=json.dumps(AVRO), onBadRecord="null")
    good = avro_bytes({"id": 1, "note": "n", "kind": "A", "raw": b"zz", "day": 0, "at": 0, "local": 0,
                       "price": decimal.Decimal("0"), "labels": [], "attrs": {}, "either": 1, "wide": None,
                       "item": {"sku": ""}})
    out = rows(s, [good[:6], b"\x02\x00\x09"])
    assert all(r["id"] is None and "Avro" in r["_decodeError"] for r in out)
    recursive = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(OptionError, match="recursive"):
        spec(bodyFormat="avro", bodySchema=json.dumps(recursive))


def test_text_and_invalid_utf8():
    s = spec(bodyFormat="text", onBadRecord="null")
    out = rows(s, [b"hello", b"\xff\xfe", b""])
    assert [(r["bodyText"], r["_decodeError"] is None) for r in out] == [("hello", True), (None, False), ("", True)]


def test_confluent_header_checked_and_skipped():
    s = spec(bodyFormat="json", bodySchema="a int", bodyWireFormat="confluent", onBadRecord="null")
    out = rows(s, [b"\x00\x00\x00\x00\x07" + b'{"a": 3}', b'{"a": 3}', b"\x00\x01"])
    assert [r["a"] for r in out] == [3, None, None]
    assert out[0]["_decodeError"] is None and all("Confluent" in r["_decodeError"] for r in out[1:])


# -- several topics --------------------------------------------------------------------------------------

def test_per_topic_schemas_union_of_columns():
    s = spec(bodyFormat="json", bodySchema="id BIGINT, note STRING",
             bodySchemaByTopic=json.dumps({"Pay": "id BIGINT, amount DOUBLE", "Ship": "carrier STRING, id BIGINT"}))
    assert s.columns.names == ["id", "note", "amount", "carrier"]
    body = b'{"id": 1, "note": "n", "amount": 2.5, "carrier": "c"}'
    out = rows(s, [body] * 3, topics=["Pay", "Ship", "Other"])
    assert [(r["id"], r["note"], r["amount"], r["carrier"]) for r in out] == [
        (1, None, 2.5, None), (1, None, None, "c"), (1, "n", None, None)]


def test_per_topic_without_default_leaves_other_topics_null_and_type_clash_refused():
    s = spec(bodyFormat="json", bodySchemaByTopic='{"Pay": "id BIGINT"}')
    assert [r["id"] for r in rows(s, [b'{"id": 1}', b"not json"], topics=["Pay", "Other"])] == [1, None]
    with pytest.raises(OptionError, match="'id' has type bigint.*but string"):
        spec(bodyFormat="json", bodySchema="id BIGINT", bodySchemaByTopic='{"Pay": "id STRING"}')
    with pytest.raises(OptionError, match="bodySchemaByTopic\\['Pay'\\]"):
        spec(bodyFormat="json", bodySchemaByTopic='{"Pay": "id BIGINT,"}')
