"""Stores on object storage: the JVM scan reading ``s3a://`` URIs from a real S3 API server on loopback.

s3proxy (a real S3 API server: a child JVM over a temp folder) serves a bucket holding every golden corpus
(``../shared/golden``), its crash cases and the DLedger corpora (``../shared/golden-dledger``); Spark reads
it through Hadoop's S3A connector of pyspark's own Hadoop version (tests/support/objectstore.py). The
judges: the real engines' ``expected/get`` answers, and the same read of the same bytes from the local disk
(rows, or the same error with the local path replaced by the object's URI). Marker ``objectstore``: not in
the default run; scripts/test_objectstore.sh runs this tier (boto3 is installed there; the s3proxy and S3A
jars are fetched from Maven Central once).
"""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from rmqsource.format.system_topics import is_internal_topic

from golden import GOLDEN_ROOT, case_id, copy_store, corpora, corpus_of, crash_cases, read_jsonl, written_prefix
from test_spark_batch import assert_rows_equal_engine_get, expected_messages, plan_of, rmq, rows_of

pytestmark = [pytest.mark.objectstore, pytest.mark.spark]

CORPORA = corpora()
CRASH = crash_cases()
DLEDGER_ROOT = GOLDEN_ROOT.parent / "golden-dledger"


def dledger_stores() -> list[tuple[Path, Path]]:
    """(corpus, store) of every DLedger corpus and its crash cases, when ../shared/golden-dledger is there."""
    if not DLEDGER_ROOT.is_dir():
        return []
    out = []
    for corpus in sorted(p for p in DLEDGER_ROOT.iterdir() if (p / "inputs.jsonl").is_file()):
        out.append((corpus, corpus / "store"))
        crash = corpus / "crash"
        if crash.is_dir():
            out.extend((corpus, c / "store") for c in sorted(crash.iterdir()) if (c / "store").is_dir())
    return out


# (corpus, store) pairs read from the bucket and from disk, which must agree.
SAME_AS_LOCAL = [(corpus_of(c), c / "store") for c in CRASH] + dledger_stores()


def object_key(store: Path) -> str:
    """Where a store under ../shared sits in the bucket: its path below ../shared."""
    return store.resolve().relative_to(GOLDEN_ROOT.parent.resolve()).as_posix()


def store_id(pair) -> str:
    return object_key(pair[1]).removesuffix("/store")


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def s3():
    try:
        import boto3  # noqa: F401
    except ImportError as e:       # a failure, not a skip: the tier would pass without reading a byte
        pytest.fail(f"{e.name} is missing: scripts/test_objectstore.sh installs boto3")
    from objectstore import S3Server
    server = S3Server()
    try:
        for store in [c / "store" for c in CORPORA] + [s for _, s in SAME_AS_LOCAL]:
            server.upload_dir(store, object_key(store))
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def s3_spark(request):
    """A session reading the bucket through S3A with the JVM scan (the rmq jar and the S3A jars)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime: Spark cannot start")
    from pyspark import SparkContext
    from rmqsource.spark.jar import session_jar
    jar = session_jar()
    if jar is None:
        pytest.skip("RMQ_SPARK_MODE=python: the pure Python source reads local paths only "
                    "(tests/test_options_hints.py checks its refusal of object-store URIs)")
    if SparkContext._active_spark_context is not None:
        raise pytest.UsageError("the object-store tier starts its own Spark session (S3A jars on spark.jars): "
                                "run it alone, `pytest -m objectstore` (scripts/test_objectstore.sh)")
    from objectstore import spark_session
    s3 = request.getfixturevalue("s3")       # after the checks: no server or uploads for a skipped tier
    session = spark_session(s3.endpoint, "rmqsource-objectstore-tests", jar)
    yield session
    session.stop()


def uri_of(s3, store: Path) -> str:
    return s3.uri(object_key(store))


# --------------------------------------------------------------------------- outcomes

RMQ_ERROR_LINE = re.compile(r"((?:io\.rmqsource\.spark\.errors|rmqsource\.errors)\.(\w+): [^\n]*)")


def error_text(exc: BaseException) -> str:
    """A Spark failure's message and its JVM stack trace with every cause (a failed stream's message
    alone does not name the exception's class)."""
    return f"{exc}\n{getattr(exc, '_stackTrace', '') or ''}"


