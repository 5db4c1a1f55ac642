"""Lookups by key, what only the JVM scan does (docs/reading.md#lookups-by-key): the session extension
io.rmqsource.spark.RmqExtensions turns array_contains(keys, 'k') / arrays_overlap(keys, array(...)) conjuncts,
and ORs of them, into the scan's option keys (the plan shows ``Keys: N (IndexFile)``); the Filter stays, so
the rows are those of the same query with the full read filtered in Python. Skipped when the session reads
format('rmq') through the Python data source.
"""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def jvm(spark):
    from rmqsource.spark.jar import has_native_scan, session_jar
    if not has_native_scan(session_jar()):
        pytest.skip("the session reads format('rmq') through the Python data source (no JVM scan jar)")
    return spark


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    from rmqsource.sample import write_sample_store
    root = tmp_path_factory.mktemp("key-lookups-jvm") / "store"
    write_sample_store(str(root), 20_000)
    return str(root)


@pytest.fixture(scope="module")
def everything(jvm, store) -> list[tuple]:
    df = jvm.read.format("rmq").load(store)
    return [(r.commitLogOffset, tuple(r["keys"] or ()), r.tags, r.storeTimestamp)
            for r in df.select("commitLogOffset", "keys", "tags", "storeTimestamp").collect()]


def plan_of(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def keys_in_plan(df) -> list[str]:
    return re.findall(r"Keys: \d+ \([\w ]+\)", plan_of(df))


def offsets(df) -> list[int]:
    return sorted(r.commitLogOffset for r in df.select("commitLogOffset").collect())


def want(everything, keep) -> list[int]:
    return sorted(o for o, ks, tags, ts in everything if keep(set(ks), tags, ts))


def test_the_session_has_the_extension(jvm):
    assert "io.rmqsource.spark.RmqExtensions" in jvm.conf.get("spark.sql.extensions")


@pytest.mark.compat
@pytest.mark.parametrize("condition, keys, keep", [
    ("array_contains(keys, 'order-17')", 1, lambda ks: "order-17" in ks),
    ("arrays_overlap(keys, array('order-17', 'user-3', 'order-999999'))", 3,
     lambda ks: bool(ks & {"order-17", "user-3", "order-999999"})),
    ("arrays_overlap(array('order-18', 'order-19'), keys)", 2, lambda ks: bool(ks & {"order-18", "order-19"})),
    ("array_contains(keys, 'order-17') OR arrays_overlap(keys, array('order-18', 'user-4'))", 3,
     lambda ks: bool(ks & {"order-17", "order-18", "user-4"})),
    # conjuncts intersect: only user-5 can be in both
    ("arrays_overlap(keys, array('user-5', 'order-20')) AND arrays_overlap(keys, array('user-5', 'user-6'))", 1,
     lambda ks: bool(ks & {"user-5", "order-20"}) and bool(ks & {"user-5", "user-6"})),
    # a key with a space, or an empty one, is no key of any message
    ("array_contains(keys, 'order-17 user-3') OR array_contains(keys, '')", 0, lambda ks: False),
])
def test_array_filters_on_keys_become_index_lookups(jvm, store, everything, condition, keys, keep):
    df = jvm.read.format("rmq").load(store).where(condition)
    assert keys_in_plan(df) == [f"Keys: {keys} (IndexFile)"]
    assert offsets(df) == want(everything, lambda ks, tags, ts: keep(ks))


def test_other_filters_still_apply(jvm, store, everything):
    some = sorted(everything, key=lambda r: r[3])[len(everything) // 2][3]
    df = (jvm.read.format("rmq").load(store)
          .where("arrays_overlap(keys, array('user-1', 'user-2', 'user-3'))")
          .where(f"storeTimestamp >= timestamp'{some.isoformat()}'").where("tags = 'TagA' or tags is null"))
    assert keys_in_plan(df) == ["Keys: 3 (IndexFile)"]
    got = offsets(df)
    assert got == want(everything, lambda ks, tags, ts: bool(ks & {"user-1", "user-2", "user-3"}) and ts >= some
                       and (tags == "TagA" or tags is None))


@pytest.mark.parametrize("condition", [
    "array_contains(keys, 'order-17') OR tags = 'TagA'",                  # an OR with another filter
    "size(keys) = 2",
    "array_contains(keys, concat('order-', '1', tags))",                  # not a literal
])
def test_other_conditions_are_left_to_spark(jvm, store, condition):
    df = jvm.read.format("rmq").load(store).where(condition)
    assert keys_in_plan(df) == []
    assert df.count() == jvm.read.format("rmq").load(store).where(condition).count()


def test_a_read_with_keys_already_is_left_alone(jvm, store, everything):
    df = (jvm.read.format("rmq").option("keys", json.dumps(["order-1", "order-2"])).load(store)
          .where("array_contains(keys, 'order-2')"))
    assert keys_in_plan(df) == ["Keys: 2 (IndexFile)"]
    assert offsets(df) == want(everything, lambda ks, tags, ts: "order-2" in ks)


def test_index_lookups_off_checks_every_record(jvm, store, everything):
    df = (jvm.read.format("rmq").option("indexLookups", "false").load(store)
          .where("arrays_overlap(keys, array('order-7', 'user-8'))"))
    assert keys_in_plan(df) == ["Keys: 2 (every record checked)"]
    assert offsets(df) == want(everything, lambda ks, tags, ts: bool(ks & {"order-7", "user-8"}))


@pytest.mark.compat
def test_results_equal_the_query_without_the_extension(jvm, store):
    cond = "arrays_overlap(keys, array('order-11', 'order-12', 'user-13'))"
    with_ext = offsets(jvm.read.format("rmq").load(store).where(cond))
    jvm.conf.set("spark.sql.optimizer.excludedRules", "io.rmqsource.spark.KeyLookupRule")
    try:
        df = jvm.read.format("rmq").load(store).where(cond)
        assert keys_in_plan(df) == []
        assert offsets(df) == with_ext
    finally:
        jvm.conf.unset("spark.sql.optimizer.excludedRules")


def test_sql_tables_and_views(jvm, store, everything):
    jvm.sql(f"CREATE TABLE key_lookups_t USING rmq LOCATION '{store}'")
    try:
        df = jvm.sql("SELECT commitLogOffset FROM key_lookups_t WHERE array_contains(keys, 'user-21')")
        assert keys_in_plan(df) == ["Keys: 1 (IndexFile)"]
        assert offsets(df) == want(everything, lambda ks, tags, ts: "user-21" in ks)
    finally:
        jvm.sql("DROP TABLE key_lookups_t")
    # a view of RocketMQ's own topics is no messages read: left to Spark
    df = jvm.read.format("rmq").option("view", "dlq").load(store).where("array_contains(keys, 'order-1')")
    assert keys_in_plan(df) == []
    assert df.count() == 0
