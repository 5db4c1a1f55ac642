"""option("metadata", ...) as both twins answer it (rmqsource/store/metadata.py and its Java twin
io/rmqsource/store/StoreMetadata.java, read by spark/read/RmqMetadataScan.java): every table of every corpus
store gives the same rows, value for value; the JVM scan refuses what parse_metadata refuses, with its text; and
the dlq / retry / trace views of a store without such topics read no rows in the JVM scan (a user's topicPattern
that matches nothing still fails)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqsource.spark.schema import METADATA_SCHEMAS
from rmqsource.store.config import StoreConfig
from rmqsource.store.metadata import TABLES, metadata_rows
from tests.support.jvm_twins import jvm_or_skip

from golden import broker_corpora, corpora

pytestmark = pytest.mark.jvm

STORES = [pytest.param(p / "store", id=p.name) for p in broker_corpora() + corpora()]


@pytest.fixture(scope="module")
def jvm_spark(request):
    """The session with the rmq jar (its format("rmq") is the JVM scan), else skip."""
    jvm_or_skip(request)
    return request.getfixturevalue("spark")


def _ms(v):
    return None if v is None else round(v.timestamp() * 1000)


def jvm_rows(spark, store: Path, table: str) -> list[dict]:
    df = spark.read.format("rmq").option("metadata", table).load(str(store))
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "metadata " + table in plan, plan          # the JVM scan, not a Python data source
    assert df.columns == METADATA_SCHEMAS[table].names
    out = []
    for r in df.collect():
        d = r.asDict()
        for c in ("beginTimestamp", "endTimestamp"):
            if c in d:
                d[c] = _ms(d[c])
        out.append(d)
    return out


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("store", STORES)
def test_every_table_equals_the_python_rows(jvm_spark, store, table):
    expected = metadata_rows(table, str(store), StoreConfig())
    for r in expected:
        r["broker"], r["storePath"] = store.name, str(store)
    got = jvm_rows(jvm_spark, store, table)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g == e


def test_filters_go_back_to_spark_and_columns_are_pruned(jvm_spark):
    store = STORES[0].values[0]
    df = jvm_spark.read.format("rmq").option("metadata", "queues").load(str(store))
    rows = df.where("NOT internal AND messages > 0").select("queueId", "topic").collect()
    everything = [r for r in df.collect() if not r.internal and r.messages > 0]
    assert sorted((r.topic, r.queueId) for r in rows) == sorted((r.topic, r.queueId) for r in everything)
    assert rows and rows[0].__fields__ == ["queueId", "topic"]
    assert df.groupBy("topic").count().count() == len({r.topic for r in df.collect()})


@pytest.mark.parametrize("options, text", [
    ({"metadata": "files"}, "option metadata must be one of queues, topics, groups, segments, indexes, got 'files'"),
    ({"metadata": "groups", "topics": "a", "view": "dlq"},
     "option metadata=groups lists the whole store: filter its rows instead of giving topics, view"),
    ({"metadata": "queues", "topicPattern": "x.*", "startingTimestamp": "0"},
     "option metadata=queues lists the whole store: filter its rows instead of giving startingTimestamp, "
     "topicPattern"),
])
def test_the_jvm_scan_refuses_as_parse_metadata(jvm_spark, options, text):
    store = STORES[0].values[0]
    with pytest.raises(Exception) as info:
        jvm_spark.read.format("rmq").options(**options).load(str(store)).collect()
    assert text in str(info.value)


def test_a_metadata_stream_is_refused(jvm_spark, tmp_path):
    store = STORES[0].values[0]
    with pytest.raises(Exception) as info:
        q = (jvm_spark.readStream.format("rmq").option("metadata", "queues").load(str(store))
             .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "cp")).start())
        try:
            q.processAllAvailable()
        finally:
            q.stop()
    assert "option metadata=queues is for batch reads (spark.read)" in str(info.value)


def plain_store(root: Path) -> Path:
    """A store of one topic's messages only: no dead letters, retries or traces."""
    import base64
    import json
    from rmqsource.store.writer import MessageStoreWriter
    lines = "".join(json.dumps({"topic": "plain", "queueId": q, "body": base64.b64encode(b"x").decode()}) + "\n"
                    for q in (0, 1, 1))
    with MessageStoreWriter(root, StoreConfig()) as w:
        assert w.put_json_lines(lines.encode()).ok_count == 3
    return root


def test_views_of_a_store_without_such_topics_have_no_rows(jvm_spark, tmp_path):
    store = plain_store(tmp_path / "store")
    for view in ("dlq", "retry", "trace"):
        df = jvm_spark.read.format("rmq").option("view", view).load(str(store))
        assert "RmqScan(JVM, " + view in df._jdf.queryExecution().executedPlan().toString()
        assert df.collect() == []
        assert df.count() == 0
    with pytest.raises(Exception, match=r"topicPattern .* matches no topic"):
        jvm_spark.read.format("rmq").option("view", "dlq").option("topicPattern", "%DLQ%nobody").load(str(store)).collect()
    with pytest.raises(Exception, match=r"topic 'RMQ_SYS_TRACE_TOPIC' does not exist"):
        jvm_spark.read.format("rmq").option("view", "trace").option("topics", "RMQ_SYS_TRACE_TOPIC") \
            .load(str(store)).collect()
