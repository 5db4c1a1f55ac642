"""Batch sink (DataSourceArrowWriter) and idempotent streaming sink of the rmq source."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pytest

from rmqsource.errors import FormatError, OptionError
from rmqsource.format.javahash import java_string_hash
from rmqsource.spark.jar import spark_mode
from rmqsource.spark.sink import (BATCH_PROPERTY, FAULT_ENV, SEQ_PROPERTY, QueueChooser, RmqStreamWriter,
                                  SinkCommitMessage, SinkLog, table_from_batch, parse_sink_options)
from rmqsource.store.reader import MessageStoreReader
from rmqsource.store.writer import MessageExtBrokerInner, MessageStoreWriter

from store_records import all_messages


def java_queue(keys, n):
    """SelectMessageQueueByHash: Math.abs(keys.hashCode() % n) with Java's remainder sign."""
    h = java_string_hash(keys)
    r = abs(h) % n
    return r


_all_messages = all_messages


# --------------------------------------------------------------------------- no Spark

def test_rows_become_messages(tmp_path):
    opts = parse_sink_options({"path": str(tmp_path / "s"), "queueNums": "3"})
    batch = pa.record_batch({
        "topic": ["A", "A", "A", "B"],
        "body": [b"x", b"y", None, b"z"],
        "queueId": pa.array([None, 7, None, None], type=pa.int32()),
        "keys": [None, None, "k1 k2", None],
        "tags": ["t", None, None, None],
        "properties": pa.array([[("p", "1")], None, None, [("TAGS", "ignored")]],
                               type=pa.map_(pa.string(), pa.string())),
        "bornTimestamp": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), None, None, None],
                                  type=pa.timestamp("us", tz="UTC")),
    })
    rows = table_from_batch(batch, QueueChooser(opts, seed=0)).to_pylist()
    assert [r["queueId"] for r in rows] == [0, 7, java_queue("k1 k2", 3), 0]
    assert rows[0]["properties"] == [("p", "1")] and rows[0]["tags"] == "t"
    assert rows[0]["bornTimestamp"] == 1704067200000
    assert rows[2]["body"] == b"" and rows[2]["keys"] == "k1 k2"
    assert rows[3]["properties"] is None                        # TAGS comes from the tags column
    with pytest.raises(OptionError, match="unknown option"):
        parse_sink_options({"path": str(tmp_path), "topic": "x"})


def test_columnar_rows_match_the_per_row_path(tmp_path):
    """Rows without properties take a columnar path; it gives what the per-row path gives, row for row."""
    opts = parse_sink_options({"path": str(tmp_path / "s")})
    n = 50
    batch = pa.record_batch({
        "topic": [["A", "B", "Long" * 10][i % 3] for i in range(n)],
        "body": pa.array([None if i % 7 == 0 else f"b{i}" for i in range(n)], pa.string()),
        "queueId": pa.array([i % 5 if i % 4 == 0 else None for i in range(n)], pa.int64()),
        "keys": [None if i % 3 else ("" if i % 9 == 0 else f"k{i}") for i in range(n)],
        "tags": [None if i % 2 else ("" if i % 4 == 1 else "t") for i in range(n)],
        "flag": pa.array([None if i % 6 == 0 else i for i in range(n)], pa.int32()),
        "bornTimestamp": pa.array([None if i % 5 == 0 else 1_700_000_000_000_000 + i for i in range(n)],
                                  pa.timestamp("us", tz="UTC")),
        "bornHost": [None if i % 2 else "10.0.0.1:9" for i in range(n)],
    })
    for stamp in (None, ("write:w", 3)):
        for skip in (None, {0, 5, 49}):
            fast = table_from_batch(batch, QueueChooser(opts, seed=3), seq_start=100, stamp=stamp,
                                    skip={s + 100 for s in skip} if skip else None)
            slow = table_from_batch(batch, QueueChooser(opts, seed=3), seq_start=100, stamp=stamp,
                                    skip={s + 100 for s in skip} if skip else None, extra_props=lambda s: {})
            assert fast.schema == slow.schema
            assert fast.to_pylist() == slow.to_pylist()


