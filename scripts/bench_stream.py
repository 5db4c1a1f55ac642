#!/usr/bin/env python
"""Streaming benchmark: a producer process appends while a ``processingTime="0 seconds"`` query consumes
into a ``foreachBatch`` sink, once per implementation of the source (same store shape, same producer,
same sink, one after the other in fresh Spark processes):

* ``jvm``: the JVM micro-batch stream (the jar on ``spark.jars``);
* ``python``: the Python data source stream (no jar).

Reported per mode (and written as JSON with ``--json``):

* producer alone (before the modes, nothing else running): its own max rate and CPU per message, the
  bound of what a run on the same cores can show;
* producer: achieved append rate (msgs/s; the writer's columnar path, 256-byte bodies, a put every
  50 ms by default) and its CPU time per message;
* stream: input rate while the producer runs (rows/s), batch durations, rows per batch, the source's
  planning time (``latestOffset`` in the progress), the median of each phase of ``durationMs``
  (addBatch, walCommit, commitOffsets, queryPlanning, ...) and the foreachBatch function's own time;
* lag (produced - consumed, sampled every 0.5 s): median in the first and last 10 s of the
  producing window and its growth (least-squares slope, msgs/s): ~0 means the query keeps up;
* latency append -> foreachBatch (bornTimestamp is set by the producer right before its put; the
  query selects bornTimestamp alone and the sink counts rows per bornTimestamp in the JVM, one
  collect of a few rows per batch, so latency costs no per-row Python): median, p90, p99;
* with ``--sink``: the exactly-once streaming sink's sustained rate: a store of ``--sink-rows`` messages
  (4 topics x 8 queues) streamed by ``writeStream.format("rmq")`` into another store,
  ``maxMessagesPerTrigger`` = ``--sink-batch``, coalesced to ``--sink-partitions`` sink tasks (each task
  takes the store lock and opens the writer once), in the session's mode (the JVM sink with the jar): rows
  per second of the batches after the first (Spark's triggerExecution) and of their ``addBatch`` (the
  sink's appends and commits), with the median of each phase; once with Spark's default checkpoint file
  manager and once with ``FileSystemBasedCheckpointFileManager`` (``--sink-checkpoint-managers``): on a
  local path the default goes through Hadoop's FileContext, which forks ``readlink`` and ``chmod`` for each
  checkpoint file where libhadoop is absent, time spent in walCommit and commitOffsets, not in the sink;
  and the batch sink ``df.write.format("rmq")`` rows/s vs the writer's own
  batch put (scripts/bench_spark_write.py has the full batch comparison);
* with ``--sink-rss``: the peak RSS of the sink's Python worker writing one partition of 3M rows with
  1 KiB bodies (2.9 GiB), against the partition's size and the 512 MiB bound the README states.

The figures of both modes are printed side by side with their ratio (jvm / python).  The machine's
load average at the start and end is printed too: on a shared machine, run it when ``uptime`` is low.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

from bench_spark_write import settle

PRODUCER = textwrap.dedent("""
    import sys, time, json
    from rmqsource.store.config import StoreConfig
    import numpy as np
    import pyarrow as pa
    from rmqsource.store.writer import MessageStoreWriter
    import resource
    root, total, rate, body_size, stats, chunk = (sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]),
                                                  sys.argv[5], int(sys.argv[6]))
    config = StoreConfig().with_overrides({"messageIndexEnable": "false"})
    body = b"x" * body_size
    bodies = pa.array([body] * chunk, type=pa.binary())
    topics = pa.array(["Bench"] * chunk)
    def cpu():
        use = resource.getrusage(resource.RUSAGE_SELF)
        return use.ru_utime + use.ru_stime
    cpu0 = cpu()                    # after the imports: the appends' own CPU time
    t0 = time.monotonic()
    done = 0
    with MessageStoreWriter(root, config, lock_timeout_s=30) as w, open(stats, "w") as out:
        while done < total:
            n = min(chunk, total - done)
            now = int(time.time() * 1000)
            table = pa.table({"topic": topics.slice(0, n),
                              "queueId": pa.array((np.arange(done, done + n) % 4).astype(np.int32)),
                              "body": bodies.slice(0, n),
                              "bornTimestamp": pa.array(np.full(n, now, dtype=np.int64))})
            res = w.put_arrow_batch(table)   # the writer's columnar path
            assert res.ok_count == n, res[-1]
            done += n
            out.write(f"{time.time():.3f} {done}\\n")
            out.flush()
            delay = t0 + done / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        elapsed = time.monotonic() - t0
    print(json.dumps({"produced": done, "seconds": elapsed, "rate": done / elapsed, "cpuSeconds": cpu() - cpu0}),
          flush=True)
