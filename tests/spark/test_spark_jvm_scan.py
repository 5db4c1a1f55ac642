"""What only the JVM scan does: explain output, column pruning, count(*) pushdown, metrics, no state
kept between queries of one DataFrame.  Skipped when the session runs the Python data source.

Answers are judged by the golden corpora and by full reads of the same DataFrame.
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from rmqsource.format.system_topics import is_internal_topic

from golden import copy_store, corpora, corpus_of, crash_cases, read_jsonl
from test_spark_batch import expected_messages, plan_of, rmq, torn_record

pytestmark = pytest.mark.spark

CORPORA = corpora()
# A case whose engine serves a torn record fails a full read (test_spark_batch asserts the typed error).
CRASH = [c for c in crash_cases() if not torn_record(c)]


def expected_keys(expected_dir: Path) -> list[tuple]:
    return list(expected_messages(expected_dir))


@pytest.fixture(scope="module")
def jvm(spark):
    from rmqsource.spark.jar import has_native_scan, session_jar
    if not CORPORA:
        pytest.skip("no golden corpus")
    if not has_native_scan(session_jar()):
        pytest.skip("the session reads format('rmq') through the Python data source (no JVM scan jar)")
    assert "RmqScan(JVM)" in plan_of(rmq(spark, CORPORA[0]))
    return spark


# --------------------------------------------------------------------------- explain, pruning

def test_explain_shows_jvm_scan_with_pushed_filters_and_pruned_columns(jvm):
    df = rmq(jvm, CORPORA[0]).where("tags = 'TagA' and queueId = 1").select("topic", "queueOffset")
    plan = plan_of(df)
    assert "RmqScan(JVM)" in plan, plan
    assert "EqualTo(tags,TagA)" in plan and "EqualTo(queueId,1)" in plan, plan
    assert "ReadSchema: struct<topic:string,queueOffset:bigint>" in plan, plan
    assert "ColumnarToRow" in plan, plan       # columnar batches handed to Spark


def test_a_column_not_asked_for_is_never_decoded(jvm, tmp_path):
    """A compressed body that cannot be inflated fails a read of `body`, never a read without it."""
    corpus = CORPORA[0]
    expected = expected_messages(corpus / "expected")
    victim = next(m for m in expected.values() if m["sysFlag"] & 0x1 and m["sysFlag"] & 0x30 == 0)
    store = copy_store(corpus / "store", tmp_path / "store")
    seg_start = max(int(p.name) for p in (store / "commitlog").iterdir() if int(p.name) <= victim["commitLogOffset"])
    seg = store / "commitlog" / f"{seg_start:020d}"
    pos = victim["commitLogOffset"] - seg_start
    body_len = struct.unpack_from(">i", seg.read_bytes(), pos + 84)[0]
    with open(seg, "r+b") as f:                # garbage inside the body: lengths and CRC field untouched
        f.seek(pos + 88)
        f.write(b"\xff" * min(body_len, 16))
    df = rmq(jvm, corpus, store, decompress="true", excludeInternalTopics="false")
    n = df.select("queueOffset", "tags", "properties").count()
    assert n == len(expected)
    with pytest.raises(Exception) as exc:
        df.select("body").collect()
    assert "DecompressionError" in str(exc.value) and f"{seg}, offset {pos}" in str(exc.value)


def test_user_schema_selects_columns_and_checks_types(jvm):
    corpus = CORPORA[0]
    df = (jvm.read.format("rmq").schema("storeTimestamp timestamp, msgId string").option("excludeInternalTopics", "false")
          .option("config", str(corpus / "store.properties")).load(str(corpus / "store")))
    assert df.columns == ["storeTimestamp", "msgId"]
    assert "ReadSchema: struct<storeTimestamp:timestamp,msgId:string>" in plan_of(df)
    assert df.count() == len(expected_keys(corpus / "expected"))
    bad = (jvm.read.format("rmq").schema("queueOffset string")
           .option("config", str(corpus / "store.properties")).load(str(corpus / "store")))
    with pytest.raises(Exception, match="column 'queueOffset' must have type bigint"):
        bad.collect()


# --------------------------------------------------------------------------- count(*) pushdown

@pytest.mark.compat
@pytest.mark.parametrize("case", CORPORA + CRASH, ids=lambda p: str(p.name if p in CORPORA else f"{p.parent.parent.name}/{p.name}"))
def test_count_pushdown_equals_engine_and_full_read(jvm, case):
    corpus = corpus_of(case) if case in CRASH else case
    want = Counter((t, q) for t, q, _ in expected_keys(case / "expected"))
    df = rmq(jvm, corpus, case / "store", topicPattern=".*", failOnDataLoss="false", excludeInternalTopics="false")
    counted = df.groupBy("topic", "queueId").count()
    assert "PushedAggregation" in plan_of(counted), plan_of(counted)
    got = {(r.topic, r.queueId): r["count"] for r in counted.collect()}
    assert got == {k: v for k, v in want.items() if v}
    assert df.count() == sum(want.values()) == len(df.select("commitLogOffset").collect())
    by_topic = {r.topic: r["count"] for r in df.groupBy("topic").count().collect()}
    want_topic = Counter()
    for (t, _), n in want.items():
        want_topic[t] += n
    assert by_topic == {t: n for t, n in want_topic.items() if n}


def test_count_is_not_pushed_where_it_would_need_records(jvm):
    corpus = CORPORA[0]
    tagged = rmq(jvm, corpus, topics="TopicTest").where("tags = 'TagA'")
    assert "PushedAggregation" not in plan_of(tagged.groupBy("queueId").count())
    whole = rmq(jvm, corpus, excludeInternalTopics="false").where("storeTimestamp > timestamp'2000-01-01 00:00:00'")
    assert "LocalTableScan" not in plan_of(whole.groupBy("topic").count())
    keys = expected_keys(corpus / "expected")
    assert whole.count() == len(keys)
    # A filter Spark keeps for itself (none is pushed) must not let the units answer either.
    long_bodies = rmq(jvm, corpus).where("length(body) > 100")
    assert "LocalTableScan" not in plan_of(long_bodies.groupBy("topic").count())
    assert 0 < long_bodies.count() == sum(_read_counts(long_bodies, "topic").values()) < len(keys)


def _counted_on_driver(df) -> bool:
    plan = plan_of(df)
    return "LocalTableScan" in plan and "BatchScan" not in plan


def _read_counts(df, *cols) -> dict:
    """Counts Spark computes from rows read (sum(1) is never pushed down)."""
    return {tuple(r)[:-1]: r[-1] for r in df.groupBy(*cols).agg(F.sum(F.lit(1)).cast("long")).collect()}


def _sum_by(counts: dict, names: tuple, cols: tuple) -> dict:
    """Counts keyed by the columns ``names`` summed up to the columns ``cols`` (a subset)."""
    out: dict = {}
    for key, n in counts.items():
        sub = tuple(key[names.index(c)] for c in cols)
        out[sub] = out.get(sub, 0) + n
    return out


@pytest.mark.compat
@pytest.mark.parametrize("case", CORPORA + CRASH, ids=lambda p: str(p.name if p in CORPORA else f"{p.parent.parent.name}/{p.name}"))
def test_whole_store_count_from_consume_queue_offsets(jvm, case):
    """A whole-store count (grouped or not) is answered on the driver from ConsumeQueue offsets when
    the units tile the CommitLog, and always equals the count of the rows a read gives."""
    corpus = corpus_of(case) if case in CRASH else case
    finest = ("topic", "queueId", "broker", "storePath")
    for internal in (False, True):
        # by default the count leaves out RocketMQ's own topics' queues (SCHEDULE_TOPIC_XXXX, %RETRY%), as the read
        df = rmq(jvm, corpus, case / "store", excludeInternalTopics="false" if internal else "true")
        read = _read_counts(df, *finest)          # one job reads every row; the coarser counts are its sums
        for cols in (("topic",), ("topic", "queueId"), ("broker", "storePath")):
            counted = df.groupBy(*cols).count()
            assert {tuple(r)[:-1]: r[-1] for r in counted.collect()} == _sum_by(read, finest, cols)
        total = df.count()
        assert total == sum(read.values())
        pushed = _counted_on_driver(df.groupBy("topic").count())
        if case in CORPORA:
            # Written by the real engine: every record has its unit, transaction halves and blanks between.
            assert pushed
            keys = expected_keys(case / "expected")
            assert total == len([k for k in keys if internal or not is_internal_topic(k[0])])
        if case.name == "no_consumequeue":
            assert not pushed                   # units re-derived from the CommitLog prove nothing


def test_whole_store_count_is_read_when_a_record_has_no_unit(jvm, tmp_path):
    """Dispatch behind the CommitLog (the last record's unit lost): the count still counts that record, whether
    read or taken from the units (a stopped store's queues serve it again from the CommitLog past their end)."""
    corpus = CORPORA[0]
    store = copy_store(corpus / "store", tmp_path / "store")
    df = rmq(jvm, corpus, store)
    last = df.orderBy(F.desc("commitLogOffset")).select("topic", "queueId", "queueOffset").first()
    before = df.count()
    cq_dir = store / "consumequeue" / last.topic / str(last.queueId)
    at = last.queueOffset * 20                   # ConsumeQueue files are named by their first byte offset
    target = max((f for f in cq_dir.iterdir() if int(f.name) <= at), key=lambda f: int(f.name))
    with open(target, "r+b") as f:               # the unit becomes unwritten space (zeros)
        f.seek(at - int(target.name))
        f.write(bytes(20))
    df = rmq(jvm, corpus, store)
    grouped = {(r["topic"],): r["count"] for r in df.groupBy("topic").count().collect()}
    assert grouped == _read_counts(df, "topic")
    assert df.count() == before == sum(_read_counts(df, "topic").values())


def test_two_counts_on_one_dataframe(jvm):
    """No scan state survives a query: the filtered count does not leak into the next one."""
    corpus = CORPORA[0]
    expected = expected_messages(corpus / "expected")
    for d in (rmq(jvm, corpus, excludeInternalTopics="false"),
              rmq(jvm, corpus, topicPattern=".*", excludeInternalTopics="false")):
        tagged = d.where("tags = 'TagA'").count()
        total = d.count()
        assert tagged == sum(1 for m in expected.values() if m["tags"] == "TagA") > 0
        assert total == len(expected)


# --------------------------------------------------------------------------- metrics, parallelism

def _scan_metrics(spark, df) -> dict:
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        qe = df._jdf.queryExecution()
        df._jdf.collectAsList()
        plan = qe.executedPlan()
        leaves = plan.collectLeaves()
        for i in range(leaves.size()):
            node = leaves.apply(i)
            if node.nodeName().startswith("BatchScan"):
                metrics = node.metrics()
                return {k: metrics.apply(k).value() for k in ("recordsRead", "commitLogBytesRead", "unitsSkippedByTag")}
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")
    raise AssertionError("no BatchScan node")


def test_source_metrics(jvm):
    corpus = CORPORA[0]
    expected = expected_messages(corpus / "expected")
    topic_test = [m for k, m in expected.items() if k[0] == "TopicTest"]
    want = [m for m in topic_test if m["tags"] == "TagA"]
    m = _scan_metrics(jvm, rmq(jvm, corpus, topics="TopicTest").where("tags = 'TagA'").select("queueOffset"))
    # Only records whose unit tagsCode matches are read; the others are skipped on the ConsumeQueue.
    codes = {m["cq"]["tagsCode"] for m in want}
    candidates = [x for x in topic_test if x["cq"]["tagsCode"] in codes]
    assert m["recordsRead"] == len(candidates) >= len(want) > 0
    assert m["unitsSkippedByTag"] == len(topic_test) - len(candidates)
    assert m["commitLogBytesRead"] == sum(x["storeSize"] for x in candidates)


@pytest.mark.compat
def test_point_lookup_is_answered_on_the_driver_without_a_job(jvm):
    corpus = CORPORA[0]
    view = [v for v in read_jsonl(corpus / "expected" / "view.jsonl") if v["result"]["found"]]
    target = view[-1]["result"]["message"]
    df = rmq(jvm, corpus).where(f"msgId = '{target['msgId']}'").select("topic", "commitLogOffset", "body")
    plan = plan_of(df)                         # columns in table order: no projection on top
    assert "LocalTableScan" in plan and "BatchScan" not in plan, plan
    tracker = jvm.sparkContext.statusTracker()
    jvm.sparkContext.setJobGroup("lookup", "point lookup")
    try:
        rows = df.collect()
        assert list(tracker.getJobIdsForGroup("lookup")) == []
    finally:
        jvm.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert [(r.commitLogOffset, r.topic, bytes(r.body)) for r in rows] == [
        (target["commitLogOffset"], target["topic"], base64.b64decode(target["body"]))]


@pytest.mark.parametrize("corpus", CORPORA, ids=lambda p: p.name)
def test_msgid_lookups_equal_engine_view(jvm, corpus):
    """Every msgId the engine was asked to view: a decoded message is the one row, anything else (not
    found, or an offset that holds no record start, e.g. a DLedger entry header) gives no row.  The
    entry-header offset's engine answer is a 1-byte decodeError: rmqsource never serves header bytes."""
    views = read_jsonl(corpus / "expected" / "view.jsonl")
    ids = [v["msgId"] for v in views]
    df = rmq(jvm, corpus, includeTransactional="true", excludeInternalTopics="false").where(F.col("msgId").isin(ids))
    rows = df.select("msgId", "commitLogOffset", "storeSize", "body").collect()
    got = {}
    for r in rows:
        got.setdefault(r.msgId, []).append((r.commitLogOffset, r.storeSize, bytes(r.body or b"")))
    for v in views:
        m = v["result"].get("message") if v["result"]["found"] else None
        # (the msgId column is the record's own: a msgId with another host prefix is no row of it)
        want = [] if m is None or m.get("decodeError") or m["msgId"] != v["msgId"] else \
            [(m["commitLogOffset"], m["storeSize"], base64.b64decode(m["body"] or ""))]
        assert got.get(v["msgId"], []) == want, v["label"]


def test_topic_read_has_a_partition_per_queue_in_both_planners(jvm):
    from rmqsource.spark.options import parse_options
    from rmqsource.spark.planning import plan
    from rmqsource.spark.pushdown import Pushed
    corpus = CORPORA[0]
    queues = sorted({q for t, q, _ in expected_keys(corpus / "expected") if t == "TopicTest"})
    assert len(queues) >= 2
    assert rmq(jvm, corpus, topics="TopicTest").rdd.getNumPartitions() >= len(queues)
    opts = parse_options({"path": str(corpus / "store"), "config": str(corpus / "store.properties"),
                          "topics": "TopicTest"})
    assert len(plan(opts, Pushed())) >= len(queues)


# --------------------------------------------------------------------------- errors at planning

def test_bad_option_is_one_clear_error(jvm):
    with pytest.raises(Exception) as exc:
        rmq(jvm, CORPORA[0], topic="TopicTest").count()
    text = str(exc.value)
    assert "OptionError" in text and "unknown option 'topic'" in text
    assert "Traceback" not in text          # no Python worker in the way



# --------------------------------------------------------------------------- bodies, live stores

SMALL = {"mappedFileSizeCommitLog": "1048576", "mappedFileSizeConsumeQueue": "12000", "maxHashSlotNum": "64",
         "maxIndexNum": "256"}


def _small_config():
    from rmqsource.store.config import StoreConfig
    return StoreConfig.from_mapping(SMALL)


def _read(spark, store: Path, **options):
    r = spark.read.format("rmq")
    for k, v in {**SMALL, **options}.items():
        r = r.option(k, v)
    return r.load(str(store))


def _tag_of(i: int):
    """Tags of many kinds: null, long (past the intern table's length), not UTF-8 once stored, many distinct."""
    if i % 7 == 0:
        return None
    if i % 11 == 0:
        return "long-" + "x" * 70 + str(i % 3)
    if i % 13 == 0:
        return "bad-Q"                    # its Q becomes 0xff in the stored bytes
    return f"t{i % 150}"


def test_columns_of_shared_values_read_as_written(jvm, tmp_path):
    """topic, tags, transactionType, broker and storePath reach Spark as shared values (one per distinct
    value): more distinct tags than the intern table has slots, long ones, null ones and tags whose stored
    bytes are not UTF-8 (read as U+FFFD, as the Python path reads them) read as written, row by row and
    grouped."""
    from rmqsource.format.message import Message
    from rmqsource.store.writer import MessageStoreWriter
    store = tmp_path / "store"
    n = 3000
    with MessageStoreWriter(store, _small_config()) as w:
        w.put_messages([Message(topic=f"S{i % 3}", queue_id=i % 2, body=b"b", tags=_tag_of(i)) for i in range(n)])
    for segment in (store / "commitlog").iterdir():
        segment.write_bytes(segment.read_bytes().replace(b"bad-Q", b"bad-\xff"))
    expected, next_offset = {}, Counter()
    for i in range(n):
        queue = (f"S{i % 3}", i % 2)
        tag = _tag_of(i)
        expected[(*queue, next_offset[queue])] = "bad-\ufffd" if tag == "bad-Q" else tag
        next_offset[queue] += 1
    df = _read(jvm, store)
    rows = df.select("topic", "queueId", "queueOffset", "tags", "transactionType", "broker", "storePath").collect()
    assert {(r.topic, r.queueId, r.queueOffset): r.tags for r in rows} == expected
    assert {(r.transactionType, r.broker, r.storePath) for r in rows} == {("NOT_TYPE", rows[0].broker, str(store))}
    grouped = {(r.topic, r.tags): r.n for r in df.groupBy("topic", "tags").agg(F.count("*").alias("n")).collect()}
    assert grouped == Counter((topic, tag) for (topic, _, _), tag in expected.items())


def test_decompress_zlib_lz4_zstd_with_a_cap(jvm, tmp_path):
    lz4_frame = pytest.importorskip("lz4.frame")
    zstandard = pytest.importorskip("zstandard")
    from rmqsource.store.writer import Message, MessageStoreWriter
    plain = [f"payload {i} ".encode() * 40 for i in range(3)]
    stored = [(zlib.compress(plain[0]), 0x1 | (3 << 8)), (lz4_frame.compress(plain[1]), 0x1 | (1 << 8)),
              (zstandard.ZstdCompressor().compress(plain[2]), 0x1 | (2 << 8))]
    store = tmp_path / "store"
    with MessageStoreWriter(store, _small_config()) as w:
        for body, flag in stored:
            w.put_message(Message(topic="Zipped", queue_id=0, body=body, sys_flag=flag))
    rows = _read(jvm, store, decompress="true").select("queueOffset", "body").collect()
    assert [bytes(r.body) for r in sorted(rows)] == plain
    raw = _read(jvm, store).select("queueOffset", "body").collect()
    assert [bytes(r.body) for r in sorted(raw)] == [b for b, _ in stored]
    with pytest.raises(Exception, match="inflates past the cap of 100 bytes"):
        _read(jvm, store, decompress="true", maxInflatedBodyBytes="100").select("body").collect()


def test_store_being_written_shows_only_dispatched_records(jvm, tmp_path):
    """While a writer holds the lock, the scan stops at what dispatch has seen (torn tail ignored)."""
    from rmqsource.store.writer import Message, MessageStoreWriter
    store = tmp_path / "store"
    with MessageStoreWriter(store, _small_config()) as w:
        for i in range(50):
            w.put_message(Message(topic="Live", queue_id=i % 2, body=b"x" * 100, tags="t"))
        seg = sorted((store / "commitlog").iterdir())[0]
        with open(seg, "r+b") as f:       # a half-written record after the dispatched end
            data = f.read()
            last = len(data.rstrip(b"\0"))
            f.seek(last)
            f.write(struct.pack(">ii", 300, -626843481) + b"\x07" * 40)
        assert (store / "abort").exists()
        for opts in ({}, {"topics": "Live"}):
            df = _read(jvm, store, **opts)
            assert df.count() == 50, opts
            assert sorted(r.queueOffset for r in df.where("queueId = 1").select("queueOffset").collect()) == \
                list(range(25))


def test_inflate_caps_per_batch_and_per_task_in_both_modes(spark, tmp_path):
    from rmqsource.store.writer import Message, MessageStoreWriter
    store = tmp_path / "store"
    with MessageStoreWriter(store, _small_config()) as w:
        w.put_messages([Message(topic="Z", queue_id=0, body=zlib.compress(b"\0" * 300_000, 9), sys_flag=1)
                        for _ in range(12)])
    for topics in ({}, {"topics": "Z"}):
        rows = _read(spark, store, decompress="true", maxInflatedBatchBytes=str(1 << 20), **topics) \
            .select("queueOffset", "body").collect()
        assert sorted((r.queueOffset, len(r.body)) for r in rows) == [(i, 300_000) for i in range(12)]
        with pytest.raises(Exception, match="maxInflatedTaskBytes=2097152"):
            _read(spark, store, decompress="true", maxInflatedTaskBytes=str(2 << 20), **topics) \
                .select("body").collect()


def test_kafka_names_file_uris_and_stream_options_as_in_python(jvm):
    corpus = CORPORA[0]
    n = rmq(jvm, corpus, topics="TopicTest").count()
    assert rmq(jvm, corpus, subscribe="TopicTest").count() == n
    assert jvm.read.format("rmq").option("config", str(corpus / "store.properties")) \
        .option("subscribe", "TopicTest").load((corpus / "store").as_uri()).count() == n
    with pytest.raises(Exception, match="option maxMessagesPerTrigger is for streaming reads"):
        rmq(jvm, corpus, maxMessagesPerTrigger="10").count()
    with pytest.raises(Exception, match="the rmq source calls this consumerGroup"):
        rmq(jvm, corpus, **{"kafka.group.id": "g"}).count()


def test_first_consume_queue_file_cut_short_in_both_modes(spark, tmp_path):
    """A cut-short first ConsumeQueue file does not shrink the file size the others are read with:
    the whole-store scan reads every record; the queue scan fails naming the cut file and the offset in it."""
    from rmqsource.store.writer import Message, MessageStoreWriter
    store = tmp_path / "store"
    config = _small_config()
    per_file = config.mapped_file_size_consume_queue_bytes // 20
    with MessageStoreWriter(store, config) as w:
        w.put_messages([Message(topic="Cut", queue_id=0, body=b"x" * 50) for _ in range(3 * per_file)])
    first = sorted((store / "consumequeue" / "Cut" / "0").iterdir())[0]
    with open(first, "r+b") as f:
        f.truncate((per_file - 9) * 20)
    read = spark.read.format("rmq")        # no sizes given: they come from the files
    split = read.option("maxBytesPerPartition", "65536")             # cuts are placed by ConsumeQueue units
    assert split.load(str(store)).count() == 3 * per_file               # the CommitLog is whole
    with pytest.raises(Exception, match=rf"{first}, offset {(per_file - 9) * 20}: ConsumeQueue Cut:0 ends"):
        read.option("topics", "Cut").load(str(store)).select("queueOffset").collect()


@pytest.mark.parametrize("topics", ["OrderTopic", None])
def test_a_hole_of_a_sparse_commitlog_on_a_full_file_system_is_a_store_error(jvm, small_tmpfs, topics):
    """Touching a hole of a sparse CommitLog file through a map on a full tmpfs is SIGBUS, which the JVM
    raises as java.lang.InternalError (a fatal VirtualMachineError to Spark).  Here the end-of-CommitLog
    walk of planning starts at a hole (the last ConsumeQueue unit points into the sparse tail); the
    query fails with a StoreError naming the file instead."""
    import os
    import struct
    corpus = next(c for c in CORPORA if c.name == "rmq533-g2")
    store = copy_store(corpus / "store", small_tmpfs / "store")
    last = store / "commitlog" / "00000000000000786432"
    os.truncate(last, 1310720)                                # extended sparse: a hole of 1 MiB
    cq = store / "consumequeue" / "OrderTopic" / "0" / "00000000000000001200"
    units = bytearray(cq.read_bytes())
    n = max(i for i in range(len(units) // 20) if struct.unpack_from(">qi", units, i * 20)[1] > 0)
    struct.pack_into(">qi", units, n * 20, 786432 + 700000, 200)
    cq.write_bytes(bytes(units))
    filler = small_tmpfs / "filler"
    with open(filler, "wb", buffering=0) as f:                # fill the file system to the last block
        for chunk in (1 << 20, 4096, 1):
            try:
                while True:
                    f.write(bytes(chunk))
            except OSError:
                pass
    r = jvm.read.format("rmq").option("config", str(corpus / "store.properties"))
    if topics:
        r = r.option("topics", topics)
    try:
        with pytest.raises(Exception) as err:
            r.load(str(store)).write.format("noop").mode("overwrite").save()
    finally:
        filler.unlink()
    text = str(err.value)
    assert "io.rmqsource.errors.StoreError" in text and str(last) in text, text
    assert "java.lang.InternalError" not in text.split("Caused by")[0], text
