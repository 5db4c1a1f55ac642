#!/usr/bin/env python
"""Streaming benchmark: a producer process appends while a ``processingTime="0 seconds"`` query consumes.

Reports (and writes as JSON with ``--json``):

* producer: achieved append rate (msgs/s, 256-byte bodies by default);
* stream: steady-state input rate (rows/s, from StreamingQueryProgress,
  first batches excluded), batch durations (median / p90 / max), lag
  (producer count - consumed) over time and at the end;
* latency: median / p90 of append -> foreachBatch (bornTimestamp is set by
  the producer right before its put; foreachBatch records its wall clock);
* batch sink: rows/s of ``df.write.format("rmq")`` (2 tasks) vs the store
  writer's own batch put rate measured in the same run.

``--short`` runs a quick version (~1 minute incl. Spark start).
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

PRODUCER = textwrap.dedent("""
    import sys, time, json
    from rmqsource.store.config import StoreConfig
    import numpy as np
    import pyarrow as pa
    from rmqsource.store.writer import MessageStoreWriter
    root, total, rate, body_size, stats = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    config = StoreConfig().with_overrides({"messageIndexEnable": "false"})
    body = b"x" * body_size
    chunk = max(100, int(rate / 50))
    t0 = time.monotonic()
    done = 0
    with MessageStoreWriter(root, config, lock_timeout_s=30) as w, open(stats, "w") as out:
        while done < total:
            n = min(chunk, total - done)
            now = int(time.time() * 1000)
            table = pa.table({"topic": pa.array(["Bench"] * n),
                              "queueId": pa.array((np.arange(done, done + n) % 4).astype(np.int32)),
                              "body": pa.array([body] * n, type=pa.binary()),
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
    print(json.dumps({"produced": done, "seconds": elapsed, "rate": done / elapsed}), flush=True)
""")


def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--short", action="store_true", help="quick run (small volume)")
    ap.add_argument("--messages", type=int, help="messages to produce (default 1,500,000; short: 150,000)")
    ap.add_argument("--rate", type=float, default=100_000, help="target producer rate, msgs/s")
    ap.add_argument("--body-size", type=int, default=256)
    ap.add_argument("--sink-rows", type=int, help="rows for the batch-sink comparison (default 200k; short 40k)")
    ap.add_argument("--dir", help="work directory (default: a temp dir, removed afterwards)")
    ap.add_argument("--json", help="write the results to this file")
    args = ap.parse_args(argv)
    total = args.messages or (150_000 if args.short else 1_500_000)
    sink_rows = args.sink_rows or (40_000 if args.short else 200_000)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = args.dir or tempfile.mkdtemp(prefix="rmq-bench-")
    root = os.path.join(work, "store")
    os.makedirs(work, exist_ok=True)
    shutil.rmtree(root, ignore_errors=True)
    from rmqsource.store.config import StoreConfig
    from rmqsource.store.writer import MessageExtBrokerInner, MessageStoreWriter
    config = StoreConfig().with_overrides({"messageIndexEnable": "false"})
    with MessageStoreWriter(root, config) as w:          # the topic's queues exist before the query starts
        w.put_messages([MessageExtBrokerInner(topic="Bench", queue_id=q, body=b"warm") for q in range(4)])

    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("rmq-bench")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")

    latencies: list[float] = []
    consumed = [0]
    lock = threading.Lock()

    def each(df, batch_id):
        rows = df.select("bornTimestamp").collect()
        now = time.time()
        lat = [now - r[0].timestamp() for r in rows if r[0] is not None and r[0].timestamp() > 1]
        with lock:
            latencies.extend(lat)
            consumed[0] += len(rows)

    df = (spark.readStream.format("rmq").option("topics", "Bench").option("startingOffsets", "earliest")
          .option("messageIndexEnable", "false").load(root))
    q = (df.writeStream.foreachBatch(each).option("checkpointLocation", os.path.join(work, "ckpt"))
         .trigger(processingTime="0 seconds").start())
    # let the query start (first batch pays the Python worker start-up)
    t_wait = time.monotonic()
    while not q.recentProgress and time.monotonic() - t_wait < 120:
        time.sleep(0.2)

    stats_path = os.path.join(work, "producer.txt")
    prod = subprocess.Popen([sys.executable, "-c", PRODUCER, root, str(total), str(args.rate), str(args.body_size),
                             stats_path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lag_samples = []
    t0 = time.time()
    while prod.poll() is None or consumed[0] < total + 4:
        produced = 0
        try:
            with open(stats_path) as f:
                lines = f.read().split()
                produced = int(lines[-1]) if lines else 0
        except OSError:
            pass
        with lock:
            lag_samples.append((round(time.time() - t0, 2), produced, produced - (consumed[0] - 4)))
        if q.exception():
            raise SystemExit(f"query failed: {q.exception()}")
        if prod.poll() is not None and time.time() - t0 > 600:
            break
        time.sleep(0.5)
    with lock:
        lag_samples.append((round(time.time() - t0, 2), total, total - (consumed[0] - 4)))
    prod_out, prod_err = prod.communicate()
    if prod.returncode:
        raise SystemExit(f"producer failed: {prod_err}")
    producer = json.loads(prod_out.strip().splitlines()[-1])
    progress = [p for p in q.recentProgress if p["numInputRows"] > 0]
    q.stop()
    steady = progress[2:] if len(progress) > 4 else progress
    durations = [p["durationMs"]["triggerExecution"] for p in steady]
    rates = [p["processedRowsPerSecond"] for p in steady if p.get("processedRowsPerSecond")]
    span_rows = sum(p["numInputRows"] for p in steady)
    first_ts = time.mktime(time.strptime(steady[0]["timestamp"][:19], "%Y-%m-%dT%H:%M:%S")) if steady else 0
    last_ts = time.mktime(time.strptime(steady[-1]["timestamp"][:19], "%Y-%m-%dT%H:%M:%S")) if steady else 0
    span = max(1e-9, (last_ts - first_ts) + (steady[-1]["durationMs"]["triggerExecution"] / 1000 if steady else 0))

    # batch sink vs the writer's own batch rate
    from pyspark.sql import functions as F
    sink_root = os.path.join(work, "sink")
    body = "x" * args.body_size
    sdf = spark.range(sink_rows, numPartitions=2).select(F.lit("Sink").alias("topic"),
                                                         F.lit(body).cast("binary").alias("body")).cache()
    sdf.count()
    ts = time.monotonic()
    sdf.write.format("rmq").mode("append").option("messageIndexEnable", "false").save(sink_root)
    sink_cold_s = time.monotonic() - ts            # includes the Python workers' start-up
    ts = time.monotonic()
    sdf.write.format("rmq").mode("append").option("messageIndexEnable", "false").save(sink_root)
    sink_s = time.monotonic() - ts
    wroot = os.path.join(work, "writer")
    import numpy as np
    import pyarrow as pa
    # The writer's own batch API on the same rows (columnar path, one process).
    table = pa.table({"topic": pa.array(["Sink"] * sink_rows),
                      "queueId": pa.array((np.arange(sink_rows) % 4).astype(np.int32)),
                      "body": pa.array([body.encode()] * sink_rows, type=pa.binary())})
    tw = time.monotonic()
    with MessageStoreWriter(wroot, config) as w:
        w.put_arrow_batch(table)
    writer_s = time.monotonic() - tw
    spark.stop()

    result = {
        "messages": total, "bodySize": args.body_size,
        "producer": {"targetRate": args.rate, "achievedRate": round(producer["rate"]),
                     "seconds": round(producer["seconds"], 2)},
        "stream": {
            "batches": len(progress), "steadyBatches": len(steady),
            "steadyInputRate": round(span_rows / span) if steady else None,
            "medianProcessedRowsPerSecond": round(statistics.median(rates)) if rates else None,
            "batchDurationMs": {"median": pct(durations, 50), "p90": pct(durations, 90),
                                "max": max(durations) if durations else None},
            "rowsPerBatch": {"median": pct([p["numInputRows"] for p in steady], 50),
                             "max": max((p["numInputRows"] for p in steady), default=None)},
            "consumed": consumed[0] - 4,
        },
        "lag": {"max": max((s[2] for s in lag_samples), default=0),
                "median": pct([s[2] for s in lag_samples], 50),
                "final": lag_samples[-1][2] if lag_samples else None,
                "samples": lag_samples[:: max(1, len(lag_samples) // 40)]},
        "latencySeconds": {"median": round(pct(latencies, 50), 3) if latencies else None,
                           "p90": round(pct(latencies, 90), 3) if latencies else None},
        "batchSink": {"rows": sink_rows, "sparkRowsPerSecond": round(sink_rows / sink_s),
                      "sparkRowsPerSecondCold": round(sink_rows / sink_cold_s),
                      "writerRowsPerSecond": round(sink_rows / writer_s),
                      "ratio": round((sink_rows / sink_s) / (sink_rows / writer_s), 3)},
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
