#!/usr/bin/env python3
"""Writer benchmarks (not tests): JSON-lines bulk put, Arrow/Parquet batch put, raw write ratio.

    scripts/make_sample_inputs.py --count 250000 --jsonl /tmp/bench/in250k.jsonl
    scripts/make_sample_inputs.py --count 2000000 --parquet /tmp/bench/in2m.parquet
    scripts/bench_writer.py --jsonl /tmp/bench/in250k.jsonl --parquet /tmp/bench/in2m.parquet [--profile]

Each run: default StoreConfig (1 GiB segments, index on), fresh store, dispatch
and index included, clean close.  Prints wall and CPU seconds, msgs/s, and the
same-run time of writing the resulting CommitLog bytes with one os.write loop.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time


def _raw_write_seconds(store: str, scratch: str, max_offset: int) -> tuple[float, int]:
    """Time to write the store's CommitLog bytes (up to its max offset) to a new file with os.write."""
    from rmqsource.io.segments import list_segments
    segs = list_segments(os.path.join(store, "commitlog"))
    datas = []
    for s in segs:
        with open(s.path, "rb") as f:
            datas.append(f.read(max(0, min(s.size_bytes, max_offset - s.start_offset))))
    path = os.path.join(scratch, "raw.bin")
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    total = 0
    for d in datas:
        mv = memoryview(d).toreadonly()
        n = len(d)
        pos = 0
        while pos < n:
            pos += os.write(fd, mv[pos:min(n, pos + (64 << 20))])
        total += n
    os.close(fd)
    t = time.perf_counter() - t0
    os.unlink(path)
    return t, total


def _timed(label: str, fn):
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    c1, t1 = time.process_time(), time.perf_counter()
    print(f"  {label:<28} wall {t1 - t0:7.3f} s   cpu {c1 - c0:7.3f} s")
    return out, t1 - t0, c1 - c0


def bench_jsonl(path: str, scratch: str, chunk: int, render: bool) -> None:
    from rmqsource.store.writer import MessageStoreWriter
    with open(path, "rb") as f:
        data = f.read()
    store = os.path.join(scratch, "json-store")
    print(f"JSON lines: {path} ({len(data) / 1e6:.0f} MB)")
    n = 0
    max_off = 0

    def run():
        nonlocal n
        out = open(os.devnull, "wb")
        nonlocal max_off
        with MessageStoreWriter(store) as w:
            pos, i = 0, 0
            while pos < len(data):
                end = data.rfind(b"\n", pos, pos + chunk) + 1 if pos + chunk < len(data) else len(data)
                if end <= pos:
                    end = len(data)
                res = w.put_json_lines(data[pos:end])
                if render:
                    out.write(res.to_put_jsonl(i))
                i += len(res)
                pos = end
            max_off = w.commit_log_max_offset
        n = i
        out.close()
    _, wall, cpu = _timed("put_json_lines + close", run)
    raw, size = _raw_write_seconds(store, scratch, max_off)
    print(f"  {n} msgs: {n / wall:,.0f} msgs/s wall, {n / cpu:,.0f} msgs/s cpu; CommitLog {size / 1e6:.0f} MB, "
          f"raw os.write {raw:.3f} s -> writer/raw = {wall / raw:.1f}x")
    shutil.rmtree(store)


def bench_parquet(path: str, scratch: str) -> None:
    import pyarrow.parquet as pq
    from rmqsource.store.writer import MessageStoreWriter
    table, _, _ = _timed("read parquet", lambda: pq.read_table(path))
    store = os.path.join(scratch, "arrow-store")
    n = table.num_rows
    max_off = 0

    def run():
        nonlocal max_off
        with MessageStoreWriter(store) as w:
            res = w.put_arrow_batch(table)
            max_off = w.commit_log_max_offset
        assert res.ok_count == n
    _, wall, cpu = _timed("put_arrow_batch + close", run)
    raw, size = _raw_write_seconds(store, scratch, max_off)
    print(f"  {n} msgs: {n / wall:,.0f} msgs/s wall, {n / cpu:,.0f} msgs/s cpu; CommitLog {size / 1e6:.0f} MB, "
          f"raw os.write {raw:.3f} s -> writer/raw = {wall / raw:.1f}x")
    shutil.rmtree(store)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jsonl")
    ap.add_argument("--parquet")
    ap.add_argument("--chunk-mb", type=int, default=64)
    ap.add_argument("--no-render", action="store_true", help="skip put.jsonl rendering")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--scratch", default=None)
    a = ap.parse_args()
    scratch = tempfile.mkdtemp(dir=a.scratch)
    try:
        def go():
            if a.jsonl:
                bench_jsonl(a.jsonl, scratch, a.chunk_mb << 20, not a.no_render)
            if a.parquet:
                bench_parquet(a.parquet, scratch)
        if a.profile:
            import cProfile
            import pstats
            pr = cProfile.Profile()
            pr.runcall(go)
            pstats.Stats(pr).sort_stats("cumulative").print_stats(40)
        else:
            go()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
