"""Streaming source (``spark.readStream.format("rmq")``), consumer-group commits and lag.

Real Spark session (conftest ``spark`` fixture), real store files written by
the store writer, producers in separate processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from rmqsource.errors import OptionError
from rmqsource.io.segments import list_segments
from rmqsource.store.config import StoreConfig
from rmqsource.store.consumer_offsets import ConsumerOffsets
from rmqsource.store.lag import group_lag, lag_rows_text
from rmqsource.store.reader import GetMessageStatus, MessageStoreReader
from rmqsource.store.writer import MessageExtBrokerInner, MessageStoreWriter

HERE = os.path.dirname(os.path.abspath(__file__))


# --------------------------------------------------------------------------- helpers

def fill(root, n, *, topic="T", queues=4, start=0, config=None, tags=None, weights=None, body_size=0):
    """Append ``n`` messages with bodies ``b"<i>"`` (i from ``start``); queue = i % queues (or by weights)."""
    msgs = []
    for i in range(start, start + n):
        if weights:
            qid = 0
            acc = i % sum(weights)
            for q, wgt in enumerate(weights):
                if acc < wgt:
                    qid = q
                    break
                acc -= wgt
        else:
            qid = i % queues
        body = str(i).encode()
        if body_size:
            body = body.ljust(body_size, b".")
        msgs.append(MessageExtBrokerInner(topic=topic, queue_id=qid, body=body,
                                          tags=(tags[i % len(tags)] if tags else None)))
    with MessageStoreWriter(root, config) as w:
        for k in range(0, len(msgs), 5000):
            results = w.put_messages(msgs[k:k + 5000])
            assert all(r.ok for r in results)


PRODUCER = textwrap.dedent("""
    import sys, time
    from rmqsource.store.writer import MessageStoreWriter, MessageExtBrokerInner
    root, total, rate, queues = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    first = int(sys.argv[5])
    chunk = max(1, int(rate / 20))
    t0 = time.monotonic()
    with MessageStoreWriter(root, lock_timeout_s=30) as w:
        i = 0
        while i < total:
            n = min(chunk, total - i)
            res = w.put_messages([MessageExtBrokerInner(topic="T", queue_id=(i + k) % queues,
                                                        body=str(first + i + k).encode(), tags="TagA")
                                  for k in range(n)])
            assert all(r.ok for r in res), res[0]
            i += n
            delay = t0 + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    print("done", i, flush=True)
""")


def start_producer(root, total, rate, queues=4, first=0):
    return subprocess.Popen([sys.executable, "-c", PRODUCER, str(root), str(total), str(rate), str(queues),
                             str(first)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stream(spark, root, **options):
    r = spark.readStream.format("rmq")
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load(str(root))


def run_available_now(spark, df, ckpt, timeout=240):
    sizes = []

    def each(batch_df, batch_id):
        sizes.append(batch_df.count())

    q = df.writeStream.foreachBatch(each).option("checkpointLocation", str(ckpt)) \
        .trigger(availableNow=True).start()
    assert q.awaitTermination(timeout), "query did not finish"
    if q.exception():
        raise AssertionError(str(q.exception()))
    return sizes, q


def python_reader(root, **options):
    from rmqsource.spark.stream import RmqStreamReader
    opts = {"path": str(root)}
    opts.update({k: str(v) for k, v in options.items()})
    return RmqStreamReader(opts)


@pytest.fixture(params=["python", pytest.param("jvm", marks=pytest.mark.spark)])
def reader_for(request):
    """The stream source's driver API in both implementations: RmqStreamReader, RmqMicroBatchStream (py4j)."""
    if request.param == "python":
        return python_reader
    from jvm_twins import JvmStreamReader, jvm_or_skip
    jvm = jvm_or_skip(request)
    return lambda root, **options: JvmStreamReader(jvm, root, **options)


# --------------------------------------------------------------------------- pure logic (no Spark)

def test_split_budget_is_proportional_and_exact():
    from rmqsource.spark.stream_admission import split_budget
    avail = {("T", 0): 3000, ("T", 1): 1000, ("T", 2): 0, ("U", 0): 1}
    out = split_budget(avail, 1000)
    assert sum(out.values()) == 1000
    assert out[("T", 0)] in (749, 750, 751) and out[("T", 1)] in (249, 250, 251)
    assert out[("T", 2)] == 0 and all(out[k] <= avail[k] for k in avail)
    assert split_budget(avail, 10_000) == avail
    assert split_budget(avail, 1000) == out                      # deterministic


