#!/usr/bin/env python
"""RocksDB ConsumeQueues (storeType=defaultRocksDB) against file ConsumeQueues: the same topic, the same CommitLog.

Writes one store with file queues (``rmq put``: one topic, 4 queues, tags TagA..TagD, 256-byte bodies), then a
twin whose ``consumequeue/`` is a RocksDB database holding the same units in the broker's key/value layout
(``rmqsource/format/rocksdb_queue.py``; written here with rocksdict, as the broker writes it with rocksdbjni),
the CommitLog hard-linked.  Both are read in the same run, alternating, best of --repeat:

1. topic read (``rmq export --topic``: every message of the topic, all columns, to Arrow IPC)
2. tag query (``rmq export --topic --tag TagB``: tagsCode filter on the units, only matches read); the
   RocksDB store's units are then kept decoded with its open (``UnitBlocks``), as a process reading it
   again finds them, so 2b. repeats it from a cold open (the first query of a process: every unit read
   from RocksDB; the open before it is closed outside the time; the file store's page cache stays warm
   for both)
3. queue units alone (every unit of every queue through the store layer's ``read_units``, cold open)
4. JVM scan (``spark.read.format("rmq")`` with the rmq jar, local[2]: the topic, all columns, to Spark's
   ``noop`` sink), and 5. its tag query (``where tags = 'TagB'``, pushed down to the tags code): one Spark
   session for the run, left out with --no-jvm or when the jar is not built (``rmq jar --build``)

A third store, "unflushed", is the twin as a running broker leaves it before its first memtable flush: the
database holds no unit, so every unit comes from the CommitLog's tail (``rmqsource/store/rocksdb_tail.py``,
walked once per process and snapshot: the cold cases include that walk).

Prints seconds and the ratios RocksDB / files and unflushed / files (target: within 1.2x for the reads and tag
queries of the RocksDB store).

Usage: bench_rocksdb_queue.py [--messages N] [--dir /tmp/rmq-bench-rocksdb] [--repeat 3] [--no-jvm]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import os
import shutil
import sys
import time
from pathlib import Path

TOPIC = "BenchTopic"
QUEUES = 4


def write_file_store(root: Path, messages: int) -> None:
    from rmqsource.cli import main
    body = base64.b64encode(b"x" * 256).decode()
    lines = "".join(json.dumps({"topic": TOPIC, "queueId": i % QUEUES, "tags": f"Tag{'ABCD'[i % 4]}",
                                "keys": f"k-{i}", "body": body}) + "\n" for i in range(messages))
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["put", str(root)], stdout=io.StringIO(), stdin=io.BytesIO(lines.encode()))
    assert code == 0, code


def write_rocksdb_twin(files: Path, twin: Path) -> int:
    """The twin: the same CommitLog (hard links) and the file queues' units in a RocksDB database."""
    from rocksdict import Options, Rdict
    from rmqsource.format.rocksdb_queue import encode_cq_key, encode_cq_value, encode_offset_key, \
        encode_offset_value
    from rmqsource.store.reader import MessageStoreReader
    twin.mkdir(parents=True)
    (twin / "commitlog").mkdir()
    for seg in (files / "commitlog").iterdir():
        os.link(seg, twin / "commitlog" / seg.name)
    for name in ("checkpoint",):
        if (files / name).exists():
            shutil.copyfile(files / name, twin / name)
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    db = Rdict(str(twin / "consumequeue"), options=opts)
    offsets = db.create_column_family("offset", Options(raw_mode=True))
    n = 0
    with MessageStoreReader(files) as reader:
        for topic, qid in reader.queue_keys():
            q = reader.consume_queue(topic, qid)
            units = q.read_units(0, q.max_offset)
            for off, u in enumerate(units):
                db[encode_cq_key(topic, qid, off)] = encode_cq_value(int(u["phy_offset"]), int(u["size"]),
                                                                     int(u["tags_code"]), 0)
            last = units[-1]
            offsets[encode_offset_key(topic, qid, max_entry=True)] = encode_offset_value(int(last["phy_offset"]),
                                                                                         len(units) - 1)
            n += len(units)
    db.flush()
    db.close()
    os.unlink(twin / "consumequeue" / "rocksdict-config.json")
    return n


def write_unflushed_twin(files: Path, twin: Path) -> None:
    """A store whose RocksDB database has no unit yet (a broker before its first flush): the same CommitLog."""
    from rocksdict import Options, Rdict
    twin.mkdir(parents=True)
    (twin / "commitlog").mkdir()
    for seg in (files / "commitlog").iterdir():
        os.link(seg, twin / "commitlog" / seg.name)
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    db = Rdict(str(twin / "consumequeue"), options=opts)
    db.create_column_family("offset", Options(raw_mode=True))
    db.flush()
    db.close()
    os.unlink(twin / "consumequeue" / "rocksdict-config.json")