def test_row_spill_keeps_order_past_its_memory_budget(tmp_path, monkeypatch):
    """Rows past the memory budget go to one local file; read back in order, in put chunks; file removed."""
    from rmqsource.spark import spill
    monkeypatch.setattr(spill, "MEMORY_BYTES", 50_000)
    monkeypatch.setattr(spill, "PUT_ROWS", 700)
    rows = spill.RowSpill(str(tmp_path))
    for k in range(10):
        rows.add(pa.table({"i": pa.array(range(k * 1000, (k + 1) * 1000), pa.int64())}))
    assert rows.spilled and os.path.exists(rows.path) and rows.rows == 10_000
    chunks = list(spill.put_chunks(rows.tables()))
    assert [c.num_rows for c in chunks] == [700] * 14 + [200]
    assert pa.concat_tables(chunks).column("i").to_pylist() == list(range(10_000))
    rows.close()
    assert os.listdir(tmp_path) == []


def test_queue_nums_from_topics_json(tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "topics.json").write_text(
        '{"topicConfigTable":{"Wide":{"topicName":"Wide","readQueueNums":8,"writeQueueNums":8}}}')
    opts = parse_sink_options({"path": str(tmp_path)})
    assert opts.queues_of("Wide") == 8 and opts.queues_of("Other") == 4
    ch = QueueChooser(opts, seed=0)
    assert [ch.choose("Wide", None, None) for _ in range(9)] == [0, 1, 2, 3, 4, 5, 6, 7, 0]


# --------------------------------------------------------------------------- batch sink

@pytest.mark.spark
def test_batch_sink_appends_every_row_once(spark, tmp_path):
    from pyspark.sql import functions as F
    root = tmp_path / "store"
    n = 10_000
    df = (spark.range(n).repartition(4)
          .select(F.lit("S").alias("topic"),
                  F.col("id").cast("string").cast("binary").alias("body"),
                  F.when(F.col("id") % 2 == 0, F.lit("TagA")).otherwise(F.lit("TagB")).alias("tags"),
                  F.when(F.col("id") % 5 == 0, F.concat(F.lit("key"), F.col("id").cast("string"))).alias("keys"),
                  F.when(F.col("id") % 7 == 0, F.lit(3)).cast("int").alias("queueId"),
                  F.create_map(F.lit("src"), F.lit("spark")).alias("properties"),
                  F.lit(123).alias("flag")))
    t0 = time.monotonic()
    df.write.format("rmq").mode("append").save(str(root))
    elapsed = time.monotonic() - t0
    recs = _all_messages(root, "S")
    assert len(recs) == n and {int(r.body) for r in recs} == set(range(n))
    for r in recs:
        i = int(r.body)
        assert r.properties["src"] == "spark" and r.flag == 123
        assert r.properties["TAGS"] == ("TagA" if i % 2 == 0 else "TagB")
        if i % 7 == 0:
            assert r.queue_id == 3
        elif i % 5 == 0:
            assert r.queue_id == java_queue(f"key{i}", 4)
    # the store is clean (writer closed by every task) and fully dispatched
    assert not (root / "abort").exists()
    with MessageStoreReader(root) as rd:
        assert sum(i.max_offset for i in rd.queue_infos()) == n
    # read back through the batch source and append a second time: still readable, 2n rows
    spark.read.format("rmq").option("topics", "S").load(str(root)) \
        .select("topic", "body", "tags", "keys", "properties").write.format("rmq").mode("append").save(str(root))
    assert spark.read.format("rmq").option("topics", "S").load(str(root)).count() == 2 * n
    print(f"batch sink: {n} rows in {elapsed:.1f}s")


