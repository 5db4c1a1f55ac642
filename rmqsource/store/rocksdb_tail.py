"""Units a RocksDB ConsumeQueue database does not hold yet, dispatched from the CommitLog as the broker does.

A broker with ``storeType=defaultRocksDB`` writes its ConsumeQueue units without a write-ahead log
(``AbstractRocksDBStorage.initWriteOptions``: ``disableWAL``) into 128 MiB memtables, and its column
families flush atomically (``RocksDBOptionsFactory``: ``atomicFlush``).  So the database on disk holds
exactly the units of the records before its dispatch checkpoint (``CHECKPOINT_TOPIC``'s ``maxPhyOffset``,
written in the same batches); every unit dispatched since lives only in the broker's memory until the next
memtable flush or a clean shutdown.  A running broker can go through a million messages without one
flush: measured on 5.5.0, none of ~1,300 acknowledged messages was in the database while it ran.

The broker itself recovers from a crash this way (``RocksDBConsumeQueueStore.recover`` ->
``dispatchFromPhyOffset`` = the checkpoint): it dispatches the CommitLog again from the checkpoint.  The
reader does the same: :class:`CommitLogTail` walks the CommitLog from the checkpoint to its valid end (CRC
checked: a record the broker is still writing ends the walk) and keeps, per queue, the units dispatch
gives (NOT/COMMIT records, tagsCode as ``consume_queue_tags_code``, LMQ copies from
``INNER_MULTI_DISPATCH``/``INNER_MULTI_QUEUE_OFFSET``).  :class:`~rmqsource.store.rocksdb_queue.RocksDbQueueStore`
serves each queue's units from the database up to its last unit there, then from the tail.

A tail belongs to one snapshot of the database (kept in its ``memo``) and grows: each new store opened on
the same snapshot walks only the records written since the last walk, then freezes what it saw
(:meth:`CommitLogTail.view`), so one reader answers from one consistent end.  Twin: RocksDbTail.java.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ..format.consumequeue import CQ_UNIT_DTYPE
from ..format.record import Kind, MessageRecord
from ..format.tagscode import consume_queue_tags_code
from .config import StoreConfig

INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"          # MessageConst.PROPERTY_INNER_MULTI_DISPATCH
INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"  # MessageConst.PROPERTY_INNER_MULTI_QUEUE_OFFSET
LMQ_PREFIX = "%LMQ%"                                   # MixAll.LMQ_PREFIX
LMQ_QUEUE_ID = 0                                       # MixAll.LMQ_QUEUE_ID
LMQ_DISPATCH_SEPARATOR = ","                           # MixAll.LMQ_DISPATCH_SEPARATOR
DEFAULT_DELAY_LEVELS_MS = StoreConfig().message_delay_levels_ms


@dataclass(frozen=True)
class TailQueue:
    """One queue's units past the database: queue offsets ``first_offset`` on, without a gap."""

    first_offset: int
    units: np.ndarray               # CQ_UNIT_DTYPE

    @property
    def end_offset(self) -> int:
        return self.first_offset + len(self.units)


class _GrowingQueue:
    __slots__ = ("first_offset", "rows", "frozen")

    def __init__(self, first_offset: int):
        self.first_offset = first_offset
        self.rows: list[tuple[int, int, int]] = []
        self.frozen: Optional[TailQueue] = None

    @property
    def next_offset(self) -> int:
        return self.first_offset + len(self.rows)

    def freeze(self) -> TailQueue:
        if self.frozen is None or len(self.frozen.units) != len(self.rows):
            units = np.array(self.rows, dtype=CQ_UNIT_DTYPE)
            units.flags.writeable = False
            self.frozen = TailQueue(self.first_offset, units)
        return self.frozen


class CommitLogTail:
    """The units of the records from ``start`` (the database's dispatch checkpoint) to the CommitLog's end.

    ``next_offsets``: each queue's next offset in the database; a record whose queue offset is below it is
    already there (the broker's dispatch writes the same key again), and a queue's tail runs without a gap
    from its first unit (a record out of sequence is skipped, as rebuilding a queue from the CommitLog does).
    """

    def __init__(self, start: int, next_offsets: dict[tuple[str, int], int],
                 delay_levels_ms: Sequence[int] = DEFAULT_DELAY_LEVELS_MS):
        self.start = start
        self.end = start
        self._next_offsets = next_offsets
        self._delays = tuple(delay_levels_ms)
        self._queues: dict[tuple[str, int], _GrowingQueue] = {}
        self._lock = threading.Lock()

    def extend(self, commitlog) -> None:
        """Walk the records written since the last walk (from ``start`` the first time)."""
        with self._lock:
            if not commitlog.segments:
                return
            at = max(self.end, commitlog.min_offset)
            for step in commitlog.walk(at, check_crc=True):
                kind = step.decoded.kind
                if kind is Kind.MESSAGE:
                    self._dispatch(step.phy_offset, step.decoded.size, step.decoded.record)
                    at = step.phy_offset + step.decoded.size
                elif kind is Kind.BLANK:
                    at = step.segment.start_offset + max(step.segment.size_bytes, commitlog.segment_size)
                else:
                    break
            self.end = max(self.end, at)

    def view(self) -> dict[tuple[str, int], TailQueue]:
        """Each queue's tail as walked so far (immutable: later walks do not change it)."""
        with self._lock:
            return {key: q.freeze() for key, q in self._queues.items()}

    def _dispatch(self, phy_offset: int, size: int, record: MessageRecord) -> None:
        if not record.enters_consume_queue:
            return
        props = record.properties
        tags_code = consume_queue_tags_code(record.topic, props, record.store_timestamp_ms, self._delays)
        unit = (phy_offset, size, tags_code)
        self._put((record.topic, record.queue_id), record.queue_offset, unit)
        names, offsets = props.get(INNER_MULTI_DISPATCH), props.get(INNER_MULTI_QUEUE_OFFSET)
        if names and offsets:
            self._dispatch_lmq(names, offsets, record.queue_id, unit)

    def _dispatch_lmq(self, names: str, offsets: str, queue_id: int, unit: tuple[int, int, int]) -> None:
        """The copies ``RocksDBConsumeQueueStore.dispatchLMQ`` writes (LMQ queues are queue 0)."""
        names_list, offsets_list = names.split(LMQ_DISPATCH_SEPARATOR), offsets.split(LMQ_DISPATCH_SEPARATOR)
        if len(names_list) != len(offsets_list):
            return                      # the broker logs "[bug] queues.length!=queueOffsets.length" and skips
        for name, offset in zip(names_list, offsets_list):
            try:
                queue_offset = int(offset)
            except ValueError:
                continue
            self._put((name, LMQ_QUEUE_ID if name.startswith(LMQ_PREFIX) else queue_id), queue_offset, unit)

    def _put(self, key: tuple[str, int], queue_offset: int, unit: tuple[int, int, int]) -> None:
        q = self._queues.get(key)
        if q is None:
            if queue_offset < self._next_offsets.get(key, 0):
                return                  # in the database already
            q = self._queues[key] = _GrowingQueue(queue_offset)
        if queue_offset == q.next_offset:
            q.rows.append(unit)
