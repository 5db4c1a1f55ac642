#!/usr/bin/env python
"""Batch sink benchmark: ``df.write.format("rmq")`` against the other ways to write the same rows.

    scripts/bench_spark_write.py [--rows 2000000] [--body-size 256] [--repeat 1] [--dir DIR] [--json FILE]

One DataFrame (default 2M rows, 256-byte bodies, 4 topics x 8 queues given as queueId, local[2], two
partitions), cached in memory before anything is timed, then each write into a fresh directory:

* ``rmq``: ``df.write.format("rmq")`` in the session's mode (RMQ_SPARK_MODE; jvm = the JVM sink of the
  jar), default store config: dispatch (ConsumeQueues) and IndexFile included, clean close;
* ``parquet``: Spark's own Parquet write of the same DataFrame (snappy);
* ``rmq put --from``: the CLI's columnar put of the same rows (the Parquet files just written), a
  subprocess, wall time;
* ``raw``: a sequential ``os.write`` of the CommitLog bytes the rmq write produced (up to its end,
  64 MiB writes, a new file) and one ``fsync`` (the sink's commit makes its bytes durable too), the
  floor of any durable writer on this disk.

Every write starts from the same page-cache state: dirty pages are written back (``sync``, then a wait
until less than 64 MiB is dirty) before its clock starts, so no write pays for the one before it. The
JVM sink's tasks stage their rows in their execution memory (``spark.driver.memory`` 4g here, so a
1M-row task is not spilled).

Printed: msgs/s of each and the ratios of the rmq sink to each (> 1: the sink is faster). Medians over
``--repeat`` runs. The machine may be shared: run it when ``uptime`` is low; ``--dir /dev/shm`` takes
the disk out (a memory-bound figure).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def settle() -> None:
    """Write back dirty pages (so the next write starts from a clean page cache)."""
    os.sync()
    for _ in range(600):
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        if int(info["Dirty"].split()[0]) + int(info["Writeback"].split()[0]) < 64 << 10:
            return
        time.sleep(0.1)


def raw_write_seconds(store: str, scratch: str) -> tuple[float, int]:
    """Time of writing the store's CommitLog bytes (up to the valid end) sequentially to a new file."""
    from rmqsource.store.reader import MessageStoreReader
    with MessageStoreReader(store) as rd:
        end = rd.commit_log_max_offset
    segs = sorted(glob.glob(os.path.join(store, "commitlog", "*")))
    out = os.path.join(scratch, "raw.bin")
    left = end
    t0 = time.perf_counter()
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for s in segs:
            with open(s, "rb") as f:
                while left > 0:
                    block = f.read(min(64 << 20, left))
                    if not block:
                        break
                    os.write(fd, block)
                    left -= len(block)
        os.fsync(fd)
    finally:
        os.close(fd)
    seconds = time.perf_counter() - t0
    os.unlink(out)
    return seconds, end


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--body-size", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--dir", help="parent of the work directories (default: the system temp dir)")
    ap.add_argument("--json", help="write the results to this file")
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from rmqsource.spark.jar import session_conf, spark_mode
    work = tempfile.mkdtemp(prefix="rmq-bench-write-", dir=args.dir)
    spark = (SparkSession.builder.master("local[2]").config(map=session_conf()).config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "4g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    n, size = args.rows, args.body_size
    df = (spark.range(n, numPartitions=2)
          .select(F.concat(F.lit("BenchTopic"), (F.col("id") % 4).cast("string")).alias("topic"),
                  ((F.col("id") / 4).cast("long") % 8).cast("int").alias("queueId"),
                  F.expr(f"substring(repeat(sha2(cast(id AS string), 256), {size // 64 + 1}), 1, {size})")
                  .cast("binary").alias("body"))
          .cache())
    df.count()
    # warm both writers' code paths (the JIT compiles them) on a tenth of the rows
    warm = max(1000, n // 10)
    df.limit(warm).write.format("rmq").mode("append").save(os.path.join(work, "warm-rmq"))
    df.limit(warm).write.mode("overwrite").parquet(os.path.join(work, "warm-parquet"))
    for d in ("warm-rmq", "warm-parquet"):
        shutil.rmtree(os.path.join(work, d), ignore_errors=True)
    runs = {"rmq": [], "parquet": [], "put": [], "raw": []}
    raw_bytes = 0
    for r in range(args.repeat):
        store = os.path.join(work, f"rmq-{r}")
        settle()
        t0 = time.perf_counter()
        df.write.format("rmq").mode("append").save(store)
        runs["rmq"].append(time.perf_counter() - t0)
        pq = os.path.join(work, f"parquet-{r}")
        settle()
        t0 = time.perf_counter()
        df.write.parquet(pq)
        runs["parquet"].append(time.perf_counter() - t0)
        parts = sorted(glob.glob(os.path.join(pq, "*.parquet")))
        cmd = [sys.executable, "-m", "rmqsource", "put", os.path.join(work, f"put-{r}")]
        for p in parts:
            cmd += ["--from", p]
        settle()
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        runs["put"].append(time.perf_counter() - t0)
        settle()
        seconds, raw_bytes = raw_write_seconds(store, work)
        runs["raw"].append(seconds)
        for d in (pq, os.path.join(work, f"put-{r}")):
            shutil.rmtree(d, ignore_errors=True)
        if r + 1 < args.repeat:
            shutil.rmtree(store, ignore_errors=True)
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in runs.items()}
    rate = {k: round(n / s) for k, s in med.items()}
    results = {
        "mode": spark_mode(), "rows": n, "bodyBytes": size, "topics": 4, "queuesPerTopic": 8, "cores": os.cpu_count(),
        "seconds": {k: round(s, 2) for k, s in med.items()}, "msgsPerSecond": rate,
        "runsSeconds": {k: [round(s, 2) for s in v] for k, v in runs.items()},
        "loadAverage": os.getloadavg()[0],
        "commitLogBytes": raw_bytes,
        "rmqSinkVs": {"parquet": round(med["parquet"] / med["rmq"], 2), "rmqPutFrom": round(med["put"] / med["rmq"], 2),
                      "rawCommitLogWrite": round(med["raw"] / med["rmq"], 2),
                      "note": "time of the other / time of the rmq sink (> 1: the sink is faster)"},
    }
    text = json.dumps(results, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