@pytest.mark.spark
def test_batch_sink_spills_a_partition_past_its_memory_budget(spark, tmp_path):
    """One partition of 80 MB (over the Python sink's 64 MiB kept in memory): the rows spilled to local disk
    come back whole and in order (queue 0 gets the rows in their order). The JVM sink stages the records in
    the task's execution memory instead, spilling only when Spark does not grant it (its spill file is
    tested through the writer: test_writer_golden_jvm.py's staged puts from the spill file)."""
    from pyspark.sql import functions as F
    root = tmp_path / "store"
    n = 80_000
    df = spark.range(n, numPartitions=1).select(
        F.lit("Big").alias("topic"), F.lit(0).alias("queueId"),
        F.format_string("%01024d", "id").cast("binary").alias("body"))
    df.write.format("rmq").mode("append").option("messageIndexEnable", "false").save(str(root))
    bodies = [r.body for r in _all_messages(root, "Big")]
    assert [int(b) for b in bodies] == list(range(n)) and all(len(b) == 1024 for b in bodies)


SMALL_MEMORY_WRITE = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession, functions as F
    from rmqsource.spark.jar import session_conf
    spark = (SparkSession.builder.master("local[1]").config(map=session_conf()).config("spark.ui.enabled", "false")
             .config("spark.testing.memory", str(64 << 20)).config("spark.testing.reservedMemory", "0")
             .getOrCreate())
    n = int(sys.argv[2])
    df = spark.range(n, numPartitions=1).select(
        F.lit("Big").alias("topic"), F.lit(0).alias("queueId"),
        F.format_string("%01024d", "id").cast("binary").alias("body"))
    df.write.format("rmq").mode("append").option("messageIndexEnable", "false").save(sys.argv[1])
    spark.stop()
""")


@pytest.mark.spark
@pytest.mark.e2e
def test_jvm_sink_spills_staged_records_when_spark_grants_no_memory(tmp_path):
    """The JVM sink stages a task's records in the task's execution memory: with 64 MiB for Spark (about
    38 MiB of execution memory) a 80 MB partition spills to the executor's local directory (the spill file
    is seen while the write runs), and the records come back whole and in order."""
    import threading
    from rmqsource.spark.jar import session_jar
    if session_jar() is None:
        pytest.skip("the JVM sink needs the rmq jar (RMQ_SPARK_MODE=python)")
    root, local = tmp_path / "store", tmp_path / "local"
    local.mkdir()
    seen, done = [], threading.Event()

    def watch():
        while not done.is_set():
            for f in local.glob("rmq-staged-*.records"):
                try:
                    seen.append(f.stat().st_size)
                except OSError:             # removed meanwhile
                    pass
            time.sleep(0.01)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    n = 80_000
    env = dict(os.environ, SPARK_LOCAL_DIRS=str(local), PYSPARK_PYTHON=sys.executable)
    try:
        p = subprocess.run([sys.executable, "-c", SMALL_MEMORY_WRITE, str(root), str(n)], env=env,
                           capture_output=True, text=True, timeout=600)
    finally:
        done.set()
        watcher.join()
    assert p.returncode == 0, p.stderr[-3000:]
    assert seen and max(seen) > 16 << 20, seen[-5:]          # spilled: tens of MB in the spill file
    assert not list(local.glob("rmq-staged-*.records"))       # removed when the task ended
    bodies = [r.body for r in _all_messages(root, "Big")]
    assert [int(b) for b in bodies] == list(range(n)) and all(len(b) == 1024 for b in bodies)


LOCK_HOLDER = textwrap.dedent("""
    import sys, time
    from rmqsource.io.lock import StoreLock
    with StoreLock(sys.argv[1]):
        print("locked", flush=True)
        time.sleep(float(sys.argv[2]))