def rmq_error_line(exc: BaseException) -> str:
    """The first line of the rmq error inside a Spark failure (Java or Python class, message)."""
    m = RMQ_ERROR_LINE.search(error_text(exc))
    assert m, f"not a typed rmq error: {error_text(exc)[-3000:]}"
    return re.sub(r"^(io\.rmqsource\.spark\.errors|rmqsource\.errors)\.", "", m.group(1)).strip()


def outcome(df):
    """Rows without ``storePath`` (ordered), or the rmq error line."""
    try:
        rows = rows_of(df)
    except Exception as e:  # noqa: BLE001 - the error itself is the outcome compared
        return "error", rmq_error_line(e)
    for r in rows:
        r.pop("storePath", None)
    return "rows", sorted(rows, key=lambda r: (r["commitLogOffset"], r["topic"], r["queueId"], r["queueOffset"] or 0))


def as_remote(result, local: Path, uri: str):
    """A local outcome as it reads from the bucket: the store's path in error texts becomes its URI."""
    kind, value = result
    return (kind, value.replace(str(local), uri)) if kind == "error" else result


# --------------------------------------------------------------------------- golden answers

@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
@pytest.mark.parametrize("mode", ["whole_store", "topics"])
def test_golden_corpus_in_a_bucket_reads_equal_engine_get(s3_spark, s3, corpus, mode):
    expected = expected_messages(corpus / "expected")
    opts = {} if mode == "whole_store" else {"topicPattern": ".*", "maxRecordsPerPartition": "50"}
    opts["excludeInternalTopics"] = "false"          # every record the engine serves (SCHEDULE_TOPIC_XXXX, %RETRY%)
    uri = uri_of(s3, corpus / "store")
    rows = rows_of(rmq(s3_spark, corpus, uri, **opts))
    assert_rows_equal_engine_get(rows, expected)
    assert {r["storePath"] for r in rows} == {uri}


@pytest.mark.parametrize("pair", SAME_AS_LOCAL, ids=store_id)
def test_crash_and_dledger_stores_read_from_a_bucket_as_from_disk(s3_spark, s3, pair):
    corpus, store = pair
    uri = uri_of(s3, store)
    for opts in ({}, {"topicPattern": ".*"}):
        local = outcome(rmq(s3_spark, corpus, store, failOnDataLoss="false", **opts))
        remote = outcome(rmq(s3_spark, corpus, uri, failOnDataLoss="false", **opts))
        assert remote == as_remote(local, store, uri), (opts, remote[1] if remote[0] == "error" else len(remote[1]))


# --------------------------------------------------------------------------- pushdown, lookups, counts

@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_tag_filters_equal_engine_and_local_reads(s3_spark, s3, corpus):
    expected = expected_messages(corpus / "expected")
    uri = uri_of(s3, corpus / "store")
    tags = Counter(v["tags"] for v in expected.values() if v["tags"])
    for tag, _ in tags.most_common(3):
        want = sorted(k for k, v in expected.items() if v["tags"] == tag)
        for opts in ({"excludeInternalTopics": "false"}, {"topics": ",".join(sorted({k[0] for k in want}))}):
            df = rmq(s3_spark, corpus, uri, **opts).where(f"tags = '{tag}'")
            got = sorted((r.topic, r.queueId, r.queueOffset) for r in df.select("topic", "queueId", "queueOffset").collect())
            assert got == want, (tag, opts)
            assert f"EqualTo(tags,{tag})" in plan_of(df)
            local = rmq(s3_spark, corpus, corpus / "store", **opts).where(f"tags = '{tag}'")
            assert sorted(tuple(r) for r in df.select("commitLogOffset", "tagsCode").collect()) == \
                sorted(tuple(r) for r in local.select("commitLogOffset", "tagsCode").collect())


