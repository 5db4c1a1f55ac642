"""A deterministic sample store: what the demo, the notebooks and the benchmarks write.

Messages look like a small shop's traffic: a few topics, several queues each,
ten tags, business keys, JSON bodies, store timestamps spread over time.
"""

from __future__ import annotations

import json
import os
import random
from typing import Iterator, Optional, Sequence

from .store.config import StoreConfig
from .store.writer import Message, MessageStoreWriter

DEFAULT_TOPICS = ("OrderEvents", "PaymentEvents", "ShipmentEvents", "ClickStream")
DEFAULT_TAGS = ("created", "paid", "shipped", "delivered", "cancelled",
                "refunded", "viewed", "clicked", "carted", "reviewed")
SAMPLE_START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def sample_messages(count: int, *, seed: int = 42, topics: Sequence[str] = DEFAULT_TOPICS,
                    queues_per_topic: int = 8, tags: Sequence[str] = DEFAULT_TAGS,
                    body_bytes: Optional[int] = None, start_ms: int = SAMPLE_START_MS,
                    spacing_ms: int = 7) -> Iterator[Message]:
    """``count`` messages; ``body_bytes`` pads/cuts JSON bodies to a fixed size."""
    rng = random.Random(seed)
    for i in range(count):
        topic = topics[i % len(topics)]
        tag = tags[rng.randrange(len(tags))]
        order = rng.randrange(1_000_000)
        doc = {"seq": i, "order": order, "event": tag, "amount": round(rng.random() * 500, 2)}
        body = json.dumps(doc, separators=(",", ":")).encode()
        if body_bytes is not None:
            body = (body + b" " * body_bytes)[:body_bytes]
        ts = start_ms + i * spacing_ms
        yield Message(
            topic=topic, queue_id=rng.randrange(queues_per_topic), body=body, tags=tag,
            keys=f"order-{order} user-{order % 977}",
            properties={"UNIQ_KEY": f"7F000001{seed & 0xFFFF:04X}{i:020X}"},
            born_timestamp_ms=ts - rng.randrange(50), born_host="10.1.2.3:40000",
            store_host="10.0.0.5:10911", store_timestamp_ms=ts)


def write_sample_store(root: str | os.PathLike, count: int, *, config: Optional[StoreConfig] = None,
                       batch_size: int = 10_000, **kwargs) -> int:
    """Append ``count`` sample messages to the store at ``root``; returns the CommitLog max offset."""
    config = config or StoreConfig.from_mapping({"mappedFileSizeCommitLog": 64 * 1024 * 1024})
    with MessageStoreWriter(root, config) as writer:
        batch: list[Message] = []
        for m in sample_messages(count, **kwargs):
            batch.append(m)
            if len(batch) >= batch_size:
                _put(writer, batch)
                batch = []
        if batch:
            _put(writer, batch)
        return writer.commit_log_max_offset


def _put(writer: MessageStoreWriter, batch: list[Message]) -> None:
    for r in writer.put_messages(batch):
        if not r.ok:
            raise RuntimeError(f"sample put failed: {r.status} {r.reason}")
