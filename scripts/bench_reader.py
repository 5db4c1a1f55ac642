#!/usr/bin/env python
"""Engine-level read benchmark: CommitLog -> Arrow, one core, no Spark (plus one Spark RSS probe).

Uses the store that scripts/bench_spark_read.py generates (2M messages, 256-byte bodies,
4 topics x 8 queues, 1 GiB CommitLog segments); generates it when missing.

1. raw: the same CommitLog bytes read with os.preadv into one reusable buffer
   (8 MiB reads) -- the floor any decoder pays.
2. whole-store decode (read_partition over the whole-store plan: ConsumeQueue-driven
   record starts, vectorized headers) into Arrow, per column group:
     * numeric+body: queueId, queueOffset, commitLogOffset, body, timestamps,
       sysFlag, flag, reconsumeTimes, bodyCRC, preparedTransactionOffset, storeSize
     * + strings: topic, msgId, bornHost, storeHost, transactionType, broker, storePath
     * + properties: uniqKey, tags, keys, properties (map)
     * all columns (incl. tagsCode from the ConsumeQueue units)
     * the 5-column user schema of bench_spark_read.py
   reporting rows/s per core and the ratio to the raw read of the same bytes.
3. ConsumeQueue-driven reads: topic mode (all queues), all columns, and tags = 'tag-3'
   (tagsCode filter on the units, only matching records read).
4. --rss: a Spark read (local[1]) of the 1 GiB segment as ONE partition
   (maxBytesPerPartition=2g), reporting the Python worker's peak RSS (VmHWM, reset with
   /proc/self/clear_refs at task start, written by the task to a file).

Usage: bench_reader.py [--messages N] [--dir /tmp/rmq-bench] [--repeat 3] [--rss] [--only-rss]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

GROUPS = {
    "numeric+body": ["queueId", "queueOffset", "commitLogOffset", "body", "bornTimestamp", "storeTimestamp",
                     "sysFlag", "flag", "reconsumeTimes", "bodyCRC", "preparedTransactionOffset", "storeSize"],
    "+strings": ["topic", "queueId", "queueOffset", "commitLogOffset", "msgId", "body", "bornTimestamp",
                 "storeTimestamp", "bornHost", "storeHost", "sysFlag", "flag", "reconsumeTimes", "bodyCRC",
                 "preparedTransactionOffset", "transactionType", "storeSize", "broker", "storePath"],
    "+properties": ["topic", "queueId", "queueOffset", "commitLogOffset", "msgId", "uniqKey", "tags", "keys",
                    "body", "properties", "bornTimestamp", "storeTimestamp", "bornHost", "storeHost", "sysFlag",
                    "flag", "reconsumeTimes", "bodyCRC", "preparedTransactionOffset", "transactionType",
                    "storeSize", "broker", "storePath"],
    "all columns": None,
    "bench_spark_read 5-col schema": ["queueOffset", "commitLogOffset", "body", "storeTimestamp", "tags"],
}


def timed(fn, repeat):
    ts, res = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        res = fn()
        ts.append(time.perf_counter() - t)
    return min(ts), statistics.median(ts), res


def raw_read(store: Path) -> int:
    seg_dir = store / "commitlog"
    buf = bytearray(8 << 20)
    mv = memoryview(buf)
    total = 0
    from rmqsource.store.reader import MessageStoreReader
    r = MessageStoreReader(str(store))
    end = r.commit_log_max_offset
    r.close()
    for f in sorted(seg_dir.iterdir()):
        start = int(f.name)
        if start >= end:
            break
        fd = os.open(f, os.O_RDONLY)
        try:
            pos, stop = 0, min(end - start, os.fstat(fd).st_size)
            while pos < stop:
                k = os.preadv(fd, [mv[:min(len(buf), stop - pos)]], pos)
                if k <= 0:
                    break
                total += k
                pos += k
        finally:
            os.close(fd)
    return total


def decode_all(store: Path, columns, options=None, pushed=None) -> tuple[int, int]:
    from rmqsource.spark.batch import ReadSpec, read_partition
    from rmqsource.spark.options import parse_options
    from rmqsource.spark.planning import plan
    from rmqsource.spark.pushdown import Pushed
    from rmqsource.spark.schema import COLUMNS
    opts = parse_options({"path": str(store), **(options or {})})
    pushed = pushed or Pushed()
    spec = ReadSpec(opts, pushed, tuple(columns or COLUMNS))
    rows = nbytes = 0
    for p in plan(opts, pushed):
        for b in read_partition(spec, p):
            rows += b.num_rows
            nbytes += b.nbytes
    return rows, nbytes


def engine(store: Path, n: int, repeat: int) -> None:
    from rmqsource.spark.pushdown import Pushed
    best_raw, med_raw, nbytes = timed(lambda: raw_read(store), repeat)
    print(f"\n== engine, one core ({n:,} messages, {nbytes / 2**20:,.0f} MiB of CommitLog) ==")
    print(f"{'raw preadv (8 MiB reads)':<44} best {best_raw:6.2f}s  median {med_raw:6.2f}s  "
          f"{nbytes / best_raw / 2**30:5.2f} GiB/s  = {n / best_raw:>12,.0f} rows/s equivalent")
    for name, cols in GROUPS.items():
        best, med, (rows, out_bytes) = timed(lambda: decode_all(store, cols), repeat)
        assert rows == n, (name, rows)
        print(f"whole-store decode: {name:<24} best {best:6.2f}s  median {med:6.2f}s  {rows / best:>12,.0f} rows/s"
              f"  ({best / best_raw:5.1f}x the raw read; {out_bytes / 2**20:,.0f} MiB of Arrow)")
    best, med, (rows, _) = timed(lambda: decode_all(store, None, {"topicPattern": ".*"}), repeat)
    print(f"{'ConsumeQueue-driven (topicPattern=.*), all':<44} best {best:6.2f}s  median {med:6.2f}s  "
          f"{rows / best:>12,.0f} rows/s")
    tag = Pushed(tags=frozenset({"tag-3"}))
    best, med, (rows, _) = timed(lambda: decode_all(store, None, pushed=tag), repeat)
    print(f"{'tags = tag-3 via tagsCode (all columns)':<44} best {best:6.2f}s  median {med:6.2f}s  "
          f"{rows:,} rows, {n / best:>12,.0f} scanned rows/s")
    best, med, (rows, _) = timed(lambda: decode_all(store, GROUPS["bench_spark_read 5-col schema"], pushed=tag),
                                 repeat)
    print(f"{'tags = tag-3 via tagsCode (5-col schema)':<44} best {best:6.2f}s  median {med:6.2f}s  "
          f"{rows:,} rows, {n / best:>12,.0f} scanned rows/s")


RSS_PROBE = '''
import os, time
from rmqsource.spark.source import RmqDataSource, RmqReader, RmqPushdownReader

def _vm(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0

class RssProbe(RmqDataSource):
    @classmethod
    def name(cls):
        return "rmqrss"

    def reader(self, schema):
        out_dir = self.options.pop("rssdir")      # ours, not an rmq option
        r = super().reader(schema)
        base = type(r)

        class Probe(base):
            def read(self, partition):
                try:
                    with open("/proc/self/clear_refs", "w") as f:
                        f.write("5")            # reset VmHWM to the current RSS
                except OSError:
                    pass
                start = _vm("VmRSS")
                rows = 0
                for b in base.read(self, partition):
                    rows += b.num_rows
                    yield b
                with open(os.path.join(out_dir, f"{os.getpid()}-{time.monotonic_ns()}"), "w") as f:
                    f.write(f"{start} {_vm('VmHWM')} {rows}")

        p = Probe.__new__(Probe)
        p.__dict__.update(r.__dict__)
        return p
'''


def rss_probe(store: Path) -> None:
    import importlib
    import shutil
    import tempfile
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    probe_dir = Path(tempfile.mkdtemp(prefix="rmq-rss-"))
    (probe_dir / "rmq_rss_probe.py").write_text(RSS_PROBE)
    os.environ["PYTHONPATH"] = f"{probe_dir}:{os.environ.get('PYTHONPATH', '')}"
    sys.path.insert(0, str(probe_dir))
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[1]").appName("bench_reader_rss")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.python.filterPushdown.enabled", "true")
             .config("spark.executorEnv.PYTHONPATH", str(probe_dir))
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    mod = importlib.import_module("rmq_rss_probe")
    spark.dataSource.register(mod.RssProbe)
    out = probe_dir / "out"
    seg = sorted((store / "commitlog").iterdir())[0]
    print(f"\n== Python worker RSS: one task reads the whole {seg.stat().st_size / 2**30:.2f} GiB segment "
          f"({seg.name}), all columns ==")
    for bs in ("32768", "131072"):
        out.mkdir(exist_ok=True)
        for f in out.iterdir():
            f.unlink()
        t = time.perf_counter()
        n = (spark.read.format("rmqrss").option("rssdir", str(out)).option("maxBytesPerPartition", str(2 << 30))
             .option("batchSize", bs).load(str(store)).selectExpr("count(*)", "sum(length(body))").collect()[0])
        dt = time.perf_counter() - t
        for f in sorted(out.iterdir()):
            start, hwm, rows = map(int, f.read_text().split())
            print(f"batchSize={bs:>7}: task rows {rows:,}, RSS at task start {start / 2**20:,.0f} MiB, "
                  f"peak RSS {hwm / 2**20:,.0f} MiB  (query {dt:.1f}s, count {n[0]:,})")
    spark.stop()
    shutil.rmtree(probe_dir, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=2_000_000)
    ap.add_argument("--dir", default="/tmp/rmq-bench")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rss", action="store_true", help="also run the Spark RSS probe")
    ap.add_argument("--only-rss", action="store_true")
    args = ap.parse_args()
    store = Path(args.dir) / f"store-{args.messages}"
    if not (store / "consumequeue").is_dir():
        from bench_spark_read import generate
        t = time.perf_counter()
        generate(store, args.messages)
        print(f"generated store: {args.messages} messages in {time.perf_counter() - t:.1f}s -> {store}")
    if not args.only_rss:
        engine(store, args.messages, args.repeat)
    if args.rss or args.only_rss:
        rss_probe(store)


if __name__ == "__main__":
    main()
