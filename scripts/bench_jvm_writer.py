#!/usr/bin/env python3
"""JVM store writer benchmark (not a test): the JVM writer's putAll beside the Python writer's columnar put
of the same rows and a raw sequential write of the same number of CommitLog bytes.

    scripts/bench_jvm_writer.py [--messages 2000000] [--body-bytes 256] [--chunk 8192] [--repeat 3] [--staged]
                                [--scratch DIR] [--skip-python]

Rows: 4 topics x 8 queues, TAGS, KEYS ("order-<i>") and a UNIQ_KEY property, bodies of --body-bytes,
store timestamps pinned, so both writers write the same CommitLog bytes (checked).  Each writer: default
StoreConfig (1 GiB segments, ConsumeQueue and IndexFile dispatch), fresh store, clean close, timed from
open to close; rows are built before the clock starts.  The JVM figures come from WriteMain bench (its
raw write is an 8 MiB FileChannel write loop plus one fsync in the same JVM); the Python writer uses
put_columns (the columnar fast path).  With --repeat N the medians are reported; the machine may be
shared, so CPU seconds are printed too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TOPICS = ["BenchTopicA", "BenchTopicB", "BenchTopicC", "BenchTopicD"]
TAGS = ["TagA", "TagB", "TagC"]
BORN_MS = 1_700_000_000_000


def jvm_run(root: str, n: int, body_bytes: int, chunk: int, staged: bool = False) -> dict:
    from rmqsource.spark.jar import find_java, jar_path
    jar, java = jar_path(required=True), find_java()
    cmd = [java, "-Xmx4g", *(["-Drmqsource.benchStaged=" + str(4 << 30)] if staged else []), "-cp", jar, "io.rmqsource.tools.WriteMain", "bench", root, str(n),
           str(body_bytes), str(chunk)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def python_columns(n: int, body_bytes: int):
    """The WriteBench rows as MessageColumns (put_columns input)."""
    import numpy as np
    import pyarrow as pa
    from rmqsource.format.message_columns import columns_from_arrow
    i = np.arange(n, dtype=np.int64)
    bodies = [bytes(((b * 31 + j * 7) & 0xFF) for j in range(body_bytes)) for b in range(64)]
    body = pa.array(bodies, pa.binary()).take(pa.array(i & 63))
    topic = pa.array(TOPICS).take(pa.array(i & 3))
    tags = pa.array(TAGS).take(pa.array(i % 3))
    keys = pa.array([f"order-{k}" for k in range(n)])
    uniq = pa.array([f"0A00000500002A9F{k:016X}" for k in range(n)])
    props = pa.MapArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32)), pa.array(["UNIQ_KEY"] * n), uniq)
    table = pa.table({"topic": topic, "queueId": pa.array((i >> 2) & 7, pa.int32()), "body": body, "tags": tags,
                      "keys": keys, "properties": props, "bornTimestamp": pa.array(BORN_MS + i),
                      "storeTimestamp": pa.array(BORN_MS + i + 1000), "bornHost": pa.array(["192.168.0.7:50000"] * n),
                      "storeHost": pa.array(["10.0.0.5:10911"] * n)})
    return columns_from_arrow(table)


def python_run(root: str, cols) -> dict:
    from rmqsource.store.writer import MessageStoreWriter
    c0, t0 = time.process_time(), time.perf_counter()
    with MessageStoreWriter(root) as w:
        res = w.put_columns(cols)
        end = w.commit_log_max_offset
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert res.ok_count == cols.n, res.ok_count
    return {"seconds": secs, "cpuSeconds": cpu, "commitLogBytes": end}


def same_commitlog(a: str, b: str, end: int) -> bool:
    for name in sorted(os.listdir(os.path.join(a, "commitlog"))):
        start = int(name)
        if start >= end:
            continue
        n = min(end - start, os.path.getsize(os.path.join(a, "commitlog", name)))
        with open(os.path.join(a, "commitlog", name), "rb") as fa, open(os.path.join(b, "commitlog", name), "rb") as fb:
            for _ in range(0, n, 64 << 20):
                if fa.read(min(64 << 20, n)) != fb.read(min(64 << 20, n)):
                    return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=2_000_000)
    ap.add_argument("--body-bytes", type=int, default=256)
    ap.add_argument("--chunk", type=int, default=8192, help="messages per putAll")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--scratch", default=None)
    ap.add_argument("--skip-python", action="store_true")
    ap.add_argument("--staged", action="store_true",
                    help="also the JVM writer's staged path: StagedPuts.stage of every message (in memory), then "
                         "one putStaged (the Spark sink's split: staging in the tasks, the copy under the lock)")
    a = ap.parse_args()
    scratch = tempfile.mkdtemp(dir=a.scratch)
    n = a.messages
    try:
        jvm, py, staged = [], [], []
        cols = None if a.skip_python else python_columns(n, a.body_bytes)
        for r in range(a.repeat):
            jroot, proot = os.path.join(scratch, "jvm"), os.path.join(scratch, "py")
            jvm.append(jvm_run(jroot, n, a.body_bytes, a.chunk))
            if a.staged:
                shutil.rmtree(jroot, ignore_errors=True)
                staged.append(jvm_run(jroot, n, a.body_bytes, a.chunk, staged=True))
            if cols is not None:
                py.append(python_run(proot, cols))
                if r == 0:
                    ok = same_commitlog(jroot, proot, jvm[-1]["commitLogBytes"])
                    print(f"same CommitLog bytes from both writers: {ok}")
                    if not ok:
                        sys.exit("the two writers wrote different CommitLog bytes: the figures do not compare")
            shutil.rmtree(jroot, ignore_errors=True)
            shutil.rmtree(proot, ignore_errors=True)
        med = lambda rows, k: statistics.median(x[k] for x in rows)  # noqa: E731
        size = jvm[0]["commitLogBytes"]
        jw, jc, raw = med(jvm, "seconds"), med(jvm, "cpuSeconds"), med(jvm, "rawSeconds")
        print(f"{n} messages, {a.body_bytes}-byte bodies, 4 topics x 8 queues, KEYS + TAGS + UNIQ_KEY, "
              f"putAll chunks of {a.chunk}; CommitLog {size / 1e6:.0f} MB; median of {a.repeat}")
        print(f"  JVM writer     {jw:7.3f} s wall {jc:7.3f} s cpu  {n / jw:>12,.0f} msgs/s  {size / jw / 1e6:8.1f} MB/s")
        if py:
            pw, pc = med(py, "seconds"), med(py, "cpuSeconds")
            print(f"  Python writer  {pw:7.3f} s wall {pc:7.3f} s cpu  {n / pw:>12,.0f} msgs/s  {size / pw / 1e6:8.1f} MB/s")
        if staged:
            sw, ss = med(staged, "seconds"), med(staged, "stageSeconds")
            print(f"  JVM staged     {sw:7.3f} s wall = {ss:.3f} s staging + {sw - ss:.3f} s putStaged and close "
                  f"(putAll's whole put: {jw:.3f} s)")
        print(f"  raw write      {raw:7.3f} s wall                {n / raw:>12,.0f} msgs/s  {size / raw / 1e6:8.1f} MB/s")
        print(f"  ratios: JVM/raw {jw / raw:.2f}x wall" + (f", Python/JVM {pw / jw:.2f}x wall, {pc / jc:.2f}x cpu"
                                                          if py else ""))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