def s3a_counter(spark, uri: str, name: str) -> int:
    """One counter of S3A's IOStatistics for the bucket of ``uri`` (the executors run in this JVM)."""
    path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(uri)
    counters = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).getIOStatistics().counters()
    return int(counters.get(name) or 0)


def test_tag_filter_records_come_by_vectored_reads_of_merged_ranges(s3_spark, s3):
    """pyspark's Hadoop has vectored reads: the records a tag filter selects over several queues are
    fetched by them, in merged ranges: far fewer GETs than records."""
    corpus = CORPORA[0]
    uri = uri_of(s3, corpus / "store")
    expected = expected_messages(corpus / "expected")
    tag, n = Counter(v["tags"] for v in expected.values() if v["tags"]).most_common(1)[0]
    df = rmq(s3_spark, corpus, uri, topicPattern=".*", excludeInternalTopics="false").where(f"tags = '{tag}'") \
        .select("commitLogOffset", "body")
    assert len(df.collect()) == n            # the executor keeps the ConsumeQueue files it read: the next
    vectored, gets = s3a_counter(s3_spark, uri, "stream_read_vectored_operations"), s3.requests().get("GetObject", 0)
    assert len(df.collect()) == n            # run's GETs are the CommitLog's and the planning's
    assert s3a_counter(s3_spark, uri, "stream_read_vectored_operations") > vectored
    assert s3.requests().get("GetObject", 0) - gets < n / 10, (n, s3.requests())


