#!/usr/bin/env python3
"""Generate benchmark inputs: JSON lines (inputs.jsonl shape) and/or a Parquet file.

    make_sample_inputs.py --count 250000 --body 256 --jsonl /tmp/in.jsonl
    make_sample_inputs.py --count 2000000 --body 256 --parquet /tmp/in.parquet

Messages look like a typical producer's: 4 topics x 8 queues, 5 tags, one KEYS
value, a UNIQ_KEY property, IPv4 born hosts, one store host, random bodies.
"""

from __future__ import annotations

import argparse
import base64
import json
import os

import numpy as np


def columns(n: int, body: int, seed: int = 7) -> dict:
    rng = np.random.default_rng(seed)
    topics = np.array(["TopicA", "TopicB", "TopicC", "TopicD"])
    tags = np.array(["TagA", "TagB", "TagC", "TagD", "TagE"])
    raw = rng.integers(0, 256, size=(n, body), dtype=np.uint8)
    uniq = rng.integers(0, 1 << 63, size=(n, 2), dtype=np.int64)
    born = rng.integers(1, 255, size=(n, 2))
    return {
        "topic": topics[rng.integers(0, 4, n)].tolist(),
        "queueId": rng.integers(0, 8, n).tolist(),
        "bornTimestamp": (1_732_000_000_000 + np.arange(n) // 10).tolist(),
        "bornHost": [f"192.168.{a}.{b}:{30000 + a}" for a, b in born.tolist()],
        "storeHost": ["10.0.0.5:10911"] * n,
        "flag": [0] * n,
        "tags": tags[rng.integers(0, 5, n)].tolist(),
        "keys": [f"order-{i}" for i in range(n)],
        "uniq": [f"{a & 0xFFFFFFFFFFFFFFFF:016X}{b & 0xFFFFFFFFFFFFFFFF:016X}" for a, b in uniq.tolist()],
        "body": raw,
    }


def write_jsonl(path: str, c: dict) -> None:
    n = len(c["topic"])
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            d = {"topic": c["topic"][i], "queueId": c["queueId"][i], "bornTimestamp": c["bornTimestamp"][i],
                 "bornHost": c["bornHost"][i], "storeHost": c["storeHost"][i], "sysFlag": 0, "flag": 0,
                 "reconsumeTimes": 0, "preparedTransactionOffset": 0, "tags": c["tags"][i],
                 "keys": c["keys"][i], "properties": {"UNIQ_KEY": c["uniq"][i]},
                 "body": base64.b64encode(c["body"][i].tobytes()).decode()}
            f.write(json.dumps(d, separators=(",", ":")) + "\n")


def write_parquet(path: str, c: dict) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    n = len(c["topic"])
    body = c["body"]
    offsets = np.arange(n + 1, dtype=np.int32) * body.shape[1]
    body_arr = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(body.tobytes())])
    props = pa.array([[("UNIQ_KEY", u)] for u in c["uniq"]], type=pa.map_(pa.string(), pa.string()))
    t = pa.table({"topic": c["topic"], "queueId": pa.array(c["queueId"], pa.int32()),
                  "bornTimestamp": c["bornTimestamp"], "bornHost": c["bornHost"], "storeHost": c["storeHost"],
                  "flag": pa.array(c["flag"], pa.int32()), "tags": c["tags"], "keys": c["keys"],
                  "properties": props, "body": body_arr})
    pq.write_table(t, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=250_000)
    ap.add_argument("--body", type=int, default=256)
    ap.add_argument("--jsonl")
    ap.add_argument("--parquet")
    a = ap.parse_args()
    c = columns(a.count, a.body)
    if a.jsonl:
        write_jsonl(a.jsonl, c)
        print(f"{a.jsonl}: {a.count} lines, {os.path.getsize(a.jsonl)} bytes")
    if a.parquet:
        write_parquet(a.parquet, c)
        print(f"{a.parquet}: {a.count} rows, {os.path.getsize(a.parquet)} bytes")


if __name__ == "__main__":
    main()
