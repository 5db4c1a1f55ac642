"""The ``rmq`` Spark data source (batch reads) against the golden corpora.

One SparkSession (tests/conftest.py) serves every test.  Rows are compared
with the real engines' ``expected/get`` answers field for field.
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from pathlib import Path

import pyarrow as pa
import pytest

from rmqsource.format.system_topics import is_internal_topic

from golden import (case_id, copy_store, corpora, corpus_of, crash_cases, expected_get_files, is_dledger,
                    read_jsonl)

pytestmark = pytest.mark.spark

CORPORA = corpora()
CRASH = crash_cases()


# --------------------------------------------------------------------------- helpers

def rmq(spark, corpus: Path, store: Path | None = None, **options):
    r = spark.read.format("rmq").option("config", str(corpus / "store.properties"))
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(str(store or corpus / "store"))


def rows_of(df) -> list[dict]:
    if hasattr(df, "toArrow"):
        return df.toArrow().to_pylist()
    # pyspark 3.5 (jar only) has no DataFrame.toArrow: the batches its toPandas collects, as one table
    return [row for batch in df._collect_as_arrow() for row in batch.to_pylist()]


def expected_messages(expected_dir: Path) -> dict:
    out = {}
    for topic, qid, path in expected_get_files(expected_dir):
        for line in read_jsonl(path)[:-1]:
            out[(topic, qid, line["queueOffset"])] = line
    return out


def ms(ts) -> int:
    import datetime as dt
    return int((ts - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)).total_seconds() * 1000) if ts.tzinfo else \
        int((ts - dt.datetime(1970, 1, 1)).total_seconds() * 1000)


def assert_row_equals_engine(row: dict, want: dict):
    key = (want["topic"], want["queueId"], want["queueOffset"])
    for f in ("topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "bodyCRC", "flag", "sysFlag",
              "bornHost", "storeHost", "reconsumeTimes", "preparedTransactionOffset", "tags", "msgId"):
        assert row[f] == want[f], (key, f, row[f], want[f])
    assert ms(row["bornTimestamp"]) == want["bornTimestamp"], key
    assert ms(row["storeTimestamp"]) == want["storeTimestamp"], key
    assert row["body"] == base64.b64decode(want["body"] or ""), key
    assert dict(row["properties"]) == want["properties"], key
    want_keys = None if want["keys"] is None else [k for k in want["keys"].split(" ") if k]
    assert row["keys"] == want_keys, key
    assert row["uniqKey"] == want["properties"].get("UNIQ_KEY"), key
    assert row["tagsCode"] == want["cq"]["tagsCode"], key
    assert row["transactionType"] in ("NOT_TYPE", "COMMIT_TYPE"), key


def plan_of(df) -> str:
    jvm = df.sparkSession._jvm
    mode = jvm.org.apache.spark.sql.execution.ExplainMode.fromString("formatted")
    return df._jdf.queryExecution().explainString(mode)


def reader_for(options: dict, filters=(), columns=None):
    """The DataSourceReader as Spark's pushdown planner builds it (outside Spark)."""
    from rmqsource.spark.source import RmqDataSource
    from pyspark.sql.pandas.types import from_arrow_schema
    from rmqsource.spark.schema import ARROW_SCHEMA
    ds = RmqDataSource(options)
    schema = from_arrow_schema(ARROW_SCHEMA if columns is None else
                               pa.schema([ARROW_SCHEMA.field(c) for c in columns]))
    reader = ds.reader(schema)
    rejected = list(reader.pushFilters(list(filters)))
    return reader, rejected


def read_all(reader) -> pa.Table:
    batches = [b for p in reader.partitions() for b in reader.read(p)]
    from rmqsource.spark.schema import output_schema
    return pa.Table.from_batches(batches, schema=output_schema(reader.columns))


# --------------------------------------------------------------------------- registration

def test_format_rmq_works_without_register(spark):
    corpus = CORPORA[0]
    assert rmq(spark, corpus).where("queueId = 0").limit(1).count() == 1


