"""Aggregate pushdown of a topic read (JVM scan): count(*), min and max of queueOffset, commitLogOffset and
storeTimestamp, global or grouped by topic / queueId / broker / storePath, answered per queue range.

On every golden store (topics and queues of each, read in place) a pushed answer equals the same
aggregation over the rows the read gives; the plan says when it is pushed.  Skipped when the session runs
the Python data source.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F

from golden import GOLDEN_BROKER_ROOT, GOLDEN_ROOTS
from test_spark_batch import plan_of

pytestmark = pytest.mark.spark

STORES = sorted(p for root in (*GOLDEN_ROOTS, GOLDEN_BROKER_ROOT) if root.is_dir()
                for p in root.glob("*/store") if p.is_dir())
FIELDS = ("queueOffset", "commitLogOffset", "storeTimestamp")
GROUPS = ((), ("topic",), ("topic", "queueId"), ("broker", "storePath", "queueId"))
PUSHED = "PushedAggregation"


def _config(store: Path) -> Path:
    run = store.parent
    return run / "broker.properties" if (run / "broker.properties").is_file() else run / "store.properties"


def load(spark, store: Path, **options):
    r = spark.read.format("rmq").option("config", str(_config(store)))
    for k, v in {"excludeInternalTopics": "false", "failOnDataLoss": "false", **options}.items():
        r = r.option(k, v)
    return r.load(str(store))


@pytest.fixture(scope="module")
def jvm(spark):
    from rmqsource.spark.jar import has_native_scan, session_jar
    if not STORES:
        pytest.skip("no golden store")
    if not has_native_scan(session_jar()):
        pytest.skip("the session reads format('rmq') through the Python data source (no JVM scan jar)")
    return spark


def _aggregates(with_count: bool) -> list:
    aggs = [F.count("*").alias("n")] if with_count else []
    for f in FIELDS:
        aggs += [F.min(f).alias(f"min_{f}"), F.max(f).alias(f"max_{f}")]
    return aggs


def _answer(df, groups: tuple, aggs: list) -> list[tuple]:
    out = df.groupBy(*groups).agg(*aggs) if groups else df.agg(*aggs)
    return sorted((tuple(r) for r in out.collect()), key=repr)


def _check(df, groups: tuple, with_count: bool, pushed: bool = True) -> list[tuple]:
    """The aggregation of df as the scan answers it equals Spark's over the rows (a filter Spark keeps
    for itself, on the body, defeats the pushdown)."""
    aggs = _aggregates(with_count)
    grouped = df.groupBy(*groups).agg(*aggs) if groups else df.agg(*aggs)
    assert (PUSHED in plan_of(grouped)) == pushed, plan_of(grouped)
    read = df.where("length(body) >= 0")
    reference = read.groupBy(*groups).agg(*aggs) if groups else read.agg(*aggs)
    assert PUSHED not in plan_of(reference)
    got = _answer(df, groups, aggs)
    assert got == _answer(read, groups, aggs), (groups, with_count)
    return got


def _queues(spark, store: Path) -> list[tuple]:
    rows = load(spark, store, topicPattern=".*").groupBy("topic", "queueId").agg(F.count("*").alias("n")).collect()
    return sorted((r.topic, r.queueId, r.n) for r in rows)


@pytest.mark.parametrize("store", STORES, ids=lambda p: p.parent.name)
def test_pushed_min_max_count_equal_the_rows_aggregated(jvm, store):
    df = load(jvm, store, topicPattern=".*")
    for groups in GROUPS:
        for with_count in (True, False):
            _check(df, groups, with_count)
    # queue offset bounds narrow each range (pushed, no record needed): the ends move with them
    narrowed = df.where("queueOffset >= 3 and queueOffset < 40")
    assert "GreaterThanOrEqual(queueOffset,3)" in plan_of(narrowed)
    for groups in GROUPS[:3]:
        for with_count in (True, False):
            _check(narrowed, groups, with_count)


@pytest.mark.parametrize("store", STORES, ids=lambda p: p.parent.name)
def test_topics_and_queues_options(jvm, store):
    queues = _queues(jvm, store)
    assert queues
    topic, qid, _ = max(queues, key=lambda q: q[2])
    for options in ({"topics": topic}, {"queues": f"{topic}:{qid}"},
                    {"topics": topic, "startingOffsets": "earliest", "endingOffsets": "latest"}):
        df = load(jvm, store, **options)
        for groups in GROUPS[:3]:
            for with_count in (True, False):
                got = _check(df, groups, with_count)
                if groups == ("topic", "queueId") and "queues" in options:
                    assert [g[:2] for g in got] == [(topic, qid)] or topic.startswith("%LMQ%")
        # every queue of the topic also one at a time, min / max with no count
        for t, q, n in queues:
            if t != topic:
                continue
            one = load(jvm, store, queues=f"{t}:{q}")
            got = _check(one, (), False)
            assert len(got) == 1 and got[0][0] is not None


@pytest.mark.parametrize("store", STORES[:2], ids=lambda p: p.parent.name)
def test_empty_ranges_give_spark_semantics(jvm, store):
    df = load(jvm, store, topicPattern=".*").where("queueOffset > 1000000000000")
    assert _check(df, (), True) == [(0,) + (None,) * 6]
    assert _check(df, (), False) == [(None,) * 6]
    assert _check(df, ("topic",), True) == []
    assert _check(df, ("topic", "queueId"), False) == []


@pytest.mark.parametrize("store", STORES, ids=lambda p: p.parent.name)
def test_not_pushed_where_records_or_other_aggregates_are_needed(jvm, store):
    df = load(jvm, store, topicPattern=".*")
    # a tag filter is pushed, but only a record says its tags (needsRecords): Spark aggregates the rows
    tagged = df.where("tags = 'TagA'")
    assert "EqualTo(tags,TagA)" in plan_of(tagged)
    _check(tagged, ("topic",), True, pushed=False)
    # a storeTimestamp range is pushed (it narrows each range) but the rows are still checked one by one
    micros = sorted(r[0] for r in df.selectExpr("unix_micros(storeTimestamp)").collect())
    middle = micros[len(micros) // 2]
    timed = df.where(f"storeTimestamp >= timestamp_micros({middle})")
    assert "GreaterThanOrEqual(storeTimestamp" in plan_of(timed), plan_of(timed)
    got = _check(timed, ("topic", "queueId"), True, pushed=False)
    assert sum(g[2] for g in got) == len([m for m in micros if m >= middle])
    _check(timed, (), False, pushed=False)
    # aggregates or columns outside count / min / max of the three columns
    for other in (F.min("bornTimestamp"), F.max("storeSize"), F.sum("queueOffset"), F.avg("commitLogOffset"),
                  F.count_distinct("queueId"), F.min("tags")):
        plan = plan_of(df.groupBy("topic").agg(F.min("queueOffset"), other))
        assert PUSHED not in plan, plan
    assert PUSHED not in plan_of(df.groupBy("tags").agg(F.min("queueOffset")))
    # a whole-store read (no topic option, no queue filter) is not a topic read
    whole = load(jvm, store)
    assert PUSHED not in plan_of(whole.groupBy("topic").agg(F.max("commitLogOffset")))
    assert _answer(whole, ("topic",), _aggregates(True)) == _answer(whole.where("length(body) >= 0"), ("topic",),
                                                                        _aggregates(True))
