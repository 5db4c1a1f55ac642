"""The JVM stream (RmqMicroBatchStream) in real queries: native runs, Kafka-style lag metrics, and
checkpoints that move between the JVM and the Python implementation.

Every test here needs the jar (skipped in RMQ_SPARK_MODE=python runs, where the
same queries of tests/test_spark_stream.py run on the Python source).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from golden import corpora, corpus_of, crash_cases, expected_get_files, is_dledger, read_jsonl
from rmqsource.spark.jar import jar_path
from rmqsource.store.consumequeue import ConsumeQueue
from rmqsource.store.lag import group_lag
from rmqsource.store.layout import StoreLayout
from test_spark_batch import torn_record
from test_spark_stream import fill

pytestmark = pytest.mark.spark


@pytest.fixture
def jvm_spark(request):
    from jvm_twins import jvm_or_skip
    jvm_or_skip(request)
    return request.getfixturevalue("spark")


@pytest.mark.compat
def test_available_now_runs_natively_and_its_lag_metrics_match_rmq_lag(jvm_spark, tmp_path):
    spark = jvm_spark
    root = tmp_path / "store"
    fill(root, 1000, queues=4, body_size=100)
    sizes = []

    def each(batch_df, batch_id):
        sizes.append(batch_df.count())
        if batch_id == 0:   # arrives after AvailableNow fixed its target: left unread, uneven per queue
            fill(root, 37, start=1000, queues=3, body_size=300)

    df = (spark.readStream.format("rmq").option("topics", "T").option("startingOffsets", "earliest")
          .option("maxMessagesPerTrigger", 300).option("consumerGroup", "lagged").load(str(root)))
    q = (df.writeStream.foreachBatch(each).option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(240)
    assert q.exception() is None, str(q.exception())
    assert sizes == [300, 300, 300, 100]
    progress = [p for p in q.recentProgress if p["numInputRows"]]
    source = progress[-1]["sources"][0]
    assert source["description"].startswith("RmqMicroBatchStream(JVM)")
    metrics = source["metrics"]
    # rmq lag of the group the query committed: per queue, what the 37 late messages left behind
    lag = {r["queueId"]: r["diff"] for r in group_lag(root, group="lagged")}
    assert sorted(lag.values()) == [0, 12, 12, 13]
    assert int(metrics["minOffsetsBehindLatest"]) == min(lag.values())
    assert int(metrics["maxOffsetsBehindLatest"]) == max(lag.values())
    assert float(metrics["avgOffsetsBehindLatest"]) == pytest.approx(sum(lag.values()) / len(lag), abs=0.051)  # progress shows 1 decimal
    layout = StoreLayout.for_root(str(root))
    unread_bytes = 0
    for qid in range(4):
        cq = ConsumeQueue(layout.queue_dir("T", qid), "T", qid)
        try:
            unread_bytes += int(cq.read_units(250, cq.max_offset - 250)["size"].sum())
        finally:
            cq.close()
    assert int(metrics["bytesBehindLatest"]) == unread_bytes > 37 * 300
    # every batch reports them, shrinking as the query catches up with its target
    behind = [int(p["sources"][0]["metrics"]["maxOffsetsBehindLatest"]) for p in progress]
    assert behind == sorted(behind, reverse=True) and behind[0] > behind[-1]


# --------------------------------------------------------------------------- checkpoints across modes

LEG = textwrap.dedent("""
    import json, os, sys
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from rmqsource.spark.jar import session_conf      # RMQ_SPARK_MODE decides: jar or Python only
    root, out, ckpt = sys.argv[1], sys.argv[2], sys.argv[3]
    spark = (SparkSession.builder.master("local[2]").config(map=session_conf()).config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = (spark.readStream.format("rmq").option("topicPattern", "T.*").option("startingOffsets", "earliest")
          .option("maxMessagesPerTrigger", 700).load(root)
          .selectExpr("topic", "CAST(body AS STRING) AS b", "queueId", "queueOffset"))
    q = (df.writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt)
         .trigger(availableNow=True).start())
    q.awaitTermination()
    print(json.dumps({"batches": [p["numInputRows"] for p in q.recentProgress],
                      "source": q.recentProgress[-1]["sources"][0]["description"] if q.recentProgress else None}))