def test_explicit_register(spark):
    from rmqsource.spark.source import RmqDataSource
    spark.dataSource.register(RmqDataSource)
    corpus = CORPORA[0]
    df = spark.read.format("rmq").option("config", str(corpus / "store.properties")).load(str(corpus / "store"))
    assert df.columns[:4] == ["topic", "queueId", "queueOffset", "commitLogOffset"]


def test_schema_matches_pyspark_arrow_conversion(spark):
    from pyspark.sql.pandas.types import to_arrow_schema
    from rmqsource.spark.schema import ARROW_SCHEMA
    df = rmq(spark, CORPORA[0])
    assert to_arrow_schema(df.schema, timezone="UTC").equals(ARROW_SCHEMA)
    assert dict(df.dtypes)["keys"] == "array<string>"
    assert dict(df.dtypes)["properties"] == "map<string,string>"


# --------------------------------------------------------------------------- golden: both read paths

def assert_rows_equal_engine_get(rows: list, expected: dict) -> None:
    """Rows of a whole-store read are the engine's messages, one each (by topic, queue, queue offset)."""
    got = {(r["topic"], r["queueId"], r["queueOffset"]): r for r in rows}
    assert len(got) == len(rows)
    assert set(got) == set(expected)
    for key, want in expected.items():
        assert_row_equals_engine(got[key], want)
    assert {r["broker"] for r in rows} == {"store"}


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
@pytest.mark.parametrize("mode", ["whole_store", "whole_store_all", "topics_all"])
def test_reads_equal_engine_get(spark, corpus, mode):
    """Every record the engine serves, RocketMQ's own topics (SCHEDULE_TOPIC_XXXX, %RETRY%) included with
    excludeInternalTopics=false; a default whole-store read gives those of the user topics."""
    expected = expected_messages(corpus / "expected")
    opts = {"whole_store": {}, "whole_store_all": {"excludeInternalTopics": "false"},
            "topics_all": {"topicPattern": ".*", "maxRecordsPerPartition": "50", "excludeInternalTopics": "false"}}[mode]
    if mode == "whole_store":
        expected = {k: v for k, v in expected.items() if not is_internal_topic(k[0])}
        assert len(expected) < len(expected_messages(corpus / "expected"))
    rows = rows_of(rmq(spark, corpus, **opts))
    assert_rows_equal_engine_get(rows, expected)


def torn_record(case: Path):
    """The record a DLedger crash case's engine served as garbage (DLedger recovery checks entry headers
    only), else None: rmqsource reads refuse it with a typed error naming the data file and offset."""
    if not is_dledger(case) or not (case / "case.json").is_file():
        return None
    torn = json.loads((case / "case.json").read_text())["checks"]["records_returned_that_differ_from_the_clean_record"]
    return torn[0] if torn else None


def assert_refuses_torn_record(action, store: Path, torn: dict) -> None:
    from rmqsource.store.commitlog import CommitLog
    from rmqsource.store.layout import StoreLayout
    cl = CommitLog(StoreLayout.for_root(store))
    seg = cl.reader.find(torn["commitLogOffset"])
    cl.close()
    with pytest.raises(Exception) as e:
        action()
    text = str(e.value)
    assert "CorruptRecordError" in text or type(e.value).__name__ == "CorruptRecordError", text[:2000]
    assert f"{seg.path}, offset {torn['commitLogOffset'] - seg.start_offset}: " in text, text[:2000]


