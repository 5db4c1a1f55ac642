#!/usr/bin/env python
"""Benchmark: format("rmq") read from an S3 bucket by the JVM scan vs Parquet of the same rows, same bucket.

1. The store and its Parquet peer of scripts/bench_spark_read.py (N messages, default 2M, 256-byte bodies,
   4 topics x 8 queues, 10 tags; shared with that script under --dir), uploaded to one bucket of a real
   S3 API server on loopback (s3proxy over a temp folder, tests/support/objectstore.py: a ranged GET reads
   the bytes it serves, as on S3), every file whole, as a sync job copies it.
2. One local[2] SparkSession with the rmq jar and the hadoop-aws of pyspark's Hadoop (scripts/s3_jars.sh)
   on spark.jars times, runs interleaved, median of --repeat:
   * full-scan aggregate (count, sum(length(body)), sums of offsets, min/max(storeTimestamp))
   * the same aggregate where tags = 'tag-3' (10 %)
   * msgId = x, planning included (load + where + collect)
   and prints the ratio Parquet time / rmq time (> 1: rmq is faster).
3. Beside each query, in its last run and in its first (which also fetches the ConsumeQueue files an
   executor then keeps), for rmq and for Parquet: the requests the server answered by S3 operation (its
   own count, s3proxy's metrics endpoint) and the bytes it sent (its process's written bytes), with S3A's
   vectored-read counters (S3A's IOStatistics: the executors are in this JVM), against the bytes the query needs: the
   store's valid CommitLog bytes (full scan); the ConsumeQueue bytes plus the matching records (tag query,
   whose records one request each would take one GET per matching record).

--segment-mib sets the segment size of the generated store (its folder name carries it; default 64).
--s3a-stream sets S3A's input stream (fs.s3a.input.stream.type): hadoop-aws 3.5's default is "analytics"
(the S3 analytics accelerator, whose block cache serves later queries of the same objects from memory);
"classic" reads each positioned read by a GET bounded to it, and each query's requests are its own.
Needs boto3 (scripts/test_objectstore.sh installs it), a JDK for the jar and s3proxy.
Usage: bench_objectstore.py [--messages N] [--segment-mib 64] [--dir /tmp/rmq-bench] [--repeat 3]
                           [--s3a-stream classic|analytics]
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
    ap.add_argument("--segment-mib", type=int, default=64, help="CommitLog segment size of the generated store")
    ap.add_argument("--s3a-stream", default="classic", help="fs.s3a.input.stream.type ('' : the connector's default)")
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
    conf = {"spark.hadoop.fs.s3a.input.stream.type": args.s3a_stream} if args.s3a_stream else {}
    spark = spark_session(server.endpoint, "bench_objectstore", jar, **conf)
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


# S3A's counters (IOStatistics of the bucket's file system) shown per query.
S3A_COUNTERS = ("stream_read_bytes", "stream_read_vectored_operations", "stream_read_vectored_incoming_ranges",
                "stream_read_vectored_combined_ranges", "action_http_get_request")


class Traffic:
    """The server's requests by S3 operation and S3A's counters, read before and after a query."""

    def __init__(self, spark, server: S3Server, uri: str):
        jvm = spark.sparkContext._jvm
        path = jvm.org.apache.hadoop.fs.Path(uri)
        self.fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        self.server = server

    def snapshot(self) -> dict[str, int]:
        counters = self.fs.getIOStatistics().counters()
        out = {k: int(counters.get(k) or 0) for k in S3A_COUNTERS}
        for op, n in self.server.requests().items():
            out[op] = n
        out["sent"] = self.server.bytes_sent()
        return out

    def since(self, snap: dict[str, int]) -> dict[str, int]:
        now = self.snapshot()
        return {k: v - snap.get(k, 0) for k, v in now.items() if v - snap.get(k, 0)}


def describe(t: dict[str, int]) -> str:
    return (f"GET {t.get('GetObject', 0):5d} ({t.get('sent', 0) / 2**20:9.1f} MiB sent)   "
            f"LIST {t.get('ListObjectsV2', 0):3d}   HEAD {t.get('HeadObject', 0):4d}   vectored: "
            f"{t.get('stream_read_vectored_operations', 0)} calls, {t.get('stream_read_vectored_incoming_ranges', 0)} "
            f"ranges -> {t.get('stream_read_vectored_combined_ranges', 0)}")


def run(spark, server: S3Server, store: Path, parquet: Path, rmq_uri: str, parquet_uri: str, args) -> None:
    n = args.messages
    commit_log_bytes, cq_bytes = store_bytes(store)
    parquet_bytes = sum(f.stat().st_size for f in parquet.rglob("*.parquet"))
    parquet_files = len(list(parquet.rglob("*.parquet")))
    sources = {"rmq": lambda: spark.read.format("rmq").load(rmq_uri),
               "parquet": lambda: spark.read.parquet(parquet_uri)}
    log = Traffic(spark, server, rmq_uri)

    def agg(df):
        return tuple(df.selectExpr(*AGGS).collect()[0])

    def compare(title: str, query) -> dict:
        times = {k: [] for k in sources}
        traffic = {}
        first = {}
        answers = {}
        for _ in range(args.repeat):
            for k, load in sources.items():
                snap = log.snapshot()
                t = time.perf_counter()
                answers[k] = query(load)
                times[k].append(time.perf_counter() - t)
                traffic[k] = log.since(snap)      # one run's requests (the last)
                first.setdefault(k, traffic[k])
        assert answers["rmq"] == answers["parquet"], f"{title}: answers differ: {answers}"
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{title:<34}" + "".join(f"  {k} {med[k] * 1000:8.0f} ms" for k in sources)
              + f"   parquet/rmq {med['parquet'] / med['rmq']:5.2f}x")
        for k in sources:
            print(f"    {k:<8} {describe(traffic[k])}   first run: GET {first[k].get('GetObject', 0)} "
                  f"({first[k].get('sent', 0) / 2**20:.1f} MiB)")
        return {"times": med, "traffic": traffic, "answer": answers["rmq"]}

    print(f"\n{n:,} messages on {server.endpoint} (s3proxy, filesystem backend; S3A input stream "
          f"{args.s3a_stream or 'default'}), local[2]; medians of {args.repeat} "
          f"interleaved runs; ratio > 1: rmq faster than Parquet")
    print(f"store: CommitLog {commit_log_bytes / 2**20:,.1f} MiB valid in {args.segment_mib} MiB segments, ConsumeQueues "
          f"{cq_bytes / 2**20:,.1f} MiB; parquet {parquet_bytes / 2**20:,.1f} MiB in {parquet_files} files")
    full = compare("full-scan aggregate", lambda s: agg(s()))
    tags = compare(f"tags = '{TAG}' (10 %) aggregate", lambda s: agg(s().where(f"tags = '{TAG}'")))
    msg_id = spark.read.format("rmq").option("queues", "BenchB:3").load(str(store)) \
        .where(f"queueOffset = {min(12345, n // 64)}").select("msgId").collect()[0].msgId
    look = compare("msgId = x (load + plan + read)",
                   lambda s: [tuple(r) for r in s().where(f"msgId = '{msg_id}'").select("commitLogOffset").collect()])

    def fetched(result) -> int:
        return result["traffic"]["rmq"].get("sent", 0)

    matched = spark.read.format("rmq").load(str(store)).where(f"tags = '{TAG}'") \
        .selectExpr("sum(storeSize) AS b", "count(*) AS n").collect()[0]
    matching = matched.b or 0
    print(f"\nrmq full scan fetched {fetched(full) / commit_log_bytes:.2f}x the valid CommitLog bytes (target <= 1.1x)")
    print(f"rmq tag query fetched {fetched(tags) / (cq_bytes + matching):.2f}x the ConsumeQueue bytes plus the "
          f"{matching / 2**20:,.1f} MiB of matching records (target <= 3x), in {tags['traffic']['rmq'].get('GetObject', 0)} "
          f"GETs for {matched.n:,} matching records (a request each would take {matched.n:,})")
    print(f"rmq msgId lookup: {look['traffic']['rmq'].get('GetObject', 0)} GETs (target <= 4), "
          f"{look['times']['rmq'] * 1000:.0f} ms with planning")


if __name__ == "__main__":
    main()
