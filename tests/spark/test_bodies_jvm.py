"""Typed bodies (docs/bodies.md): what only the JVM scan does — the `bad records skipped` SQL metric, no
aggregate answered from the ConsumeQueues with bodyFormat set, the plan naming the format, JSON bodies equal to
from_json over the sample store. Skipped when the session reads format('rmq') through the Python data source.
"""

from __future__ import annotations

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


def test_avro_without_spark_avro_names_the_package(jvm, store):
    try:
        j = jvm.sparkContext._jvm
        j.java.lang.Class.forName("org.apache.spark.sql.avro.AvroDataToCatalyst", False,
                                  j.org.apache.spark.util.Utils.getContextOrSparkClassLoader())
    except Exception:
        with pytest.raises(Exception, match="spark-avro_2.1[23]:"):
            jvm.read.format("rmq").option("bodyFormat", "avro").option("bodySchema", '{"type":"record","name":"R",'
                                                                      '"fields":[{"name":"a","type":"long"}]}').load(store).columns
    else:
        pytest.skip("spark-avro is on this session's classpath")