@pytest.mark.parametrize("case", CRASH, ids=case_id)
def test_crash_stores_read_as_recovered_view(spark, case):
    corpus = corpus_of(case)
    torn = torn_record(case)
    if torn is not None:
        # Deliberate difference: the engine serves the torn record as a message with an empty topic.
        for opts in ({}, {"topicPattern": ".*"}):
            assert_refuses_torn_record(lambda: rows_of(rmq(spark, corpus, case / "store", **opts)), case / "store",
                                       torn)
        return
    clean = expected_messages(corpus / "expected")
    want = {}
    for topic, qid, path in expected_get_files(case / "expected"):
        for line in read_jsonl(path)[:-1]:
            want[(topic, qid, line["queueOffset"])] = line
    for opts in ({"excludeInternalTopics": "false"}, {"topicPattern": ".*", "excludeInternalTopics": "false"}):
        rows = rows_of(rmq(spark, corpus, case / "store", **opts))
        got = {(r["topic"], r["queueId"], r["queueOffset"]): r for r in rows}
        assert len(got) == len(rows)
        assert set(got) == set(want), (opts, sorted(set(got) ^ set(want))[:5])
        for key, w in want.items():
            r = got[key]
            assert (r["commitLogOffset"], r["storeSize"], r["tagsCode"]) == \
                (w["commitLogOffset"], w["storeSize"], w["tagsCode"]), key
            raw = base64.b64decode(clean[key]["raw"])
            assert zlib.crc32(raw) == w["rawCrc32"]
            assert_row_equals_engine(r, clean[key])


def test_include_transactional_adds_prepared_and_rollback(spark):
    corpus = CORPORA[0]
    inputs = read_jsonl(corpus / "inputs.jsonl")
    tx = [i for i in inputs if i["sysFlag"] & 0xC in (0x4, 0xC)]
    df = rmq(spark, corpus, includeTransactional="true", excludeInternalTopics="false")    # every record stored
    counts = {r["transactionType"]: r["count"] for r in df.groupBy("transactionType").count().collect()}
    assert counts["PREPARED_TYPE"] + counts["ROLLBACK_TYPE"] == len(tx)
    assert counts["PREPARED_TYPE"] == sum(1 for i in tx if i["sysFlag"] & 0xC == 0x4)
    nulls = df.where("transactionType = 'PREPARED_TYPE' and tagsCode is null").count()
    assert nulls == counts["PREPARED_TYPE"]
    assert df.count() == len(inputs)


def test_decompress_inflates_bodies(spark):
    corpus = CORPORA[0]
    inputs = read_jsonl(corpus / "inputs.jsonl")
    plain = {base64.b64decode(i["body"]): i["plaintext"].encode() for i in inputs if "plaintext" in i}
    assert plain
    rows = rmq(spark, corpus, decompress="true").where("sysFlag & 1 = 1").select("body", "bodyCRC").collect()
    raw = rmq(spark, corpus).where("sysFlag & 1 = 1").select("body").collect()
    assert len(rows) == len(raw) == len(plain)
    assert sorted(bytes(r.body) for r in rows) == sorted(plain[bytes(r.body)] for r in raw)


# --------------------------------------------------------------------------- topic options

def test_topic_options_and_offsets(spark):
    corpus = CORPORA[0]
    expected = expected_messages(corpus / "expected")
    tt = sorted(k for k in expected if k[0] == "TopicTest")
    assert rmq(spark, corpus, topics="TopicTest").count() == len(tt)
    df = rmq(spark, corpus, queues="TopicTest:0,TopicTest:1",
             startingOffsets=json.dumps({"TopicTest": {"0": 5, "1": -2}}),
             endingOffsets=json.dumps({"TopicTest": {"0": 20, "1": 10}}))
    got = sorted((r.queueId, r.queueOffset) for r in df.select("queueId", "queueOffset").collect())
    assert got == [(0, o) for o in range(5, 20)] + [(1, o) for o in range(0, 10)]


def test_timestamp_options_follow_store_time(spark):
    corpus = CORPORA[0]
    expected = [v for k, v in expected_messages(corpus / "expected").items() if k[:2] == ("OrderTopic", 1)]
    expected.sort(key=lambda m: m["queueOffset"])
    t1, t2 = expected[10]["storeTimestamp"], expected[40]["storeTimestamp"]
    df = rmq(spark, corpus, queues="OrderTopic:1", startingTimestamp=str(t1), endingTimestamp=str(t2))
    offs = sorted(r.queueOffset for r in df.select("queueOffset").collect())
    want = [m["queueOffset"] for m in expected if t1 <= m["storeTimestamp"] < t2]
    assert offs == want and offs


