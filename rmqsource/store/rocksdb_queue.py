"""ConsumeQueues kept in RocksDB (``storeType=defaultRocksDB``): the queue source the file queues' readers use.

:class:`RocksDbQueueStore` answers what ``consumequeue/{topic}/{queueId}/`` answers for file queues: the
queues (every (topic, queueId) with a ``max`` entry in the ``offset`` column family) and, per queue, a
:class:`RocksDbConsumeQueue` with the interface of :class:`~rmqsource.store.consumequeue.ConsumeQueueBase`
(max offset, first offset, units of a range), so getMessage, planning, lag, lookups and streams above it
never know which they got.  Key and value layout: ``rmqsource/format/rocksdb_queue.py``.  The database is
opened read-only (``rmqsource/io/rocksdb.py``); twin: RocksDbQueues.java.

The broker's own answers, for comparison (RocketMQ ``RocksDBConsumeQueueStore``): max offset = the
``max`` entry's queue offset + 1; min offset = its lazily corrected ``min`` entry, i.e. the first unit
whose record is at or above the CommitLog's min offset, which is what
:meth:`ConsumeQueueBase.min_offset` finds from the units (5.x rule).  A queue's units start at the
lowest key present (compaction may drop expired ones): that is its ``first_file_start_offset``.

A running broker's newest units are not in the database yet (it writes them without a WAL into memtables
that flush rarely): :mod:`rmqsource.store.rocksdb_tail` dispatches them from the CommitLog past the
database's checkpoint, as the broker's own recovery does, and each queue's units continue there.

Units read in bulk are kept, decoded, with the snapshot they came from (:class:`UnitBlocks`, in the open's
``memo``): rocksdict hands out one Python object a value (~0.25-0.5 us a unit, where a file queue's units
are one copy out of the page cache), so a second query of the same snapshot in the process (a notebook, a
reused Spark Python worker, the next export) reads its units from memory.  A new snapshot (the broker
wrote since) starts with none.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from functools import cached_property
from pathlib import Path
from typing import Optional

import numpy as np

from ..errors import CorruptRecordError
from ..format.consumequeue import CQ_UNIT_DTYPE, PRE_BLANK_SIZE
from ..format.rocksdb_queue import (CHECKPOINT_TOPIC, CQ_VALUE_SIZE, DEFAULT_CF, OFFSET_CF, cq_queue_prefix,
                                    decode_cq_value, decode_dispatch_checkpoint, decode_offset_key, decode_offset_value,
                                    encode_cq_key, encode_offset_key, queue_offset_of_cq_key, values_to_units)
from ..io.rocksdb import ReadOnlyRocksDb, open_read_only
from .commitlog import CommitLog
from .consumequeue import ConsumeQueueBase
from .rocksdb_tail import DEFAULT_DELAY_LEVELS_MS, CommitLogTail, TailQueue

# Units per "file" a RocksDB queue reports: it has no files; getMessage reads at most this many per call
# (the file queues' default, so a read is cut where it is cut over files of the default size).
DEFAULT_UNITS_PER_FILE = 300_000
_END_OF_QUEUE = b"\xff" * 8
UNIT_BLOCK = 1024                   # units a cached block holds, aligned on queue offsets
UNIT_CACHE_BYTES = 64 << 20         # decoded units kept per snapshot (20 bytes a unit: ~3.3M units)
_ENTRY_BYTES = 200                  # what a kept block costs besides its units (key, array, order)
READ_DIRECTLY = np.empty(0, dtype=CQ_UNIT_DTYPE)     # a block kept as "not kept"; compared by identity
READ_DIRECTLY.flags.writeable = False


class UnitBlocks:
    """Decoded units of one snapshot in aligned blocks of :data:`UNIT_BLOCK`, least recently used dropped
    past ``budget`` bytes.  Block (topic, queueId, b) -> the units of keys ``b * UNIT_BLOCK`` on, which are
    all the block's keys below the queue's last unit in the database (a full block, or the queue's last), or
    :data:`READ_DIRECTLY` for a block with a gap inside or a malformed value (read as asked, every time)."""

    def __init__(self, budget: int = UNIT_CACHE_BYTES):
        self.budget = budget
        self.nbytes = 0
        self._blocks: OrderedDict[tuple[str, int, int], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def of(cls, db) -> Optional["UnitBlocks"]:
        memo = getattr(db, "memo", None)
        if memo is None:
            return None
        with _memo_lock:
            blocks = memo.get("units")
            if blocks is None:
                blocks = memo["units"] = cls()
        return blocks

    def get(self, key: tuple[str, int, int]) -> Optional[np.ndarray]:
        with self._lock:
            units = self._blocks.get(key)
            if units is not None:
                self._blocks.move_to_end(key)
            return units

    def put(self, key: tuple[str, int, int], units: np.ndarray) -> None:
        with self._lock:
            old = self._blocks.pop(key, None)
            if old is not None:
                self.nbytes -= old.nbytes + _ENTRY_BYTES
            self._blocks[key] = units
            self.nbytes += units.nbytes + _ENTRY_BYTES
            while self.nbytes > self.budget and self._blocks:
                self.nbytes -= self._blocks.popitem(last=False)[1].nbytes + _ENTRY_BYTES


_memo_lock = threading.Lock()


def _join_units(parts: list[np.ndarray]) -> np.ndarray:
    """The units of ``parts`` in one new array, copied as bytes (assigning a big-endian structured array
    goes field by field, ~5x slower; np.concatenate would make the fields native-endian)."""
    parts = [np.ascontiguousarray(p, dtype=CQ_UNIT_DTYPE) for p in parts]     # (no copy when already so)
    out = np.empty(sum(len(p) for p in parts), dtype=CQ_UNIT_DTYPE)
    raw, at = out.view(np.uint8), 0
    for part in parts:
        raw[at:at + part.nbytes] = part.view(np.uint8)
        at += part.nbytes
    return out


class RocksDbQueueStore:
    """The ConsumeQueues of one store's RocksDB database (read-only), each continued by the CommitLog's tail."""

    def __init__(self, layout, db: Optional[ReadOnlyRocksDb] = None, *,
                 units_per_file: int = DEFAULT_UNITS_PER_FILE, delay_levels_ms=DEFAULT_DELAY_LEVELS_MS):
        self.layout = layout
        self.folder = Path(layout.consumequeue_dir)
        self.db = db if db is not None else open_read_only(self.folder)
        self.units_per_file = units_per_file
        self._delay_levels_ms = delay_levels_ms

    @cached_property
    def max_entries(self) -> dict[tuple[str, int], tuple[int, int]]:
        """(topic, queueId) -> (CommitLog offset, queue offset) of each queue's last unit in the database."""
        out = {}
        for k, v in self.db.items(OFFSET_CF):
            key = decode_offset_key(k)
            value = decode_offset_value(v)
            if key is None or value is None or not key.is_max or key.queue_id < 0:
                continue                 # the dispatch checkpoint (8 bytes), min hints, foreign keys
            out[(key.topic, key.queue_id)] = value
        return out

    @cached_property
    def dispatch_checkpoint(self) -> Optional[int]:
        """The CommitLog offset the database's units reach (``maxPhyOffset``); None before the first flush."""
        value = self.db.get(OFFSET_CF, encode_offset_key(CHECKPOINT_TOPIC, 0, max_entry=True))
        return decode_dispatch_checkpoint(value) if value is not None else None

    @cached_property
    def tail(self) -> dict[tuple[str, int], TailQueue]:
        """Each queue's units past the database, dispatched from the CommitLog (rocksdb_tail.py)."""
        tail = self._snapshot_tail()
        commitlog = CommitLog(self.layout)
        try:
            tail.extend(commitlog)
        finally:
            commitlog.close()
        return tail.view()

    def _snapshot_tail(self) -> CommitLogTail:
        """The tail of this database snapshot and delay levels, shared by the stores opened on it (it only grows)."""
        memo = getattr(self.db, "memo", None)
        key = ("tail", tuple(self._delay_levels_ms))
        with _memo_lock:
            tail = memo.get(key) if memo is not None else None
            if tail is None:
                tail = CommitLogTail(self.dispatch_end, {k: v[1] + 1 for k, v in self.max_entries.items()},
                                     self._delay_levels_ms)
                if memo is not None:
                    memo[key] = tail
        return tail

    @cached_property
    def dispatch_end(self) -> int:
        """Where the database's units end in the CommitLog (the readers' tail starts there; verify expects no
        unit past it): its dispatch checkpoint; without one (a database written before the checkpoint existed)
        the furthest CommitLog end of a unit there, 0 when it holds none.  Each queue's last unit (its ``max``
        entry) is its furthest: units follow the CommitLog.  Twin: ``RocksDbQueues.dispatchEnd``."""
        if self.dispatch_checkpoint is not None:
            return self.dispatch_checkpoint
        end = 0
        for (topic, queue_id), (phy, queue_offset) in sorted(self.max_entries.items()):
            _, values = self.database_units(topic, queue_id, queue_offset, queue_offset + 1, 1)
            if values and len(values[0]) == CQ_VALUE_SIZE:
                unit_phy, size, _, _ = decode_cq_value(values[0])
                end = max(end, unit_phy + size)
            else:
                end = max(end, phy)             # the entry's unit is missing or malformed: where it starts
        return end

    @cached_property
    def max_offsets(self) -> dict[tuple[str, int], int]:
        """(topic, queueId) -> the queue's max offset (next offset to write), database and tail together."""
        out = {key: queue_offset + 1 for key, (_, queue_offset) in self.max_entries.items()}
        for key, t in self.tail.items():
            out[key] = max(out.get(key, 0), t.end_offset)
        return out

    def database_units(self, topic: str, queue_id: int, start: int, end: int,
                       limit: int) -> tuple[list[int], list[bytes]]:
        """The database's own units of (topic, queueId) with queue offsets in [start, end), at most ``limit``,
        in key order (never the tail): each key's queue offset and its value as stored, of any length
        (``rmq verify`` checks what is on disk; the readers raise on a malformed value).  A key's queue offset
        is the 8 bytes after the queue's prefix, so offsets never go down along the keys."""
        keys, values = self.db.range(DEFAULT_CF, encode_cq_key(topic, queue_id, start),
                                     encode_cq_key(topic, queue_id, end), limit)
        at = len(cq_queue_prefix(topic, queue_id))
        offsets = [int.from_bytes(k[at:at + 8].ljust(8, b"\0"), "big", signed=True) for k in keys]
        return offsets, values

    def list_queues(self) -> list[tuple[str, int]]:
        return sorted(self.max_offsets)

    def queue(self, topic: str, queue_id: int) -> Optional["RocksDbConsumeQueue"]:
        key = (topic, int(queue_id))
        max_offset = self.max_offsets.get(key)
        if max_offset is None:
            return None
        last = self.max_entries.get(key)
        return RocksDbConsumeQueue(self, topic, int(queue_id), max_offset,
                                   in_database=last[1] + 1 if last is not None else 0, tail=self.tail.get(key))


class RocksDbConsumeQueue(ConsumeQueueBase):
    """One queue's units in the ``default`` column family."""

    def __init__(self, store: RocksDbQueueStore, topic: str, queue_id: int, max_offset: int, *,
                 in_database: int, tail: Optional[TailQueue]):
        self.store = store
        self.topic = topic
        self.queue_id = queue_id
        self.units_per_file = store.units_per_file
        self._max_offset = max_offset
        self._in_database = in_database          # the database holds units below this offset
        self._tail = tail                        # the units past it, from the CommitLog
        self._prefix = cq_queue_prefix(topic, queue_id)

    @property
    def max_offset(self) -> int:
        return self._max_offset

    @cached_property
    def first_file_start_offset(self) -> int:
        """The lowest queue offset with a unit (units below were compacted away, or never written)."""
        key = self.store.db.first_key(DEFAULT_CF, self._prefix, self._prefix + _END_OF_QUEUE)
        if key is not None:
            return queue_offset_of_cq_key(key)
        return self._tail.first_offset if self._tail is not None else self._max_offset

    @cached_property
    def max_physic_offset(self) -> int:
        units = self._read(self._max_offset - 1, 1) if self._max_offset > 0 else ()
        if len(units) == 0 or int(units[0]["size"]) == PRE_BLANK_SIZE:
            return -1
        return int(units[0]["phy_offset"]) + int(units[0]["size"])

    def locate(self, offset: int) -> tuple[str, int]:
        return f"{self.store.folder} (RocksDB ConsumeQueue {self.topic}:{self.queue_id}, unit {offset})", 0

    def has_file_for(self, offset: int) -> bool:
        return offset >= self.first_file_start_offset

    def close(self) -> None:
        pass

    def _read(self, start: int, count: int) -> np.ndarray:
        """Units [start, start + count) present without a gap from ``start`` (none when ``start`` is missing):
        the database's up to its last unit, then the tail's."""
        if count <= 0 or start < 0:
            return np.empty(0, dtype=CQ_UNIT_DTYPE)
        end = start + count
        head = self._read_database(start, min(end, self._in_database) - start) if start < self._in_database \
            else np.empty(0, dtype=CQ_UNIT_DTYPE)
        t = self._tail
        if t is None or end <= t.first_offset or start + len(head) < t.first_offset:
            return head                           # nothing past the database asked for, or a gap before it
        lo = max(start, t.first_offset)
        rest = t.units[lo - t.first_offset:end - t.first_offset]
        if len(head) == 0:
            return rest
        return _join_units([head, rest])

    def _read_database(self, start: int, count: int) -> np.ndarray:
        """Units [start, start + count) of the database present without a gap from ``start``.

        Through the snapshot's :class:`UnitBlocks`: a bulk read (``count`` >= a block) reads and keeps the
        whole blocks it covers; a short read (a binary search's probe) is answered from kept blocks, or
        read directly when one is not kept.  A kept block holds all its keys, so each block's part of the
        range is exact, and the first part that comes back short (a missing key) ends the run."""
        if count <= 0 or start < 0:
            return np.empty(0, dtype=CQ_UNIT_DTYPE)
        cache = self._cache
        if cache is None:
            return self._read_direct(start, count)
        end = start + count
        first_block, last_block = start // UNIT_BLOCK, (end - 1) // UNIT_BLOCK
        fill = count >= UNIT_BLOCK
        blocks = []
        for b in range(first_block, last_block + 1):
            units = cache.get((self.topic, self.queue_id, b))
            if units is None:
                if not fill:
                    return self._read_direct(start, count)
                units = self._read_block(b)
                cache.put((self.topic, self.queue_id, b), units)
            blocks.append(units)
        parts = []
        for b, units in zip(range(first_block, last_block + 1), blocks):
            base = b * UNIT_BLOCK
            lo, hi = max(start, base), min(end, base + UNIT_BLOCK)
            part = self._read_direct(lo, hi - lo) if units is READ_DIRECTLY else units[lo - base:hi - base]
            parts.append(part)
            if len(part) < hi - lo:
                break                           # a missing key: the run from ``start`` ends here
        return _join_units(parts)

    @cached_property
    def _cache(self) -> Optional[UnitBlocks]:
        return UnitBlocks.of(self.store.db)

    def _read_block(self, block: int) -> np.ndarray:
        """The units of a block to keep (see :class:`UnitBlocks`): all its keys from its first, up to the
        queue's last unit in the database (the database is read only below it), or :data:`READ_DIRECTLY`.
        A block holding every key of that range is one values pass; a short one is read again with its keys."""
        db, first = self.store.db, block * UNIT_BLOCK
        end = min(first + UNIT_BLOCK, self._in_database)
        lo, hi = encode_cq_key(self.topic, self.queue_id, first), encode_cq_key(self.topic, self.queue_id, end)
        values = db.values_range(DEFAULT_CF, lo, hi)
        if len(values) != end - first:
            keys, values = db.range(DEFAULT_CF, lo, hi, end - first)
            # Keys are unique and sorted: the first and last in place mean every one between is there.
            if keys and (queue_offset_of_cq_key(keys[0]) != first
                         or queue_offset_of_cq_key(keys[-1]) != first + len(keys) - 1):
                return READ_DIRECTLY
        joined = b"".join(values)
        if len(joined) != CQ_VALUE_SIZE * len(values):
            return READ_DIRECTLY                # a direct read names the unit, if it is asked for
        units = values_to_units(joined)
        units.flags.writeable = False
        return units

    def _read_direct(self, start: int, count: int) -> np.ndarray:
        """Units [start, start + count) from the database, as :meth:`_read` answers.

        One bounded iterator pass over the range's values, joined and decoded at once (as file units are):
        the keys of one queue have one length, so a range holding ``count`` values has no gap.  Fewer values
        mean a gap (units compacted away, or a dispatch in progress): the keys are read to keep the run
        from ``start``."""
        db, first, end = self.store.db, encode_cq_key(self.topic, self.queue_id, start), \
            encode_cq_key(self.topic, self.queue_id, start + count)
        values = db.values_range(DEFAULT_CF, first, end)
        if len(values) != count:
            keys, values = db.range(DEFAULT_CF, first, end, count)
            if not keys or queue_offset_of_cq_key(keys[0]) != start:
                return np.empty(0, dtype=CQ_UNIT_DTYPE)
            n = len(keys)
            if queue_offset_of_cq_key(keys[-1]) != start + n - 1:
                # Keys are unique and sorted: a gap lies before the last one; keep the run from ``start``.
                n = next(i for i in range(1, n) if queue_offset_of_cq_key(keys[i]) != start + i)
                values = values[:n]
        joined = b"".join(values)
        if len(joined) != CQ_VALUE_SIZE * len(values):
            i, v = next((i, v) for i, v in enumerate(values) if len(v) != CQ_VALUE_SIZE)
            raise CorruptRecordError(f"RocksDB ConsumeQueue {self.topic}:{self.queue_id} unit {start + i} has a "
                                     f"{len(v)}-byte value, expected {CQ_VALUE_SIZE}", file=str(self.store.folder),
                                     offset=0)
        return values_to_units(joined)
