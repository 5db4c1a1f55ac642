#!/usr/bin/env python3
"""Lookup latency: by offset msgId (one positioned read) and by key (IndexFile hash walk).

    scripts/bench_lookup.py [--sizes 100000,1000000] [--samples 300]

For each store size it writes a sample store, then times, over random samples:
  view(msgId)            decode msgId -> pread the record -> decode
  query(topic, key)      IndexFile slot -> chain walk -> read and check each hit
  raw pread              the same record bytes with one os.pread (the peer)
on an open reader (warm) and including the reader's open (cold, one-shot CLI
style).  Prints medians and p99 in ms and the ratio to the raw read.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time

from rmqsource.sample import write_sample_store
from rmqsource.store.config import StoreConfig
from rmqsource.store.reader import MessageStoreReader


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return (time.perf_counter() - t0) * 1000, out


def bench(size: int, samples: int, workdir: str) -> None:
    store = os.path.join(workdir, f"store{size}")
    config = StoreConfig.from_mapping({"mappedFileSizeCommitLog": 256 * 1024 * 1024})
    t0 = time.perf_counter()
    write_sample_store(store, size, config=config)
    print(f"\nstore of {size:,} messages written in {time.perf_counter() - t0:.1f} s")
    rng = random.Random(size)
    with MessageStoreReader(store, config) as reader:
        picks = []
        keys = reader.queue_keys()
        for _ in range(samples):
            topic, qid = rng.choice(keys)
            q = reader.consume_queue(topic, qid)
            r = reader.get_message("bench", topic, qid, rng.randrange(q.max_offset), 1).messages[0].record
            picks.append((r.msg_id, r.topic, r.keys.split(" ")[0], r.phy_offset, r.store_size))
    warm_view, warm_query, raw, cold_view = [], [], [], []
    with MessageStoreReader(store, config) as reader:
        reader.view(picks[0][0])  # first call computes the valid end once
        for msg_id, topic, key, phy, size in picks:
            ms, res = timed(reader.view, msg_id)
            assert res.message is not None and res.message.record.phy_offset == phy
            warm_view.append(ms)
            ms, res = timed(reader.query, topic, key, 32)
            assert any(m.record.phy_offset == phy for m in res.messages)
            warm_query.append(ms)
            seg = reader.commitlog.reader.find(phy)
            fd = os.open(seg.path, os.O_RDONLY)
            try:
                ms, data = timed(os.pread, fd, size, phy - seg.start_offset)
            finally:
                os.close(fd)
            raw.append(ms)
    for msg_id, *_ in picks[:50]:
        t0 = time.perf_counter()
        with MessageStoreReader(store, config) as reader:
            assert reader.view(msg_id).message is not None
        cold_view.append((time.perf_counter() - t0) * 1000)
    raw_med = statistics.median(raw)
    for name, values in (("view(msgId), open reader", warm_view), ("query(key), open reader", warm_query),
                         ("open + view(msgId)", cold_view), ("raw os.pread of the record", raw)):
        med = statistics.median(values)
        print(f"  {name:<28} median {med:7.3f} ms  p99 {pct(values, 0.99):7.3f} ms  "
              f"ratio to raw pread {med / raw_med:8.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--samples", type=int, default=300)
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="rmq-bench-lookup-")
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            bench(size, args.samples, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