def test_partitioning_options():
    corpus = CORPORA[0]
    base = {"path": str(corpus / "store"), "config": str(corpus / "store.properties")}
    r, _ = reader_for({**base, "topics": "TopicTest", "maxRecordsPerPartition": "10"})
    parts = r.partitions()
    assert all(p.end - p.start <= 10 for p in parts)
    assert sum(p.end - p.start for p in parts) == 105 + 106 + 99 + 106
    r, _ = reader_for({**base, "queues": "SCHEDULE_TOPIC_XXXX:0", "minPartitions": "3"})
    assert len(r.partitions()) == 3
    # whole store: small maxBytesPerPartition splits segments at record boundaries
    r, _ = reader_for({**base, "maxBytesPerPartition": "65536", "excludeInternalTopics": "false"})
    parts = r.partitions()
    assert len(parts) > 8
    t = read_all(r)
    assert t.num_rows == len(expected_messages(corpus / "expected"))
    assert len(set(t.column("commitLogOffset").to_pylist())) == t.num_rows


# --------------------------------------------------------------------------- pushdown

def test_tag_pushdown_reads_only_matching_records(monkeypatch):
    from pyspark.sql.datasource import EqualTo, In
    from rmqsource.spark import queue_range
    corpus = CORPORA[0]
    expected = expected_messages(corpus / "expected")
    want = sorted(k for k, v in expected.items() if v["tags"] == "TagA")
    fetched = []
    real = queue_range.fetch_records
    monkeypatch.setattr(queue_range, "fetch_records", lambda rd, phys, sizes: (fetched.append(len(phys)), real(rd, phys, sizes))[1])
    base = {"path": str(corpus / "store"), "config": str(corpus / "store.properties"), "excludeInternalTopics": "false"}
    f = EqualTo(("tags",), "TagA")
    r, rejected = reader_for(base, [f])
    assert rejected == []
    t = read_all(r)
    got = sorted(zip(t.column("topic").to_pylist(), t.column("queueId").to_pylist(), t.column("queueOffset").to_pylist()))
    assert got == want
    # No other record was read from the CommitLog, except in SCHEDULE_TOPIC_XXXX, whose tagsCode
    # is a deliver time (those records get the exact check only).
    sched = [k for k in expected if k[0] == "SCHEDULE_TOPIC_XXXX"]
    assert sched
    assert sum(fetched) == len([k for k in want if k[0] != "SCHEDULE_TOPIC_XXXX"]) + len(sched)
    r, _ = reader_for({**base, "topics": "TopicTest"}, [In(("tags",), ("TagB", "订单"))])
    t = read_all(r)
    assert sorted(set(t.column("tags").to_pylist())) == ["TagB", "订单"]
    assert t.num_rows == sum(1 for k, v in expected.items() if k[0] == "TopicTest" and v["tags"] in ("TagB", "订单"))


def test_pushed_filters_in_physical_plan_and_results(spark):
    corpus = CORPORA[0]
    expected = expected_messages(corpus / "expected")
    df = rmq(spark, corpus).where("tags = 'TagA' and queueId IN (0, 1) and queueOffset >= 3 and topic = 'TopicTest'")
    plan = plan_of(df)
    pushed = re.search(r"PushedFilters: \[(.*)\]", plan)
    assert pushed, plan
    for frag in ("EqualTo(tags,TagA)", "In(queueId", "GreaterThanOrEqual(queueOffset,3)", "EqualTo(topic,TopicTest)"):
        assert frag in pushed.group(1), plan
    want = sorted(k for k, v in expected.items()
                  if v["tags"] == "TagA" and k[1] in (0, 1) and k[2] >= 3 and k[0] == "TopicTest")
    got = sorted((r.topic, r.queueId, r.queueOffset) for r in df.select("topic", "queueId", "queueOffset").collect())
    assert got == want and got