def test_offsets_json_has_stable_order():
    from rmqsource.spark.stream_offsets import offsets_from_json, offsets_to_json
    d = {("b", 10): 1, ("a", 2): 5, ("b", 9): 3, ("a", 0): 0}
    js = offsets_to_json(d)
    assert json.dumps(js) == '{"a": {"0": 0, "2": 5}, "b": {"9": 3, "10": 1}}'
    assert offsets_from_json(js) == d
    assert json.dumps(offsets_to_json(offsets_from_json(json.loads(json.dumps(js))))) == json.dumps(js)


def test_stream_options_are_validated(tmp_path):
    from rmqsource.spark.stream_options import parse_duration_ms, parse_stream_options, parse_sub_expression
    fill(tmp_path, 4)
    with pytest.raises(OptionError, match="topics, topicPattern or queues"):
        parse_stream_options({"path": str(tmp_path)})
    with pytest.raises(OptionError, match="consumerGroup"):
        parse_stream_options({"path": str(tmp_path), "topics": "T", "startingOffsets": "group"})
    with pytest.raises(OptionError, match="endingoffsets"):
        parse_stream_options({"path": str(tmp_path), "topics": "T", "endingOffsets": "latest"})
    with pytest.raises(OptionError, match="maxMessagesPerTrigger"):
        parse_stream_options({"path": str(tmp_path), "topics": "T", "maxMessagesPerTrigger": "0"})
    o = parse_stream_options({"path": str(tmp_path), "topics": "T", "maxMessagesPerTrigger": "10",
                              "subExpression": "TagA || TagB", "minMessagesPerTrigger": "5",
                              "maxTriggerDelay": "2s"})
    assert o.max_messages == 10 and o.sub_tags == {"TagA", "TagB"} and o.max_trigger_delay_ms == 2000
    assert parse_sub_expression("*") is None and parse_duration_ms("x", "1m") == 60_000


BAD_STREAM_OPTIONS = [
    {}, {"topics": "T", "startingOffsets": "group"}, {"topics": "T", "endingOffsets": "latest"},
    {"topics": "T", "maxMessagesPerTrigger": "0"}, {"topics": "T", "maxBytesPerTrigger": "x"},
    {"topics": "T", "maxTriggerDelay": "5s"}, {"topics": "T", "minMessagesPerTrigger": "9", "maxTriggerDelay": "soon"},
    {"topics": "T", "minMessagesPerTrigger": "10", "maxMessagesPerTrigger": "5"},
    {"topics": "T", "subExpression": "||"}, {"topics": "T", "consumerGroup": "a@b"},
    {"topics": "T", "startingOffsets": "earliest", "startingTimestamp": "5"},
    {"topics": "T", "startingTimestamp": "-1"}, {"topics": "T", "startingOffsetsFallback": "middle"},
    {"topics": "T", "reportLatestOffset": "maybe"}, {"topics": "T", "startingOffsets": '{"T": {"9": 0}}'},
    {"topics": "T", "startingOffsets": '{"T": {"0": 99}}'}, {"topics": "T", "tpoics": "T"},
    {"topics": "T", "kafka.bootstrap.servers": "h:9092"}, {"subscribe": "T", "failOnDataLoss": "maybe"},
    {"topics": "T", "startingOffsets": "group", "consumerGroup": "nobody"},
]