""")

WARM = 4      # messages in the store before the query starts (one per queue)


def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def weighted_pct(pairs, p):
    """Percentile of values given as (value, count) pairs."""
    pairs = sorted(pairs)
    total = sum(c for _, c in pairs)
    if not total:
        return None
    rank = p / 100 * (total - 1)
    acc = 0
    for v, c in pairs:
        acc += c
        if acc > rank:
            return v
    return pairs[-1][0]


def slope(points):
    """Least-squares slope of (t, y) points."""
    if len(points) < 3:
        return None
    mt = statistics.fmean(t for t, _ in points)
    my = statistics.fmean(y for _, y in points)
    den = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (y - my) for t, y in points) / den if den else None


def put_batch(args) -> int:
    """Messages per put: --put-batch, else a put every 50 ms at the target rate."""
    return args.put_batch or max(100, int(args.rate / 20))


def producer_alone(args) -> dict:
    """The producer's own maximum rate, nothing else running: a bound on what the runs can show."""
    work = tempfile.mkdtemp(prefix="rmq-bench-producer-", dir=args.dir)
    n = int(args.producer_alone)
    try:
        out = subprocess.run([sys.executable, "-c", PRODUCER, os.path.join(work, "store"), str(n), "1e12",
                              str(args.body_size), os.path.join(work, "producer.txt"), str(put_batch(args))],
                             capture_output=True, text=True, check=True).stdout
    finally:
        shutil.rmtree(work, ignore_errors=True)
    r = json.loads(out.strip().splitlines()[-1])
    return {"messages": n, "putBatch": put_batch(args), "rate": round(r["rate"]),
            "cpuMicrosPerMessage": round(r["cpuSeconds"] / n * 1e6, 2)}


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


# --------------------------------------------------------------------------- one mode, in its own process

