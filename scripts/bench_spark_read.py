#!/usr/bin/env python
"""Benchmark: format("rmq") read by the JVM scan and by the Python data source vs Parquet, one session.

1. Generates a valid store directly (format/record.py encode_record + CQ units; no dependency on
   the writer): N messages (default 2M), 256-byte random bodies (each distinct), 4 topics x 8 queues, 10 tags
   round-robin, UNIQ_KEY/KEYS/TAGS/WAIT properties, 1 GiB CommitLog segments.
2. Writes the same rows to Parquet (snappy).
3. Times, in one SparkSession (local[2]) with the JVM jar on spark.jars, each query on the JVM
   scan (format "rmq"), on the Python data source (registered as "rmq_python" in the same
   session) and on Parquet, runs interleaved, median of --repeat:
   * full-scan aggregate: count, sum(length(body)), sum(queueOffset), sum(commitLogOffset),
     min/max(storeTimestamp)
   * the same aggregate where tags = 'tag-3' (10 %)
   * narrow: count per topic; messages per minute
   * msgId = x, planning included (load + where + collect)
   and prints the ratio Parquet time / rmq time (> 1: rmq is faster), plus the JVM scan's rows/s
   against one core reading the same CommitLog bytes raw (preadv, page cache warm).
4. With --dledger, also generates the same messages in a DLedger store (store/dledger_writer.py: a
   48-byte entry header before each record, 1 GiB data files) and times the JVM scan on it in the
   same runs as the full-scan aggregate and the tag queries, printing DLedger time / normal time.

Usage: bench_spark_read.py [--messages N] [--dir /tmp/rmq-bench] [--repeat 5] [--regen] [--skip-python]
                           [--dledger] [--only full,tags,notag,topic,minute,lookup,floor,raw]
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
AGGS = ["count(*) AS n", "sum(length(body)) AS body_bytes", "sum(queueOffset) AS qo", "sum(commitLogOffset) AS clo",
        "min(storeTimestamp) AS first", "max(storeTimestamp) AS last"]
MEASUREMENTS = ("full", "tags", "notag", "topic", "minute", "lookup", "floor", "raw")


def messages(n: int):
    """(queue key, tagsCode, record encoder taking the PHYSICALOFFSET) of each message, in log order."""
    from rmqsource.format.javahash import tags_code
    from rmqsource.format.record import encode_record

    rng = np.random.default_rng(7)
    # Random bodies, each made distinct by the message's index in its first 8 bytes: bodies repeated from a
    # small pool would let Parquet store the column as a dictionary (102 MB instead of 560 MB for 2M rows),
    # which message bodies do not allow.
    bodies = rng.integers(0, 256, size=(1024, BODY), dtype=np.uint8)
    body_list = [bodies[i].tobytes() for i in range(1024)]
    codes = [tags_code(t) for t in TAGS]
    next_qo = {(t, q): 0 for t in range(len(TOPICS)) for q in range(QUEUES)}
    topic_b = [t.encode() for t in TOPICS]
    born, store_addr = bytes([10, 1, 2, 3]), bytes([10, 0, 0, 5])
    t0 = 1_700_000_000_000

    def encoder(i, t, q, qo, props):
        return lambda phy: encode_record(
            topic=topic_b[t], queue_id=q, flag=0, queue_offset=qo, phy_offset=phy, sys_flag=0,
            born_timestamp_ms=t0 + i - 5, born_addr=born, born_port=40000 + t, store_timestamp_ms=t0 + i,
            store_addr=store_addr, store_port=10911, reconsume_times=0, prepared_transaction_offset=0,
            body=i.to_bytes(8, "big") + body_list[i & 1023][8:], properties=props)

    for i in range(n):
        t = i % len(TOPICS)
        q = (i // len(TOPICS)) % QUEUES
        tag = i % len(TAGS)
        key = (t, q)
        qo = next_qo[key]
        next_qo[key] = qo + 1
        uniq = struct.pack(">4shiih", born, 4242, 0x1B6D3586, i // 1000, i & 0x7FFF).hex().upper()
        props = (f"UNIQ_KEY\x01{uniq}\x02KEYS\x01order-{i} user-{i % 1000}\x02TAGS\x01{TAGS[tag]}"
                 f"\x02WAIT\x01true").encode()
        yield key, codes[tag], encoder(i, t, q, qo, props)


def write_commitlog(root: Path, n: int) -> dict:
    """The messages as a normal CommitLog; the ConsumeQueue units per queue."""
    from rmqsource.format.record import encode_blank

    (root / "commitlog").mkdir(parents=True)
    per_queue: dict[tuple[int, int], list] = {}
    seg_start = 0
    seg_file = open(root / "commitlog" / f"{seg_start:020d}", "wb")
    pos = 0
    chunks = []
    chunk_bytes = 0
    for key, code, encode in messages(n):
        rec = encode(seg_start + pos)
        if pos + len(rec) + 8 > SEGMENT:
            chunks.append(encode_blank(SEGMENT - pos))
            seg_file.write(b"".join(chunks))
            seg_file.truncate(SEGMENT)
            seg_file.close()
            chunks, chunk_bytes = [], 0
            seg_start += SEGMENT
            pos = 0
            seg_file = open(root / "commitlog" / f"{seg_start:020d}", "wb")
            rec = encode(seg_start)
        per_queue.setdefault(key, []).append((seg_start + pos, len(rec), code))
        chunks.append(rec)
        chunk_bytes += len(rec)
        pos += len(rec)
        if chunk_bytes > 64 << 20:
            seg_file.write(b"".join(chunks))
            chunks, chunk_bytes = [], 0
    seg_file.write(b"".join(chunks))
    seg_file.truncate(SEGMENT)
    seg_file.close()
    return per_queue


def write_dledger(root: Path, n: int) -> dict:
    """The same messages in a DLedger store (dledger-n0/, data files of the same 1 GiB); the units per queue."""
    from rmqsource.store.config import StoreConfig
    from rmqsource.store.dledger_writer import DLedgerWriter

    per_queue: dict[tuple[int, int], list] = {}
    config = StoreConfig(mapped_file_size_commit_log_bytes=SEGMENT)
    with DLedgerWriter(root, config) as writer:
        for key, code, encode in messages(n):
            rec = encode(0)                     # the writer sets PHYSICALOFFSET to the entry position + 48
            per_queue.setdefault(key, []).append((writer.append(rec), len(rec), code))
    return per_queue


def generate(root: Path, n: int, *, dledger: bool = False) -> None:
    from rmqsource.format.consumequeue import CQ_UNIT_DTYPE

    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    per_queue = write_dledger(root, n) if dledger else write_commitlog(root, n)
    for (t, q), units in per_queue.items():
        d = root / "consumequeue" / TOPICS[t] / str(q)
        d.mkdir(parents=True)
        data = np.array(units, dtype=CQ_UNIT_DTYPE).tobytes()
        for k in range(0, max(len(data), 1), CQ_FILE):
            with open(d / f"{k:020d}", "wb") as f:
                f.write(data[k:k + CQ_FILE])
                f.truncate(CQ_FILE)


def raw_read_seconds(store: Path, repeat: int) -> tuple[float, int]:
    """One core reading the valid CommitLog bytes with preadv into one reused buffer (page cache warm)."""
    from rmqsource.store.reader import MessageStoreReader
    with MessageStoreReader(store) as r:
        end = r.commit_log_max_offset
        segments = [(s.path, s.start_offset) for s in r.commitlog.segments]
    buf = bytearray(8 << 20)
    mv = memoryview(buf)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        for path, start in segments:
            fd = os.open(path, os.O_RDONLY)
            try:
                pos, stop = 0, max(0, min(SEGMENT, end - start))
                while pos < stop:
                    got = os.preadv(fd, [mv[:min(len(buf), stop - pos)]], pos)
                    if got <= 0:
                        break
                    pos += got
            finally:
                os.close(fd)
        times.append(time.perf_counter() - t)
    return statistics.median(times), end


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=2_000_000)
    ap.add_argument("--dir", default="/tmp/rmq-bench")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--regen", action="store_true", help="regenerate even if the data exists")
    ap.add_argument("--skip-python", action="store_true", help="do not time the Python data source (slow)")
    ap.add_argument("--dledger", action="store_true",
                    help="also time the JVM scan on the same messages in a DLedger store")
    ap.add_argument("--only", default="",
                    help="comma-separated measurements to run, of " + ",".join(MEASUREMENTS) + " (default: all)")
    args = ap.parse_args()
    only = {m.strip() for m in args.only.split(",") if m.strip()}
    if only - set(MEASUREMENTS):
        unknown = ", ".join(sorted(only - set(MEASUREMENTS)))
        ap.error(f"--only: unknown {unknown}; choose from {', '.join(MEASUREMENTS)}")
    run = set(only or MEASUREMENTS)

    from rmqsource.spark.jar import build_jar
    jar = build_jar()
    base = Path(args.dir)
    store = base / f"store-{args.messages}-distinct"         # the name changed with the bodies' content
    parquet = base / f"parquet-{args.messages}-distinct"
    if args.regen or not (store / "consumequeue").is_dir():
        t = time.perf_counter()
        generate(store, args.messages)
        print(f"generated store: {args.messages} messages in {time.perf_counter() - t:.1f}s -> {store}")
    dledger_store = base / f"store-dledger-{args.messages}-distinct"
    if args.dledger and (args.regen or not (dledger_store / "consumequeue").is_dir()):
        t = time.perf_counter()
        generate(dledger_store, args.messages, dledger=True)
        print(f"generated DLedger store: {args.messages} messages in {time.perf_counter() - t:.1f}s -> {dledger_store}")

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    spark = (SparkSession.builder.master("local[2]").appName("bench_spark_read")
             .config("spark.jars", jar)
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.memory", "2g")
             .config("spark.python.worker.reuse", "true")
             # Python data source pushdown; every query below starts from its own load().
             .config("spark.sql.python.filterPushdown.enabled", "true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")

    from rmqsource.spark.source import RmqDataSource

    class PythonRmq(RmqDataSource):
        """The Python data source under another name, to time it in the same session as the JVM scan."""

        @classmethod
        def name(cls) -> str:
            return "rmq_python"

    spark.dataSource.register(PythonRmq)
    sources = {"jvm": lambda: spark.read.format("rmq").load(str(store)),
               "python": lambda: spark.read.format("rmq_python").load(str(store)),
               "parquet": lambda: spark.read.parquet(str(parquet)),
               "dledger": lambda: spark.read.format("rmq").load(str(dledger_store))}
    if args.regen or not parquet.is_dir():
        t = time.perf_counter()
        sources["jvm"]().write.mode("overwrite").option("compression", "snappy").parquet(str(parquet))
        print(f"wrote parquet (snappy) in {time.perf_counter() - t:.1f}s -> {parquet}")
    n = args.messages
    kinds = ["jvm", "parquet"] + ([] if args.skip_python else ["python"])
    summary = []

    def compare(title: str, query, check=True, dledger=False, floor=False):
        """Median seconds per source, runs interleaved (python: fewer runs, it is slow); with ``dledger``
        the JVM scan of the DLedger store too, its time as a ratio to the normal store's."""
        timed = kinds + (["dledger"] if dledger and args.dledger else []) + (["floor"] if floor else [])
        load_start = os.getloadavg()[0]
        times = {k: [] for k in timed}
        answers = {}
        for i in range(args.repeat):
            for k in timed:
                if k == "python" and i >= max(1, args.repeat // 3):
                    continue
                t = time.perf_counter()
                answers[k] = query(sources[k])
                times[k].append(time.perf_counter() - t)
        med = {k: statistics.median(v) for k, v in times.items()}
        if check:
            # DLedger offsets are larger by the entry headers before the records: not compared.
            same = {repr(without_offsets(a) if "dledger" in timed else a) for a in answers.values()}
            assert len(same) == 1, f"{title}: answers differ: {answers}"
        line = f"{title:<44}" + "".join(f"  {k} {med[k] * 1000:8.1f} ms" for k in kinds)
        load_end = os.getloadavg()[0]
        ratios = {k: med["parquet"] / med[k] for k in kinds if k != "parquet"}
        line += "".join(f"   parquet/{k} {r:5.2f}x" for k, r in ratios.items())
        if "floor" in med:
            line += f"   spark floor {med['floor'] * 1000:6.1f} ms"
        if "dledger" in med:
            line += f"   dledger {med['dledger'] * 1000:8.1f} ms  dledger/jvm {med['dledger'] / med['jvm']:5.2f}x"
        print(line + f"   load {load_start:.1f}-{load_end:.1f}", flush=True)
        summary.append((title, med, ratios))
        return med

    def agg(df):
        return df.selectExpr(*AGGS).collect()[0].asDict()

    def without_offsets(answer):
        return {k: v for k, v in answer.items() if k != "clo"}

    print(f"\n{n:,} messages, local[2]; medians of {args.repeat} interleaved runs "
          f"(python: {max(1, args.repeat // 3)}); ratio > 1: faster than Parquet")
    full = tags = look = None
    if "full" in run:
        full = compare("full-scan aggregate", lambda s: agg(s()), dledger=True)
    if "tags" in run:
        tags = compare("tags = 'tag-3' (10 %) aggregate", lambda s: agg(s().where("tags = 'tag-3'")), dledger=True)
    # The floor under any tag query: every ConsumeQueue unit is scanned and no record matches, so
    # what remains is planning, the Spark job and the unit scan.
    if "notag" in run:
        compare("tags = 'no-such-tag' (0 %) aggregate", lambda s: agg(s().where("tags = 'no-such-tag'")), dledger=True)
    if "topic" in run:
        compare("count per topic", lambda s: sorted(tuple(r) for r in s().groupBy("topic").count().collect()))
    if "minute" in run:
        compare("messages per minute", lambda s: sorted(
            tuple(r) for r in s().groupBy(F.date_trunc("minute", "storeTimestamp").alias("m")).count().collect()))
    if "lookup" in run:
        msg_id = spark.read.format("rmq").option("queues", "BenchB:3").load(str(store)) \
            .where(f"queueOffset = {min(12345, n // 64)}").select("msgId").collect()[0].msgId
        clo = spark.read.format("rmq").load(str(store)).where(f"msgId = '{msg_id}'").collect()[0].commitLogOffset
        # Spark's floor under any lookup, timed in the same rounds: the same calls (a DataFrame, where, select,
        # collect) over one in-memory row holding the answer, no source at all.
        sources["floor"] = lambda: spark.range(1).selectExpr(f"{clo}L AS commitLogOffset", f"'{msg_id}' AS msgId")
        look = compare("msgId = x (load + plan + read)", lambda s: [
            tuple(r) for r in s().where(f"msgId = '{msg_id}'").select("commitLogOffset").collect()], floor=True)

    if "floor" in run:
        floor = []
        tiny = spark.range(0, 2, 1, 2).selectExpr(
            "1L AS queueOffset", "id AS commitLogOffset", "CAST('x' AS BINARY) AS body",
            "CAST(id AS TIMESTAMP) AS storeTimestamp")
        for _ in range(args.repeat):
            t = time.perf_counter()
            agg(tiny)
            floor.append(time.perf_counter() - t)
        print(f"Spark's own floor, the same aggregate over spark.range(2) in 2 tasks: "
              f"{statistics.median(floor) * 1000:.0f} ms"
              + (f" (3x Parquet on the tag query would be {tags['parquet'] / 3 * 1000:.0f} ms)" if tags else ""))

    if "raw" in run:
        raw_s, raw_bytes = raw_read_seconds(store, args.repeat)
        print(f"\nraw read of the CommitLog ({raw_bytes / 2**20:,.0f} MiB, one core, preadv 8 MiB): "
              f"{raw_s * 1000:.0f} ms = {n / raw_s:,.0f} rows/s")
        if full:
            print(f"JVM scan, full-scan aggregate (2 cores, Spark included): {n / full['jvm']:,.0f} rows/s = "
                  f"{raw_s / full['jvm']:.2f}x the raw read")
    if look:
        print(f"msgId lookup on the JVM scan, planning included: {look['jvm'] * 1000:.0f} ms (warm median); "
              f"Spark's floor for the same calls over one in-memory row: {look['floor'] * 1000:.0f} ms")
    spark.stop()


if __name__ == "__main__":
    main()