def test_range_pushdown_equals_spark_filtering(spark):
    corpus = CORPORA[1] if len(CORPORA) > 1 else CORPORA[0]
    expected = expected_messages(corpus / "expected")
    offs = sorted(v["commitLogOffset"] for v in expected.values())
    lo, hi = offs[100], offs[300]
    times = sorted(v["storeTimestamp"] for v in expected.values())
    tlo = times[50]
    df = rmq(spark, corpus, excludeInternalTopics="false").where(f"commitLogOffset >= {lo} and commitLogOffset < {hi} "
                                  f"and storeTimestamp >= timestamp_millis({tlo})")
    got = sorted(r.commitLogOffset for r in df.select("commitLogOffset").collect())
    want = sorted(v["commitLogOffset"] for v in expected.values()
                  if lo <= v["commitLogOffset"] < hi and v["storeTimestamp"] >= tlo)
    assert got == want and got
    assert "GreaterThanOrEqual(commitLogOffset" in plan_of(df)


def test_msgid_pushdown_reads_one_record(spark):
    from pyspark.sql.datasource import EqualTo
    corpus = CORPORA[0]
    view = [v for v in read_jsonl(corpus / "expected" / "view.jsonl") if v["result"]["found"]]
    target = view[-1]["result"]["message"]
    base = {"path": str(corpus / "store"), "config": str(corpus / "store.properties")}
    r, rejected = reader_for(base, [EqualTo(("msgId",), target["msgId"])])
    parts = r.partitions()
    assert rejected == [] and len(parts) == 1 and parts[0].offsets == (target["commitLogOffset"],)
    rows = rmq(spark, corpus).where(f"msgId = '{target['msgId']}'").collect()
    assert len(rows) == 1 and rows[0].commitLogOffset == target["commitLogOffset"]
    assert rmq(spark, corpus).where("msgId = 'not-a-msgid'").count() == 0


def test_uniqkey_pushdown_uses_index(spark):
    from pyspark.sql.datasource import EqualTo
    corpus = CORPORA[0]
    expected = expected_messages(corpus / "expected")
    # a uniqKey shared by a retried copy: several records
    by_key = {}
    for k, v in expected.items():
        u = v["properties"].get("UNIQ_KEY")
        if u:
            by_key.setdefault(u, []).append(k)
    key, hits = max(by_key.items(), key=lambda kv: len(kv[1]))
    base = {"path": str(corpus / "store"), "config": str(corpus / "store.properties"), "excludeInternalTopics": "false"}
    r, rejected = reader_for(base, [EqualTo(("uniqKey",), key)])
    parts = r.partitions()
    assert rejected == [] and parts and all(type(p).__name__ == "Lookup" for p in parts)
    got = sorted((r.topic, r.queueId, r.queueOffset)
                 for r in rmq(spark, corpus, excludeInternalTopics="false").where(f"uniqKey = '{key}'").collect())
    assert got == sorted(hits)
    # by default the copies in RocketMQ's own topics (the %RETRY% one) are left out of a whole-store lookup
    own = sorted(h for h in hits if not is_internal_topic(h[0]))
    assert own != sorted(hits)
    assert sorted((r.topic, r.queueId, r.queueOffset)
                  for r in rmq(spark, corpus).where(f"uniqKey = '{key}'").collect()) == own