def run_one(args) -> dict:
    """Producer + query in this process's Spark session (RMQ_SPARK_MODE chooses the source)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = tempfile.mkdtemp(prefix="rmq-bench-stream-", dir=args.dir)
    root = os.path.join(work, "store")
    total = int(args.rate * args.seconds)
    from rmqsource.store.config import StoreConfig
    from rmqsource.store.writer import MessageExtBrokerInner, MessageStoreWriter
    config = StoreConfig().with_overrides({"messageIndexEnable": "false"})
    with MessageStoreWriter(root, config) as w:          # the topic's queues exist before the query starts
        w.put_messages([MessageExtBrokerInner(topic="Bench", queue_id=q, body=b"warm") for q in range(WARM)])

    from pyspark.sql import SparkSession
    from rmqsource.spark.jar import session_conf, spark_mode
    spark = (SparkSession.builder.master("local[2]").appName("rmq-bench-stream").config(map=session_conf())
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", str(args.shuffle_partitions))
             .config("spark.sql.streaming.numRecentProgressUpdates", "100000")     # every batch's progress
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")

    latencies: list[tuple[float, int]] = []          # (seconds, rows)
    sink_seconds: list[float] = []                    # the foreachBatch function's own time per batch
    consumed = [0]
    lock = threading.Lock()

    def each(df, batch_id):
        # One small aggregation in the JVM and one collect of its few rows (a put's messages share
        # their bornTimestamp): the latency costs no per-row Python.
        t_in = time.monotonic()
        groups = df.groupBy("bornTimestamp").count().collect()
        now = time.time()
        sink_seconds.append(time.monotonic() - t_in)
        with lock:
            for ts, n in groups:
                if ts is not None and ts.timestamp() > 1:
                    latencies.append((now - ts.timestamp(), n))
            consumed[0] += sum(n for _, n in groups)

    # foreachBatch receives the batch as rows already made of every column the query outputs (Spark
    # materialises them before calling the function), so the query selects the one column the sink uses.
    df = (spark.readStream.format("rmq").option("topics", "Bench").option("startingOffsets", "earliest")
          .option("messageIndexEnable", "false").load(root).select("bornTimestamp"))
    q = (df.writeStream.foreachBatch(each).option("checkpointLocation", os.path.join(work, "ckpt"))
         .trigger(processingTime="0 seconds").start())
    t_wait = time.monotonic()
    while consumed[0] < WARM and time.monotonic() - t_wait < 180:      # first batch: workers start, JIT
        if q.exception():
            raise SystemExit(f"query failed: {q.exception()}")
        time.sleep(0.2)
    with lock:
        latencies.clear()
        sink_seconds.clear()

    stats_path = os.path.join(work, "producer.txt")
    prod = subprocess.Popen([sys.executable, "-c", PRODUCER, root, str(total), str(args.rate), str(args.body_size),
                             stats_path, str(put_batch(args))], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    samples = []                                      # (t, produced, lag)
    t0 = time.time()
    producing_until = None
    while True:
        produced = 0
        try:
            with open(stats_path) as f:
                lines = f.read().split()
                produced = int(lines[-1]) if lines else 0
        except OSError:
            pass
        with lock:
            samples.append((time.time() - t0, produced, produced - (consumed[0] - WARM)))
        if q.exception():
            prod.kill()
            raise SystemExit(f"query failed: {q.exception()}")
        if prod.poll() is not None and producing_until is None:
            producing_until = time.time() - t0
        if producing_until is not None and (consumed[0] - WARM >= total or time.time() - t0 > producing_until + 120):
            break
        time.sleep(0.5)
    drained_s = time.time() - t0 - producing_until
    prod_out, prod_err = prod.communicate()
    if prod.returncode:
        raise SystemExit(f"producer failed: {prod_err}")
    producer = json.loads(prod_out.strip().splitlines()[-1])
    progress = [p for p in q.recentProgress if p["numInputRows"] > 0]
    description = progress[-1]["sources"][0]["description"] if progress else None
    metrics = progress[-1]["sources"][0].get("metrics") if progress else None
    q.stop()
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)

    window = [(t, lag) for t, _, lag in samples if 5 <= t <= producing_until]
    first = [lag for t, lag in window if t < 15]
    last = [lag for t, lag in window if t > producing_until - 10]
    in_window = [p for p in progress[2:]]
    durations = [p["durationMs"]["triggerExecution"] for p in in_window]
    planning = [p["durationMs"].get("latestOffset", 0) for p in in_window]
    breakdown = phase_medians(in_window)
    consumed_in_window = max((s[1] - s[2] for s in samples if s[0] <= producing_until), default=0)
    return {
        "mode": spark_mode(), "source": description, "messages": total, "bodySize": args.body_size,
        "shufflePartitions": args.shuffle_partitions,
        "producer": {"targetRate": args.rate, "achievedRate": round(producer["rate"]),
                     "seconds": round(producer["seconds"], 2), "putBatch": put_batch(args),
                     "cpuMicrosPerMessage": round(producer["cpuSeconds"] / producer["produced"] * 1e6, 2)},
        "stream": {
            "inputRateWhileProducing": round(consumed_in_window / producing_until) if producing_until else None,
            "batches": len(progress),
            "batchDurationMs": {"median": pct(durations, 50), "p90": pct(durations, 90),
                                "max": max(durations) if durations else None},
            "latestOffsetMs": {"median": pct(planning, 50), "max": max(planning) if planning else None},
            "durationMsMedians": breakdown,
            "foreachBatchMs": {"median": round(pct(sink_seconds, 50) * 1000) if sink_seconds else None,
                               "p90": round(pct(sink_seconds, 90) * 1000) if sink_seconds else None},
            "rowsPerBatch": {"median": pct([p["numInputRows"] for p in in_window], 50),
                             "max": max((p["numInputRows"] for p in in_window), default=None)},
            "drainedSecondsAfterProducer": round(drained_s, 2),
            "lastMetrics": metrics,
        },
        "lag": {"firstWindowMedian": pct(first, 50), "lastWindowMedian": pct(last, 50),
                "max": max((s[2] for s in samples), default=0),
                "growthPerSecond": round(slope(window), 1) if slope(window) is not None else None,
                "samples": [(round(t, 1), lag) for t, _, lag in samples[:: max(1, len(samples) // 30)]]},
        "latencySeconds": {"median": round(weighted_pct(latencies, 50), 3) if latencies else None,
                           "p90": round(weighted_pct(latencies, 90), 3) if latencies else None,
                           "p99": round(weighted_pct(latencies, 99), 3) if latencies else None},
    }


def phase_medians(progress: list) -> dict:
    """The median of each phase of ``durationMs`` over the progress entries."""
    phases = sorted({k for p in progress for k in p["durationMs"]})
    return {k: pct([p["durationMs"].get(k, 0) for p in progress], 50) for k in phases}


def run_child(cmd: list, env, what: str) -> dict:
    """Run this script's internal one-run mode in a fresh process; its RESULT line's JSON."""
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode or not lines:
        raise SystemExit(f"{what} failed:\n{done.stderr[-4000:]}")
    return json.loads(lines[-1][len("RESULT "):])


# --------------------------------------------------------------------------- stream sink (optional)

# Spark's checkpoint file managers by name (the classes moved package in Spark 4.1).
CHECKPOINT_MANAGERS = ("spark-default", "filesystem")


def checkpoint_manager_conf(name: str) -> dict:
    """Spark conf for a checkpoint file manager: Spark's default (FileContext on a local path), or FileSystem."""
    if name == "spark-default":
        return {}
    import pyspark
    major_minor = tuple(int(x) for x in pyspark.__version__.split(".")[:2])
    package = "org.apache.spark.sql.execution.streaming" + (".checkpointing" if major_minor >= (4, 1) else "")
    return {"spark.sql.streaming.checkpointFileManagerClass": package + ".FileSystemBasedCheckpointFileManager"}


