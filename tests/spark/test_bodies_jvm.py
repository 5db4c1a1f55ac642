"""Typed bodies (docs/bodies.md): what only the JVM scan does — the `bad records skipped` SQL metric, no
aggregate answered from the ConsumeQueues with bodyFormat set, the plan naming the format, JSON bodies equal to
from_json over the sample store. Skipped when the session reads format('rmq') through the Python data source.
"""

from __future__ import annotations

import json
import math

import pytest
from pyspark.sql import functions as F

from body_stores import JSON_TOPIC, write_body_store

pytestmark = pytest.mark.spark

SAMPLE_DDL = "seq BIGINT, order BIGINT, event STRING, amount DOUBLE"


@pytest.fixture(scope="module")
def jvm(spark):
    from rmqsource.spark.jar import has_native_scan, session_jar
    if not has_native_scan(session_jar()):
        pytest.skip("the session reads format('rmq') through the Python data source (no JVM scan jar)")
    return spark


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("bodies_jvm") / "store"
    write_body_store(root)
    return str(root)


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    from rmqsource.sample import write_sample_store
    root = tmp_path_factory.mktemp("bodies_sample") / "store"
    write_sample_store(str(root), 2000)
    return str(root)


def _scan_node(spark, df):
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        qe = df._jdf.queryExecution()
        rows = df._jdf.collectAsList().size()
        leaves = qe.executedPlan().collectLeaves()
        for i in range(leaves.size()):
            node = leaves.apply(i)
            if node.nodeName().startswith("BatchScan"):
                return node, rows
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")
    raise AssertionError("no BatchScan node")


def test_skipped_bad_records_are_counted_in_the_scan_metric(jvm, store):
    df = (jvm.read.format("rmq").option("topics", JSON_TOPIC).option("bodyFormat", "json")
          .option("bodySchema", "id BIGINT, amount DOUBLE, qty INT, paid BOOLEAN").option("onBadRecord", "skip")
          .load(store).select("queueOffset", "id"))
    bad = jvm.read.format("rmq").option("topics", JSON_TOPIC).load(store).where("properties['bad'] = '1'").count()
    node, rows = _scan_node(jvm, df)
    skipped = node.metrics().apply("badRecordsSkipped").value()
    assert skipped == bad == 8
    total = jvm.read.format("rmq").option("topics", JSON_TOPIC).load(store).count()
    assert rows == total - bad


def test_count_is_not_answered_from_the_queues_with_body_format(jvm, store):
    df = (jvm.read.format("rmq").option("topics", JSON_TOPIC).option("bodyFormat", "json")
          .option("bodySchema", "id BIGINT, amount DOUBLE, qty INT, paid BOOLEAN").option("onBadRecord", "skip")
          .load(store))
    plan = df.groupBy("queueId").agg(F.count("*"), F.max("queueOffset"))._jdf.queryExecution().executedPlan().toString()
    assert "PushedAggregation" not in plan and "BodyFormat: json" in plan, plan
    total = jvm.read.format("rmq").option("topics", JSON_TOPIC).load(store).count()
    assert df.count() == total - 8


def test_sample_store_json_equals_from_json(jvm, sample):
    ours = (jvm.read.format("rmq").option("bodyFormat", "json").option("bodySchema", SAMPLE_DDL).load(sample)
            .select("commitLogOffset", "seq", "order", "event", "amount"))
    judge = (jvm.read.format("rmq").load(sample)
             .select("commitLogOffset", F.from_json(F.col("body").cast("string"), SAMPLE_DDL).alias("j"))
             .select("commitLogOffset", "j.seq", "j.order", "j.event", "j.amount"))
    got = sorted(tuple(r) for r in ours.collect())
    assert len(got) == 2000 and got == sorted(tuple(r) for r in judge.collect())
    assert ours.where("amount > 10").count() == judge.where("amount > 10").count()


def test_protobuf_is_refused_saying_how_to_decode(jvm, store):
    with pytest.raises(Exception, match=r"not supported yet; decode with from_protobuf\(body, \.\.\.\)"):
        jvm.read.format("rmq").option("bodyFormat", "protobuf").load(store).columns


_WITHOUT_SPARK_AVRO = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").config("spark.jars", sys.argv[1]).config("spark.ui.enabled", "false").getOrCreate()
try:
    spark.read.format("rmq").option("bodyFormat", "avro").option(
        "bodySchema", '{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}').load(sys.argv[2]).columns
    print("NO ERROR")
