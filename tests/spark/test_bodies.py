"""Typed bodies (option bodyFormat; docs/bodies.md) in the session's mode, judged by Spark's own decoders.

The judges: ``from_json(CAST(body AS STRING), schema)`` over the same read's ``body`` column, with Spark's
``columnNameOfCorruptRecord`` saying which bodies Spark itself refuses; ``from_avro(body, schema)`` (Spark's
spark-avro, put on the session's jars by tests/conftest.py); ``CAST(body AS STRING)``. The stores: the golden
corpora written by RocketMQ's own engines (their JSON bodies), and a store of JSON, Avro and text bodies,
good and bad (tests/support/body_stores.py: each message says in a property whether its body is bad).
"""

from __future__ import annotations

import json
import math

import pytest

from body_stores import (AVRO_CONFLUENT_TOPIC, AVRO_SCHEMA, AVRO_TOPIC, JSON_DDL, JSON_OTHER_TOPIC, JSON_TOPIC,
                         REFUND_DDL, TEXT_TOPIC, write_body_store)
from golden import corpora

pytestmark = pytest.mark.spark

CORRUPT = "_corrupt_record"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("bodies") / "store"
    write_body_store(root)
    return str(root)


def read(spark, path, topics, **options):
    r = spark.read.format("rmq").option("topics", topics).option("decompress", "true")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(path)


def plain(v):
    """A value compared across paths: Rows as dicts, NaN as a string (NaN != NaN), lists and maps item by item."""
    if hasattr(v, "asDict"):
        return {k: plain(x) for k, x in v.asDict().items()}
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    return v