""")


@pytest.mark.spark
def test_batch_sink_reports_a_locked_store(spark, tmp_path):
    root = tmp_path / "store"
    with MessageStoreWriter(root) as w:
        w.put_message(MessageExtBrokerInner(topic="S", queue_id=0, body=b"first"))
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(root), "60"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        df = spark.createDataFrame([("S", b"x")], "topic string, body binary")
        with pytest.raises(Exception) as info:
            df.write.format("rmq").mode("append").option("lockTimeout", "1s").save(str(root))
        assert "could not lock the store" in str(info.value) and "lockTimeout" in str(info.value)
    finally:
        holder.kill()
        holder.wait()
    assert len(_all_messages(root, "S")) == 1


@pytest.mark.spark
def test_batch_sink_refuses_overwrite_and_unknown_columns(spark, tmp_path):
    df = spark.createDataFrame([("S", b"x", 1)], "topic string, body binary, extra int")
    with pytest.raises(Exception, match="does not know column 'extra'"):
        df.write.format("rmq").mode("append").save(str(tmp_path / "s"))
    with pytest.raises(Exception, match="only appends"):
        df.select("topic", "body").write.format("rmq").mode("overwrite").save(str(tmp_path / "s"))


@pytest.mark.spark
def test_batch_sink_refusals_read_the_same_in_both_modes(spark, tmp_path):
    """The sink's one-line refusals, whichever implementation runs (the texts come from one place)."""
    from rmqsource.spark.sink import SINK_OPTIONS
    df = spark.createDataFrame([("S", b"x")], "topic string, body binary")
    expected = {
        "bogus": (f"unknown option 'bogus' for the rmq sink; options are: {', '.join(sorted(SINK_OPTIONS.values()))}, "
                  f"plus RocketMQ MessageStoreConfig keys"),
        "queueNums": "option queueNums must be in [1, 65535], got 0",
        "preserveStoreFields": "option preserveStoreFields must be true or false, got 'yes'",
    }
    values = {"bogus": "1", "queueNums": "0", "preserveStoreFields": "yes"}
    for option, text in expected.items():
        with pytest.raises(Exception) as info:
            df.write.format("rmq").mode("append").option(option, values[option]).save(str(tmp_path / "s"))
        assert text in str(info.value), str(info.value)[-2000:]
    # A string properties column (the wire form): only with preserveStoreFields, and without tags/keys.
    from rmqsource.spark.sink import SINK_ERRORS
    verbatim = spark.createDataFrame([("S", b"x", "a\x01b", "t")], "topic string, body binary, properties string, "
                                                                     "tags string")
    for frame, preserve, text in [
            (verbatim.drop("tags"), "false", SINK_ERRORS["stringPropertiesWithoutPreserveStoreFields"]),
            (verbatim, "true", SINK_ERRORS["stringPropertiesWithTagsOrKeys"]),
            (verbatim.withColumnRenamed("tags", "keys"), "true",
             SINK_ERRORS["stringPropertiesWithTagsOrKeys"])]:
        with pytest.raises(Exception) as info:
            frame.write.format("rmq").mode("append").option("preserveStoreFields", preserve).save(str(tmp_path / "s"))
        assert text in str(info.value), str(info.value)[-2000:]
        assert "OptionError" in str(info.value) or isinstance(info.value, OptionError), str(info.value)[-2000:]
    with pytest.raises(Exception) as info:
        df.write.format("rmq").mode("append").save("s3a://bucket/store")
    assert "store path 's3a://bucket/store': stores on s3a: are read-only" in str(info.value)
    assert not (tmp_path / "s").exists()


