"""The input partitions planning.py and lookup_planning.py make (picklable values; twins of RmqInputPartition.java):
:class:`CommitLogRange`, :class:`QueueRange` / :class:`QueueRanges`, :class:`Lookup`, each naming its store by a
:class:`StoreRef`.  Imported by both planners, so the lookup planner needs no import of planning.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .compat import InputPartition        # a stand-in where pyspark has no Python data sources (3.5)

from ..store.config import StoreConfig


@dataclass(frozen=True)
class StoreRef:
    index: int
    root: str
    broker: str
    config: StoreConfig
    commit_log_min: int
    commit_log_max: int
    cq_on_disk: bool


class RmqPartition(InputPartition):
    def __init__(self, store: StoreRef):
        super().__init__(None)
        self.store = store


class CommitLogRange(RmqPartition):
    def __init__(self, store: StoreRef, start: int, end: int, segment_start: int, segment_end: int):
        super().__init__(store)
        self.start, self.end = start, end
        self.segment_start, self.segment_end = segment_start, segment_end

    def __repr__(self):
        return f"CommitLogRange({self.store.broker}, [{self.start}, {self.end}))"


class QueueRange(RmqPartition):
    def __init__(self, store: StoreRef, topic: str, queue_id: int, start: int, end: int):
        super().__init__(store)
        self.topic, self.queue_id, self.start, self.end = topic, queue_id, start, end

    def __repr__(self):
        return f"QueueRange({self.store.broker}, {self.topic}/{self.queue_id}, [{self.start}, {self.end}))"


class QueueRanges(RmqPartition):
    """Several whole-queue ranges read one after the other by one task (many small queues)."""

    def __init__(self, store: StoreRef, ranges: tuple):
        super().__init__(store)
        self.ranges = tuple(ranges)          # ((topic, queue_id, start, end), ...)

    def pieces(self) -> list[QueueRange]:
        return [QueueRange(self.store, t, q, a, b) for t, q, a, b in self.ranges]

    def __repr__(self):
        return f"QueueRanges({self.store.broker}, {len(self.ranges)} queues)"


class Lookup(RmqPartition):
    """Point reads at CommitLog offsets; ``queues`` restricts rows to planned queue ranges (topic reads)."""

    def __init__(self, store: StoreRef, offsets: tuple, queues: Optional[dict]):
        super().__init__(store)
        self.offsets = tuple(sorted(set(offsets)))
        self.queues = queues

    def __repr__(self):
        return f"Lookup({self.store.broker}, {len(self.offsets)} offsets)"