""")


def _leg(mode, root, out, ckpt):
    env = dict(os.environ, RMQ_SPARK_MODE=mode)
    done = subprocess.run([sys.executable, "-c", LEG, str(root), str(out), str(ckpt)], env=env,
                          capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow          # four Spark processes
@pytest.mark.parametrize("first,second", [("jvm", "python"), ("python", "jvm")])
def test_checkpoint_resumes_in_the_other_mode_without_loss_or_duplicates(jvm_spark, tmp_path, first, second):
    assert jar_path(), "the jvm leg needs the jar"
    spark = jvm_spark
    root, out, ckpt = tmp_path / "store", tmp_path / "out", tmp_path / "ckpt"
    fill(root, 2000, queues=4)
    one = _leg(first, root, out, ckpt)
    assert sum(one["batches"]) == 2000 and max(one["batches"]) <= 700
    # more messages, a new queue of T and a new topic matching the pattern, then the other implementation
    fill(root, 1000, start=2000, queues=5)
    fill(root, 300, topic="T2", queues=2, start=3000)
    two = _leg(second, root, out, ckpt)
    assert sum(two["batches"]) == 1300
    native = "RmqMicroBatchStream(JVM)"
    assert (native in one["source"]) == (first == "jvm") and (native in two["source"]) == (second == "jvm")
    bodies = [int(r[0]) for r in spark.read.parquet(str(out)).select("b").collect()]
    assert len(bodies) == 3300 and set(bodies) == set(range(3300))
    # both wrote the offset log in one format: Python's json.dumps of {topic: {queueId: offset}}
    for name in sorted(os.listdir(ckpt / "offsets"), key=lambda n: int(n) if n.isdigit() else -1):
        if not name.isdigit():
            continue
        line = (ckpt / "offsets" / name).read_text().splitlines()[-1]
        assert line == json.dumps(json.loads(line)), line
    last = json.loads((ckpt / "offsets" / max((n for n in os.listdir(ckpt / "offsets") if n.isdigit()), key=int))
                      .read_text().splitlines()[-1])
    assert last == {"T": {"0": 700, "1": 700, "2": 700, "3": 700, "4": 200}, "T2": {"0": 150, "1": 150}}


def test_group_commit_from_the_jvm_is_read_by_the_python_engine(jvm_spark, tmp_path):
    """The JVM writes consumerOffset.json; the Python reader and `rmq lag` read the same numbers."""
    from rmqsource.store.consumer_offsets import ConsumerOffsets
    spark = jvm_spark
    root = tmp_path / "store"
    fill(root, 100)
    ConsumerOffsets(root).commit("other", {"T": {0: 3}})
    df = (spark.readStream.format("rmq").option("topics", "T").option("startingOffsets", "earliest")
          .option("consumerGroup", "jg").load(str(root)))
    q = (df.writeStream.foreachBatch(lambda d, i: None).option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(240) and q.exception() is None
    text = (root / "config" / "consumerOffset.json").read_text()
    assert '"T@jg":{0:25,1:25,2:25,3:25\n' in text and '"T@other":{0:3\n' in text
    assert ConsumerOffsets(root).offsets_for_group("jg") == {"T": {0: 25, 1: 25, 2: 25, 3: 25}}
    assert [r["diff"] for r in group_lag(root, group="jg")] == [0, 0, 0, 0]


# --------------------------------------------------------------------------- columns decoded on access

@pytest.mark.parametrize("corpus", corpora(), ids=lambda p: p.name)
def test_stream_rows_equal_the_batch_scan_column_for_column(jvm_spark, tmp_path, corpus):
    """The stream decodes a column only when the query reads it (Spark prunes no stream columns):
    every column, all of them or a few, equals the batch scan's eager decoding of a real engine's store."""
    spark = jvm_spark
    root = corpus / "store"                               # read in place: a stream without a group writes nothing
    config = {"config": str(corpus / "store.properties")}
    key = ["topic", "queueId", "queueOffset"]
    batch = (spark.read.format("rmq").options(**config).option("topicPattern", ".*").load(str(root))
             .orderBy(*key).collect())
    assert len(batch) > 10
    few = ["queueOffset", "msgId", "properties", "bornTimestamp", "topic", "queueId"]
    for n, columns in enumerate([None, few]):
        rows = []
        df = (spark.readStream.format("rmq").options(**config).option("topicPattern", ".*")
              .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", 400)
              .option("batchSize", 3).load(str(root)))            # many columnar batches per task
        if columns:
            df = df.select(*columns)
        q = (df.writeStream.foreachBatch(lambda d, i: rows.extend(d.collect()))
             .option("checkpointLocation", str(tmp_path / f"ckpt{n}")).trigger(availableNow=True).start())
        assert q.awaitTermination(240) and q.exception() is None, str(q.exception())
        assert q.recentProgress[-1]["sources"][0]["description"].startswith("RmqMicroBatchStream(JVM)")
        rows.sort(key=lambda r: tuple(r[k] for k in key))
        expected = [r.asDict() for r in batch] if columns is None else [{c: r[c] for c in columns} for r in batch]
        assert [r.asDict() for r in rows] == expected


# (a stream follows ConsumeQueue files: a store without them, which the engine re-dispatches, has no queue yet)
@pytest.mark.parametrize("case", [c for c in crash_cases() if is_dledger(c) and (c / "store" / "consumequeue").is_dir()],
                         ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_stream_admits_what_the_engine_serves_after_a_dledger_crash(jvm_spark, tmp_path, case):
    """Units past the DLedger data's valid end (a torn or garbage entry header) are never admitted, units
    below it are, whatever the DLedger checkpoint says: the rows are the engine's get answers.  A record
    torn inside an intact entry (the engine serves its garbage) fails the query with a typed error."""
    spark = jvm_spark
    corpus = corpus_of(case)
    want = set()
    for topic, qid, path in expected_get_files(case / "expected"):
        want |= {(topic, qid, line["queueOffset"], line["commitLogOffset"]) for line in read_jsonl(path)[:-1]}
    rows = []
    q = (spark.readStream.format("rmq").option("config", str(corpus / "store.properties"))
         .option("topicPattern", ".*").option("startingOffsets", "earliest").option("excludeInternalTopics", "false")
         .load(str(case / "store")).select("topic", "queueId", "queueOffset", "commitLogOffset")
         .writeStream.foreachBatch(lambda d, i: rows.extend(tuple(r) for r in d.collect()))
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    torn = torn_record(case)
    if torn is not None:
        with pytest.raises(Exception) as e:
            q.awaitTermination(240)
        assert "CorruptRecordError" in str(e.value) and "dledger-n0/data/" in str(e.value), str(e.value)[:2000]
        return
    assert q.awaitTermination(240) and q.exception() is None, str(q.exception())
    assert len(rows) == len(set(rows))
    assert set(rows) == want
