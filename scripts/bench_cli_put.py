#!/usr/bin/env python3
"""End-to-end benchmark of ``rmq put --json`` (not a test).

    scripts/make_sample_inputs.py --count 250000 --jsonl /tmp/bench/in250k.jsonl
    scripts/bench_cli_put.py /tmp/bench/in250k.jsonl [--repeat 5] [--scratch DIR]

Two measurements per run, each on a fresh store with the default config
(1 GiB segments, index on, dispatch included, clean close):

* ``cli``: ``python -m rmqsource put STORE --json < FILE > /dev/null`` as a
  subprocess -- interpreter start, imports, reading stdin in 64 MiB blocks,
  the put, put.jsonl output, close.  Wall time, and CPU time of the child
  (user + sys from ``os.wait4``).
* ``in-process``: what ``cmd_put`` does without the process around it
  (``line_blocks`` + ``put_json_lines`` + ``to_put_jsonl`` written to
  /dev/null, close), timed with ``perf_counter``/``process_time``.

Then the same-run time of a raw sequential ``os.write`` of the CommitLog
bytes the put produced (up to its max offset, 64 MiB writes, a new file), and
the ratios.  Medians over ``--repeat`` runs (the machine may be shared: CPU
time is the steadier figure).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def _commitlog_bytes(store: str) -> list[bytes]:
    import json
    from rmqsource.io.segments import list_segments
    max_offset = None
    # The CLI's last --json line is its summary with commitLogMaxOffset.
    summary = os.path.join(store, ".bench-summary.json")
    if os.path.exists(summary):
        with open(summary, encoding="utf-8") as f:
            max_offset = json.load(f)["commitLogMaxOffset"]
    out = []
    for s in list_segments(os.path.join(store, "commitlog")):
        with open(s.path, "rb") as f:
            n = s.size_bytes if max_offset is None else max(0, min(s.size_bytes, max_offset - s.start_offset))
            out.append(f.read(n))
    return out


def _raw_write(datas: list[bytes], scratch: str) -> tuple[float, float, int]:
    path = os.path.join(scratch, "raw.bin")
    c0, t0 = time.process_time(), time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    total = 0
    for d in datas:
        mv = memoryview(d)
        pos = 0
        while pos < len(d):
            pos += os.write(fd, mv[pos:pos + (64 << 20)])
        total += len(d)
    os.close(fd)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    os.unlink(path)
    return wall, cpu, total


def run_cli(path: str, store: str) -> tuple[float, float, int]:
    """(wall, child cpu, messages) of one ``python -m rmqsource put STORE --json`` run."""
    out_path = store + ".out"
    with open(path, "rb") as stdin, open(out_path, "wb") as stdout:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "rmqsource", "put", store, "--json"],
                                stdin=stdin, stdout=stdout)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"rmq put exited with {proc.returncode}")
    # Keep only the summary (the put.jsonl lines went to the file, as they would to a pipe).
    with open(out_path, "rb") as f:
        f.seek(max(0, os.path.getsize(out_path) - 4096))
        last = f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    with open(os.path.join(store, ".bench-summary.json"), "wb") as f:
        f.write(last)
    os.unlink(out_path)
    import json
    return wall, usage.ru_utime + usage.ru_stime, json.loads(last)["done"]


def run_in_process(path: str, store: str) -> tuple[float, float, int]:
    """(wall, cpu, messages) of cmd_put's JSON path without the process around it."""
    import json
    from rmqsource.commands.put import line_blocks
    from rmqsource.store.writer import MessageStoreWriter
    c0, t0 = time.process_time(), time.perf_counter()
    total = 0
    with open(path, "rb") as stream, open(os.devnull, "w", encoding="utf-8") as out:
        w = MessageStoreWriter(store)
        try:
            for _, block in line_blocks(stream):
                res = w.put_json_lines(block)
                out.write(res.to_put_jsonl(total).decode("utf-8"))
                total += len(res)
            max_offset = w.commit_log_max_offset
        finally:
            w.close()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    with open(os.path.join(store, ".bench-summary.json"), "w", encoding="utf-8") as f:
        json.dump({"commitLogMaxOffset": max_offset, "done": total}, f)
    return wall, cpu, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsonl")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scratch", default=None)
    ap.add_argument("--only", choices=("cli", "in-process"), default=None)
    a = ap.parse_args()
    scratch = tempfile.mkdtemp(dir=a.scratch)
    modes = [("cli", run_cli), ("in-process", run_in_process)]
    if a.only:
        modes = [m for m in modes if m[0] == a.only]
    size_mb = os.path.getsize(a.jsonl) / 1e6
    print(f"rmq put --json: {a.jsonl} ({size_mb:.0f} MB), median of {a.repeat} runs")
    try:
        for label, fn in modes:
            walls, cpus, raws, raw_cpus = [], [], [], []
            n = size = 0
            for _ in range(a.repeat):
                store = os.path.join(scratch, "store")
                shutil.rmtree(store, ignore_errors=True)
                wall, cpu, n = fn(a.jsonl, store)
                rw, rc, size = _raw_write(_commitlog_bytes(store), scratch)
                walls.append(wall), cpus.append(cpu), raws.append(rw), raw_cpus.append(rc)
                shutil.rmtree(store, ignore_errors=True)
            w, c, r, rc = (statistics.median(x) for x in (walls, cpus, raws, raw_cpus))
            print(f"  {label:<11} wall {w:6.3f} s (min {min(walls):.3f})  cpu {c:6.3f} s  -> "
                  f"{n / w:,.0f} msgs/s wall, {n / c:,.0f} msgs/s cpu")
            print(f"  {'':<11} raw os.write of the {size / 1e6:.0f} MB CommitLog: {r:.3f} s wall, {rc:.3f} s cpu "
                  f"-> put/raw = {w / r:.1f}x wall, {c / max(rc, 1e-9):.1f}x cpu")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