@pytest.mark.spark
def test_v1_setting_beside_config_rdb_fails_the_write_before_any_task(spark, tmp_path):
    """configManagerVersion=v1 on a store a config-v2 broker served is refused at planning on the driver (a
    cluster would otherwise retry the refusal in every task attempt), in both modes, and nothing is written."""
    store = tmp_path / "s"
    put = subprocess.run([sys.executable, "-m", "rmqsource", "put", "-C", "engineVersion=5.5.0", "-C",
                          "configManagerVersion=v2", str(store)], input=b'{"topic": "T1", "body": "aGk="}\n',
                         capture_output=True, timeout=120)
    assert put.returncode == 0, put.stderr.decode()
    before = sorted((p.relative_to(store), p.stat().st_size) for p in store.rglob("*") if p.is_file())
    df = spark.createDataFrame([("T1", b"x")], "topic string, body binary")
    sc = spark.sparkContext
    sc.setJobGroup("v1-beside-config-rdb", "a write refused at planning")
    try:
        with pytest.raises(Exception) as info:
            df.write.format("rmq").mode("append").option("engineVersion", "5.5.0") \
                .option("configManagerVersion", "v1").save(str(store))
        jobs = list(sc.statusTracker().getJobIdsForGroup("v1-beside-config-rdb"))
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
    text = str(info.value)
    assert "configManagerVersion=v1, but" in text and "config/rdb" in text, text[-2000:]
    assert jobs == [], f"the refusal came from a job's tasks: {text[-2000:]}"
    assert sorted((p.relative_to(store), p.stat().st_size) for p in store.rglob("*") if p.is_file()) == before


# --------------------------------------------------------------------------- streaming sink

def _fill_source(root, n):
    with MessageStoreWriter(root) as w:
        for k in range(0, n, 1000):
            w.put_messages([MessageExtBrokerInner(topic="IN", queue_id=i % 2, body=str(i).encode(), tags="t")
                            for i in range(k, min(n, k + 1000))])


def _run_stream_sink(spark, src, dst, ckpt, timeout=180):
    df = (spark.readStream.format("rmq").option("topics", "IN").option("startingOffsets", "earliest")
          .option("maxMessagesPerTrigger", "1000").load(str(src))
          .selectExpr("'OUT' AS topic", "body", "tags"))
    q = (df.writeStream.format("rmq").option("checkpointLocation", str(ckpt))
         .trigger(availableNow=True).start(str(dst)))
    try:
        q.awaitTermination(timeout)
    except Exception:          # noqa: BLE001 - inspected through q.exception()
        pass
    return q


def _fault_file():
    """The fault seam the spark fixture sets up (an env var the Python workers inherit)."""
    from pathlib import Path
    path = os.environ.get(FAULT_ENV)
    assert path, f"{FAULT_ENV} is set by the spark fixture before the session starts"
    return Path(path)


@pytest.mark.spark
@pytest.mark.e2e
def test_stream_sink_is_exactly_once_across_failures(spark, tmp_path):
    src, dst, ckpt = tmp_path / "src", tmp_path / "dst", tmp_path / "ckpt"
    n = 4000
    _fill_source(src, n)
    (dst / "config").mkdir(parents=True)
    fault = _fault_file()
    # 1) the driver dies after batch 1 was appended, before the sink commit: batch 1 is replayed
    fault.write_text(f"commit:1 {os.path.realpath(dst)}")
    q = _run_stream_sink(spark, src, dst, ckpt)
    assert q.exception() is not None and "injected fault" in str(q.exception())
    assert len(_all_messages(dst, "OUT")) == 2000
    # 2) restart: batch 1 is skipped (already appended); a task of batch 2 dies half-way through its append
    fault.write_text(f"mid-append:2 {os.path.realpath(dst)}")
    q = _run_stream_sink(spark, src, dst, ckpt)
    assert q.exception() is not None
    partial = len(_all_messages(dst, "OUT"))
    assert 2000 < partial < 3000
    # 3) restart again: the rest of batch 2 and the remaining batches, nothing twice
    q = _run_stream_sink(spark, src, dst, ckpt)
    assert q.exception() is None, str(q.exception())
    recs = _all_messages(dst, "OUT")
    bodies = [int(r.body) for r in recs]
    assert len(bodies) == n and set(bodies) == set(range(n))
    tags = {r.properties[BATCH_PROPERTY] for r in recs}
    assert len({t.split(":")[0] for t in tags}) == 1 and len(tags) == 4     # one query, 4 batches
    assert all(SEQ_PROPERTY in r.properties for r in recs)
    log = SinkLog(str(dst)).load()
    (qid, entry), = log["queries"].items()
    assert entry["committedBatch"] == 3 and entry["tasks"] == {}
    assert not fault.exists()
    if spark_mode() == "jvm":
        # The JVM sink reports each batch in the progress (sink.metrics): batch 2 resumed after the task that
        # died, so part of it is skipped; batch 3 is appended whole.
        progress = [p for p in q.recentProgress if p["numInputRows"]]
        metrics = [p["sink"]["metrics"] for p in progress]
        assert [m["batchId"] for m in metrics] == ["2", "3"], metrics
        resumed, last = metrics
        assert int(resumed["rows"]) == 1000 and int(resumed["skippedMessages"]) == partial - 2000
        assert int(resumed["appendedMessages"]) == 3000 - partial
        assert (last["rows"], last["appendedMessages"], last["skippedMessages"]) == ("1000", "1000", "0")
        assert int(last["tasks"]) >= 1 and int(last["appendMsTotal"]) >= int(last["appendMsMax"]) >= 0


