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


SAMPLE_PRODUCER_GROUP = "pg_shop"
SAMPLE_CONSUMER_GROUP = "cg_billing"


def write_sample_broker_topics(root: str | os.PathLike, *, traced: int = 20, dead: int = 5,
                               config: Optional[StoreConfig] = None) -> None:
    """Append to a sample store what a broker would have kept about some of its messages: trace messages
    (a client with message trace on: each traced message sent by ``pg_shop``, then consumed by ``cg_billing``)
    and dead letters of ``cg_billing`` (sent back until they reached ``%DLQ%cg_billing``), in the broker's
    own topics and with the properties it sets (docs/views.md). For the demo and the notebooks."""
    from .format.message import MessageExtBrokerInner
    from .store.reader import MessageStoreReader
    config = config or StoreConfig.from_mapping({"mappedFileSizeCommitLog": 64 * 1024 * 1024})
    with MessageStoreReader(root, config) as reader:
        picked = [step.decoded.record for step, _ in zip(reader.commitlog.walk(reader.commitlog.min_offset),
                                                          range(traced + dead))]
    split, content = "\x02", "\x01"       # the client's TraceDataEncoder: events end with 2, fields split by 1
    events = []               # (event text, the msgId it is about)
    for i, r in enumerate(picked[:traced]):
        t = r.store_timestamp_ms
        events.append((content.join(["Pub", str(t - 3), "DefaultRegion", SAMPLE_PRODUCER_GROUP, r.topic, r.uniq_key,
                                     r.tags or "null", r.keys or "null", "10.0.0.5:10911", str(len(r.body)),
                                     str(3 + i % 5), "0", r.msg_id, "true", "10.1.2.3"]) + split, r.uniq_key))
        events.append((content.join(["SubBefore", str(t + 40 + 10 * i), "DefaultRegion", SAMPLE_CONSUMER_GROUP,
                                     f"req-{i}", r.uniq_key, "0", r.keys or "null"]) + split, r.uniq_key))
        events.append((content.join(["SubAfter", f"req-{i}", r.uniq_key, str(12 + 7 * (i % 4)), "true",
                                     r.keys or "null", "0", str(t + 52 + 10 * i + 7 * (i % 4)),
                                     SAMPLE_CONSUMER_GROUP]) + split, r.uniq_key))
    messages = []
    for a in range(0, len(events), 6):       # the client batches events into one trace message
        batch = events[a:a + 6]
        # indexed under every msgId it holds events of (TraceTransferBean's keys), so `rmq trace` finds it
        messages.append(MessageExtBrokerInner(topic="RMQ_SYS_TRACE_TOPIC", queue_id=0,
                                              body="".join(e for e, _ in batch).encode(),
                                              keys=" ".join(dict.fromkeys(k for _, k in batch)),
                                              properties={"TRACE_ON": "true"}))
    for r in picked[traced:]:
        messages.append(MessageExtBrokerInner(
            topic=f"%DLQ%{SAMPLE_CONSUMER_GROUP}", queue_id=0, body=r.body, tags=r.tags, keys=r.keys,
            reconsume_times=16, born_timestamp_ms=r.born_timestamp_ms,
            properties={"RETRY_TOPIC": r.topic, "ORIGIN_MESSAGE_ID": r.msg_id, "UNIQ_KEY": r.uniq_key,
                        "REAL_TOPIC": f"%RETRY%{SAMPLE_CONSUMER_GROUP}", "REAL_QID": "0", "DELAY": "0"}))
    with MessageStoreWriter(root, config) as writer:
        results = writer.put_messages(messages)
        if not all(x.ok for x in results):
            raise RuntimeError(f"sample put failed: {next(x for x in results if not x.ok)}")