def test_a_dense_tag_filter_fetches_each_commitlog_byte_once(s3_spark, s3, tmp_path):
    """600,000 small records in 4 queues: a task's CommitLog span holds more units than the topic reader
    takes at once (262,144), yet its slices are whole spans, so the tag query fetches the CommitLog once
    (slices cut by the cap fetched it twice). Read from a bucket of its own through S3A's classic stream,
    whose GETs are the query's own (the default stream keeps blocks in a per-JVM cache)."""
    from rmqsource.store.config import StoreConfig
    from rmqsource.store.reader import MessageStoreReader
    from rmqsource.store.writer import Message, MessageStoreWriter
    bucket, segment = "rmq-dense", 16 << 20
    store, props = tmp_path / "store", tmp_path / "store.properties"
    props.write_text(f"mappedFileSizeCommitLog={segment}\n")
    with MessageStoreWriter(store, StoreConfig().with_overrides({"mappedFileSizeCommitLog": str(segment)})) as w:
        for start in range(0, 600_000, 10_000):
            w.put_messages([Message(topic="Dense", queue_id=i % 4, body=b"x", tags=f"t{i % 10}")
                            for i in range(start, start + 10_000)])
    with MessageStoreReader(store) as r:
        commit_log_bytes = r.commit_log_max_offset
    s3.client.create_bucket(Bucket=bucket)
    s3_spark.sparkContext._jsc.hadoopConfiguration().set(f"fs.s3a.bucket.{bucket}.input.stream.type", "classic")
    uri = s3.upload_dir(store, "dense/store", bucket)

    def tagged(path):
        return s3_spark.read.format("rmq").option("config", str(props)).load(str(path)).where("tags = 't3'") \
            .selectExpr("count(*)", "sum(commitLogOffset)", "sum(queueOffset)", "sum(hash(body))").collect()

    sent = s3.bytes_sent()
    remote = tagged(uri)
    sent = s3.bytes_sent() - sent
    assert remote == tagged(store) and remote[0][0] == 60_000
    consume_queues = 600_000 * 20
    assert sent < 1.4 * commit_log_bytes + consume_queues, (sent, commit_log_bytes)


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_msgid_and_uniqkey_lookups_equal_local(s3_spark, s3, corpus):
    uri = uri_of(s3, corpus / "store")
    expected = expected_messages(corpus / "expected")
    found = [v["result"]["message"] for v in read_jsonl(corpus / "expected" / "view.jsonl") if v["result"]["found"]]
    for target in (found[0], found[-1]):
        df = rmq(s3_spark, corpus, uri, excludeInternalTopics="false").where(f"msgId = '{target['msgId']}'")
        rows = df.select("commitLogOffset", "msgId", "body").collect()
        assert [(r.commitLogOffset, r.msgId) for r in rows] == [(target["commitLogOffset"], target["msgId"])]
        local = rmq(s3_spark, corpus, corpus / "store", excludeInternalTopics="false").where(f"msgId = '{target['msgId']}'")
        assert rows == local.select("commitLogOffset", "msgId", "body").collect()
        # A lookup runs on the driver where it runs for a local store (no scan of the store).
        assert ("LocalTableScan" in plan_of(df)) == ("LocalTableScan" in plan_of(local))
    by_key: dict[str, list] = {}
    for k, v in expected.items():
        if v["properties"].get("UNIQ_KEY"):
            by_key.setdefault(v["properties"]["UNIQ_KEY"], []).append(k)
    key, hits = max(by_key.items(), key=lambda kv: len(kv[1]))
    got = rmq(s3_spark, corpus, uri, excludeInternalTopics="false").where(f"uniqKey = '{key}'").select("topic", "queueId", "queueOffset").collect()
    assert sorted(tuple(r) for r in got) == sorted(hits)
    assert rmq(s3_spark, corpus, uri).where("msgId = '0A00000500002A9F00000000FFFFFFFF'").count() == 0


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_counts_equal_engine_and_are_pushed_down(s3_spark, s3, corpus):
    uri = uri_of(s3, corpus / "store")
    want = Counter((t, q) for t, q, _ in expected_messages(corpus / "expected"))
    df = rmq(s3_spark, corpus, uri, topicPattern=".*", excludeInternalTopics="false")
    counted = df.groupBy("topic", "queueId").count()
    assert "PushedAggregation" in plan_of(counted), plan_of(counted)
    assert {(r.topic, r.queueId): r["count"] for r in counted.collect()} == {k: v for k, v in want.items() if v}
    assert rmq(s3_spark, corpus, uri, excludeInternalTopics="false").count() == sum(want.values())
    assert rmq(s3_spark, corpus, uri).count() == sum(n for (t, _), n in want.items() if not is_internal_topic(t))
    assert df.count() == sum(want.values())


def test_explain_shows_the_jvm_scan_with_pushed_filters(s3_spark, s3):
    corpus = CORPORA[0]
    df = rmq(s3_spark, corpus, uri_of(s3, corpus / "store")).where("tags = 'TagA' and queueId = 1") \
        .select("topic", "queueOffset")
    plan = plan_of(df)
    assert "RmqScan(JVM)" in plan, plan
    assert "EqualTo(tags,TagA)" in plan and "EqualTo(queueId,1)" in plan, plan
    assert "ReadSchema: struct<topic:string,queueOffset:bigint>" in plan, plan
    want = sorted((k[0], k[2]) for k, v in expected_messages(corpus / "expected").items()
                  if v["tags"] == "TagA" and k[1] == 1 and not is_internal_topic(k[0]))
    assert sorted(tuple(r) for r in df.collect()) == want and want


# --------------------------------------------------------------------------- bad objects, missing buckets

def test_truncated_segment_object_fails_with_the_typed_error_naming_uri_and_offset(s3_spark, s3, tmp_path):
    corpus = CORPORA[0]
    store = copy_store(corpus / "store", tmp_path / "store")
    segments = sorted((store / "commitlog").iterdir())
    victim = segments[1]                      # a segment followed by another: never a sync in progress
    os.truncate(victim, 100_000)
    uri = s3.upload_dir(store, "truncated/store")
    for opts in ({}, {"topicPattern": ".*"}):
        local = outcome(rmq(s3_spark, corpus, store, **opts))
        remote = outcome(rmq(s3_spark, corpus, uri, **opts))
        assert local[0] == "error", local
        assert re.search(rf"{re.escape(uri)}/commitlog/{victim.name}, offset \d+", remote[1]), remote
        # Which cut record a failed job names depends on which of its tasks failed first: the same
        # error, the same object, possibly another offset.
        assert re.sub(r"\d+", "N", remote[1]) == re.sub(r"\d+", "N", as_remote(local, store, uri)[1])