def stream_sink_rate(rows: int, body_size: int, per_batch: int, partitions: int,
                     checkpoint_manager: str = "spark-default") -> dict:
    """Sustained rows/s of the exactly-once streaming sink on a prepared source store."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import numpy as np
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from rmqsource.spark.jar import spark_mode, session_conf
    from rmqsource.store.config import StoreConfig
    from rmqsource.store.writer import MessageStoreWriter
    work = tempfile.mkdtemp(prefix="rmq-bench-stream-sink-")
    src, dst = os.path.join(work, "src"), os.path.join(work, "dst")
    config = StoreConfig().with_overrides({"messageIndexEnable": "false"})
    with MessageStoreWriter(src, config) as w:
        for lo in range(0, rows, 250_000):
            k = min(250_000, rows - lo)
            ids = np.arange(lo, lo + k)
            w.put_arrow_batch(pa.table({
                "topic": pa.array([f"Src{i}" for i in range(4)]).take(pa.array(ids % 4)),
                "queueId": pa.array(((ids // 4) % 8).astype(np.int32)),
                "body": pa.array([b"x" * body_size] * k, type=pa.binary())}))
    settle()           # the source's (and an earlier run's) dirty pages written back before the query writes
    spark = (SparkSession.builder.master("local[2]").config(map=session_conf()).config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "4g")
             .config(map=checkpoint_manager_conf(checkpoint_manager)).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        df = (spark.readStream.format("rmq").option("topicPattern", "Src.*").option("startingOffsets", "earliest")
              .option("maxMessagesPerTrigger", str(per_batch)).load(src)
              .select("topic", "queueId", "body"))
        if partitions:
            # each sink task takes the store lock and opens the writer once: few tasks per batch
            df = df.coalesce(partitions)
        t0 = time.monotonic()
        q = (df.writeStream.format("rmq").option("checkpointLocation", os.path.join(work, "ckpt"))
             .trigger(availableNow=True).start(dst))
        q.awaitTermination()
        wall = time.monotonic() - t0
        progress = [p for p in q.recentProgress if p["numInputRows"]]
    finally:
        spark.stop()
    steady = progress[1:] or progress
    n = sum(p["numInputRows"] for p in steady)
    trigger_s = sum(p["durationMs"].get("triggerExecution", 0) for p in steady) / 1000
    add_s = sum(p["durationMs"].get("addBatch", 0) for p in steady) / 1000
    breakdown = phase_medians(steady)
    # the JVM sink's own figures per batch (sink.metrics of the progress): time under the store lock and waiting
    sink_metrics = [(p.get("sink") or {}).get("metrics") or {} for p in steady]
    sink_phases = ("appendMsMax", "appendMsTotal", "lockWaitMsMax", "commitMs")
    sink_breakdown = {k: pct([int(m[k]) for m in sink_metrics if k in m], 50)
                      for k in sink_phases if any(k in m for m in sink_metrics)}
    written = 0
    from rmqsource.store.reader import MessageStoreReader
    with MessageStoreReader(dst) as rd:
        written = sum(i.max_offset for i in rd.queue_infos())
    shutil.rmtree(work, ignore_errors=True)
    return {"mode": spark_mode(), "checkpointFileManager": checkpoint_manager, "rows": rows, "rowsWritten": written, "bodyBytes": body_size, "batches": len(progress),
            "rowsPerBatch": per_batch, "sinkTasksPerBatch": partitions or "one per source queue", "wallSeconds": round(wall, 1),
            "sustainedRowsPerSecond": round(n / trigger_s) if trigger_s else None,
            "addBatchRowsPerSecond": round(n / add_s) if add_s else None,
            "durationMsMedians": breakdown,
            "sinkMetricsMedians": sink_breakdown,
            "note": "batches after the first: rows / triggerExecution (whole query) and rows / addBatch (the sink)"}


# --------------------------------------------------------------------------- batch sink (optional)

def sink_comparison(rows: int, body_size: int) -> dict:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import numpy as np
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from rmqsource.spark.jar import session_conf
    from rmqsource.store.config import StoreConfig
    from rmqsource.store.writer import MessageStoreWriter
    work = tempfile.mkdtemp(prefix="rmq-bench-sink-")
    config = StoreConfig().with_overrides({"messageIndexEnable": "false"})
    spark = (SparkSession.builder.master("local[2]").config(map=session_conf()).config("spark.ui.enabled", "false")
             .getOrCreate())
    body = "x" * body_size
    sdf = spark.range(rows, numPartitions=2).select(F.lit("Sink").alias("topic"),
                                                    F.lit(body).cast("binary").alias("body")).cache()
    sdf.count()
    sink_root = os.path.join(work, "sink")
    sdf.write.format("rmq").mode("append").option("messageIndexEnable", "false").save(sink_root)   # warm
    ts = time.monotonic()
    sdf.write.format("rmq").mode("append").option("messageIndexEnable", "false").save(sink_root)
    sink_s = time.monotonic() - ts
    table = pa.table({"topic": pa.array(["Sink"] * rows), "queueId": pa.array((np.arange(rows) % 4).astype(np.int32)),
                      "body": pa.array([body.encode()] * rows, type=pa.binary())})
    tw = time.monotonic()
    with MessageStoreWriter(os.path.join(work, "writer"), config) as w:
        w.put_arrow_batch(table)
    writer_s = time.monotonic() - tw
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    return {"rows": rows, "sparkRowsPerSecond": round(rows / sink_s), "writerRowsPerSecond": round(rows / writer_s),
            "ratio": round(writer_s / sink_s, 3)}


def _python_worker_peak_rss() -> int:
    """Largest VmHWM (peak RSS, bytes) of this machine's PySpark daemon / worker processes."""
    peak = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
            if b"pyspark.daemon" not in cmd and b"pyspark.worker" not in cmd:
                continue
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]) * 1024)
        except OSError:
            continue
    return peak


