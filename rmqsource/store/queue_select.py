"""Which queue a message without a queueId goes to: the one rule of the Spark sink and ``rmq put --from``.

A queueId column wins; else a message with keys goes to
``abs(keys.hashCode() % queueNums)`` (the producer's SelectMessageQueueByHash
on the KEYS string); else the topic's queues take turns (round-robin from
``seed``).  ``queueNums`` is a fixed number, else the topic's writeQueueNums in
``config/topics.json``, else 4 (the broker's default).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Optional

import pyarrow as pa

from ..errors import FormatError, OptionError
from ..format.configjson import loads_fastjson
from ..format.javahash import java_string_hash
from ..io.durable import load_with_bak

DEFAULT_QUEUE_NUMS = 4


def read_topic_queue_nums(root: str) -> dict[str, int]:
    """``writeQueueNums`` of each topic in ``{root}/config/topics.json`` (empty when absent)."""
    path = os.path.join(root, "config", "topics.json")
    try:
        doc = load_with_bak(path, lambda text, file: loads_fastjson(text, file=file))
    except FormatError:
        return {}
    table = (doc or {}).get("topicConfigTable") or {}
    out = {}
    if isinstance(table, dict):
        for name, tc in table.items():
            if isinstance(tc, dict):
                n = tc.get("writeQueueNums")
                if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                    out[str(name)] = n
    return out


class TopicQueueNums:
    """``queues_of(topic)``: a fixed number, else topics.json's writeQueueNums, else DEFAULT_QUEUE_NUMS."""

    def __init__(self, queue_nums: Optional[int] = None, topic_queue_nums: Mapping[str, int] = ()):
        self.queue_nums = queue_nums
        self.topic_queue_nums = dict(topic_queue_nums)

    @classmethod
    def of_store(cls, root: str, queue_nums: Optional[int] = None) -> "TopicQueueNums":
        return cls(queue_nums, read_topic_queue_nums(root))

    def queues_of(self, topic: str) -> int:
        if self.queue_nums is not None:
            return self.queue_nums
        return self.topic_queue_nums.get(topic, DEFAULT_QUEUE_NUMS)


def _java_rem(a: int, n: int) -> int:
    r = abs(a) % n
    return -r if a < 0 else r


class QueueChooser:
    """queueId column, else hash of the keys, else round-robin per topic (starting at ``seed``).

    ``nums`` is anything with ``queues_of(topic)`` (:class:`TopicQueueNums`, the sink's options).
    """

    def __init__(self, nums, seed: int = 0):
        self.nums = nums
        self.seed = seed
        self._rr: dict[str, int] = {}

    def choose(self, topic: str, queue_id: Optional[int], keys: Optional[str]) -> int:
        if queue_id is not None:
            if queue_id < 0:
                raise OptionError(f"queueId {queue_id} is negative (topic {topic})")
            return int(queue_id)
        n = self.nums.queues_of(topic)
        if keys:
            value = _java_rem(java_string_hash(keys), n)
            return abs(value)
        i = self._rr.get(topic, self.seed)
        self._rr[topic] = i + 1
        return i % n

    def round_robin(self, topic: str, count: int):
        """The queues of the next ``count`` messages of ``topic`` without queueId or keys (numpy int64)."""
        import numpy as np
        i = self._rr.get(topic, self.seed)
        self._rr[topic] = i + count
        return (i + np.arange(count, dtype=np.int64)) % self.nums.queues_of(topic)


def keys_string(keys) -> Optional[str]:
    """The KEYS property of a keys value: a string as it is, a list joined by spaces (empty items dropped)."""
    if isinstance(keys, list):
        keys = " ".join(k for k in keys if k)
    return keys or None


def with_queue_ids(batch, chooser: QueueChooser):
    """``batch`` (Arrow table or record batch with a topic column) with a queueId for every row.

    Rows whose queueId is null (or tables without the column) get the chooser's
    queue; ``queue_id`` is accepted as the column name too.
    """
    names = batch.schema.names
    qcol = "queueId" if "queueId" in names else "queue_id" if "queue_id" in names else None
    if qcol is not None and batch.column(names.index(qcol)).null_count == 0:
        return batch
    if "topic" not in names:
        return batch                      # the writer reports the missing topic
    topics = batch.column(names.index("topic")).to_pylist()
    qids = batch.column(names.index(qcol)).to_pylist() if qcol else [None] * batch.num_rows
    keys = batch.column(names.index("keys")).to_pylist() if "keys" in names else [None] * batch.num_rows
    chosen = pa.array([q if q is not None or t is None else chooser.choose(t, None, keys_string(k))
                       for t, q, k in zip(topics, qids, keys)], pa.int32())
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    if qcol is None:
        return table.append_column("queueId", chosen)
    return table.set_column(names.index(qcol), qcol, chosen)
