#!/usr/bin/env python
"""Benchmark: ``rmq verify`` and ``rmq export --format parquet`` of a 2M-message store, one process.

The store is the sample store (rmqsource.sample: 4 topics x 8 queues, JSON bodies,
UNIQ_KEY + KEYS + TAGS, 64 MiB segments, IndexFiles), generated when missing.
Peer measured in the same run: reading the same CommitLog bytes raw (os.preadv
into one reusable 16 MiB buffer, the floor any check pays).  Prints msgs/s and
the ratio of each command's time to the raw read.  Runs in-process (rmq's
``main``), so interpreter start-up is not counted; the JVM walk's process is
(its start-up, class loading and JIT are part of every run), and CPU time counts
this process and its children.  Verify runs with each walk (``--engine python``,
and ``--engine jvm`` when the jar is built), also pinned to one core (the
process and the JVM it starts share one CPU: the per-core figure).

Usage: bench_verify_export.py [--messages N] [--dir /tmp/rmq-bench-verify] [--repeat 3]
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import statistics
import sys
import time
from pathlib import Path


def raw_read(store: Path) -> int:
    buf = bytearray(16 << 20)
    mv = memoryview(buf)
    total = 0
    for f in sorted((store / "commitlog").iterdir()):
        fd = os.open(f, os.O_RDONLY)
        try:
            pos, size = 0, os.fstat(fd).st_size
            while pos < size:
                k = os.preadv(fd, [mv[:min(len(buf), size - pos)]], pos)
                if k <= 0:
                    break
                pos += k
                total += k
        finally:
            os.close(fd)
    return total


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the JVM walk runs in one)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn, repeat: int):
    """(best wall s, median wall s, best CPU s): CPU time stays meaningful on a busy machine."""
    ts, cpu = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), cpu_seconds()
        fn()
        ts.append(time.perf_counter() - t)
        cpu.append(cpu_seconds() - c)
    return min(ts), statistics.median(ts), min(cpu)


def on_one_core(fn):
    """``fn`` with this process (and the processes it starts) pinned to one CPU."""
    def pinned():
        cpus = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {min(cpus)})
        try:
            fn()
        finally:
            os.sched_setaffinity(0, cpus)
    return pinned


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=2_000_000)
    ap.add_argument("--dir", default="/tmp/rmq-bench-verify")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from rmqsource.cli import main as rmq
    from rmqsource.sample import write_sample_store
    store = Path(args.dir) / f"store-{args.messages}"
    if not store.is_dir():
        t = time.perf_counter()
        write_sample_store(store, args.messages)
        print(f"generated {args.messages:,} messages in {time.perf_counter() - t:.1f}s -> {store}")
    out_file = Path(args.dir) / "export.parquet"
    n = args.messages

    def verify(engine: str):
        def run():
            assert rmq(["verify", str(store), "--engine", engine], stdout=io.StringIO()) == 0
        return run

    def export():
        assert rmq(["export", str(store), str(out_file)], stdout=io.StringIO()) == 0

    raw_read(store)                                       # warm the page cache
    r_best, r_med, r_cpu = timed(lambda: raw_read(store), args.repeat)
    size = raw_read(store)
    print(f"store: {n:,} messages, {size / 2**20:,.0f} MiB of CommitLog; raw preadv {r_best:.3f}s wall "
          f"({size / r_best / 2**30:.2f} GiB/s), {r_cpu:.3f}s CPU")
    from rmqsource.commands.verify_jvm import jvm_command
    engines = ["python"] + (["jvm"] if jvm_command() else [])
    runs = [(f"verify {e}", verify(e)) for e in engines]
    runs += [(f"verify {e} 1 CPU", on_one_core(verify(e))) for e in engines]
    if not jvm_command():
        print("(no JVM walk: build the jar with `rmq jar --build` and put java on PATH)")
    for name, fn in runs + [("export parquet", export)]:
        best, med, cpu = timed(fn, args.repeat)
        print(f"{name:19s} wall best {best:6.2f}s median {med:6.2f}s ({n / best / 1e6:5.2f}M msgs/s, "
              f"{best / r_best:5.1f}x the raw read); CPU {cpu:6.2f}s ({n / cpu / 1e6:5.2f}M msgs/s per core, "
              f"{cpu / max(r_cpu, 1e-9):5.1f}x the raw read's CPU)")
    print(f"parquet: {out_file.stat().st_size / 2**20:,.0f} MiB")


if __name__ == "__main__":
    sys.exit(main())