def sink_peak_rss(rows: int, body_size: int) -> dict:
    """One single-partition ``df.write.format("rmq")`` of ``rows`` x ``body_size``; the sink worker's peak RSS.

    Run in a fresh Spark process with worker reuse, so the worker that wrote is still there to be read."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from rmqsource.spark.jar import session_conf
    work = tempfile.mkdtemp(prefix="rmq-bench-sink-rss-")
    spark = (SparkSession.builder.master("local[1]").config(map=session_conf()).config("spark.ui.enabled", "false")
             .config("spark.python.worker.reuse", "true").getOrCreate())
    try:
        baseline = _python_worker_peak_rss()
        df = spark.range(rows, numPartitions=1).select(F.lit("Sink").alias("topic"),
                                                       F.lit("x" * body_size).cast("binary").alias("body"))
        ts = time.monotonic()
        df.write.format("rmq").mode("append").option("messageIndexEnable", "false").save(os.path.join(work, "s"))
        seconds = time.monotonic() - ts
        peak = _python_worker_peak_rss()
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    data = rows * body_size
    return {"rows": rows, "bodyBytes": body_size, "partitionMiB": round(data / 2**20), "seconds": round(seconds, 1),
            "rowsPerSecond": round(rows / seconds), "workerPeakRssMiB": round(peak / 2**20),
            "workerRssBeforeMiB": round(baseline / 2**20), "peakRssVsPartition": round(peak / data, 3),
            "peakRssVsBound512MiB": round(peak / (512 << 20), 3)}


# --------------------------------------------------------------------------- driver

def ratio(a, b):
    return round(a / b, 2) if a and b else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", default="jvm,python", help="comma-separated: jvm, python (default both)")
    ap.add_argument("--rate", type=float, default=100_000, help="producer rate, msgs/s (default 100k)")
    ap.add_argument("--seconds", type=float, default=60, help="producing time per mode (default 60)")
    ap.add_argument("--body-size", type=int, default=256)
    ap.add_argument("--put-batch", type=int, help="messages per put (default: a put every 50 ms at --rate)")
    ap.add_argument("--producer-alone", type=float, default=2e6,
                    help="messages for the producer-alone run, its own max rate (0: skip; default 2M)")
    ap.add_argument("--shuffle-partitions", type=int, default=2,
                    help="spark.sql.shuffle.partitions, used by the sink's aggregation (default 2)")
    ap.add_argument("--short", action="store_true", help="quick check: 15 s per mode")
    ap.add_argument("--sink", action="store_true", help="also compare the batch sink with the writer")
    ap.add_argument("--sink-rows", type=int, default=4_000_000, help="rows of the stream sink run (default 4M)")
    ap.add_argument("--sink-batch", type=int, default=500_000, help="maxMessagesPerTrigger of the stream sink run")
    ap.add_argument("--sink-partitions", type=int, default=2,
                    help="coalesce the stream to this many sink tasks per batch (0: one per source queue)")
    ap.add_argument("--sink-checkpoint-managers", default=",".join(CHECKPOINT_MANAGERS),
                    help="the stream sink run once per checkpoint file manager: spark-default (on a local path, "
                         "Hadoop's FileContext, which forks readlink and chmod per checkpoint file where libhadoop "
                         "is absent), filesystem (FileSystemBasedCheckpointFileManager); default both")
    ap.add_argument("--batch-sink-rows", type=int, default=200_000)
    ap.add_argument("--sink-rss", action="store_true",
                    help="also print the sink worker's peak RSS writing one 3M x 1 KiB partition")
    ap.add_argument("--sink-rss-rows", type=int, default=3_000_000)
    ap.add_argument("--dir", help="parent of the work directories (default: the system temp dir)")
    ap.add_argument("--json", help="write the results to this file")
    ap.add_argument("--one", help=argparse.SUPPRESS)            # internal: run one mode, print its JSON
    ap.add_argument("--one-sink", help=argparse.SUPPRESS)       # internal: one stream sink run, print its JSON
    args = ap.parse_args(argv)
    if args.short:
        args.seconds = 15
    if args.one:
        print("RESULT " + json.dumps(run_one(args)), flush=True)
        return 0
    if args.one_sink:
        run = stream_sink_rate(args.sink_rows, args.body_size, args.sink_batch, args.sink_partitions, args.one_sink)
        print("RESULT " + json.dumps(run), flush=True)
        return 0
    results = {"loadAverageStart": load_average(), "cores": os.cpu_count(), "modes": {}}
    if args.producer_alone:
        results["producerAlone"] = producer_alone(args)
        print(f"== producer alone: {results['producerAlone']}", file=sys.stderr, flush=True)
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        env = dict(os.environ, RMQ_SPARK_MODE=mode)
        cmd = [sys.executable, os.path.abspath(__file__), "--one", mode, "--rate", str(args.rate),
               "--seconds", str(args.seconds), "--body-size", str(args.body_size), "--put-batch", str(put_batch(args)),
               "--shuffle-partitions", str(args.shuffle_partitions)]
        if args.dir:
            cmd += ["--dir", args.dir]
        print(f"== {mode}: {args.rate:.0f} msgs/s for {args.seconds:.0f} s (load average {load_average()})",
              file=sys.stderr, flush=True)
        results["modes"][mode] = run_child(cmd, env, f"{mode} run")
    results["loadAverageEnd"] = load_average()
    if args.sink:
        results["streamSink"] = []
        for manager in args.sink_checkpoint_managers.split(","):
            # a fresh process each (a second session in one process keeps the first one's conf and runs slower)
            cmd = [sys.executable, os.path.abspath(__file__), "--one-sink", manager, "--sink-rows", str(args.sink_rows),
                   "--body-size", str(args.body_size), "--sink-batch", str(args.sink_batch),
                   "--sink-partitions", str(args.sink_partitions)]
            run = run_child(cmd, None, f"stream sink run ({manager})")
            results["streamSink"].append(run)
            print(f"== stream sink: {run}", file=sys.stderr, flush=True)
        results["batchSink"] = sink_comparison(args.batch_sink_rows, args.body_size)
    if args.sink_rss:
        results["batchSinkPeakRss"] = sink_peak_rss(args.sink_rss_rows, 1024)
    m = results["modes"]
    if "jvm" in m and "python" in m:
        j, p = m["jvm"], m["python"]
        results["jvmVsPython"] = {
            "inputRate": ratio(j["stream"]["inputRateWhileProducing"], p["stream"]["inputRateWhileProducing"]),
            "latencyMedian": ratio(p["latencySeconds"]["median"], j["latencySeconds"]["median"]),
            "latencyP99": ratio(p["latencySeconds"]["p99"], j["latencySeconds"]["p99"]),
            "note": "inputRate: jvm / python; latency: python / jvm (both > 1 when the JVM stream is better)",
        }
    text = json.dumps(results, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
