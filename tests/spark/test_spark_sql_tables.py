"""SQL tables of the rmq source: ``CREATE TABLE ... USING rmq`` with OPTIONS (path ...) or LOCATION,
``CREATE TEMPORARY VIEW ... USING rmq``; the table's options reach batch scans, streams and
``INSERT INTO``.

Spark keeps a table's options in its catalog and hands them to a JVM provider's ``getTable`` only;
a Python data source is created with the query's options alone. So with the jar every table works,
and without it a table's reads and writes fail with one line that names the jar (jvm / python mode
as the run's RMQ_SPARK_MODE says). Spark 3.5 reads catalog tables through the V1 API: there the
sessions made here use the jar's session catalog (io.rmqsource.spark.RmqSessionCatalog), and INSERT
goes to the jar's native sink.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from golden import copy_store, corpora
from rmqsource.store.consumer_offsets import ConsumerOffsets
from rmqsource.spark.jar import session_jar

pytestmark = [pytest.mark.spark, pytest.mark.compat]

COLUMNS = ["topic", "queueId", "queueOffset", "commitLogOffset", "msgId", "tags", "keys", "body", "properties",
           "storeTimestamp"]


def _store() -> Path:
    """The first golden corpus's store (read in place)."""
    found = corpora()
    if not found:
        pytest.skip("no golden corpus")
    return found[0] / "store"


def _rows(df) -> list:
    return sorted(df.select(*COLUMNS).collect(), key=lambda r: (r.topic, r.queueId, r.queueOffset))


def _with_jar() -> bool:
    return session_jar() is not None


@pytest.fixture
def tables(spark):
    """Drops the tables and views a test made (one session serves every test)."""
    made = []
    yield made
    for name in made:
        spark.sql(f"DROP TABLE IF EXISTS {name}")
        spark.sql(f"DROP VIEW IF EXISTS {name}")


def _no_path_error(call):
    """Without the jar: the source sees no path and its one-line error names the jar."""
    with pytest.raises(Exception, match=r"no store path: .*a SQL table .* only with the rmq jar on spark\.jars"):
        call()


def test_temporary_view_reads_as_load(spark, tables):
    store = _store()
    tables.append("rmq_view")
    spark.sql(f"CREATE TEMPORARY VIEW rmq_view USING rmq OPTIONS (path '{store}', topics 'TopicTest')")
    want = _rows(spark.read.format("rmq").option("topics", "TopicTest").load(str(store)))
    assert want and _rows(spark.table("rmq_view")) == want