except Exception as e:
    print(str(e))
"""


@pytest.mark.slow
def test_avro_without_spark_avro_names_the_package(jvm, store):
    """A session as a user starts it, with the rmq jar and without Spark's Avro package (the test session has it)."""
    import subprocess
    import sys
    from rmqsource.spark.jar import session_jar
    out = subprocess.run([sys.executable, "-c", _WITHOUT_SPARK_AVRO, session_jar(), store], capture_output=True,
                         text=True, timeout=300).stdout
    assert "bodyFormat=avro needs Spark's Avro support" in out and "spark-avro_2.1" in out, out[-2000:]


# The scan's fast path (FlatJsonScanner) takes strict JSON of the common kinds and leaves anything else to the
# exact path (Jackson and Spark's converters): each body here is one the fast path takes, or one at its edge that
# it must give up on. All are judged by from_json.
TRICKY_DDL = "l BIGINT, i INT, d DOUBLE, s STRING, b BOOLEAN, at TIMESTAMP"
TRICKY_OTHER_DDL = ("l BIGINT, s STRING, dec DECIMAL(5,2), day DATE, arr ARRAY<INT>, st STRUCT<a: STRING, n: INT>, "
                    "m MAP<STRING, DOUBLE>, f FLOAT, sh SMALLINT, at TIMESTAMP")
_TS = ["2026-11-01T10:00:00Z", "2026-11-01T10:00:00.5Z", "2026-11-01T10:00:00.12Z", "2026-11-01T10:00:00.123Z",
       "2026-11-01T10:00:00.1234Z", "2026-11-01T10:00:00.12345Z", "2026-11-01T10:00:00.123456Z",
       "2026-11-01T10:00:00.1234567Z", "2026-11-01T10:00:00.123456789Z", "2026-11-01T10:00:00+05:30",
       "2026-11-01T10:00:00.25-08:00", "2026-11-01T10:00:00+18:00", "2026-11-01T10:00:00-00:00",
       "2026-11-01T10:00:00+17:59", "2026-11-01T10:00:00z", "2026-11-01 10:00:00Z", "2026-11-01T10:00Z",
       "2026-11-01", "2026-11-01T10:00:00", "2026-11-01T10:00:60Z", "2024-02-29T23:59:59Z", "2023-02-29T00:00:00Z",
       "2026-02-30T00:00:00Z", "0001-01-01T00:00:00Z", "1969-12-31T23:59:59.999999Z", "1600-03-01T00:00:00Z",
       "9999-12-31T23:59:59.999999Z", "2026-11-01T24:00:00Z", "2026-13-01T00:00:00Z", "2026-11-01T10:00:00+0530",
       "2026-11-01T10:00:00+5:30", " 2026-11-01T10:00:00Z", "2026-11-01T10:00:00Z ", "", "x"]
_VALUES = ['"l": -0', '"l": 123456789012345678', '"l": -123456789012345678', '"l": 1234567890123456789',
           '"l": 9223372036854775807', '"l": 9223372036854775808', '"l": 1e2', '"l": 1.0', '"l": 01', '"l": "5"',
           '"i": 2147483647', '"i": -2147483648', '"i": 2147483648', '"i": 123456789', '"i": 1234567890',
           '"d": -0', '"d": -0.0', '"d": 0.1', '"d": 1e5', '"d": 1E-5', '"d": 1.5e+300', '"d": 2.5e-320',
           '"d": 0.30000000000000004', '"d": 123456789012345678', '"d": 12345678901234567890',
           '"d": 99999999999999999999999', '"d": 3.141592653589793238462643383279', '"d": 9007199254740993.0',
           '"d": 1.7976931348623157e308', '"d": 1e400', '"d": 0.000001234', '"d": 9007199254740992e-22', '"d": 123456789012345.6', '"d": 4.35', '"d": 1e22',
           '"d": 1e23', '"d": 0.1e-21', '"d": -12.5E+3', '"d": 0.0000000000000000000000000000001', '"d": 1.', '"d": .5', '"d": NaN',
           '"d": "NaN"', '"d": Infinity', '"d": -Infinity', '"d": "-Infinity"', '"d": +1', '"d": 1e', '"d": 7',
           '"s": "a\\"b\\\\c\\/d\\b\\f\\n\\r\\t"', '"s": "\\u00e9\\u2713\\u0041"', '"s": "\\ud83d\\ude00"',
           '"s": "caf\u00e9 \u2713 \U0001F600"', '"s": 12.50', '"s": -0', '"s": true', '"s": {"a": [1, true, null]}',
           '"s": [ 1 , "x" ]', "\"s\": 'single'", '"s": ""', '"s": "\\u0000"', '"s": "\\x"', '"s": "\\u12"',
           '"b": true', '"b": false', '"b": "true"', '"b": 1', '"b": truex', '"b": nul', '"l": null, "s": null',
           '"unknown": {"x": [1, {"y": "z"}, [], {}], "w": -1.5e3}', '"unknown": [1, 2,]', '"unknown": [01]',
           '"unknown": {"x" 1}', '"unknown": "\\ud800"', '"unknown": \'q\'', '"Unknown": 3', '"L": 3']
