#!/usr/bin/env python
"""Benchmark: lookups by key (``option("keys", ...)``) against the filtered full scan, one session.

1. Writes a sample store (rmqsource.sample.write_sample_store: the writer builds the IndexFiles; the store of
   scripts/bench_spark_read.py has none) of N messages (default 2M; keys ``order-N user-M``), once, under
   --dir.
2. Picks --keys distinct ``order-N`` keys (default 10,000; seeded), most of them held by some message.
3. Times, in one SparkSession (local[2]) with the JVM jar on spark.jars, for the JVM scan (format "rmq") and
   for the Python data source (registered as "rmq_python" in the same session), runs interleaved, median
   of --repeat:
   * keys: ``option("keys", json)`` then count(*), sum(commitLogOffset) (planning included)
   * scan: the same aggregate of the whole read where ``exists(keys, k -> k IN (...))`` (Spark makes the IN
     a hash set; the session has no RmqExtensions, so the JVM scan is not handed the keys: a real scan).
     With --arrays-overlap the filter is ``arrays_overlap(keys, array(...))``, what docs/reading.md names:
     Spark evaluates it by probing the whole literal array for each row (the row's array is the smaller
     side), minutes for 2M rows and 10,000 keys, so it measures Spark's expression more than the read
   checks both give the same answer and prints the ratio scan / keys (the target: at least 20x).

Usage: bench_key_lookups.py [--messages N] [--keys 10000] [--dir /tmp/rmq-bench] [--repeat 3]
                            [--skip-python] [--skip-jvm] [--arrays-overlap]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

AGG = ("count(*) AS n", "sum(commitLogOffset) AS s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=2_000_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--dir", default="/tmp/rmq-bench")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-python", action="store_true", help="do not time the Python data source")
    ap.add_argument("--skip-jvm", action="store_true", help="do not time the JVM scan (no jar needed)")
    ap.add_argument("--arrays-overlap", action="store_true",
                    help="filter the scan with arrays_overlap(keys, array(...)) (slow in Spark: see above)")
    args = ap.parse_args()

    from rmqsource.sample import write_sample_store
    store = Path(args.dir) / f"sample-store-{args.messages}"
    if not (store / "index").is_dir():
        t = time.perf_counter()
        write_sample_store(store, args.messages)
        print(f"wrote the sample store: {args.messages:,} messages in {time.perf_counter() - t:.1f}s -> {store}")
    keys = sorted(f"order-{n}" for n in random.Random(17).sample(range(1_000_000), args.keys))

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    builder = (SparkSession.builder.master("local[2]").appName("bench_key_lookups")
               .config("spark.ui.showConsoleProgress", "false").config("spark.sql.session.timeZone", "UTC")
               .config("spark.python.worker.reuse", "true")
               .config("spark.sql.python.filterPushdown.enabled", "true"))
    formats = {}
    if not args.skip_jvm:
        from rmqsource.spark.jar import build_jar
        builder = builder.config("spark.jars", build_jar())
        formats["jvm"] = "rmq"
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not args.skip_python:
        from rmqsource.spark.source import RmqDataSource

        class PythonRmq(RmqDataSource):
            """The Python data source under another name, timed in the same session as the JVM scan."""

            @classmethod
            def name(cls) -> str:
                return "rmq_python"

        spark.dataSource.register(PythonRmq)
        formats["python"] = "rmq_python"
    if not formats:
        raise SystemExit("nothing to time: --skip-python and --skip-jvm")

    keys_json = json.dumps(keys)
    literals = ", ".join("'" + k.replace("'", "\\'") + "'" for k in keys)
    overlap = (f"arrays_overlap(keys, array({literals}))" if args.arrays_overlap
               else f"exists(keys, k -> k IN ({literals}))")

    def by_keys(fmt):
        return spark.read.format(fmt).option("keys", keys_json).load(str(store)).selectExpr(*AGG).collect()[0]

    def by_scan(fmt):
        return spark.read.format(fmt).load(str(store)).where(overlap).selectExpr(*AGG).collect()[0]

    def timed(fn, *a):
        t = time.perf_counter()
        out = fn(*a)
        return time.perf_counter() - t, tuple(out)

    times: dict = {(k, q): [] for k in formats for q in ("keys", "scan")}
    floor: list = []           # Spark's own cost of a query of one in-memory row, in the same rounds
    answers: dict = {}
    failed: dict = {}
    for _ in range(args.repeat):
        floor.append(timed(lambda: spark.range(1).selectExpr("count(*)").collect())[0])
        for kind, fmt in list(formats.items()):
            for query, fn in (("keys", by_keys), ("scan", by_scan)):
                try:
                    seconds, got = timed(fn, fmt)
                except Exception as exc:          # e.g. a jar without the keys option yet
                    failed[kind] = f"{query}: {type(exc).__name__}: {str(exc).strip()[:600]}"
                    formats.pop(kind)
                    break
                times[(kind, query)].append(seconds)
                answers.setdefault((kind, query), got)
    print(f"\n{args.messages:,} messages ({store}); {len(keys):,} keys; local[2]; medians of {args.repeat} "
          f"interleaved runs; load {os.getloadavg()[0]:.1f}; Spark's floor (one in-memory row) "
          f"{statistics.median(floor) * 1000:.0f} ms")
    for kind, why in failed.items():
        print(f"{kind:<6}  FAILED  {why}")
    for kind in formats:
        k, s = statistics.median(times[(kind, "keys")]), statistics.median(times[(kind, "scan")])
        same = answers[(kind, "keys")] == answers[(kind, "scan")]
        n = answers[(kind, "keys")][0]
        print(f"{kind:<6}  keys {k * 1000:8.0f} ms   filtered scan {s * 1000:8.0f} ms   "
              f"ratio {s / k:6.1f}x (target >= 20x; scan filter: {'arrays_overlap' if args.arrays_overlap else 'exists IN'})   {n:,} rows{'' if same else '  ANSWERS DIFFER'}")
        if not same:
            print(f"        keys {answers[(kind, 'keys')]} != scan {answers[(kind, 'scan')]}")


if __name__ == "__main__":
    main()
