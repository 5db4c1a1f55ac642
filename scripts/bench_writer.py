#!/usr/bin/env python3
"""Writer benchmarks (not tests): JSON-lines bulk put, Arrow/Parquet batch put, raw write ratio.

    scripts/make_sample_inputs.py --count 250000 --jsonl /tmp/bench/in250k.jsonl
    scripts/make_sample_inputs.py --count 2000000 --parquet /tmp/bench/in2m.parquet
    scripts/bench_writer.py --jsonl /tmp/bench/in250k.jsonl --parquet /tmp/bench/in2m.parquet [--repeat 5] [--profile]

Each run: default StoreConfig (1 GiB segments, index on), fresh store, dispatch
and index included, clean close.  Prints wall and CPU seconds, msgs/s, and the
same-run time of writing the resulting CommitLog bytes with one os.write loop.
With ``--repeat N`` every measurement runs N times and the medians are
reported (the machine may be shared: CPU time is the steadier figure).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time


def _raw_write_seconds(store: str, scratch: str, max_offset: int) -> tuple[float, float, int]:
    """(wall, cpu) to write the store's CommitLog bytes (up to its max offset) to a new file with os.write."""
    from rmqsource.io.segments import list_segments
    segs = list_segments(os.path.join(store, "commitlog"))
    datas = []
    for s in segs:
        with open(s.path, "rb") as f:
            datas.append(f.read(max(0, min(s.size_bytes, max_offset - s.start_offset))))
    path = os.path.join(scratch, "raw.bin")
    c0, t0 = time.process_time(), time.perf_counter()
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
    t, c = time.perf_counter() - t0, time.process_time() - c0
    os.unlink(path)
    return t, c, total


def _timed(fn):
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    c1, t1 = time.process_time(), time.perf_counter()
    return out, t1 - t0, c1 - c0


def _report(label: str, n: int, walls, cpus, raws, raw_cpus, size: int) -> None:
    w, c, r, rc = (statistics.median(x) for x in (walls, cpus, raws, raw_cpus))
    print(f"  {label:<28} wall {w:7.3f} s   cpu {c:7.3f} s   (median of {len(walls)}; "
          f"wall {min(walls):.3f}..{max(walls):.3f})")
    print(f"  {n} msgs: {n / w:,.0f} msgs/s wall, {n / c:,.0f} msgs/s cpu; CommitLog {size / 1e6:.0f} MB, "
          f"raw os.write {r:.3f} s wall / {rc:.3f} s cpu -> writer/raw = {w / r:.1f}x wall, {c / rc:.1f}x cpu")


def bench_jsonl(path: str, scratch: str, chunk: int, render: bool, repeat: int) -> None:
    from rmqsource.store.writer import MessageStoreWriter
    with open(path, "rb") as f:
        data = f.read()
    store = os.path.join(scratch, "json-store")
    print(f"JSON lines: {path} ({len(data) / 1e6:.0f} MB), blocks of {chunk >> 20} MiB, "
          f"put.jsonl {'rendered' if render else 'not rendered'}")
    n = 0
    max_off = 0

    def run():
        nonlocal n, max_off
        out = open(os.devnull, "wb")
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
    walls, cpus, raws, raw_cpus = [], [], [], []
    size = 0
    for _ in range(repeat):
        shutil.rmtree(store, ignore_errors=True)
        _, wall, cpu = _timed(run)
        raw, raw_cpu, size = _raw_write_seconds(store, scratch, max_off)
        walls.append(wall), cpus.append(cpu), raws.append(raw), raw_cpus.append(raw_cpu)
    _report("put_json_lines + close", n, walls, cpus, raws, raw_cpus, size)
    shutil.rmtree(store, ignore_errors=True)


def bench_parquet(path: str, scratch: str, repeat: int) -> None:
    import pyarrow.parquet as pq
    from rmqsource.store.writer import MessageStoreWriter
    table, wall, cpu = _timed(lambda: pq.read_table(path))
    print(f"Arrow: {path} (read in {wall:.3f} s wall, {cpu:.3f} s cpu; not counted)")
    store = os.path.join(scratch, "arrow-store")
    n = table.num_rows
    max_off = 0

    def run():
        nonlocal max_off
        with MessageStoreWriter(store) as w:
            res = w.put_arrow_batch(table)
            max_off = w.commit_log_max_offset
        assert res.ok_count == n
    walls, cpus, raws, raw_cpus = [], [], [], []
    size = 0
    for _ in range(repeat):
        shutil.rmtree(store, ignore_errors=True)
        _, wall, cpu = _timed(run)
        raw, raw_cpu, size = _raw_write_seconds(store, scratch, max_off)
        walls.append(wall), cpus.append(cpu), raws.append(raw), raw_cpus.append(raw_cpu)
    _report("put_arrow_batch + close", n, walls, cpus, raws, raw_cpus, size)
    shutil.rmtree(store, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jsonl")
    ap.add_argument("--parquet")
    ap.add_argument("--chunk-mb", type=int, default=64)
    ap.add_argument("--no-render", action="store_true", help="skip put.jsonl rendering")
    ap.add_argument("--repeat", type=int, default=1, help="runs per measurement (medians reported)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--scratch", default=None)
    a = ap.parse_args()
    scratch = tempfile.mkdtemp(dir=a.scratch)
    try:
        def go():
            if a.jsonl:
                bench_jsonl(a.jsonl, scratch, a.chunk_mb << 20, not a.no_render, a.repeat)
            if a.parquet:
                bench_parquet(a.parquet, scratch, a.repeat)
        if a.profile:
            import cProfile
            import pstats
            pr = cProfile.Profile()
            pr.runcall(go)
            pstats.Stats(pr).sort_stats("tottime").print_stats(40)
        else:
            go()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