_BODIES = ([f'{{"at": "{t}"}}' for t in _TS] + [f'{{{v}}}' for v in _VALUES] + [
    '{}', '{ }', ' \t\r\n{"l": 1 ,\n "i" : 2}\n', '{"l": 1, "l": 2}', '{"l": 1, "s": "a", "l": null}',
    '{"at": "2026-11-01T10:00:00Z", "b": true, "s": "x", "d": 1.5, "i": 3, "l": 4}', '{"l": 1,}', '{"l": 1}  trailing',
    '{"s": "a", "l": 1}', '{"i": 1, "l": 2, "s": "b"}', '{"l": 3, "s": "c", "i": 4}', '{"s": "d", "zz": 0, "l": 5}',
    '{"l": 1} {"l": 2}', '\ufeff{"l": 1}', '[{"l": 1}]', '{"l": 1 /* c */}', '{"l": 1', '{l: 1}', '{"l": 1 "i": 2}',
    '"text"', '5', 'null', '', '   ', '{"s": "tab\there"}', '{"s": "line\nbreak"}'] + [
    # values of other kinds (TRICKY_OTHER_DDL), each read by Spark's converter of its field
    '{"l": 1, "dec": 123.45, "day": "2026-11-01", "arr": [1, 2, null], "st": {"a": "x", "n": 2}, "m": {"a": 1.5}}',
    '{"dec": 1234.5}', '{"dec": "12.5"}', '{"dec": 1e2}', '{"day": 20000}', '{"arr": [1, "x"]}',
    '{"arr": [1.5]}', '{"arr": []}', '{"arr": {"a": 1}}', '{"st": {"a": {"x": [1, 2]}, "n": 2}}', '{"st": {"n": 2147483648}}',
    '{"st": [1]}', '{"m": {"a": 1, "b": "x"}}', '{"m": {}}', '{"f": 1.5}', '{"f": 3.4e39}', '{"f": "Infinity"}',
    '{"day": "2024-02-29"}', '{"day": "0001-01-01"}', '{"day": "1969-12-31"}', '{"day": "9999-12-31"}',
    '{"day": "2026-1-5"}', '{"day": "2026-11-01T10:00:00Z"}', '{"day": "2026-11-01 "}', '{"day": "2026-11-01"}',
    '{"sh": 32767}', '{"sh": 32768}', '{"at": 1764000000}', '{"at": -5}', '{"at": 1.5}', '{"at": "2026-11-01T10:00:00.5+01:00"}'])
# not UTF-8 (CAST(body AS STRING) would replace the bytes): bad records, whichever path reads them
# (Jackson itself takes an overlong form, C0 80, F4 90 80 80 beyond U+10FFFF and, before Spark 4, an encoded
# surrogate ED A0 80: the fast path leaves those to it)
_NOT_UTF8 = [b'{"s": "\xff"}', b'{"s": "\xe2\x9c"}']


@pytest.fixture(scope="module")
def tricky(tmp_path_factory):
    from rmqsource.format.message import MessageExtBrokerInner
    from rmqsource.store.config import StoreConfig
    from rmqsource.store.writer import MessageStoreWriter
    root = tmp_path_factory.mktemp("bodies_tricky") / "store"
    bodies = [(b.encode(), False) for b in _BODIES] + [(b, True) for b in _NOT_UTF8]
    messages = [MessageExtBrokerInner(topic="Tricky", queue_id=0, body=body, keys=f"k{i}", tags="t",
                                      properties={"bad": "1" if bad else "0"}, born_timestamp_ms=1_764_000_000_000 + i,
                                      store_timestamp_ms=1_764_000_000_000 + i) for i, (body, bad) in enumerate(bodies)]
    with MessageStoreWriter(root, StoreConfig.from_mapping({"mappedFileSizeCommitLog": 1024 * 1024})) as writer:
        assert all(r.ok for r in writer.put_messages(messages))
    return str(root)