def export(store: Path, out: Path, *extra: str) -> None:
    from rmqsource.cli import main
    code = main(["export", "--format", "arrow", "--topic", TOPIC, *extra, str(store), str(out)],
                stdout=io.StringIO())
    assert code == 0, code


def close_opens() -> None:
    """Before a cold case, outside its time: a new process has no units kept, RocksDB's caches are empty, and
    it has no earlier open to close."""
    from rmqsource.io.rocksdb import close_all
    close_all()


def units_only(store: Path) -> int:
    from rmqsource.store.reader import MessageStoreReader
    total = 0
    with MessageStoreReader(store) as reader:
        for key in reader.queue_keys():
            q = reader.consume_queue(*key)
            total += len(q.read_units(0, q.max_offset))
    return total


def jvm_session():
    """A local Spark session with the rmq jar (the JVM scan), or None when the jar is not built."""
    from rmqsource.spark.jar import jar_path
    jar = jar_path()
    if jar is None:
        return None
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("bench-rocksdb-queue")
             .config("spark.jars", jar).config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def jvm_scan(spark, store: Path, tag: str | None = None) -> None:
    df = spark.read.format("rmq").option("topics", TOPIC).load(str(store))
    if tag is not None:
        df = df.where(df.tags == tag)
    df.write.format("noop").mode("overwrite").save()


def best(fn, repeat: int) -> float:
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--dir", default="/tmp/rmq-bench-rocksdb")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-jvm", action="store_true", help="leave out the JVM scan cases (no Spark session)")
    a = ap.parse_args()
    base = Path(a.dir)
    files, twin = base / f"files-{a.messages}", base / f"rocksdb-{a.messages}"
    unflushed = base / f"unflushed-{a.messages}"
    if not (unflushed / "consumequeue" / "CURRENT").is_file():
        shutil.rmtree(base, ignore_errors=True)
        t = time.perf_counter()
        write_file_store(files, a.messages)
        n = write_rocksdb_twin(files, twin)
        write_unflushed_twin(files, unflushed)
        print(f"wrote {a.messages:,} messages, a RocksDB twin of {n:,} units and an unflushed one in "
              f"{time.perf_counter() - t:.1f} s")
    stores = (files, twin, unflushed)
    out = base / "out.arrow"
    cases = [
        ("topic read (export --topic, all columns)", lambda s: export(s, out), False),
        ("tag query (export --topic --tag TagB)", lambda s: export(s, out, "--tag", "TagB"), False),
        ("topic read, cold open (a process's first)", lambda s: export(s, out), True),
        ("tag query, cold open (a process's first)", lambda s: export(s, out, "--tag", "TagB"), True),
        ("queue units alone (read_units, cold open)", units_only, True),
    ]
    for extra in ((), ("--tag", "TagB")):             # both stores give the same rows, or the timings mean nothing
        counts = []
        for store in stores:
            export(store, out, *extra)
            import pyarrow.ipc as ipc
            with ipc.open_file(str(out)) as f:
                counts.append(sum(f.get_batch(i).num_rows for i in range(f.num_record_batches)))
        assert counts[0] == counts[1] == counts[2], (extra, counts)
    spark = None if a.no_jvm else jvm_session()
    if spark is not None:
        cases += [
            ("JVM scan (rmq jar, topic, all columns)", lambda s: jvm_scan(spark, s), False),
            ("JVM scan, tag query (tags = 'TagB')", lambda s: jvm_scan(spark, s, "TagB"), False),
        ]
    elif not a.no_jvm:
        print("(no JVM cases: the rmq jar is not built; rmq jar --build)")
    print(f"{'case':44s} {'files s':>9s} {'rocksdb s':>10s} {'ratio':>7s} {'unflushed s':>12s} {'ratio':>7s}")
    for name, fn, cold in cases:
        for store in stores:
            fn(store)                               # warm the page cache for each
        times = {store: [] for store in stores}
        for _ in range(a.repeat):                   # alternate, so all see the same machine
            for store in stores:
                if cold:
                    close_opens()
                times[store].append(best(lambda: fn(store), 1))
        f, r, u = (min(times[store]) for store in stores)
        print(f"{name:44s} {f:9.3f} {r:10.3f} {r / f:6.2f}x {u:12.3f} {u / f:6.2f}x")
    print(f"python {sys.version.split()[0]}, {a.messages:,} messages, {QUEUES} queues, best of {a.repeat}")
    if spark is not None:
        spark.stop()


if __name__ == "__main__":
    main()
