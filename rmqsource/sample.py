"""A deterministic sample store: what the demo, the notebooks and the benchmarks write.

Messages look like a small shop's traffic: a few topics, several queues each,
ten tags, business keys, JSON bodies, store timestamps spread over time.  The
rows are built as Arrow columns (numpy, no per-message Python) and appended
through the writer's columnar path.
"""

from __future__ import annotations

import os
from typing import Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .store.config import StoreConfig
from .store.writer import MessageStoreWriter

DEFAULT_TOPICS = ("OrderEvents", "PaymentEvents", "ShipmentEvents", "ClickStream")
DEFAULT_TAGS = ("created", "paid", "shipped", "delivered", "cancelled",
                "refunded", "viewed", "clicked", "carted", "reviewed")
SAMPLE_START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _str_column(prefix: str, values: np.ndarray, suffix: str = "") -> pa.Array:
    return pc.binary_join_element_wise(prefix, pa.array(values).cast(pa.string()), suffix, "")


def sample_table(count: int, *, seed: int = 42, first: int = 0, topics: Sequence[str] = DEFAULT_TOPICS,
                 queues_per_topic: int = 8, tags: Sequence[str] = DEFAULT_TAGS,
                 body_bytes: Optional[int] = None, start_ms: int = SAMPLE_START_MS,
                 spacing_ms: int = 7) -> pa.Table:
    """Rows ``first .. first+count`` of the sample stream as an Arrow table (writer column names).

    Bodies are small JSON documents; ``body_bytes`` pads or cuts them to a fixed size.
    """
    seq = np.arange(first, first + count, dtype=np.int64)
    rng = np.random.default_rng(seed * 1_000_003 + first)
    order = rng.integers(0, 1_000_000, count)
    tag_index = rng.integers(0, len(tags), count)
    tag_col = pa.array(np.asarray(tags, dtype=object)[tag_index], type=pa.string())
    topic_col = pa.array(np.asarray(topics, dtype=object)[seq % len(topics)], type=pa.string())
    amount = pa.array(np.round(rng.random(count) * 500, 2)).cast(pa.string())
    body = pc.binary_join_element_wise(
        '{"seq":', pa.array(seq).cast(pa.string()), ',"order":', pa.array(order).cast(pa.string()),
        ',"event":"', tag_col, '","amount":', amount, "}", "")
    if body_bytes is not None:
        body = pc.utf8_slice_codeunits(pc.utf8_rpad(body, body_bytes, " "), 0, body_bytes)
    ts = start_ms + seq * spacing_ms
    uniq = pc.binary_join_element_wise(f"7F000001{seed & 0xFFFF:04X}",
                                       pc.utf8_lpad(pa.array(seq).cast(pa.string()), 20, "0"), "")
    keys = pc.binary_join_element_wise(_str_column("order-", order), _str_column("user-", order % 977), " ")
    properties = pa.MapArray.from_arrays(
        pa.array(np.arange(count + 1, dtype=np.int32)),
        pa.array(["UNIQ_KEY"] * count, type=pa.string()), uniq)
    return pa.table({
        "topic": topic_col,
        "queueId": pa.array(rng.integers(0, queues_per_topic, count).astype(np.int32)),
        "body": body.cast(pa.binary()),
        "tags": tag_col,
        "keys": keys,
        "properties": properties,
        "bornTimestamp": pa.array(ts - rng.integers(0, 50, count)),
        "storeTimestamp": pa.array(ts),
        "bornHost": pa.array(["10.1.2.3:40000"] * count, type=pa.string()),
        "storeHost": pa.array(["10.0.0.5:10911"] * count, type=pa.string()),
    })


def write_sample_store(root: str | os.PathLike, count: int, *, config: Optional[StoreConfig] = None,
                       batch_rows: int = 250_000, **kwargs) -> int:
    """Append ``count`` sample messages to the store at ``root``; returns the CommitLog max offset."""
    config = config or StoreConfig.from_mapping({"mappedFileSizeCommitLog": 64 * 1024 * 1024})
    with MessageStoreWriter(root, config) as writer:
        for first in range(0, count, batch_rows):
            table = sample_table(min(batch_rows, count - first), first=first, **kwargs)
            results = writer.put_arrow_batch(table)
            if results.ok_count != len(results):
                bad = results[int(np.flatnonzero(~results.ok_mask)[0])]
                raise RuntimeError(f"sample put failed: {bad.status} {bad.reason}")
        return writer.commit_log_max_offset