@pytest.mark.spark
def test_stream_sink_takes_a_query_name(spark, tmp_path):
    """DataStreamWriter.queryName travels among the sink's options (as "queryName"): accepted, not a typo."""
    src, dst, ckpt = tmp_path / "src", tmp_path / "dst", tmp_path / "ckpt"
    _fill_source(src, 300)
    df = (spark.readStream.format("rmq").option("topics", "IN").option("startingOffsets", "earliest")
          .load(str(src)).selectExpr("'ORDERS' AS topic", "body", "tags"))
    q = (df.writeStream.format("rmq").queryName("orders").option("checkpointLocation", str(ckpt))
         .trigger(availableNow=True).start(str(dst)))
    try:
        assert q.name == "orders"
        q.awaitTermination(180)
    finally:
        q.stop()
    assert q.exception() is None, str(q.exception())
    rows = spark.read.format("rmq").option("topics", "ORDERS").load(str(dst)).select("body").collect()
    assert sorted(int(r.body) for r in rows) == list(range(300))
    assert os.path.samefile(parse_sink_options({"path": str(dst), "QueryName": "orders"}).root, dst)


# --------------------------------------------------------------------------- hostile sink log / store contents

@pytest.mark.unit
@pytest.mark.parametrize("text", ["[" * 100_000, '{"queries": ' * 5000, '{"queries": {"q": 5}}',
                                  '{"queries": {"q": {"committedBatch": "x"}}}',
                                  '{"queries": {"q": {"tasks": {"\u00b2:0": {"start": 0, "done": false}}}}}',
                                  '{"queries": {"q": {"tasks": {"1:0": {"done": true}}}}}', '{"writes": [1]}',
                                  '{"writes": {"job:x": {"tasks": {"a": {}}}}}',
                                  '{"writes": {"write:w": {"tasks": {"0": {"start": 0, "done": true}}}}}'])
def test_hostile_sink_log_is_a_format_error(tmp_path, text):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "rmqsourceSinkLog.json").write_text(text)
    with pytest.raises(FormatError) as info:
        SinkLog(str(tmp_path)).load()
    assert "rmqsourceSinkLog.json" in str(info.value) and len(str(info.value)) < 1000


@pytest.mark.unit
def test_store_contents_cannot_inject_sink_faults(tmp_path, monkeypatch):
    """The old test hook read config/rmqsourceSinkFault from the store itself; nothing there may act now."""
    monkeypatch.delenv(FAULT_ENV, raising=False)
    (tmp_path / "config").mkdir()
    for name in ("rmqsourceSinkFault", "sink-fault"):
        (tmp_path / "config" / name).write_text("commit:1")
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType
    writer = RmqStreamWriter({"path": str(tmp_path)}, StructType([StructField("topic", StringType()),
                                                                  StructField("body", BinaryType())]), False)
    writer.commit([SinkCommitMessage(partition_id=0, rows=1, batch_id=1, query_id="q")], 1)
    assert SinkLog(str(tmp_path)).load()["queries"]["q"]["committedBatch"] == 1