@pytest.mark.parametrize("options", BAD_STREAM_OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_bad_stream_options_fail_alike_in_both(tmp_path, reader_for, options):
    fill(tmp_path, 4)

    def message(make):
        with pytest.raises(OptionError) as info:
            make(tmp_path, **options).initialOffset()
        return str(info.value)

    assert message(reader_for) == message(python_reader)



def test_v1_group_commit_beside_config_rdb_is_refused_alike_in_both(tmp_path, reader_for):
    """configManagerVersion=v1 with consumerGroup on a store that has config/rdb/ (readers read the offsets there,
    the commit would go to consumerOffset.json): refused in one line before anything is read; commitOffsets=false
    commits nothing and is read as before."""
    pytest.importorskip("rocksdict")
    fill(tmp_path, 8)
    v2 = StoreConfig.from_mapping({"configManagerVersion": "v2"})
    ConsumerOffsets(tmp_path, config=v2).commit("g1", {"T": {0: 1}})
    options = {"topics": "T", "consumerGroup": "g1", "configManagerVersion": "v1"}

    def message(make):
        with pytest.raises(OptionError) as info:
            make(tmp_path, **options).initialOffset()
        return str(info.value)

    text = message(reader_for)
    assert text == message(python_reader)
    assert text.startswith("configManagerVersion=v1, but ") and "config-v2 broker" in text and "\n" not in text
    assert not (tmp_path / "config" / "consumerOffset.json").exists()
    start = reader_for(tmp_path, **options, startingOffsets="group", commitOffsets="false").initialOffset()
    assert start["T"]["0"] == 1

def test_initial_offsets_and_growth_are_tracked(tmp_path, reader_for):
    from pyspark.sql.streaming.datasource import ReadAllAvailable
    fill(tmp_path, 40)
    latest = reader_for(tmp_path, topics="T")
    assert latest.initialOffset() == {"T": {"0": 10, "1": 10, "2": 10, "3": 10}}
    earliest = reader_for(tmp_path, topics="T", startingOffsets="earliest")
    start = earliest.initialOffset()
    assert start == {"T": {"0": 0, "1": 0, "2": 0, "3": 0}}
    js = reader_for(tmp_path, topics="T", startingOffsets='{"T": {"1": 3, "2": -2}}').initialOffset()
    assert js == {"T": {"0": 10, "1": 3, "2": 0, "3": 10}}
    # new messages and a new topic matching the pattern are picked up between batches
    r = reader_for(tmp_path, topicPattern="T.*", startingOffsets="earliest")
    s0 = r.initialOffset()
    e0 = r.latestOffset(s0, ReadAllAvailable())
    assert e0 == {"T": {"0": 10, "1": 10, "2": 10, "3": 10}}
    fill(tmp_path, 8, start=40)
    fill(tmp_path, 3, topic="T2", queues=2)
    e1 = r.latestOffset(e0, ReadAllAvailable())
    assert e1 == {"T": {"0": 12, "1": 12, "2": 12, "3": 12}, "T2": {"0": 2, "1": 1}}
    parts = r.partitions(e0, e1)
    assert sorted((p.topic, p.queue_id, p.start, p.end) for p in parts) == [
        ("T", 0, 10, 12), ("T", 1, 10, 12), ("T", 2, 10, 12), ("T", 3, 10, 12), ("T2", 0, 0, 2), ("T2", 1, 0, 1)]
    rows = sum(b.num_rows for p in parts for b in r.read(p))
    assert rows == 11
    assert r.latestOffset(e1, ReadAllAvailable()) == e1              # nothing new: start returned


def test_available_now_stops_at_offsets_present_at_start(tmp_path, reader_for):
    from pyspark.sql.streaming.datasource import ReadMaxRows
    fill(tmp_path, 100)
    r = reader_for(tmp_path, topics="T", startingOffsets="earliest", maxMessagesPerTrigger=30)
    start = r.initialOffset()
    r.prepareForTriggerAvailableNow()
    fill(tmp_path, 100, start=100)                                    # arrives after the query started
    fill(tmp_path, 10, topic="T9", queues=1)
    seen = 0
    for _ in range(20):
        end = r.latestOffset(start, ReadMaxRows(30))
        if end == start:
            break
        seen += sum(end["T"][q] - start["T"][q] for q in end["T"])
        assert sum(end["T"][q] - start["T"][q] for q in end["T"]) <= 30
        start = end
    assert start == {"T": {"0": 25, "1": 25, "2": 25, "3": 25}} and seen == 100


def test_min_messages_waits_up_to_max_trigger_delay(tmp_path, reader_for):
    from pyspark.sql.streaming.datasource import ReadMinRows
    fill(tmp_path, 8)
    r = reader_for(tmp_path, topics="T", startingOffsets="earliest", minMessagesPerTrigger=100,
                   maxTriggerDelay="1500ms")
    assert isinstance(r.getDefaultReadLimit(), ReadMinRows)
    start = r.initialOffset()
    t0 = time.monotonic()
    assert r.latestOffset(start, r.getDefaultReadLimit()) == start       # 8 < 100: wait
    fill(tmp_path, 200, start=8)
    end = r.latestOffset(start, r.getDefaultReadLimit())                 # 208 >= 100: go at once
    assert sum(end["T"].values()) == 208
    fill(tmp_path, 4, start=208)
    assert r.latestOffset(end, r.getDefaultReadLimit()) == end           # 4 < 100: wait ...
    while time.monotonic() - t0 < 1.6:
        time.sleep(0.1)
    time.sleep(1.6)
    end2 = r.latestOffset(end, r.getDefaultReadLimit())                  # ... but not past the delay
    assert sum(end2["T"].values()) == 212


def test_max_bytes_per_trigger(tmp_path, reader_for):
    from pyspark.sql.streaming.datasource import ReadMaxBytes
    fill(tmp_path, 400, body_size=1000)
    r = reader_for(tmp_path, topics="T", startingOffsets="earliest", maxBytesPerTrigger=50_000)
    assert isinstance(r.getDefaultReadLimit(), ReadMaxBytes)
    start = r.initialOffset()
    end = r.latestOffset(start, r.getDefaultReadLimit())
    n = sum(end["T"].values())
    assert 30 <= n <= 50                                     # ~1.1 KB records, 50 KB budget
    parts = r.partitions(start, end)
    total_bytes = sum(int(s) for p in parts for b in r.read(p) for s in b.column("storeSize").to_pylist())
    assert total_bytes <= 50_000


def test_sub_expression_filters_by_tag(tmp_path, reader_for):
    from pyspark.sql.streaming.datasource import ReadAllAvailable
    fill(tmp_path, 60, tags=["TagA", "TagB", "TagC"])
    r = reader_for(tmp_path, topics="T", startingOffsets="earliest", subExpression="TagA || TagC")
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    rows = [t for p in r.partitions(start, end) for b in r.read(p) for t in b.column("tags").to_pylist()]
    assert len(rows) == 40 and set(rows) == {"TagA", "TagC"}


# --------------------------------------------------------------------------- Spark queries

@pytest.mark.spark
def test_max_messages_per_trigger_caps_every_batch(spark, tmp_path):
    root = tmp_path / "store"
    fill(root, 5000, weights=[3, 1, 1, 1])                   # uneven backlog
    df = stream(spark, root, topics="T", startingOffsets="earliest", maxMessagesPerTrigger=1000)
    sizes, q = run_available_now(spark, df, tmp_path / "ckpt")
    assert max(sizes) <= 1000 and sum(sizes) == 5000
    assert sizes.count(1000) == 5
    progress = [p for p in q.recentProgress if p["numInputRows"]]
    assert all(p["numInputRows"] <= 1000 for p in progress)
    latest = progress[-1]["sources"][0]["latestOffset"]
    assert json.loads(latest) if isinstance(latest, str) else latest


@pytest.mark.spark
def test_a_narrower_schema_reads_only_its_columns(spark, tmp_path):
    root = tmp_path / "store"
    fill(root, 40, tags=["TagA"])
    df = (spark.readStream.format("rmq").schema("queueOffset bigint, tags string, body binary")
          .option("topics", "T").option("startingOffsets", "earliest").load(str(root)))
    rows = []
    q = (df.writeStream.foreachBatch(lambda d, i: rows.extend(d.collect())).option("checkpointLocation",
                                                                                  str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(240) and q.exception() is None
    assert df.columns == ["queueOffset", "tags", "body"]
    assert sorted(int(r.body) for r in rows) == list(range(40))
    assert {r.tags for r in rows} == {"TagA"} and sorted(r.queueOffset for r in rows) == sorted(list(range(10)) * 4)


@pytest.mark.spark
def test_group_commit_writes_consumer_offsets(spark, tmp_path):
    root = tmp_path / "store"
    fill(root, 400)
    co = ConsumerOffsets(root)
    co.commit("otherGroup", {"T": {0: 7, 1: 3}, "X": {0: 1}})
    df = stream(spark, root, topics="T", startingOffsets="earliest", consumerGroup="g1",
                maxMessagesPerTrigger=150)
    sizes, _ = run_available_now(spark, df, tmp_path / "ckpt")
    assert sum(sizes) == 400
    text = (root / "config" / "consumerOffset.json").read_text()
    assert '"T@g1":{0:100,1:100,2:100,3:100' in text.replace("\n", "").replace("\t", "")
    assert co.offsets_for_group("otherGroup") == {"T": {0: 7, 1: 3}, "X": {0: 1}}
    assert co.offsets_for_group("g1") == {"T": {0: 100, 1: 100, 2: 100, 3: 100}}
    lag = group_lag(root, group="g1")
    assert [r["diff"] for r in lag] == [0, 0, 0, 0]
    # the store engine resumes from the committed offsets
    fill(root, 20, start=400)
    with MessageStoreReader(root) as rd:
        res = rd.get_message("g1", "T", 0, co.offsets_for_group("g1")["T"][0], 32)
        assert res.status is GetMessageStatus.FOUND
        assert [int(m.record.body) for m in res.messages] == list(range(400, 420, 4))
    lag = group_lag(root, group="g1")
    assert sum(r["diff"] for r in lag) == 20 and "Diff Total: 20" in lag_rows_text(lag)
    # a new query resumes from the group's offsets
    df2 = stream(spark, root, topics="T", startingOffsets="group", consumerGroup="g1")
    sizes2, _ = run_available_now(spark, df2, tmp_path / "ckpt2")
    assert sum(sizes2) == 20
    assert co.offsets_for_group("g1") == {"T": {0: 105, 1: 105, 2: 105, 3: 105}}


def _delete_expired(root, keep_from_segment: int):
    """What retention does: drop CommitLog segments before index ``keep_from_segment``, then CQ files."""
    segs = list_segments(root / "commitlog")
    for s in segs[:keep_from_segment]:
        os.unlink(s.path)
    cl_min = segs[keep_from_segment].start_offset
    import numpy as np
    from rmqsource.format.consumequeue import units_from_bytes
    for qdir in (root / "consumequeue").glob("*/*"):
        files = list_segments(qdir)
        for f in files[:-1]:
            units = units_from_bytes(open(f.path, "rb").read())
            if int(np.asarray(units["phy_offset"])[-1]) < cl_min:
                os.unlink(f.path)
            else:
                break
    return cl_min


def _wait_batches(q, n, timeout=120):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if q.exception():
            raise AssertionError(str(q.exception()))
        done = [p for p in q.recentProgress if p["numInputRows"]]
        if len(done) >= n:
            return
        time.sleep(0.2)
    raise AssertionError("query made no progress")


@pytest.mark.spark
@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_retention_under_a_running_query(spark, tmp_path, fail_on_data_loss):
    root = tmp_path / "store"
    config = StoreConfig().with_overrides({"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 2000})
    fill(root, 600, queues=1, config=config, body_size=200)
    assert len(list_segments(root / "commitlog")) >= 3
    out = tmp_path / "out"
    df = stream(spark, root, topics="T", startingOffsets="earliest", maxMessagesPerTrigger=100,
                failOnDataLoss=str(fail_on_data_loss).lower(), mappedFileSizeCommitLog=65536,
                mappedFileSizeConsumeQueue=2000).selectExpr("CAST(body AS STRING) AS b", "queueOffset")
    q = df.writeStream.format("parquet").option("path", str(out)) \
        .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(processingTime="1 second").start()
    try:
        _wait_batches(q, 1)
        cl_min = _delete_expired(root, 1)
        with MessageStoreReader(root, config) as rd:
            new_min = [i.min_offset for i in rd.queue_infos()][0]
        assert new_min > 100
        if fail_on_data_loss:
            try:
                q.awaitTermination(60)
            except Exception:       # noqa: BLE001 - the StreamingQueryException is what we check
                pass
            err = str(q.exception())
            assert "DataLossError" in err or "removed" in err
            assert "topic T queue 0" in err and "offsets" in err
        else:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 90:
                assert q.exception() is None, str(q.exception())
                got = spark.read.parquet(str(out)).count() if (out / "_spark_metadata").exists() else 0
                if got and spark.read.parquet(str(out)).agg({"queueOffset": "max"}).first()[0] == 599:
                    break
                time.sleep(0.5)
            offs = sorted(r[0] for r in spark.read.parquet(str(out)).select("queueOffset").collect())
            assert offs[-1] == 599 and len(offs) == len(set(offs))
            assert set(range(new_min, 600)) <= set(offs) and set(range(100)) <= set(offs)
    finally:
        q.stop()
    assert cl_min > 0


# --------------------------------------------------------------------------- exactly once across restarts

CONSUMER = textwrap.dedent("""
    import os, sys, time
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from rmqsource.spark.jar import session_conf   # RMQ_SPARK_MODE is the test run's
    root, out, ckpt, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    spark = (SparkSession.builder.master("local[2]").config(map=session_conf()).config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = (spark.readStream.format("rmq").option("topics", "T").option("startingOffsets", "earliest")
          .option("maxMessagesPerTrigger", sys.argv[5]).load(root)
          .selectExpr("CAST(body AS STRING) AS b", "queueId", "queueOffset"))
    q = (df.writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt)
         .trigger(processingTime="0 seconds").start())
    print("started", flush=True)
    time.sleep(seconds)
    print("killing myself", flush=True)
    os.kill(os.getpid(), 9)
""")


def _consume_in_process(spark, root, out, ckpt, max_per_trigger, *, until_rows=None, seconds=None, timeout=240):
    df = stream(spark, root, topics="T", startingOffsets="earliest", maxMessagesPerTrigger=max_per_trigger) \
        .selectExpr("CAST(body AS STRING) AS b", "queueId", "queueOffset")
    q = df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt)) \
        .trigger(processingTime="0 seconds").start()
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < timeout:
            assert q.exception() is None, str(q.exception())
            if seconds is not None and time.monotonic() - t0 >= seconds:
                break
            if until_rows is not None:
                p = q.lastProgress
                if p and p["sources"] and p["numInputRows"] == 0:
                    end = p["sources"][0]["endOffset"]
                    end = json.loads(end) if isinstance(end, str) else end
                    if end and sum(int(v) for v in end.get("T", {}).values()) >= until_rows:
                        break
            time.sleep(0.25)
    finally:
        q.stop()


def _exactly_once(spark, tmp_path, total, rate, max_per_trigger, stop_after_s):
    root = tmp_path / "store"
    fill(root, 8)                                   # the store exists before the query
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    producer = start_producer(root, total - 8, rate, first=8)
    try:
        kills = 0
        # 1) a stop / restart in this process, while the producer appends
        _consume_in_process(spark, root, out, ckpt, max_per_trigger, seconds=stop_after_s)
        # 2) three drivers killed with SIGKILL in the middle of their work (no clean shutdown)
        for _ in range(3):
            kid = subprocess.Popen([sys.executable, "-c", CONSUMER, str(root), str(out), str(ckpt),
                                    str(stop_after_s + 8), str(max_per_trigger)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            kid.wait(timeout=240)
            assert kid.returncode == -signal.SIGKILL, kid.stderr.read()[-3000:]
            kills += 1
        assert producer.wait(timeout=300) == 0, producer.stderr.read()
        # 3) restart once more and drain everything
        _consume_in_process(spark, root, out, ckpt, max_per_trigger, until_rows=total)
    finally:
        if producer.poll() is None:
            producer.kill()
    assert kills == 3
    rows = spark.read.parquet(str(out)).select("b").collect()
    bodies = [int(r[0]) for r in rows]
    assert len(bodies) == total, (len(bodies), total)
    assert len(set(bodies)) == total and set(bodies) == set(range(total))


@pytest.mark.spark
@pytest.mark.e2e
def test_exactly_once_across_restarts_small(spark, tmp_path):
    _exactly_once(spark, tmp_path, total=20_000, rate=2_500, max_per_trigger=3000, stop_after_s=3)


@pytest.mark.spark
@pytest.mark.slow
def test_exactly_once_across_restarts_200k(spark, tmp_path):
    _exactly_once(spark, tmp_path, total=200_000, rate=10_000, max_per_trigger=20_000, stop_after_s=8)


# --------------------------------------------------------------------------- notebook

@pytest.mark.spark
@pytest.mark.slow      # tests/test_notebooks.py already runs every notebook by default
def test_streaming_notebook_runs(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    path = os.path.join(HERE, os.pardir, os.pardir, "notebooks", "streaming.ipynb")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "consumed" in outputs