def test_a_last_segment_cut_by_a_sync_in_progress_reads_as_from_disk(s3_spark, s3, tmp_path):
    corpus = CORPORA[0]
    store = copy_store(corpus / "store", tmp_path / "store")
    last = sorted((store / "commitlog").iterdir())[-1]
    os.truncate(last, 100_000)
    uri = s3.upload_dir(store, "cut-last/store")
    for opts in ({}, {"topicPattern": ".*"}):
        local = outcome(rmq(s3_spark, corpus, store, failOnDataLoss="false", **opts))
        assert outcome(rmq(s3_spark, corpus, uri, failOnDataLoss="false", **opts)) == as_remote(local, store, uri)


def test_a_missing_store_prefix_fails_as_a_missing_local_folder(s3_spark, s3, tmp_path):
    uri = s3.uri("no/such/store")
    local = outcome(s3_spark.read.format("rmq").load(str(tmp_path / "store")))
    assert local[0] == "error", local
    assert outcome(s3_spark.read.format("rmq").load(uri)) == as_remote(local, tmp_path / "store", uri)


def test_a_missing_bucket_is_one_line_naming_the_uri(s3_spark, s3):
    uri = "s3a://rmq-no-such-bucket/broker-a/store"
    with pytest.raises(Exception) as exc:
        s3_spark.read.format("rmq").load(uri).count()
    line = rmq_error_line(exc.value)
    assert uri in line, line
    assert line.startswith(("NotAStoreError:", "StoreError:")), line     # a store problem, not a usage one
    # The whole message is that line: the JVM trace goes on with the stack, not with more text.
    assert re.search(re.escape(line.split(": ", 1)[1]) + r"\n\s+at ", error_text(exc.value)), line


# --------------------------------------------------------------------------- streams

def _write(store: Path, config, start: int, n: int) -> None:
    from rmqsource.store.writer import Message, MessageStoreWriter
    with MessageStoreWriter(store, config) as w:
        for i in range(start, start + n):
            w.put_message(Message(topic="Sync", queue_id=i % 2, body=f"m{i}".encode() * 20, tags=f"t{i % 3}",
                                  keys=f"k{i}"))


def _whole_files(store: Path, config) -> dict[str, bytes]:
    return {p.relative_to(store).as_posix(): p.read_bytes() for p in sorted(store.rglob("*"))
            if p.is_file() and p.name != "lock"}


