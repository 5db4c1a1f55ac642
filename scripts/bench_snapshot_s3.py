#!/usr/bin/env python
"""Benchmark: ``rmq snapshot`` of a large store to an S3 API server, against a whole-file upload of the same files.

The server is s3proxy on loopback (tests/support/objectstore.py: a real S3 API over a temp folder). The
store is the sample store (rmqsource.sample: 4 topics x 8 queues, JSON bodies, IndexFiles), ``--messages``
of them (default 10M) in ``--segment-mb`` CommitLog segments, generated when missing. Measured in the same
run, through the same client library (pyarrow's S3FileSystem, one instance, the same options):

* ``rmq snapshot``: ``snapshot_store(store, "s3://bucket/snap-N")`` (configs, IndexFiles cut, CRC-32 of
  every byte, each file staged locally and uploaded whole, the manifest last);
* ``copy_files``: ``pyarrow.fs.copy_files`` of a folder holding exactly the files the snapshot holds
  (hard links to the store's files: the same bytes) to ``bucket/peer-N``, an ``aws s3 sync``-style upload
  of whole files (threads across files).

Throughput is the store's bytes (the sum of the files' sizes, as both upload them) per second; the ratio is
copy_files seconds / snapshot seconds (above 1: the snapshot is faster). Each side runs ``--repeat`` times,
alternated, into fresh prefixes; the best of each is kept. Then the store grows by 1 % and an incremental
snapshot into the first prefix is timed (a URI DEST re-uploads the files that grew).

Usage: bench_snapshot_s3.py [--messages N] [--segment-mb 128] [--dir /tmp/rmq-bench-snapshot] [--repeat 2]
       [--profile]  (cProfile of one snapshot run, top functions by cumulative time)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "support"))

from objectstore import ACCESS_KEY, REGION, SECRET_KEY, S3Server  # noqa: E402

from bench_snapshot import sample_store  # noqa: E402

MIB = 1 << 20


def link_farm(store: Path, rels: list[str], farm: Path) -> None:
    """``farm`` holding each of ``rels`` as a hard link to the store's file (the same bytes, no copy)."""
    shutil.rmtree(farm, ignore_errors=True)
    for rel in rels:
        target = farm / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(store / rel, target)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=10_000_000)
    ap.add_argument("--segment-mb", type=int, default=128)
    ap.add_argument("--dir", default="/tmp/rmq-bench-snapshot")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    import pyarrow.fs as pafs
    from rmqsource.sample import write_sample_store
    from rmqsource.store.snapshot import snapshot_store

    base = Path(args.dir)
    store, config = sample_store(base, args.messages, args.segment_mb)

    server = S3Server()
    try:
        host = server.endpoint.split("://", 1)[1]
        options = {"endpoint_override": host, "scheme": "http", "access_key": ACCESS_KEY, "secret_key": SECRET_KEY,
                   "region": REGION}
        s3 = pafs.S3FileSystem(**options)
        bucket = server.bucket
        snap_times, peer_times, manifest = [], [], None
        for i in range(args.repeat):
            t = time.perf_counter()
            manifest = snapshot_store(store, f"s3://{bucket}/snap-{i}", config, dest_options=options)
            snap_times.append(time.perf_counter() - t)
            farm = base / "s3-peer-files"
            link_farm(store, sorted(manifest["files"]), farm)
            t = time.perf_counter()
            pafs.copy_files(str(farm), f"{bucket}/peer-{i}", source_filesystem=pafs.LocalFileSystem(),
                            destination_filesystem=s3, use_threads=True)
            peer_times.append(time.perf_counter() - t)
            shutil.rmtree(farm, ignore_errors=True)
            for prefix in (f"snap-{i}", f"peer-{i}"):          # the server's disk holds one run at a time
                s3.delete_dir_contents(f"{bucket}/{prefix}")
            print(f"  run {i}: snapshot {snap_times[-1]:.2f} s, copy_files {peer_times[-1]:.2f} s", flush=True)
        sizes = sum(e["size"] for e in manifest["files"].values())
        objects = len(manifest["files"])
        snap_s, peer_s = min(snap_times), min(peer_times)
        print(f"store: {args.messages:,} messages, {objects} files, {sizes / MIB:,.1f} MiB "
              f"(CommitLog end {manifest['validEnd'] / MIB:,.1f} MiB, {args.segment_mb} MiB segments); "
              f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
        print(f"  {'':34s} {'seconds':>9s} {'MiB/s':>9s}")
        for name, s in (("rmq snapshot -> s3://", snap_s), ("pyarrow.fs.copy_files -> S3", peer_s)):
            print(f"  {name:34s} {s:9.2f} {sizes / MIB / s:9.1f}")
        print(f"throughput ratio, snapshot / copy_files of the same files: {peer_s / snap_s:.2f}x", flush=True)

        if args.profile:
            import cProfile
            import pstats
            prof = cProfile.Profile()
            prof.enable()
            snapshot_store(store, f"s3://{bucket}/snap-profile", config, dest_options=options)
            prof.disable()
            s3.delete_dir_contents(f"{bucket}/snap-profile")
            pstats.Stats(prof).sort_stats("cumulative").print_stats(25)

        # Incremental: 1 % more messages, then a second run into the same prefix (a copy of the store, so the
        # snapshot's source path is that copy's: the first snapshot of it is taken before it grows).
        grown = store.with_name(store.name + "-s3-grown")
        shutil.rmtree(grown, ignore_errors=True)
        try:
            shutil.copytree(store, grown)
            snapshot_store(grown, f"s3://{bucket}/incremental", config, dest_options=options)
            extra = max(1, args.messages // 100)
            write_sample_store(str(grown), extra, config=config, seed=9)
            t = time.perf_counter()
            again = snapshot_store(grown, f"s3://{bucket}/incremental", config, dest_options=options)
            inc_s = time.perf_counter() - t
        finally:
            shutil.rmtree(grown, ignore_errors=True)
        c = again["counts"]
        print(f"incremental after {extra:,} more messages: {inc_s:.2f} s, {again['bytesCopied'] / MIB:.1f} MiB "
              f"uploaded ({c['commitlog']['copied']} segments, {c['consumequeue']['copied']} queue files, "
              f"{c['index']['copied']} IndexFiles)")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