# --------------------------------------------------------------------------- batch sink: task retries

RETRY_CHILD = os.path.join(os.path.dirname(__file__), os.pardir, "support", "sink_retry_child.py")


def _retry_writes(store, tmp_path, writes, fault=None):
    """Writes in one local[2,2] session (a failed task runs again): per write, its error text (or None)
    and the store's messages after it."""
    fault_file = tmp_path / "sink-fault"
    if fault:
        fault_file.write_text(f"{fault} {os.path.realpath(store)}")
    env = dict(os.environ, **{FAULT_ENV: str(fault_file)})
    p = subprocess.run([sys.executable, RETRY_CHILD, json.dumps({"store": str(store), "writes": writes})],
                       capture_output=True, text=True, env=env, timeout=600)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert p.returncode == 0 and lines, p.stderr[-3000:]
    assert not fault_file.exists(), "the fault did not fire"
    return json.loads(lines[-1][len("RESULT "):])["writes"]


def _bodies(store):
    return sorted(int(r.body) for r in _all_messages(store, "R"))


def _verify_clean(store):
    from rmqsource import cli
    from io import StringIO
    out = StringIO()
    assert cli.main(["verify", str(store)], stdout=out) == 0, out.getvalue()[-2000:]


ROWS = 8_000                     # 4 partitions of 2,000 rows


@pytest.mark.spark
@pytest.mark.e2e
@pytest.mark.parametrize("fault", ["kill:1", "disk-full:1"])
def test_batch_sink_task_retry_appends_every_row_once(tmp_path, fault):
    """The Python worker holding the store lock is SIGKILLed half-way through its append, or the disk fills
    half-way and is free again for the retry: Spark runs the task again, which appends only the rows its
    first attempt did not."""
    store = tmp_path / "store"
    (result,) = _retry_writes(store, tmp_path, [{"rows": ROWS, "partitions": 4}], fault=fault)
    assert result["error"] is None
    assert _bodies(store) == list(range(ROWS))
    _verify_clean(store)
    assert SinkLog(str(store)).load().get("writes", {}) == {}   # a write without writeId forgets its entries


@pytest.mark.spark
@pytest.mark.e2e
def test_batch_sink_task_retry_preserve_store_fields_with_string_properties(tmp_path):
    """preserveStoreFields with a string properties column: the retried task finds the rows its first
    attempt appended by content, the verbatim string included, and appends only the others; every
    record's properties are the string as given."""
    from sink_retry_child import VERBATIM_PREFIX
    store = tmp_path / "store"
    (result,) = _retry_writes(store, tmp_path, [{"rows": ROWS, "partitions": 4, "verbatim": True}], fault="kill:1")
    assert result["error"] is None
    assert _bodies(store) == list(range(ROWS))
    for r in _all_messages(store, "R"):
        assert r.properties_raw == (VERBATIM_PREFIX + r.body.decode()).encode()
    _verify_clean(store)


@pytest.mark.spark
@pytest.mark.e2e
def test_batch_sink_upstream_failure_appends_nothing_of_the_task(tmp_path):
    """An upstream function raises on one row in the task's first attempt: the retry leaves every row in
    the store exactly once (the failed attempt appended nothing, or a prefix the retry resumes after)."""
    store = tmp_path / "store"
    (result,) = _retry_writes(store, tmp_path, [{"rows": ROWS, "partitions": 4, "failAt": 5_432}])
    assert result["error"] is None
    assert _bodies(store) == list(range(ROWS))
    _verify_clean(store)