@pytest.mark.parametrize("options", [{}, {"topics": "OrderEvents,PaymentEvents"}], ids=["whole-store", "topics"])
def test_uniqkey_lookup_finds_messages_past_the_index_end(spark, tmp_path, options):
    """The CommitLog runs on past what the IndexFiles cover (a live broker's, or a crashed one's, whose index
    has not caught up): a uniqKey lookup finds those messages too, each once, as the scan does."""
    from store_records import write_lagging_index_store
    root = tmp_path / "store"
    covered, _ = write_lagging_index_store(root)

    def read(**o):
        r = spark.read.format("rmq")
        for k, v in {**options, **o}.items():
            r = r.option(k, v)
        return r.load(str(root))

    every = read().select("commitLogOffset", "uniqKey").collect()
    head = [r.uniqKey for r in every if r.commitLogOffset < covered]
    tail = sorted((r.commitLogOffset, r.uniqKey) for r in every if r.commitLogOffset > covered)
    assert head and tail
    wanted = [head[0], head[-1], tail[0][1], tail[len(tail) // 2][1], tail[-1][1], "no-such-key"]

    def got(where, **o):
        return sorted((r.commitLogOffset, r.uniqKey) for r in read(**o).where(where)
                      .select("commitLogOffset", "uniqKey").collect())

    for key in wanted[2:]:
        assert got(f"uniqKey = '{key}'") == got(f"uniqKey = '{key}'", indexLookups="false")
    assert got(f"uniqKey = '{tail[-1][1]}'") == [tail[-1]]
    where = "uniqKey IN (" + ", ".join(f"'{k}'" for k in wanted) + ")"
    found = got(where)
    assert found == got(where, indexLookups="false") and len(found) == 5 and len(set(found)) == 5


def test_keys_array_contains(spark):
    corpus = CORPORA[0]
    expected = expected_messages(corpus / "expected")
    want = sorted(k for k, v in expected.items() if v["keys"] and "bulk-key-70" in v["keys"].split(" "))
    df = rmq(spark, corpus, excludeInternalTopics="false").where("array_contains(keys, 'bulk-key-70')")
    got = sorted((r.topic, r.queueId, r.queueOffset) for r in df.collect())
    assert got == want and len(got) >= 70


def test_reads_without_pushdown_enabled(spark):
    """The Python path plans without pushdown when the setting is off; the JVM scan does not need it."""
    from rmqsource.spark.jar import has_native_scan, session_jar
    corpus = CORPORA[0]
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        df = rmq(spark, corpus).where("tags = 'TagB'")
        if has_native_scan(session_jar()):
            assert "EqualTo(tags,TagB)" in plan_of(df)
        else:
            assert "PushedFilters: []" in plan_of(df) or "PushedFilters" not in plan_of(df)
        n = df.count()
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    assert n == rmq(spark, corpus).where("tags = 'TagB'").count() > 0


def test_projection_by_user_schema(spark):
    corpus = CORPORA[0]
    df = (spark.read.format("rmq").schema("queueOffset bigint, topic string").option("excludeInternalTopics", "false")
          .option("config", str(corpus / "store.properties")).load(str(corpus / "store")))
    t = df.toArrow()
    assert t.column_names == ["queueOffset", "topic"]
    assert t.num_rows == len(expected_messages(corpus / "expected"))


# --------------------------------------------------------------------------- several stores

def test_several_stores_in_one_read(spark):
    if len(CORPORA) < 2:
        pytest.skip("needs two corpora")
    a, b = CORPORA[0], CORPORA[1]
    df = (spark.read.format("rmq").option("brokerName", "broker-a,broker-b").option("excludeInternalTopics", "false")
          .load([str(a / "store"), str(b / "store")]))
    counts = {r.broker: r["count"] for r in df.groupBy("broker").count().collect()}
    assert counts == {"broker-a": len(expected_messages(a / "expected")),
                      "broker-b": len(expected_messages(b / "expected"))}
    df2 = (spark.read.format("rmq").option("brokerName", "x,y").option("excludeInternalTopics", "false")
           .load(f"{a / 'store'},{b / 'store'}"))
    assert df2.count() == sum(counts.values())


# --------------------------------------------------------------------------- errors

@pytest.mark.parametrize("options, error", [
    ({"topics": "NoSuchTopic"}, "topic 'NoSuchTopic' does not exist"),
    ({"queues": "TopicTest:99"}, "queue TopicTest:99 does not exist"),
    ({"topics": "TopicTest", "startingOffsets": "{bad json"}, "startingOffsets must be"),
    ({"topic": "TopicTest"}, "unknown option 'topic'"),
    ({"topics": "TopicTest", "endingOffsets": '{"TopicTest": {"0": 100000}}'}, "past the queue's max offset"),
])
def test_bad_options_fail_at_planning(spark, options, error):
    corpus = CORPORA[0]
    with pytest.raises(Exception, match=re.escape(error)):
        rmq(spark, corpus, **options).count()


def test_not_a_store(spark, tmp_path):
    with pytest.raises(Exception, match="is not a RocketMQ store"):
        spark.read.format("rmq").load(str(tmp_path)).count()


def test_data_loss(spark):
    case = next((c for c in CRASH if c.name == "deleted_first_segment"), None)
    if case is None:
        pytest.skip("no deleted_first_segment case")
    corpus = corpus_of(case)
    start = json.dumps({"TopicTest": {"0": 0}})
    with pytest.raises(Exception, match=r"DataLossError|below the queue's min offset"):
        rmq(spark, corpus, case / "store", queues="TopicTest:0", startingOffsets=start).count()
    n = rmq(spark, corpus, case / "store", queues="TopicTest:0", startingOffsets=start,
            failOnDataLoss="false").count()
    assert n == len(read_jsonl(case / "expected" / "get" / "TopicTest" / "0.jsonl")) - 1


def test_hostile_record_names_file_and_offset(spark, tmp_path):
    corpus = CORPORA[0]
    store = copy_store(corpus / "store", tmp_path / "store")
    seg = sorted((store / "commitlog").iterdir())[1]
    expected = expected_messages(corpus / "expected")
    victim = sorted(v["commitLogOffset"] for v in expected.values()
                    if v["commitLogOffset"] > int(seg.name) + 1000 and v["sysFlag"] & 0x30 == 0)[3]
    pos = victim - int(seg.name)
    with open(seg, "r+b") as f:
        f.seek(pos + 84)                 # BODYLENGTH of an IPv4/IPv4 record (checked below)
        f.write(b"\x7f\xff\xff\x00")
    for opts in ({}, {"topics": expected[[k for k, v in expected.items() if v["commitLogOffset"] == victim][0]]["topic"]}):
        with pytest.raises(Exception) as exc:   # (a count alone may come from ConsumeQueue offsets, unread)
            rmq(spark, corpus, store, **opts).selectExpr("max(storeTimestamp)").collect()
        text = str(exc.value)
        assert "CorruptRecordError" in text, text[-2000:]
        assert f"{seg}, offset {pos}" in text, text[-2000:]


@pytest.mark.parametrize("store", [c / "store" for c in CORPORA] + [c / "store" for c in CRASH], ids=str)
def test_commit_log_end_equals_full_recovery_scan(store):
    """The reader's fast valid end (from the last ConsumeQueue unit) equals a scan from segment 0."""
    from rmqsource.store.reader import MessageStoreReader
    from golden import load_config
    corpus = store.parent if (store.parent / "inputs.jsonl").exists() else corpus_of(store.parent)
    with MessageStoreReader(store, load_config(corpus)) as reader:
        full = reader.commitlog.find_valid_end(0, check_crc=True)      # DLedger: headers from the first data file
        if not reader.abort_file_existed:
            assert reader.commit_log_max_offset == full


# --------------------------------------------------------------------------- whole-store fast path

def _whole_store_table(monkeypatch, store: Path, config: Path, use_cq: bool, **extra) -> pa.Table:
    from rmqsource.spark import commitlog_range
    monkeypatch.setattr(commitlog_range, "MAX_CQ_QUEUES", 4096 if use_cq else 0)
    r, _ = reader_for({"path": str(store), "config": str(config), **extra})
    return read_all(r)


@pytest.mark.parametrize("case", CORPORA + CRASH, ids=case_id)
def test_consumequeue_positions_equal_chain_walk(monkeypatch, case):
    """Record starts taken from ConsumeQueue units give exactly the rows of a header-chain walk."""
    corpus = corpus_of(case) if case in CRASH else case
    store = case / "store"
    torn = torn_record(case)
    if torn is not None:
        for use_cq in (False, True):
            assert_refuses_torn_record(lambda: _whole_store_table(monkeypatch, store, corpus / "store.properties",
                                                                  use_cq), store, torn)
        return
    for extra in ({}, {"includeTransactional": "true"}, {"maxBytesPerPartition": "65536", "batchSize": "7"}):
        walk = _whole_store_table(monkeypatch, store, corpus / "store.properties", False, **extra)
        fast = _whole_store_table(monkeypatch, store, corpus / "store.properties", True, **extra)
        assert fast.num_rows == walk.num_rows > 0
        assert fast.equals(walk), extra


def test_consumequeue_unit_that_lies_falls_back_to_the_chain(monkeypatch, tmp_path):
    """A unit pointing into the middle of a record (or at the wrong size) never changes the rows."""
    import numpy as np
    from rmqsource.format.consumequeue import CQ_UNIT_DTYPE
    corpus = CORPORA[0]
    store = copy_store(corpus / "store", tmp_path / "store")
    want = _whole_store_table(monkeypatch, store, corpus / "store.properties", False)
    qdir = sorted(p for p in (store / "consumequeue").glob("*/*") if p.is_dir())[0]
    f = sorted(qdir.iterdir())[0]
    raw = bytearray(f.read_bytes())
    units = np.frombuffer(bytes(raw[:20 * 3]), dtype=CQ_UNIT_DTYPE).copy()
    units[1]["phy_offset"] += 4          # into the middle of a record
    units[2]["size"] += 1                # wrong size
    raw[:20 * 3] = units.tobytes()
    f.write_bytes(bytes(raw))
    got = _whole_store_table(monkeypatch, store, corpus / "store.properties", True)
    cols = [c for c in want.column_names if c != "tagsCode"]
    assert got.select(cols).equals(want.select(cols))


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_tag_filtered_reads_equal_engine_get_tag(spark, corpus):
    """`tags IN (...)` through ConsumeQueue pushdown returns what the engine's tag-filtered get returned.

    The engine filters on tag hashes only; SCHEDULE_TOPIC_XXXX units hold a deliver time
    instead of a hash, so there the engine matches nothing while SQL `tags = x` still
    means "rows whose TAGS is x": those entries are checked against the TAGS property.
    """
    tag_dir = corpus / "expected" / "get_tag"
    expected_all = expected_messages(corpus / "expected")
    entries = read_jsonl(tag_dir / "INDEX.jsonl")
    assert entries
    for entry in entries:
        tags = [t.strip() for t in entry["tagExpression"].split("||") if t.strip()]
        df = rmq(spark, corpus, queues=f"{entry['topic']}:{entry['queueId']}").where(
            "tags IN (" + ", ".join("'" + t.replace("'", "''") + "'" for t in tags) + ")")
        assert "PushedFilters" in plan_of(df) and "tags" in plan_of(df)
        rows = sorted(rows_of(df), key=lambda r: r["queueOffset"])
        if entry["topic"] == "SCHEDULE_TOPIC_XXXX":
            want = sorted(k[2] for k, v in expected_all.items()
                          if k[:2] == (entry["topic"], entry["queueId"]) and v["tags"] in tags)
            assert [r["queueOffset"] for r in rows] == want, entry["file"]
            continue
        expected = read_jsonl(tag_dir / entry["file"])[:-1]
        assert [r["queueOffset"] for r in rows] == [m["queueOffset"] for m in expected], entry["file"]
        for row, want in zip(rows, expected):
            assert_row_equals_engine(row, want)
