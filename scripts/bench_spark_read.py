#!/usr/bin/env python
"""Benchmark: the rmq Spark source vs Parquet on the same rows.

1. Generates a valid store directly (format/record.py encode_record + CQ
   units; no dependency on the writer): N messages (default 2M), 256-byte
   bodies, 4 topics x 8 queues, 10 tags round-robin, UNIQ_KEY/KEYS/TAGS/WAIT
   properties, 1 GiB CommitLog segments, 6 MB ConsumeQueue files.
2. Writes the same rows to Parquet (snappy) through Spark.
3. Times, in one SparkSession (local[2]):
   * full scan: count + sum(length(body)) + sum(queueOffset) + sum(commitLogOffset)
     + sum(storeTimestamp ms)  -- rmq (all columns, and a projected schema) vs Parquet
   * tags = 'tag-3' (10 % selectivity), same aggregates
   * msgId = x latency including planning (rmq) vs Parquet
   and prints rows/s and the rmq/Parquet ratio.

Usage: bench_spark_read.py [--messages N] [--dir /tmp/rmq-bench] [--repeat 3] [--regen]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import struct
import sys
import time
from pathlib import Path

import numpy as np

TOPICS = ["BenchA", "BenchB", "BenchC", "BenchD"]
QUEUES = 8
TAGS = [f"tag-{i}" for i in range(10)]
SEGMENT = 1024 * 1024 * 1024
CQ_FILE = 300_000 * 20
BODY = 256


def generate(root: Path, n: int) -> None:
    from rmqsource.format.consumequeue import CQ_UNIT_DTYPE
    from rmqsource.format.javahash import tags_code
    from rmqsource.format.record import encode_blank, encode_record

    if root.exists():
        shutil.rmtree(root)
    (root / "commitlog").mkdir(parents=True)
    rng = np.random.default_rng(7)
    bodies = rng.integers(0, 256, size=(1024, BODY), dtype=np.uint8)
    body_list = [bodies[i].tobytes() for i in range(1024)]
    codes = [tags_code(t) for t in TAGS]
    per_queue: dict[tuple[int, int], list] = {(t, q): [] for t in range(len(TOPICS)) for q in range(QUEUES)}
    next_qo = {k: 0 for k in per_queue}
    topic_b = [t.encode() for t in TOPICS]
    born, store_addr = bytes([10, 1, 2, 3]), bytes([10, 0, 0, 5])
    t0 = 1_700_000_000_000
    seg_start = 0
    seg_file = open(root / "commitlog" / f"{seg_start:020d}", "wb")
    pos = 0
    chunks = []
    chunk_bytes = 0
    for i in range(n):
        t = i % len(TOPICS)
        q = (i // len(TOPICS)) % QUEUES
        tag = (i // (len(TOPICS) * QUEUES)) % len(TAGS) if False else i % len(TAGS)
        key = (t, q)
        qo = next_qo[key]
        next_qo[key] = qo + 1
        uniq = struct.pack(">4shiih", born, 4242, 0x1B6D3586, i // 1000, i & 0x7FFF).hex().upper()
        props = (f"UNIQ_KEY\x01{uniq}\x02KEYS\x01order-{i} user-{i % 1000}\x02TAGS\x01{TAGS[tag]}"
                 f"\x02WAIT\x01true").encode()
        rec = encode_record(topic=topic_b[t], queue_id=q, flag=0, queue_offset=qo, phy_offset=seg_start + pos,
                            sys_flag=0, born_timestamp_ms=t0 + i - 5, born_addr=born, born_port=40000 + t,
                            store_timestamp_ms=t0 + i, store_addr=store_addr, store_port=10911,
                            reconsume_times=0, prepared_transaction_offset=0, body=body_list[i & 1023],
                            properties=props)
        if pos + len(rec) + 8 > SEGMENT:
            chunks.append(encode_blank(SEGMENT - pos))
            seg_file.write(b"".join(chunks))
            seg_file.truncate(SEGMENT)
            seg_file.close()
            chunks, chunk_bytes = [], 0
            seg_start += SEGMENT
            pos = 0
            seg_file = open(root / "commitlog" / f"{seg_start:020d}", "wb")
            rec = encode_record(topic=topic_b[t], queue_id=q, flag=0, queue_offset=qo, phy_offset=seg_start,
                                sys_flag=0, born_timestamp_ms=t0 + i - 5, born_addr=born, born_port=40000 + t,
                                store_timestamp_ms=t0 + i, store_addr=store_addr, store_port=10911,
                                reconsume_times=0, prepared_transaction_offset=0, body=body_list[i & 1023],
                                properties=props)
        per_queue[key].append((seg_start + pos, len(rec), codes[tag]))
        chunks.append(rec)
        chunk_bytes += len(rec)
        pos += len(rec)
        if chunk_bytes > 64 << 20:
            seg_file.write(b"".join(chunks))
            chunks, chunk_bytes = [], 0
    seg_file.write(b"".join(chunks))
    seg_file.truncate(SEGMENT)
    seg_file.close()
    for (t, q), units in per_queue.items():
        d = root / "consumequeue" / TOPICS[t] / str(q)
        d.mkdir(parents=True)
        arr = np.array(units, dtype=CQ_UNIT_DTYPE)
        data = arr.tobytes()
        for k in range(0, max(len(data), 1), CQ_FILE):
            with open(d / f"{k:020d}", "wb") as f:
                f.write(data[k:k + CQ_FILE])
                f.truncate(CQ_FILE)


def timed(fn, repeat: int):
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=2_000_000)
    ap.add_argument("--dir", default="/tmp/rmq-bench")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--regen", action="store_true", help="regenerate even if the data exists")
    args = ap.parse_args()

    base = Path(args.dir)
    store = base / f"store-{args.messages}"
    parquet = base / f"parquet-{args.messages}"
    if args.regen or not (store / "consumequeue").is_dir():
        t = time.perf_counter()
        generate(store, args.messages)
        print(f"generated store: {args.messages} messages in {time.perf_counter() - t:.1f}s -> {store}")

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    conf_file = Path(__file__).resolve().parents[1] / "spark_conf" / "spark-defaults.local.conf"
    builder = SparkSession.builder.master("local[2]").appName("bench_spark_read")
    for line in conf_file.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            k, _, v = line.partition(" ")
            builder = builder.config(k.strip(), v.strip())
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")

    rmq = spark.read.format("rmq").load(str(store))
    if args.regen or not parquet.is_dir():
        t = time.perf_counter()
        rmq.write.mode("overwrite").option("compression", "snappy").parquet(str(parquet))
        print(f"wrote parquet (snappy) in {time.perf_counter() - t:.1f}s -> {parquet}")
    pq = spark.read.parquet(str(parquet))
    proj_schema = "queueOffset bigint, commitLogOffset bigint, body binary, storeTimestamp timestamp, tags string"
    rmq_proj = spark.read.format("rmq").schema(proj_schema).load(str(store))

    aggs = ["count(*) AS n", "sum(length(body)) AS body_bytes", "sum(queueOffset) AS qo",
            "sum(commitLogOffset) AS clo", "sum(unix_millis(storeTimestamp)) AS ts"]
    n = args.messages
    results = {}

    def run(name, df, rows):
        best, med, res = timed(lambda: df.selectExpr(*aggs).collect()[0], args.repeat)
        results[name] = (best, res)
        print(f"{name:<34} best {best:7.2f}s  median {med:7.2f}s  {rows / best:>12,.0f} rows/s   -> {tuple(res)}")
        return res

    print("\nnote: PySpark 4.3 Python data sources get no column pruning (DataSourceReader has no\n"
          "      pruneColumns hook; reader(schema) always receives the full schema and read() must yield\n"
          "      every column). The documented workaround is a user schema naming only the needed columns:\n"
          f"      spark.read.format('rmq').schema('{proj_schema}')  -- only those columns are decoded and sent.")
    print(f"\n== full scan ({n:,} rows) ==")
    a = run("rmq (all columns)", rmq, n)
    b = run("rmq (projected schema)", rmq_proj, n)
    c = run("parquet", pq, n)
    assert tuple(a) == tuple(b) == tuple(c), "rmq and parquet disagree"
    print(f"ratio rmq/parquet rows/s: all columns {results['parquet'][0] / results['rmq (all columns)'][0]:.2f}x, "
          f"projected {results['parquet'][0] / results['rmq (projected schema)'][0]:.2f}x")

    print(f"\n== tags = 'tag-3' (10 % selectivity; rows/s counted over the {n:,} scanned) ==")
    a = run("rmq tag (all columns)", rmq.where("tags = 'tag-3'"), n)
    b = run("rmq tag (projected schema)", rmq_proj.where("tags = 'tag-3'"), n)
    c = run("parquet tag", pq.where("tags = 'tag-3'"), n)
    assert tuple(a) == tuple(b) == tuple(c), "rmq and parquet disagree"
    print(f"ratio rmq/parquet rows/s: all columns {results['parquet tag'][0] / results['rmq tag (all columns)'][0]:.2f}x, "
          f"projected {results['parquet tag'][0] / results['rmq tag (projected schema)'][0]:.2f}x")

    target = rmq_proj.where("queueOffset = 12345 and tags is not null").limit(1)
    mid_row = spark.read.format("rmq").option("queues", "BenchB:3").load(str(store)) \
        .where(f"queueOffset = {min(12345, n // 64)}").select("msgId").collect()[0]
    msg_id = mid_row.msgId
    print(f"\n== msgId = '{msg_id}' (planning included) ==")
    best_r, med_r, res_r = timed(lambda: spark.read.format("rmq").load(str(store))
                                 .where(f"msgId = '{msg_id}'").select("commitLogOffset").collect(), args.repeat)
    best_p, med_p, res_p = timed(lambda: spark.read.parquet(str(parquet))
                                 .where(f"msgId = '{msg_id}'").select("commitLogOffset").collect(), args.repeat)
    assert res_r == res_p and len(res_r) == 1
    print(f"rmq     best {best_r * 1000:8.1f} ms  median {med_r * 1000:8.1f} ms")
    print(f"parquet best {best_p * 1000:8.1f} ms  median {med_p * 1000:8.1f} ms   ratio parquet/rmq {best_p / best_r:.2f}x")
    del target
    spark.stop()


if __name__ == "__main__":
    main()
