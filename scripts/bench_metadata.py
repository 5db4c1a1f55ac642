#!/usr/bin/env python
"""Benchmark: the metadata tables (``option("metadata", T)``) of a large store, against Spark's own floor.

Uses (or generates) the store of scripts/bench_spark_read.py (N messages, default 10M, 4 topics x 8 queues,
1 GiB CommitLog segments) and times, in one SparkSession (local[2]) with the jar on spark.jars, a
``collect()`` of each metadata table (queues, topics, groups, segments, indexes) through the JVM scan and the
Python data source (registered as ``rmq_python`` in the same session), runs interleaved, median of --repeat,
and, in the same rounds, Spark's floor: ``spark.range(1).collect()`` of one in-memory row. Prints each time
and its ratio to the floor (a table is answered from ConsumeQueues, configs and file headers: its time should
stay a small multiple of what Spark needs for any query), and the rows, checked equal in both paths.

Usage: bench_metadata.py [--messages N] [--dir /tmp/rmq-bench] [--repeat 5] [--skip-python]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

TABLES = ("queues", "topics", "groups", "segments", "indexes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=10_000_000)
    ap.add_argument("--dir", default="/tmp/rmq-bench")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip-python", action="store_true", help="do not time the Python data source")
    args = ap.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_spark_read import generate
    from rmqsource.spark.jar import build_jar
    jar = build_jar()
    store = Path(args.dir) / f"store-{args.messages}-distinct"      # bench_spark_read.py's store
    if not (store / "consumequeue").is_dir():
        t = time.perf_counter()
        generate(store, args.messages)
        print(f"generated store: {args.messages} messages in {time.perf_counter() - t:.1f}s -> {store}")

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("bench_metadata").config("spark.jars", jar)
             .config("spark.ui.showConsoleProgress", "false").config("spark.sql.session.timeZone", "UTC")
             .config("spark.python.worker.reuse", "true").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from rmqsource.spark.source import RmqDataSource

    class PythonRmq(RmqDataSource):
        """The Python data source under another name, timed in the same session as the JVM scan."""

        @classmethod
        def name(cls) -> str:
            return "rmq_python"

    spark.dataSource.register(PythonRmq)
    formats = {"jvm": "rmq"} if args.skip_python else {"jvm": "rmq", "python": "rmq_python"}

    def timed(fn):
        t = time.perf_counter()
        out = fn()
        return time.perf_counter() - t, out

    def load(fmt, table):
        return spark.read.format(fmt).option("metadata", table).load(str(store))

    times: dict = {(k, t): [] for k in formats for t in TABLES}
    floor: list = []
    rows: dict = {}
    for _ in range(args.repeat):
        floor.append(timed(lambda: spark.range(1).collect())[0])
        for table in TABLES:
            for kind, fmt in formats.items():
                seconds, got = timed(lambda: load(fmt, table).collect())
                times[(kind, table)].append(seconds)
                rows[(kind, table)] = sorted(tuple(r) for r in got)
    for table in TABLES:
        if "python" in formats and rows[("jvm", table)] != rows[("python", table)]:
            raise SystemExit(f"metadata {table}: the JVM scan and the Python data source differ")
    f = statistics.median(floor)
    load_avg = os.getloadavg()[0]
    print(f"\n{args.messages:,} messages ({store}); local[2]; medians of {args.repeat} interleaved runs; "
          f"Spark's floor (one in-memory row): {f * 1000:.0f} ms; load {load_avg:.1f}")
    for table in TABLES:
        cells = [f"{kind} {statistics.median(times[(kind, table)]) * 1000:7.1f} ms "
                 f"({statistics.median(times[(kind, table)]) / f:4.1f}x floor)" for kind in formats]
        print(f"metadata {table:<9} {len(rows[('jvm', table)]):>4} rows   " + "   ".join(cells))


if __name__ == "__main__":
    main()