@pytest.mark.spark
@pytest.mark.e2e
def test_batch_sink_write_id_reruns_append_only_what_is_missing(tmp_path):
    """A job fails for good (an upstream function raises in every attempt of one task): the other
    partitions are appended; running the write again with the same writeId appends the missing partition
    only, and its task is killed half-way once; running it once more appends nothing; another writeId is
    another write."""
    store = tmp_path / "store"
    wid = {"rows": ROWS, "partitions": 4, "writeId": "nightly-2024-01-01"}
    failed, rerun, again, other = _retry_writes(store, tmp_path, [
        dict(wid, failAt=5_432, always=True), wid, wid, {"rows": 10, "partitions": 1, "writeId": "other"}],
        fault="kill:2")
    assert failed["error"] is not None and "upstream failure at row 5432" in failed["error"]
    # Whole partitions and at most a prefix of the failing one (when Spark ends a failed upstream's input
    # early, the sink sees a normal end of its input: what it appended then is found by the re-run). With two
    # task slots partition 2 starts only after partition 0 or 1 has ended, so at least one partition is in;
    # whether partition 3 ran before the job was aborted depends on the scheduling.
    assert ROWS // 4 <= failed["messages"] == failed["distinct"] < ROWS
    assert rerun["error"] is None and rerun["messages"] == rerun["distinct"] == ROWS
    assert again["error"] is None and again["messages"] == ROWS
    assert other["error"] is None and other["messages"] == ROWS + 10
    assert _bodies(store) == sorted(list(range(ROWS)) + list(range(10)))
    _verify_clean(store)
    assert set(SinkLog(str(store)).load()["writes"]) == {"write:nightly-2024-01-01", "write:other"}


@pytest.mark.spark
def test_batch_sink_full_disk_is_one_typed_error_naming_the_file(spark, small_tmpfs):
    """A real full file system under ``df.write``: the task fails with the StoreError of the put, naming the
    file it could not write (not the raw OSError of the close's checkpoint write); after space is freed and
    the store recovered, it holds whole records only and verify is clean."""
    from io import StringIO
    from pyspark.sql import functions as F
    from rmqsource import cli
    store = small_tmpfs / "store"
    options = {"messageIndexEnable": "false", "mappedFileSizeConsumeQueue": "120000"}
    filler = small_tmpfs / "filler"
    st = os.statvfs(small_tmpfs)
    with open(filler, "wb") as f:                          # leave 8 MB: one partition (5 MB) fits
        f.write(bytes(max(st.f_bavail * st.f_frsize - (8 << 20), 0)))
    n = 10_000
    df = spark.range(n, numPartitions=2).select(F.lit("R").alias("topic"),
                                                F.format_string("%01024d", "id").cast("binary").alias("body"))
    with pytest.raises(Exception) as info:
        df.write.format("rmq").mode("append").options(**options).save(str(store))
    lines = str(info.value).splitlines()
    # the Python sink's error, or the JVM sink's (same text, its class in io.rmqsource.errors)
    typed = [ln for ln in lines if ln.startswith(("rmqsource.errors.StoreError: rmq sink: put of a message",
                                                  "Caused by: io.rmqsource.errors.StoreError: rmq sink: put of a "
                                                  "message"))]
    # (the CommitLog's file, or a ConsumeQueue's when its units are written first to the full disk)
    assert typed and "No space left on device" in typed[0], lines[-40:]
    assert f"{store}/commitlog/" in typed[0] or f"{store}/consumequeue/" in typed[0], lines[-40:]
    assert not [ln for ln in lines if ln.startswith("OSError")], lines[-40:]     # nothing raw, nothing masking
    filler.unlink()
    out = StringIO()
    assert cli.main(["recover", str(store), "-C", "mappedFileSizeConsumeQueue=120000"], stdout=out) == 0, out.getvalue()
    out = StringIO()
    assert cli.main(["verify", str(store), "-C", "mappedFileSizeConsumeQueue=120000"], stdout=out) == 0, \
        out.getvalue()[-2000:]
    bodies = [r.body for r in _all_messages(store, "R")]
    # the partition appended first, and at most the records of the other that its writer acknowledged
    # before the disk filled (the JVM writer writes a chunk in pieces; each piece it acknowledges stays)
    assert n // 2 <= len(bodies) < n and len(set(bodies)) == len(bodies)
    assert all(len(b) == 1024 and int(b) < n for b in bodies)