@pytest.mark.parametrize("objects", ["written-bytes", "whole-files"])
def test_stream_picks_up_records_of_objects_reuploaded_longer(s3_spark, s3, tmp_path, objects):
    """A sync job replaces the last CommitLog and ConsumeQueue objects (object stores never append):
    the next trigger of a stream over the bucket reads the records they gained, once each."""
    from rmqsource.store.config import StoreConfig
    config = StoreConfig().with_overrides({"mappedFileSizeCommitLog": str(64 * 1024),
                                           "mappedFileSizeConsumeQueue": str(300 * 20),
                                           "maxHashSlotNum": "64", "maxIndexNum": "256"})
    props = tmp_path / "store.properties"
    props.write_text("mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=6000\n"
                     "maxHashSlotNum=64\nmaxIndexNum=256\n")
    store = tmp_path / "store"
    snapshot = written_prefix if objects == "written-bytes" else _whole_files
    prefix = f"stream-{objects}/store"
    uploaded: dict[str, bytes] = {}

    def sync() -> list[str]:
        changed = [rel for rel, data in snapshot(store, config).items() if uploaded.get(rel) != data]
        for rel in changed:
            data = snapshot(store, config)[rel]
            s3.put_bytes(f"{prefix}/{rel}", data)
            uploaded[rel] = data
        return changed

    _write(store, config, 0, 300)             # 300 records: past the first 64 KiB segment
    sync()
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def run_available_now() -> None:
        q = (s3_spark.readStream.format("rmq").option("config", str(props)).option("topics", "Sync")
             .option("startingOffsets", "earliest").load(s3.uri(prefix)).select("queueId", "queueOffset", "body")
             .writeStream.format("parquet").option("checkpointLocation", str(ckpt))
             .trigger(availableNow=True).start(str(out)))
        try:
            assert q.awaitTermination(300), "the availableNow stream did not finish in 300 s"
        finally:
            q.stop()
        if q.exception() is not None:
            raise q.exception()

    run_available_now()
    assert s3_spark.read.parquet(str(out)).count() == 300
    _write(store, config, 300, 120)
    changed = sync()
    assert any(c.startswith("commitlog/") for c in changed) and any(c.startswith("consumequeue/") for c in changed)
    run_available_now()
    rows = s3_spark.read.parquet(str(out)).select("queueId", "queueOffset", "body").collect()
    keys = [(r.queueId, r.queueOffset) for r in rows]
    assert len(keys) == len(set(keys)) == 420
    assert sorted(keys) == sorted((i % 2, i // 2) for i in range(420))
    assert sorted(bytes(r.body) for r in rows) == sorted(f"m{i}".encode() * 20 for i in range(420))


# --------------------------------------------------------------------------- read-only

def _run_to_end(start) -> None:
    """Starts a streaming query, waits for its end and raises what failed it (it is stopped either way)."""
    q = start()
    try:
        q.awaitTermination(300)
        if q.exception() is not None:
            raise q.exception()
    finally:
        q.stop()


def _one_line_refusal(exc: BaseException, uri: str) -> str:
    line = rmq_error_line(exc)
    assert uri in line and "read-only" in line, line
    return line


def test_batch_write_to_a_bucket_is_refused_in_one_line(s3_spark, s3):
    corpus = CORPORA[0]
    df = rmq(s3_spark, corpus).limit(3)
    target = s3.uri("written/store")
    with pytest.raises(Exception) as exc:
        df.write.format("rmq").mode("append").save(target)
    _one_line_refusal(exc.value, target)
    assert s3.keys("written/") == []


def test_stream_sink_to_a_bucket_is_refused_in_one_line(s3_spark, s3, tmp_path):
    corpus = CORPORA[0]
    target = s3.uri("streamed/store")
    src = s3_spark.readStream.format("rmq").option("config", str(corpus / "store.properties")) \
        .option("topics", "TopicTest").load(str(corpus / "store"))
    with pytest.raises(Exception) as exc:
        _run_to_end(lambda: src.writeStream.format("rmq").option("checkpointLocation", str(tmp_path / "ckpt"))
                    .trigger(availableNow=True).start(target))
    _one_line_refusal(exc.value, target)
    assert s3.keys("streamed/") == []


def test_consumer_group_commits_to_a_bucket_are_refused_in_one_line(s3_spark, s3, tmp_path):
    corpus = CORPORA[0]
    uri = uri_of(s3, corpus / "store")
    before = sorted(s3.keys(object_key(corpus / "store") + "/config/"))
    with pytest.raises(Exception) as exc:
        _run_to_end(lambda: s3_spark.readStream.format("rmq").option("config", str(corpus / "store.properties"))
                    .option("topics", "TopicTest").option("consumerGroup", "analytics")
                    .option("startingOffsets", "group").load(uri)
                    .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ckpt"))
                    .trigger(availableNow=True).start())
    _one_line_refusal(exc.value, uri)
    assert sorted(s3.keys(object_key(corpus / "store") + "/config/")) == before
