#!/usr/bin/env python
"""Benchmark: typed JSON bodies (``bodyFormat=json``) against ``from_json(body)`` and against Parquet.

Generates (once) a store of N messages (default 2M, 4 topics x 8 queues) whose bodies are JSON documents of 20
fields (longs, doubles, strings, booleans, a timestamp), and a Parquet copy of the same rows with those 20
fields as typed columns. Then, in one SparkSession (local[2]) with the jar on spark.jars, runs interleaved
(median of --repeat), each query writing to Spark's ``noop`` sink so every row and column is produced:

  decode     rmq scan with bodyFormat=json + bodySchema, the 20 decoded columns and queueOffset
  from_json  the same rmq scan without bodyFormat, from_json(CAST(body AS STRING), schema) in the query
  parquet    spark.read.parquet of the typed copy, the same 21 columns

and prints each time with the ratios from_json / decode (target >= 1.5) and decode / parquet (target <= 2).
Also checks that decode and from_json give the same rows on a sample.

Usage: bench_bodies.py [--messages N] [--dir /tmp/rmq-bench] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

FIELDS = ([(f"l{i}", "BIGINT") for i in range(6)] + [(f"d{i}", "DOUBLE") for i in range(5)]
          + [(f"s{i}", "STRING") for i in range(6)] + [("b0", "BOOLEAN"), ("b1", "BOOLEAN"), ("at", "TIMESTAMP")])
DDL = ", ".join(f"{n} {t}" for n, t in FIELDS)


def body_table(first: int, count: int):
    """Writer rows whose bodies are 20-field JSON objects (built column-wise with Arrow, no Python loop)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    seq = np.arange(first, first + count, dtype=np.int64)
    rng = np.random.default_rng(first + 7)
    parts = ["{"]
    for i, (name, kind) in enumerate(FIELDS):
        sep = "" if i == 0 else ","
        if kind == "BIGINT":
            value = pa.array(seq * (i + 3) + rng.integers(0, 1_000_000, count)).cast(pa.string())
        elif kind == "DOUBLE":
            value = pa.array(np.round(rng.random(count) * 10_000, 3)).cast(pa.string())
        elif kind == "STRING":
            value = pc.binary_join_element_wise('"', f"value-{name}-", pa.array(seq % 9973).cast(pa.string()), '"', "")
        elif kind == "BOOLEAN":
            value = pa.array(np.where(seq % (i + 2) == 0, "true", "false"))
        else:
            value = pa.array([f'"2026-11-{1 + d:02d}T10:00:00Z"' for d in range(28)])
            value = pc.take(value, pa.array(seq % 28))
        parts += [f'{sep}"{name}":', value]
    parts.append("}")
    body = pc.binary_join_element_wise(*parts, "")
    topics = np.array(["Orders", "Payments", "Shipments", "Refunds"], dtype=object)
    return pa.table({"topic": pa.array(topics[seq % 4], type=pa.string()),
                     "queueId": pa.array((seq // 4 % 8).astype(np.int32)),
                     "body": body.cast(pa.binary()),
                     "storeTimestamp": pa.array(1_764_000_000_000 + seq)})


def generate(store: Path, messages: int) -> None:
    from rmqsource.store.config import StoreConfig
    from rmqsource.store.writer import MessageStoreWriter
    config = StoreConfig.from_mapping({"mappedFileSizeCommitLog": 1024 * 1024 * 1024})
    with MessageStoreWriter(store, config) as writer:
        for first in range(0, messages, 250_000):
            results = writer.put_arrow_batch(body_table(first, min(250_000, messages - first)))
            assert results.ok_count == len(results)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=2_000_000)
    ap.add_argument("--dir", default="/tmp/rmq-bench")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    from rmqsource.spark.jar import build_jar
    jar = build_jar()
    store = Path(args.dir) / f"store-{args.messages}-json20"
    if not (store / "consumequeue").is_dir():
        t = time.perf_counter()
        generate(store, args.messages)
        print(f"generated store: {args.messages} messages in {time.perf_counter() - t:.1f}s -> {store}")

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    spark = (SparkSession.builder.master("local[2]").appName("bench_bodies").config("spark.jars", jar)
             .config("spark.ui.showConsoleProgress", "false").config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.memory", "4g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    names = [n for n, _ in FIELDS]
    schema = spark.createDataFrame([], DDL).schema

    def decode():
        return (spark.read.format("rmq").option("bodyFormat", "json").option("bodySchema", DDL).load(str(store))
                .select("queueOffset", *names))

    def from_json():
        return (spark.read.format("rmq").load(str(store))
                .select("queueOffset", F.from_json(F.col("body").cast("string"), schema).alias("j"))
                .select("queueOffset", *[f"j.{n}" for n in names]))

    parquet_path = Path(args.dir) / f"parquet-{args.messages}-json20"
    if not (parquet_path / "_SUCCESS").exists():
        from_json().write.mode("overwrite").parquet(str(parquet_path))

    def parquet():
        return spark.read.parquet(str(parquet_path)).select("queueOffset", *names)

    sample = lambda df: sorted(tuple(r) for r in df.where("queueOffset < 50").collect())
    if sample(decode()) != sample(from_json()):
        raise SystemExit("bodyFormat=json and from_json(body) give different rows")

    queries = {"decode": decode, "from_json": from_json, "parquet": parquet}
    times: dict = {k: [] for k in queries}
    for _ in range(args.repeat):
        for kind, q in queries.items():
            t = time.perf_counter()
            q().write.format("noop").mode("overwrite").save()
            times[kind].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n{args.messages:,} messages with 20-field JSON bodies ({store}); local[2]; medians of {args.repeat} "
          f"interleaved runs; load {os.getloadavg()[0]:.1f}")
    for k, v in med.items():
        print(f"  {k:<10} {v:7.2f} s   ({args.messages / v / 1e6:5.2f} M rows/s)")
    print(f"  from_json / decode = {med['from_json'] / med['decode']:.2f}x (target >= 1.5)   "
          f"decode / parquet = {med['decode'] / med['parquet']:.2f}x (target <= 2)")


if __name__ == "__main__":
    main()
