"""``spark.read.format("rmq").option("view", "timers")`` in the session's mode (RMQ_SPARK_MODE=jvm: the JVM
scan's RmqTimersScan; =python: the Python data source): the rows equal the store layer's
(:func:`rmqsource.store.timers.timer_entries`), filters on topic, state and deliverTime are pushed and exact,
and a stream of the view is refused in one line.

Corpora: the real-broker runs of ../shared/golden-broker (file ConsumeQueues) and the first engine corpus.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from rmqsource.store.config import StoreConfig
from rmqsource.store.reader import MessageStoreReader
from rmqsource.store.timers import timer_entries

from golden import broker_corpora, corpora

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc


RUNS = broker_corpora()
ENGINE = corpora()[:1]
STORES = [(r / "store", r / "broker.properties") for r in RUNS] + [(c / "store", c / "store.properties") for c in ENGINE]


def ms(ts) -> int | None:
    """Epoch ms of a collected timestamp (naive ones are in the session's time zone, UTC)."""
    if ts is None:
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return (ts - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(milliseconds=1)


def timers(spark, store: Path, config: Path, **options):
    r = spark.read.format("rmq").option("view", "timers").option("config", str(config))
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(str(store))


def expected(store: Path, config: Path, topics=None, exclude_internal=True) -> list[tuple]:
    """The store layer's rows; by default without RocketMQ's own real topics, as a whole-store read."""
    with MessageStoreReader(store, StoreConfig.from_properties_file(config)) as reader:
        return [(e.real_topic, e.real_queue_id, e.queue_offset, e.phy_offset, e.uniq_key, e.state, e.delay_level,
                 e.deliver_time_ms, e.tags_code, e.reconsume_times)
                for e in timer_entries(reader, topics, exclude_internal=exclude_internal)]


def got(df) -> list[tuple]:
    return [(r.topic, r.queueId, r.queueOffset, r.commitLogOffset, r.uniqKey, r.state, r.delayLevel,
             ms(r.deliverTime), r.tagsCode, r.reconsumeTimes) for r in df.collect()]


def plan_of(df) -> str:
    jvm = df.sparkSession._jvm
    mode = jvm.org.apache.spark.sql.execution.ExplainMode.fromString("formatted")
    return df._jdf.queryExecution().explainString(mode)


@pytest.mark.parametrize("store,config", STORES, ids=lambda p: p.parent.name if isinstance(p, Path) else str(p))
def test_rows_equal_the_store_layer(spark, store, config):
    df = timers(spark, store, config)
    assert df.columns[-3:] == ["deliverTime", "delayLevel", "state"]
    assert dict(df.dtypes)["deliverTime"] == "timestamp" and dict(df.dtypes)["delayLevel"] == "int"
    want = expected(store, config)
    assert sorted(got(df), key=repr) == sorted(want, key=repr)
    assert want, "every corpus here holds delay or timer messages"
    # excludeInternalTopics=false: also the retries the broker schedules (%RETRY%) and POP checkpoints
    every = expected(store, config, exclude_internal=False)
    assert sorted(got(timers(spark, store, config, excludeInternalTopics="false")), key=repr) == sorted(every, key=repr)
    if store.parent in RUNS:
        assert any(w[0].startswith("%RETRY%") and w[6] is not None for w in every)
        assert not any(w[0].startswith(("%RETRY%", "rmq_sys_")) for w in want)


@pytest.mark.skipif(not RUNS, reason="no real-broker corpus")
def test_bodies_and_properties_are_those_of_the_row_copy(spark):
    store, config = RUNS[0] / "store", RUNS[0] / "broker.properties"
    rows = timers(spark, store, config).where("topic like 'rb_topic_%'").collect()
    assert rows
    with MessageStoreReader(store, StoreConfig.from_properties_file(config)) as reader:
        for r in rows:
            rec = reader.commitlog.read_message(r.commitLogOffset)
            assert bytes(r.body) == rec.body and dict(r.properties) == rec.properties
            assert rec.topic == (r.topic if r.state == "delivered" else rec.topic)
            if r.state == "pending":
                assert r.queueOffset is None and rec.properties["REAL_TOPIC"] == r.topic


@pytest.mark.skipif(not RUNS, reason="no real-broker corpus")
def test_topic_state_and_deliver_time_filters_are_pushed_and_exact(spark):
    store, config = RUNS[0] / "store", RUNS[0] / "broker.properties"
    want = expected(store, config)
    cut = sorted(w[7] for w in want if w[7] is not None)[len(want) // 2]
    since = dt.datetime.fromtimestamp(cut / 1000, tz=UTC)
    df = (timers(spark, store, config).where("topic in ('rb_topic_1', 'rb_topic_3')")
          .where("state = 'pending'").where(f"deliverTime >= timestamp'{since.strftime('%Y-%m-%d %H:%M:%S.%f')}'"))
    rows = got(df)
    assert sorted(rows, key=repr) == sorted(
        [w for w in want if w[0] in ("rb_topic_1", "rb_topic_3") and w[5] == "pending" and w[7] >= cut], key=repr)
    plan = plan_of(df)
    if "RmqScan(JVM" in plan:
        assert "timers view" in plan, plan
        assert "In(topic" in plan and "EqualTo(state,pending)" in plan and "deliverTime" in plan, plan
    # a projection of a few columns, and a delivered-only count
    assert timers(spark, store, config).where("state = 'delivered'").select("topic", "state").count() == \
        sum(w[5] == "delivered" for w in want)
    assert timers(spark, store, config, topics="rb_topic_4").select("topic").distinct().collect()[0].topic == \
        "rb_topic_4"


@pytest.mark.skipif(not RUNS, reason="no real-broker corpus")
def test_a_stream_of_the_timers_view_is_refused(spark, tmp_path):
    store = RUNS[0] / "store"
    with pytest.raises(Exception, match=r"view=timers is for batch reads"):
        df = spark.readStream.format("rmq").option("view", "timers").load(str(store))
        q = df.writeStream.format("memory").queryName("timers_stream").option(
            "checkpointLocation", str(tmp_path / "cp")).start()
        try:
            q.processAllAvailable()
        finally:
            q.stop()


def test_unknown_view_is_refused(spark):
    store = (RUNS[0] / "store") if RUNS else ENGINE[0] / "store"
    with pytest.raises(Exception, match=r"option view must be one of messages, timers"):
        spark.read.format("rmq").option("view", "bogus").load(str(store)).collect()


@pytest.mark.skipif(not RUNS, reason="no real-broker corpus")
def test_python_reader_pushes_topic_state_deliver_time_and_leaves_the_rest():
    from rmqsource.spark.compat import FILTER_PUSHDOWN
    if not FILTER_PUSHDOWN:
        pytest.skip("this pyspark has no Python filter pushdown")
    import pyarrow as pa
    from pyspark.sql.datasource import EqualTo, GreaterThan, In
    from pyspark.sql.pandas.types import from_arrow_schema
    from rmqsource.spark.source import RmqDataSource
    from rmqsource.spark.timers import TIMERS_ARROW_SCHEMA, TimersPartition
    store, config = RUNS[0] / "store", RUNS[0] / "broker.properties"
    want = expected(store, config)
    mine = sorted(w[7] for w in want if w[0] in ("rb_topic_0", "rb_topic_2") and w[5] == "delivered")
    cut = mine[len(mine) // 2]
    ds = RmqDataSource({"path": str(store), "view": "timers", "config": str(config)})
    reader = ds.reader(from_arrow_schema(TIMERS_ARROW_SCHEMA))
    other = EqualTo(("tags",), "TagA")
    rejected = list(reader.pushFilters([In(("topic",), ("rb_topic_0", "rb_topic_2")), EqualTo(("state",), "delivered"),
                                        GreaterThan(("deliverTime",), dt.datetime.fromtimestamp(cut / 1000, tz=UTC)),
                                        other]))
    assert rejected == [other]
    parts = reader.partitions()
    assert [type(p) for p in parts] == [TimersPartition] and parts[0].topics == ("rb_topic_0", "rb_topic_2")
    t = pa.Table.from_batches([b for p in parts for b in reader.read(p)], schema=TIMERS_ARROW_SCHEMA)
    rows = sorted(zip(t.column("topic").to_pylist(), t.column("commitLogOffset").to_pylist()))
    assert rows == sorted((w[0], w[3]) for w in want
                          if w[0] in ("rb_topic_0", "rb_topic_2") and w[5] == "delivered" and w[7] > cut)
    assert rows