@pytest.mark.parametrize("ddl", [TRICKY_DDL, TRICKY_OTHER_DDL], ids=["common", "other"])
def test_fast_path_edges_equal_from_json(jvm, tricky, ddl):
    from pyspark.sql.types import StringType, StructField, StructType
    schema = jvm.createDataFrame([], ddl).schema
    names = [f.name for f in schema.fields]
    with_corrupt = StructType(schema.fields + [StructField("_corrupt_record", StringType())])
    judge = {}
    for r in (jvm.read.format("rmq").load(tricky)
              .select("commitLogOffset", "body", F.from_json(F.col("body").cast("string"), with_corrupt,
                                                              {"columnNameOfCorruptRecord": "_corrupt_record"}).alias("j"))
              .select("commitLogOffset", "body", F.col("j").withField("at", F.unix_micros("j.at")).alias("j"))
              .collect()):
        j = r["j"]
        corrupt = j is not None and j["_corrupt_record"] is not None
        judge[r["commitLogOffset"]] = (bytes(r["body"]), None if j is None or corrupt else
                                       {n: j[n] for n in names}, corrupt)
    ours = (jvm.read.format("rmq").option("bodyFormat", "json").option("bodySchema", ddl)
            .option("onBadRecord", "null").load(tricky).withColumn("at", F.unix_micros("at"))   # (Python's datetime: no year 0)
            .select("commitLogOffset", "_decodeError", *names))
    got = {r["commitLogOffset"]: ({n: r[n] for n in names}, r["_decodeError"]) for r in ours.collect()}
    assert set(got) == set(judge) and len(got) == len(_BODIES) + len(_NOT_UTF8)
    same = lambda a, b: a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)
    for offset, (body, fields, corrupt) in judge.items():
        values, error = got[offset]
        if body in _NOT_UTF8:
            assert error is not None and all(v is None for v in values.values()), (body, values)
        elif corrupt:
            assert error is not None and all(v is None for v in values.values()), (body, values)
        elif fields is None:
            assert error is None and all(v is None for v in values.values()), (body, values, error)
        else:
            assert error is None, (body, error)
            for n in names:
                assert same(values[n], fields[n]), (body, n, values[n], fields[n])
            if fields.get("d") is not None and fields["d"] == 0:      # the sign of a zero
                assert math.copysign(1, values["d"]) == math.copysign(1, fields["d"]), body


def test_bodies_mostly_of_other_kinds_equal_from_json(jvm, tmp_path):
    """Bodies whose values are mostly of kinds the fast path hands to Spark's converters one by one: after its first
    2048 bodies a task reads them with the exact path alone; every row is the same as from_json's either way."""
    from rmqsource.format.message import MessageExtBrokerInner
    from rmqsource.store.config import StoreConfig
    from rmqsource.store.writer import MessageStoreWriter
    ddl = "id BIGINT, price DECIMAL(10,2), labels ARRAY<STRING>, buyer STRUCT<name: STRING, level: INT>, attrs MAP<STRING, INT>"
    messages = [MessageExtBrokerInner(
        topic="Nested", queue_id=0, body=json.dumps({"id": i, "price": i / 4, "labels": [f"t{i % 5}", "x"],
                                                     "buyer": {"name": f"u{i}", "level": i % 3}, "attrs": {"k": i}}).encode(),
        keys="k", tags="t", born_timestamp_ms=1_764_000_000_000 + i, store_timestamp_ms=1_764_000_000_000 + i)
        for i in range(3000)]
    root = tmp_path / "store"
    with MessageStoreWriter(root, StoreConfig.from_mapping({"mappedFileSizeCommitLog": 4 * 1024 * 1024})) as writer:
        assert all(r.ok for r in writer.put_messages(messages))
    names = ["id", "price", "labels", "buyer", "attrs"]
    ours = (jvm.read.format("rmq").option("bodyFormat", "json").option("bodySchema", ddl).load(str(root))
            .select("queueOffset", *names))
    judge = (jvm.read.format("rmq").load(str(root))
             .select("queueOffset", F.from_json(F.col("body").cast("string"), ddl).alias("j"))
             .select("queueOffset", *[f"j.{n}" for n in names]))
    got = sorted(ours.collect(), key=lambda r: r[0])
    assert len(got) == 3000 and got == sorted(judge.collect(), key=lambda r: r[0])