def test_tables_with_options_and_location_read_as_load(spark, tables):
    store = _store()
    tables += ["rmq_opts", "rmq_loc", "rmq_topic"]
    spark.sql(f"CREATE TABLE rmq_opts USING rmq OPTIONS (path '{store}')")
    spark.sql(f"CREATE TABLE rmq_loc USING rmq LOCATION '{store}' TBLPROPERTIES ('owner.team' = 'ops')")
    spark.sql(f"CREATE TABLE rmq_topic USING rmq OPTIONS (path '{store}', topics 'TopicTest') COMMENT 'one topic'")
    if not _with_jar():
        _no_path_error(lambda: spark.table("rmq_opts").count())
        _no_path_error(lambda: spark.sql("SELECT count(*) FROM rmq_loc").collect())
        return
    want = _rows(spark.read.format("rmq").load(str(store)))
    assert want
    assert _rows(spark.table("rmq_opts")) == want
    assert _rows(spark.sql("SELECT * FROM rmq_loc")) == want
    # the table's options are read options (topics: the ConsumeQueue path); TBLPROPERTIES are not
    topic = _rows(spark.read.format("rmq").option("topics", "TopicTest").load(str(store)))
    assert topic and len(topic) < len(want)
    assert _rows(spark.table("rmq_topic")) == topic
    # pushdown and count as for load(): a tag filter, a msgId lookup, a count
    tag = spark.sql("SELECT msgId FROM rmq_topic WHERE tags = 'TagA'").collect()
    assert sorted(r.msgId for r in tag) == sorted(r.msgId for r in topic if r.tags == "TagA")
    one = topic[len(topic) // 2]
    assert [r.queueOffset for r in spark.sql(f"SELECT queueOffset FROM rmq_loc WHERE msgId = '{one.msgId}'")
            .collect()] == [one.queueOffset]
    assert spark.sql("SELECT count(*) FROM rmq_topic").collect()[0][0] == len(topic)


def test_a_query_option_overrides_the_tables(spark, tables):
    if not _with_jar():
        pytest.skip("table options reach only the jar's provider")
    store = _store()
    tables.append("rmq_over")
    spark.sql(f"CREATE TABLE rmq_over USING rmq OPTIONS (path '{store}', topics 'OrderTopic')")
    count = lambda topic: spark.read.format("rmq").option("topics", topic).load(str(store)).count()
    assert spark.table("rmq_over").count() == count("OrderTopic") != count("TopicTest")
    assert spark.read.option("TOPICS", "TopicTest").table("rmq_over").count() == count("TopicTest")


def test_insert_into_appends_rows_that_read_back(spark, tables, tmp_path):
    from pyspark.sql import functions as F
    root = tmp_path / "store"
    spark.createDataFrame([("SqlT", bytearray(b"seed"))], "topic string, body binary") \
        .write.format("rmq").mode("append").save(str(root))
    tables += ["rmq_w", "rmq_w_loc", "rmq_new"]
    spark.sql(f"CREATE TABLE rmq_w USING rmq OPTIONS (path '{root}')")
    spark.sql(f"CREATE TABLE rmq_w_loc USING rmq LOCATION '{root}'")
    # New rows in the table's columns (an INSERT with a column list leaves the rest to Spark, whose
    # filling of missing columns differs between versions); the store assigns offsets, msgIds ...
    new = spark.createDataFrame([("SqlT", bytearray(b"a"), "TagA"), ("SqlT", bytearray(b"b"), "TagB")],
                                "topic string, body binary, tags string")
    full = new.select([F.col(f.name) if f.name in new.columns else F.lit(None).cast(f.dataType).alias(f.name)
                       for f in spark.table("rmq_w").schema.fields])
    full.createOrReplaceTempView("rmq_new")
    insert = "INSERT INTO rmq_w SELECT * FROM rmq_new"
    if not _with_jar():
        _no_path_error(lambda: spark.sql(insert))
        return
    spark.sql(insert)
    # rows read from one table append to the other
    spark.sql("INSERT INTO rmq_w_loc SELECT * FROM rmq_w WHERE tags = 'TagA'")
    got = spark.read.format("rmq").option("topics", "SqlT").load(str(root)).select("body", "tags").collect()
    assert sorted((bytes(r.body), r.tags) for r in got) == [(b"a", "TagA"), (b"a", "TagA"), (b"b", "TagB"),
                                                          (b"seed", None)]
    assert spark.table("rmq_w").count() == 4


def test_stream_from_a_table_with_a_consumer_group(spark, tables, tmp_path):
    from pyspark.sql import functions as F
    store = copy_store(_store(), tmp_path / "store")          # the stream commits the group's offsets
    tables.append("rmq_s")
    spark.sql(f"CREATE TABLE rmq_s USING rmq OPTIONS (path '{store}', topics 'TopicTest', consumerGroup 'sqlGroup')")
    df = spark.readStream.option("startingOffsets", "earliest").table("rmq_s")
    rows = []
    query = lambda: (df.writeStream.foreachBatch(lambda d, i: rows.extend(d.select("msgId").collect()))
                     .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    if not _with_jar():
        def run():
            q = query()
            q.awaitTermination(240)
            if q.exception():
                raise q.exception()
        _no_path_error(run)
        return
    q = query()
    assert q.awaitTermination(240) and q.exception() is None
    want = spark.read.format("rmq").option("topics", "TopicTest").load(str(store))
    assert rows and sorted(r.msgId for r in rows) == sorted(r.msgId for r in want.select("msgId").collect())
    ends = {r.queueId: r.end for r in want.groupBy("queueId").agg(F.max("queueOffset").alias("end")).collect()}
    assert ConsumerOffsets(store).offsets_for_group("sqlGroup") == {"TopicTest": {q: e + 1 for q, e in ends.items()}}