def spark_json_judge(spark, path, topics, ddl):
    """commitLogOffset -> (fields by from_json, whether Spark calls the body corrupt) for every row."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType
    schema = StructType.fromJson(spark.createDataFrame([], ddl).schema.jsonValue())
    with_corrupt = StructType(schema.fields + [StructField(CORRUPT, StringType())])
    df = read(spark, path, topics).select(
        "commitLogOffset", F.from_json(F.col("body").cast("string"), with_corrupt,
                                       {"columnNameOfCorruptRecord": CORRUPT}).alias("j"))
    out = {}
    for row in df.collect():
        j = row["j"]
        corrupt = j is not None and j[CORRUPT] is not None
        fields = None if j is None or corrupt else {f.name: plain(j[f.name]) for f in schema.fields}
        out[row["commitLogOffset"]] = (fields, corrupt)
    return out, [f.name for f in schema.fields]


def decoded(df, names):
    return {r["commitLogOffset"]: ({n: plain(r[n]) for n in names}, r["_decodeError"] if "_decodeError" in r
                                   else None) for r in df.collect()}


def check_equal_to_spark(judge, ours, names):
    assert set(ours) == set(judge)
    for offset, (fields, corrupt) in judge.items():
        got, error = ours[offset]
        if corrupt:
            assert error is not None and all(v is None for v in got.values()), (offset, got)
        elif fields is None:                     # from_json's null: an empty body
            assert error is None and all(v is None for v in got.values()), (offset, got, error)
        else:
            assert error is None and got == fields, (offset, got, fields, error)


@pytest.mark.compat
def test_json_bodies_equal_from_json_and_bad_ones_are_the_ones_spark_calls_corrupt(spark, store):
    judge, names = spark_json_judge(spark, store, JSON_TOPIC, JSON_DDL)
    df = read(spark, store, JSON_TOPIC, bodyFormat="json", bodySchema=JSON_DDL, onBadRecord="null")
    ours = decoded(df, names)
    check_equal_to_spark(judge, ours, names)
    bad_by_writer = {r["commitLogOffset"] for r in df.where("properties['bad'] = '1'").collect()}
    assert {o for o, (_, e) in ours.items() if e is not None} == bad_by_writer
    assert len(bad_by_writer) == 8 and len(ours) == 50
    # the message columns stay, next to the decoded ones
    assert df.columns[:3] == ["topic", "queueId", "queueOffset"] and df.columns[-1] == "_decodeError"


@pytest.mark.compat
@pytest.mark.parametrize("corpus", [pytest.param(c, id=c.name) for c in corpora()])
def test_golden_json_bodies_equal_from_json(spark, corpus):
    """The JSON bodies RocketMQ's own engines stored ({"seq", "text"}, UTF-8 text of several scripts), beside
    binary and plain-text bodies that are bad records; a whole-store read."""
    ddl = "seq BIGINT, text STRING"
    path = str(corpus / "store")
    r = lambda **o: spark.read.format("rmq").option("decompress", "true").options(**o).load(path)
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType
    schema = StructType([StructField("seq", LongType()),
                         StructField("text", StringType()), StructField(CORRUPT, StringType())])
    judge = {}
    for row in r().select("commitLogOffset", F.from_json(F.col("body").cast("string"), schema,
                                                         {"columnNameOfCorruptRecord": CORRUPT}).alias("j")).collect():
        j = row["j"]
        corrupt = j is not None and j[CORRUPT] is not None
        judge[row["commitLogOffset"]] = (None if j is None or corrupt else {"seq": j["seq"], "text": j["text"]},
                                         corrupt)
    ours = decoded(r(bodyFormat="json", bodySchema=ddl, onBadRecord="null"), ["seq", "text"])
    check_equal_to_spark(judge, ours, ["seq", "text"])
    assert sum(1 for f, c in judge.values() if f) >= 100          # the corpus's JSON bodies are really read


def test_json_skip_drops_exactly_the_bad_rows_and_count_is_not_answered_from_the_queues(spark, store):
    df = read(spark, store, JSON_TOPIC, bodyFormat="json", bodySchema=JSON_DDL, onBadRecord="skip")
    rows = df.select("commitLogOffset", "properties").collect()
    assert len(rows) == 42 and all(r["properties"]["bad"] == "0" for r in rows)
    assert df.count() == 42
    assert "_decodeError" not in df.columns


def test_json_fail_names_the_message(spark, store):
    df = read(spark, store, JSON_TOPIC, bodyFormat="json", bodySchema=JSON_DDL)
    with pytest.raises(Exception) as e:
        df.collect()
    text = str(e.value)
    assert "cannot decode the body of the message at JsonOrders queue " in text and " as json: " in text
    assert "commitLogOffset " in text


def test_filters_on_message_and_decoded_columns(spark, store):
    base = read(spark, store, JSON_TOPIC, bodyFormat="json", bodySchema=JSON_DDL, onBadRecord="null")
    every = {r["commitLogOffset"]: r for r in base.collect()}
    got = base.where("queueId = 1 AND queueOffset >= 3 AND amount > 10").select("commitLogOffset", "event").collect()
    want = sorted(o for o, r in every.items() if r["queueId"] == 1 and r["queueOffset"] >= 3
                  and r["amount"] is not None and r["amount"] > 10)
    assert sorted(r["commitLogOffset"] for r in got) == want and want
    assert all(r["event"] == every[r["commitLogOffset"]]["event"] for r in got)


def test_per_topic_schemas_union_their_columns(spark, store):
    topics = f"{JSON_TOPIC},{JSON_OTHER_TOPIC}"
    df = read(spark, store, topics, bodyFormat="json", bodySchema=JSON_DDL,
              bodySchemaByTopic=json.dumps({JSON_OTHER_TOPIC: REFUND_DDL}), onBadRecord="null")
    assert df.columns[-3:] == ["reason", "refunded", "_decodeError"]
    judge, names = spark_json_judge(spark, store, JSON_OTHER_TOPIC, REFUND_DDL)
    refunds = {o: v for o, v in decoded(df.where(f"topic = '{JSON_OTHER_TOPIC}'"), names + ["amount"]).items()}
    assert len(refunds) == 10
    for o, (fields, error) in refunds.items():
        assert error is None and fields.pop("amount") is None and fields == judge[o][0]
    orders = df.where(f"topic = '{JSON_TOPIC}' AND _decodeError IS NULL").select("reason", "refunded", "id").collect()
    assert orders and all(r["reason"] is None and r["refunded"] is None and r["id"] is not None for r in orders)


def test_a_field_typed_differently_by_two_topics_is_refused(spark, store):
    with pytest.raises(Exception, match="id"):
        read(spark, store, f"{JSON_TOPIC},{JSON_OTHER_TOPIC}", bodyFormat="json", bodySchema=JSON_DDL,
             bodySchemaByTopic=json.dumps({JSON_OTHER_TOPIC: "id STRING"})).columns


def test_a_decoded_column_named_like_a_message_column_needs_the_prefix(spark, store):
    with pytest.raises(Exception, match="bodyColumnPrefix"):
        read(spark, store, JSON_TOPIC, bodyFormat="json", bodySchema="topic STRING, id BIGINT").columns
    df = read(spark, store, JSON_TOPIC, bodyFormat="json", bodySchema="topic STRING, id BIGINT",
              bodyColumnPrefix="b_", onBadRecord="skip")
    assert df.columns[-2:] == ["b_topic", "b_id"]
    # with this smaller schema {"qty": 3000000000} and {"paid": "yes"} are good bodies without an id
    ids = [r["b_id"] for r in df.collect()]
    assert sorted(i for i in ids if i is not None) == list(range(40)) + [100, 101] and ids.count(None) == 2


def test_projection_of_one_decoded_column(spark, store):
    full = read(spark, store, JSON_TOPIC, bodyFormat="json", bodySchema=JSON_DDL, onBadRecord="skip")
    assert sorted(r["event"] or "" for r in full.select("event").collect()) == \
        sorted(r["event"] or "" for r in full.collect())


def test_text_bodies_equal_cast_to_string(spark, store):
    df = read(spark, store, TEXT_TOPIC, bodyFormat="text", onBadRecord="null").select(
        "bodyText", "_decodeError", "properties", "body").collect()
    assert len(df) == 13
    for r in df:
        if r["properties"]["bad"] == "1":
            assert r["bodyText"] is None and r["_decodeError"]
        else:
            assert r["_decodeError"] is None and r["bodyText"] == bytes(r["body"]).decode("utf-8")


def _avro_or_skip(spark):
    jars = spark.sparkContext.getConf().get("spark.jars", "")
    if "spark-avro" not in jars:
        from spark_avro import FAILURE
        pytest.skip(f"Spark's Avro support is not on this session's jars: {FAILURE or 'not fetched'}")


def avro_judge(spark, path, topic, body_expr):
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro
    df = read(spark, path, topic).where("properties['bad'] = '0'")
    return {r["commitLogOffset"]: plain(r["a"]) for r in
            df.select("commitLogOffset", from_avro(F.expr(body_expr), json.dumps(AVRO_SCHEMA)).alias("a")).collect()}


@pytest.mark.compat
@pytest.mark.parametrize("topic, wire, body_expr", [(AVRO_TOPIC, "plain", "body"),
                                                    (AVRO_CONFLUENT_TOPIC, "confluent", "substring(body, 6)")])
def test_avro_bodies_equal_from_avro(spark, store, topic, wire, body_expr):
    _avro_or_skip(spark)
    from pyspark.sql.avro.functions import from_avro
    judge = avro_judge(spark, store, topic, body_expr)
    names = [f["name"] for f in AVRO_SCHEMA["fields"]]
    df = read(spark, store, topic, bodyFormat="avro", bodySchema=json.dumps(AVRO_SCHEMA), bodyWireFormat=wire,
              onBadRecord="null")
    ours = decoded(df, names)
    bad = {r["commitLogOffset"] for r in df.where("properties['bad'] = '1'").collect()}
    assert set(judge) | bad == set(ours) and len(bad) == 3
    for o, (got, error) in ours.items():
        if o in bad:
            assert error is not None and all(v is None for v in got.values()), (o, got)
        else:
            assert error is None and got == judge[o], (o, got, judge[o])
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    avro_struct = read(spark, store, topic).select(from_avro("body", json.dumps(AVRO_SCHEMA)).alias("a")).schema["a"]
    spark_types = {f.name: f.dataType.simpleString() for f in avro_struct.dataType.fields}
    assert {n: types[n] for n in names} == spark_types


def test_avro_schema_from_a_file(spark, store, tmp_path):
    _avro_or_skip(spark)
    f = tmp_path / "order.avsc"
    f.write_text(json.dumps(AVRO_SCHEMA))
    df = read(spark, store, AVRO_TOPIC, bodyFormat="avro", bodySchemaFile=str(f), onBadRecord="skip")
    assert sorted(r["id"] for r in df.select("id").collect()) == list(range(30))


def test_stream_decodes_as_the_batch(spark, store, tmp_path):
    batch = decoded(read(spark, store, JSON_TOPIC, bodyFormat="json", bodySchema=JSON_DDL, onBadRecord="null"),
                    ["id", "event", "at"])
    q = (spark.readStream.format("rmq").option("topics", JSON_TOPIC).option("decompress", "true")
         .option("startingOffsets", "earliest").option("bodyFormat", "json").option("bodySchema", JSON_DDL)
         .option("onBadRecord", "null").load(store)
         .writeStream.format("memory").queryName("bodies_stream")
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert decoded(spark.table("bodies_stream"), ["id", "event", "at"]) == batch


def test_options_that_do_not_go_together_are_refused(spark, store):
    for options, words in [({"bodyFormat": "xml"}, "bodyFormat"),
                           ({"bodyFormat": "json"}, "bodySchema"),
                           ({"bodyFormat": "json", "bodySchema": "a INT", "onBadRecord": "drop"}, "onBadRecord"),
                           ({"bodyFormat": "protobuf"}, "from_protobuf"),
                           ({"bodyFormat": "json", "bodySchema": "a INT", "view": "dlq"}, "bodyFormat")]:
        with pytest.raises(Exception, match=words):
            read(spark, store, JSON_TOPIC, **options).collect()
