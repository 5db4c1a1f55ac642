#!/usr/bin/env python
"""Benchmark: ``rmq snapshot`` of a large store to a local folder, against copying the same files.

The store is the sample store (rmqsource.sample: 4 topics x 8 queues, JSON bodies, UNIQ_KEY + KEYS +
TAGS, IndexFiles), ``--messages`` of them (default 2M) in ``--segment-mb`` CommitLog segments, generated
when missing.  Peers measured in the same run, on the same files, each into a fresh folder of the same file
system:

* ``copyfile``: ``shutil.copyfile`` of every file the snapshot copies (whole files, as ``cp`` does);
* ``copyfile + fsync``: the same, then each copy fsynced;
* ``same bytes``: a read/write loop over exactly the byte ranges the snapshot copies (the part of the active
  segment below the end, each queue's units, ...), no fsync.

The snapshot does more than move bytes: it parses configs, cuts and rebuilds IndexFiles, checksums
everything (CRC-32) and fsyncs each file before renaming it in; the ratios below count all of that.  Each
measurement runs ``--repeat`` times (best kept) with the source in the page cache (it was just written or
read).  Then the store grows by 10 % and an incremental snapshot into the first DEST is timed.

Usage: bench_snapshot.py [--messages N] [--segment-mb 128] [--dir /tmp/rmq-bench-snapshot] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path


def copy_files(files: list[tuple[Path, Path]]) -> int:
    total = 0
    for src, dst in files:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        total += src.stat().st_size
    return total


def copy_files_durably(files: list[tuple[Path, Path]]) -> int:
    """copy_files, then fsync each copy (what the snapshot does before renaming a file in)."""
    total = copy_files(files)
    for _, dst in files:
        fd = os.open(dst, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return total


def copy_ranges(ranges: list[tuple[Path, Path, int]]) -> int:
    """Copy the first ``n`` bytes of each file (read + write, 8 MiB at a time)."""
    total = 0
    buf = bytearray(8 << 20)
    mv = memoryview(buf)
    for src, dst, n in ranges:
        dst.parent.mkdir(parents=True, exist_ok=True)
        with open(src, "rb", buffering=0) as fi, open(dst, "wb", buffering=0) as fo:
            left = n
            while left > 0:
                k = fi.readinto(mv[:min(len(buf), left)])
                if not k:
                    break
                fo.write(mv[:k])
                left -= k
                total += k
    return total


def best(repeat: int, fn, reset) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        reset()
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return min(times), result


def sample_store(base: Path, messages: int, segment_mb: int):
    """(store, config): a sample store of ``messages`` in ``segment_mb`` MiB segments under ``base``, written
    once and reused by later runs (and by bench_snapshot_s3.py)."""
    from rmqsource.sample import write_sample_store
    from rmqsource.store.config import StoreConfig
    store = base / f"store-{messages}-{segment_mb}"
    config = StoreConfig.from_mapping({"mappedFileSizeCommitLog": segment_mb << 20})
    if not (store / "commitlog").is_dir():
        t = time.perf_counter()
        write_sample_store(str(store), messages, config=config)
        print(f"wrote {messages:,} messages in {time.perf_counter() - t:.1f} s: {store}", flush=True)
    return store, config


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=2_000_000)
    ap.add_argument("--segment-mb", type=int, default=128)
    ap.add_argument("--dir", default="/tmp/rmq-bench-snapshot")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from rmqsource.sample import write_sample_store
    from rmqsource.store.snapshot import snapshot_store

    base = Path(args.dir)
    store, config = sample_store(base, args.messages, args.segment_mb)
    dest, peer = base / "dest", base / "peer"

    def reset(*folders):
        def clear():
            for f in folders:
                shutil.rmtree(f, ignore_errors=True)
        return clear

    snap_s, manifest = best(args.repeat, lambda: snapshot_store(store, str(dest), config), reset(dest))
    copied = manifest["bytesCopied"]
    files = [(store / rel, peer / rel) for rel in manifest["files"]]
    ranges = [(store / rel, peer / rel, e["validBytes"]) for rel, e in manifest["files"].items()]
    whole_s, whole_bytes = best(args.repeat, lambda: copy_files(files), reset(peer))
    durable_s, _ = best(args.repeat, lambda: copy_files_durably(files), reset(peer))
    same_s, same_bytes = best(args.repeat, lambda: copy_ranges(ranges), reset(peer))
    shutil.rmtree(peer, ignore_errors=True)

    mib = 1 << 20
    print(f"store: {args.messages:,} messages, {len(files)} files, CommitLog end {manifest['validEnd']:,} "
          f"({args.segment_mb} MiB segments); {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    store_mib = manifest["validEnd"] / mib
    rows = [("rmq snapshot", snap_s, copied), ("shutil.copyfile (whole files)", whole_s, whole_bytes),
            ("shutil.copyfile + fsync", durable_s, whole_bytes), ("read/write of the same bytes", same_s, same_bytes)]
    print(f"  {'':32s} {'seconds':>9s} {'MiB moved':>11s} {'store MiB/s':>12s}")
    for name, s, n in rows:
        print(f"  {name:32s} {s:9.2f} {n / mib:11.1f} {store_mib / s:12.1f}")
    # Throughput = the same store (its CommitLog up to the end, with its queues and index) copied per second.
    print(f"throughput ratio, snapshot / copyfile of the same files: {whole_s / snap_s:.2f}x "
          f"(/ copyfile + fsync: {durable_s / snap_s:.2f}x; / read+write of the same bytes: {same_s / snap_s:.2f}x)")

    # Incremental: 10 % more messages, then a second run into the same DEST.
    snapshot_store(store, str(dest), config)
    grown = store.with_name(store.name + "-grown")
    shutil.rmtree(grown, ignore_errors=True)
    shutil.copytree(store, grown)
    extra = max(1, args.messages // 10)
    write_sample_store(str(grown), extra, config=config, seed=9)
    # The snapshot names its source: a grown copy needs a DEST of its own, taken before it grew.
    dest2 = base / "dest-incremental"
    shutil.rmtree(dest2, ignore_errors=True)
    shutil.copytree(dest, dest2)
    import json
    doc = json.loads((dest2 / "rmq-snapshot.json").read_text())
    doc["source"]["path"] = str(grown.resolve())
    (dest2 / "rmq-snapshot.json").write_text(json.dumps(doc))
    t = time.perf_counter()
    again = snapshot_store(grown, str(dest2), config)
    inc_s = time.perf_counter() - t
    print(f"incremental after {extra:,} more messages: {inc_s:.2f} s, {again['bytesCopied'] / mib:.1f} MiB copied "
          f"(CommitLog {again['counts']['commitlog']['bytes'] / mib:.1f} MiB = the new bytes, "
          f"{again['validEnd'] - manifest['validEnd']:,}), "
          f"{again['counts']['consumequeue']['copied']} queue files, {again['counts']['index']['copied']} IndexFiles")
    shutil.rmtree(dest2, ignore_errors=True)
    shutil.rmtree(grown, ignore_errors=True)
    shutil.rmtree(dest, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
