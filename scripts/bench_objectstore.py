#!/usr/bin/env python
"""Benchmark: format("rmq") read from an S3 bucket by the JVM scan vs Parquet of the same rows, same bucket.

1. The store and its Parquet peer of scripts/bench_spark_read.py (N messages, default 2M, 256-byte bodies,
   4 topics x 8 queues, 10 tags; shared with that script under --dir), uploaded to one bucket of a real
   S3 API server on loopback (moto's server mode, tests/support/objectstore.py), every file whole, as a sync job
   copies it.
2. One local[2] SparkSession with the rmq jar and Hadoop's S3A connector (scripts/s3_jars.sh) on
   spark.jars times, runs interleaved, median of --repeat:
   * full-scan aggregate (count, sum(length(body)), sums of offsets, min/max(storeTimestamp))
   * the same aggregate where tags = 'tag-3' (10 %)
   * msgId = x, planning included (load + where + collect)
   and prints the ratio Parquet time / rmq time (> 1: rmq is faster).
3. Beside each query, the GET requests and bytes the server sent (its request log: every request the
   connector made, whatever its statistics call them), in the last run and in the first (which also
   fetches the ConsumeQueue files an executor then keeps), for rmq and for Parquet, against the
   bytes the query needs: the store's valid CommitLog bytes (full scan); the ConsumeQueue bytes plus
   the matching records (tag query).

moto answers a ranged GET by reading the whole object and slicing it, so on this server a GET costs time
in proportion to the object's size, unlike S3: with 1 GiB CommitLog segments (RocketMQ's default, as in
bench_spark_read.py) every window the scan reads costs a 1 GiB read, while Parquet's files are small.
--segment-mib sets the segment size of the generated store (its folder name carries it).

Needs moto[server] and boto3 (scripts/test_objectstore.sh installs them) and a JDK for the jar.
Usage: bench_objectstore.py [--messages N] [--segment-mib 1024] [--dir /tmp/rmq-bench] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "support"))

import bench_spark_read  # noqa: E402
from bench_spark_read import AGGS, generate  # noqa: E402
from objectstore import S3Server, spark_session  # noqa: E402

TAG = "tag-3"


def store_bytes(store: Path) -> tuple[int, int]:
    """(valid CommitLog bytes, ConsumeQueue bytes holding units) of the store."""
    from rmqsource.store.reader import MessageStoreReader
    with MessageStoreReader(store) as r:
        commit_log = r.commit_log_max_offset - r.commitlog.segments[0].start_offset
    units = 0
    for f in (store / "consumequeue").rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            n = len(data) // 20
            while n and data[(n - 1) * 20:n * 20] == bytes(20):
                n -= 1
            units += n * 20
    return commit_log, units


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=2_000_000)
    ap.add_argument("--dir", default="/tmp/rmq-bench")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--segment-mib", type=int, default=1024, help="CommitLog segment size of the generated store")
    args = ap.parse_args()

    from rmqsource.spark.jar import build_jar
    jar = build_jar()
    base = Path(args.dir)
    seg = "" if args.segment_mib == 1024 else f"-seg{args.segment_mib}m"    # 1 GiB: bench_spark_read.py's store
    store, parquet = base / f"store-{args.messages}{seg}", base / f"parquet-{args.messages}{seg}"
    if not (store / "consumequeue").is_dir():
        t = time.perf_counter()
        bench_spark_read.SEGMENT = args.segment_mib << 20
        generate(store, args.messages)
        print(f"generated store: {args.messages} messages in {time.perf_counter() - t:.1f}s -> {store}")

    server = S3Server()
    spark = spark_session(server.endpoint, "bench_objectstore", jar)
    try:
        if not parquet.is_dir():
            t = time.perf_counter()
            spark.read.format("rmq").load(str(store)).write.option("compression", "snappy").parquet(str(parquet))
            print(f"wrote parquet (snappy) in {time.perf_counter() - t:.1f}s -> {parquet}")
        t = time.perf_counter()
        rmq_uri = server.upload_dir(store, "bench/store")
        parquet_uri = server.upload_dir(parquet, "bench/parquet")
        print(f"uploaded store and parquet to {server.endpoint} in {time.perf_counter() - t:.1f}s")
        run(spark, server, store, parquet, rmq_uri, parquet_uri, args)
    finally:
        spark.stop()
        server.stop()


def run(spark, server: S3Server, store: Path, parquet: Path, rmq_uri: str, parquet_uri: str, args) -> None:
    n = args.messages
    commit_log_bytes, cq_bytes = store_bytes(store)
    parquet_bytes = sum(f.stat().st_size for f in parquet.rglob("*.parquet"))
    parquet_files = len(list(parquet.rglob("*.parquet")))
    sources = {"rmq": lambda: spark.read.format("rmq").load(rmq_uri),
               "parquet": lambda: spark.read.parquet(parquet_uri)}

    def agg(df):
        return tuple(df.selectExpr(*AGGS).collect()[0])

    def compare(title: str, query) -> dict:
        times = {k: [] for k in sources}
        traffic = {}
        first = {}
        answers = {}
        for _ in range(args.repeat):
            for k, load in sources.items():
                snap = server.log.snapshot()
                t = time.perf_counter()
                answers[k] = query(load)
                times[k].append(time.perf_counter() - t)
                traffic[k] = server.log.since(snap)      # one run's requests (the last)
                first.setdefault(k, traffic[k])
        assert answers["rmq"] == answers["parquet"], f"{title}: answers differ: {answers}"
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{title:<34}" + "".join(f"  {k} {med[k] * 1000:8.0f} ms" for k in sources)
              + f"   parquet/rmq {med['parquet'] / med['rmq']:5.2f}x")
        for k in sources:
            reqs, sent = traffic[k]
            cold_reqs, cold_sent = first[k]
            print(f"    {k:<8} GET {reqs.get('GET', 0):5d} ({sent.get('GET', 0) / 2**20:9.1f} MiB)   "
                  f"LIST {reqs.get('LIST', 0):3d}   HEAD {reqs.get('HEAD', 0):4d}   first run: GET "
                  f"{cold_reqs.get('GET', 0)} ({cold_sent.get('GET', 0) / 2**20:.1f} MiB)")
        return {"times": med, "traffic": traffic, "answer": answers["rmq"]}

    print(f"\n{n:,} messages on {server.endpoint} (moto, this process), local[2]; medians of {args.repeat} "
          f"interleaved runs; ratio > 1: rmq faster than Parquet")
    print(f"store: CommitLog {commit_log_bytes / 2**20:,.1f} MiB valid in {args.segment_mib} MiB segments, ConsumeQueues "
          f"{cq_bytes / 2**20:,.1f} MiB; parquet {parquet_bytes / 2**20:,.1f} MiB in {parquet_files} files "
          f"(moto reads a whole object per ranged GET)")
    full = compare("full-scan aggregate", lambda s: agg(s()))
    tags = compare(f"tags = '{TAG}' (10 %) aggregate", lambda s: agg(s().where(f"tags = '{TAG}'")))
    msg_id = spark.read.format("rmq").option("queues", "BenchB:3").load(str(store)) \
        .where(f"queueOffset = {min(12345, n // 64)}").select("msgId").collect()[0].msgId
    look = compare("msgId = x (load + plan + read)",
                   lambda s: [tuple(r) for r in s().where(f"msgId = '{msg_id}'").select("commitLogOffset").collect()])

    def fetched(result) -> int:
        return result["traffic"]["rmq"][1].get("GET", 0)

    matching = spark.read.format("rmq").load(str(store)).where(f"tags = '{TAG}'") \
        .selectExpr("sum(storeSize) AS b").collect()[0].b or 0
    print(f"\nrmq full scan fetched {fetched(full) / commit_log_bytes:.2f}x the valid CommitLog bytes (target <= 1.1x)")
    print(f"rmq tag query fetched {fetched(tags) / (cq_bytes + matching):.2f}x the ConsumeQueue bytes plus the "
          f"{matching / 2**20:,.1f} MiB of matching records (target <= 3x)")
    print(f"rmq msgId lookup: {look['traffic']['rmq'][0].get('GET', 0)} GETs (target <= 4), "
          f"{look['times']['rmq'] * 1000:.0f} ms with planning")


if __name__ == "__main__":
    main()
