"""The ConsumeQueue part of ``rmq snapshot`` (:mod:`rmqsource.store.snapshot`): the snapshot's end and the
queues cut to it.

``validEnd`` is the furthest end of a record any queue's last unit points at (dispatch runs in CommitLog
order, so every record below it was dispatched when that unit was read).  The queue files, read after that,
are copied up to their first unit at or past it; a queue whose next unit, read again once all are copied,
points below the end was caught in the middle of a writer's batch and is copied again.  Then the units copied
this run must tile the CommitLog from the previous end: the gaps between them are walked record by record,
and a record that should have a unit and has none ends the snapshot before it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..errors import FormatError, StoreError
from ..format.consumequeue import CQ_UNIT_SIZE, PRE_BLANK_SIZE, units_from_bytes, valid_unit_mask
from ..format.record import TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK, TRANSACTION_NOT_TYPE, Kind
from ..io.segments import list_segments, offset_to_file_name, pread_full
from .commitlog import CommitLog

COPY_BLOCK = 8 * 1024 * 1024
QUEUE_READ_TRIES = 5            # a queue caught mid-dispatch is read again


@dataclass
class CopiedQueue:
    """One queue as this run copies it."""
    topic: str
    queue_id: int
    folder: str
    files: list = field(default_factory=list)       # _Planned, in file order
    max_offset: int = 0
    units_per_file: int = 0
    new_units: list = field(default_factory=list)   # (phy, size) arrays of the units copied this run


class QueueCopy:
    """Mixin of :class:`rmqsource.store.snapshot.Snapshot` (whose state and staging it uses): the queues."""

    def _queue_folders(self) -> dict[tuple[str, int], str]:
        return {key: str(self.layout.queue_dir(*key)) for key in self.layout.list_queues()}

    def _find_valid_end(self, min_offset: int) -> tuple[int, Optional[int]]:
        """The furthest end of a record a queue's last unit points at (and that record's offset)."""
        end, last_phy = min_offset, None
        for key, folder in self._queue_folders().items():
            for seg in reversed(list_segments(folder)):
                written = _units_written(seg.path, 0, seg.size_bytes // CQ_UNIT_SIZE)
                units = units_from_bytes(_pread(seg.path, max(0, written - 8) * CQ_UNIT_SIZE, 8 * CQ_UNIT_SIZE))
                units = units[:written - max(0, written - 8)]
                ok = valid_unit_mask(units) & (units["size"] != PRE_BLANK_SIZE)
                if ok.any():
                    u = units[int(ok.nonzero()[0][-1])]
                    if int(u["phy_offset"]) + int(u["size"]) > end:
                        end, last_phy = int(u["phy_offset"]) + int(u["size"]), int(u["phy_offset"])
                    break
                if written:
                    break                 # only pre-blank units: a queue with no message yet
        if self.previous and end < self.previous["validEnd"]:
            raise StoreError(f"the store's ConsumeQueues end at CommitLog offset {end}, before the snapshot in "
                             f"{self.dest.uri} (validEnd {self.previous['validEnd']}): not the store it was taken of, "
                             f"or it was truncated")
        return end, last_phy

    def _copy_queues(self) -> None:
        for key, folder in self._queue_folders().items():
            self.queues[key] = self._copy_queue(key, folder)
        # A writer dispatches a batch queue by queue: one read before the batch reached it lacks units below
        # the end.  Its next unit, read now, tells (a queue first seen now is copied too).
        for attempt in range(QUEUE_READ_TRIES):
            stale = [(key, folder) for key, folder in self._queue_folders().items()
                     if key not in self.queues or self._next_unit_below_end(self.queues[key])]
            if not stale:
                return
            for key, folder in stale:
                old = self.queues.get(key)
                for p in old.files if old else []:
                    if p.staged is not None:
                        p.staged.discard()
                self.queues[key] = self._copy_queue(key, folder)
            time.sleep(0.01 * (attempt + 1))
        raise StoreError(f"ConsumeQueues kept missing units below CommitLog offset {self.valid_end} after "
                         f"{QUEUE_READ_TRIES} reads: {', '.join(f'{t}/{q}' for (t, q), _ in stale[:5])}")

    def _discard_queues(self) -> None:
        for q in self.queues.values():
            for p in q.files:
                if p.staged is not None:
                    p.staged.discard()
                self.planned.pop(p.rel, None)
        self.queues = {}

    def _new_units(self) -> tuple[np.ndarray, np.ndarray]:
        """(phy, size) of every unit copied this run, by phy, one per record (an LMQ copy shares its phy)."""
        parts = [u for q in self.queues.values() for u in q.new_units]
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        phy = np.concatenate([p for p, _ in parts])
        size = np.concatenate([s for _, s in parts])
        order = np.argsort(phy, kind="stable")
        phy, size = phy[order], size[order]
        first = np.ones(len(phy), dtype=bool)
        first[1:] = phy[1:] != phy[:-1]
        return phy[first], size[first]

    def _last_unit_phy(self) -> Optional[int]:
        phy, _ = self._new_units()
        return int(phy[-1]) if len(phy) else None

    def _first_record_without_unit(self, cl: CommitLog) -> Optional[int]:
        """The first record below the end, and past the previous snapshot, that should have a ConsumeQueue unit
        and has none (None: every one has).  The units copied this run tile the CommitLog from the previous
        end; only the gaps between them (segment-end blanks, transaction records without units, or a batch
        a writer left half-dispatched) are walked record by record."""
        start = self.previous["validEnd"] if self.previous else cl.min_offset
        phy, size = self._new_units()
        ends = phy + size
        gap_from = np.concatenate(([start], ends))
        gap_to = np.concatenate((phy, [self.valid_end]))
        for a, b in zip(gap_from[gap_from < gap_to].tolist(), gap_to[gap_from < gap_to].tolist()):
            for step in cl.walk(a, stop_offset=b):
                kind = step.decoded.kind
                if kind is Kind.MESSAGE:
                    if step.decoded.record.sys_flag & TRANSACTION_MASK in (TRANSACTION_NOT_TYPE,
                                                                           TRANSACTION_COMMIT_TYPE):
                        return step.phy_offset
                elif kind is not Kind.BLANK:
                    raise FormatError(f"no valid record at CommitLog offset {step.phy_offset}, below the end "
                                      f"{self.valid_end} the ConsumeQueues point at: {step.decoded.reason}",
                                      file=step.segment.path, offset=step.phy_offset - step.segment.start_offset)
        return None

    def _next_unit_below_end(self, q: CopiedQueue) -> bool:
        if not q.units_per_file:
            return False
        m = q.max_offset
        first = m - m % q.units_per_file
        path = os.path.join(q.folder, offset_to_file_name(first * CQ_UNIT_SIZE))
        try:
            with open(path, "rb") as f:
                f.seek((m - first) * CQ_UNIT_SIZE)
                units = units_from_bytes(f.read(CQ_UNIT_SIZE))
        except FileNotFoundError:
            return False
        return bool(len(units) and valid_unit_mask(units)[0] and units["phy_offset"][0] < self.valid_end)

    def _copy_queue(self, key: tuple[str, int], folder: str) -> CopiedQueue:
        q = CopiedQueue(key[0], key[1], folder)
        segments = list_segments(folder)
        if not segments:
            return q
        file_size = max(s.size_bytes for s in segments)     # files are created at full size
        if file_size % CQ_UNIT_SIZE:
            raise FormatError(f"ConsumeQueue file size {file_size} is not a multiple of {CQ_UNIT_SIZE}",
                              file=segments[0].path, offset=0)
        q.units_per_file = file_size // CQ_UNIT_SIZE
        for seg in segments:
            rel = f"consumequeue/{key[0]}/{key[1]}/{os.path.basename(seg.path)}"
            prev = self._prev(rel, file_size)
            if prev is not None and prev["sealed"]:
                q.files.append(self._keep(rel, prev))
                q.max_offset = (seg.start_offset + file_size) // CQ_UNIT_SIZE
                continue
            kept = prev["validBytes"] if prev is not None else 0
            written = _units_written(seg.path, kept // CQ_UNIT_SIZE, file_size // CQ_UNIT_SIZE)
            tail = _pread(seg.path, kept, written * CQ_UNIT_SIZE - kept)
            units = units_from_bytes(tail)
            bad = ~valid_unit_mask(units) | (units["phy_offset"] >= self.valid_end)
            n = int(bad.nonzero()[0][0]) if bad.any() else len(units)
            valid = kept + n * CQ_UNIT_SIZE
            if valid == 0:
                break                     # no unit below the end: neither here nor in later files
            q.max_offset = seg.start_offset // CQ_UNIT_SIZE + valid // CQ_UNIT_SIZE
            new = tail[:n * CQ_UNIT_SIZE]
            messages = units[:n][units["size"][:n] != PRE_BLANK_SIZE]
            q.new_units.append((messages["phy_offset"].astype(np.int64), messages["size"].astype(np.int64)))
            if n == 0:
                q.files.append(self._keep(rel, prev))
            else:
                q.files.append(self._stage_grown(rel, "consumequeue", seg.path, file_size, prev, kept, new))
            if valid < file_size:
                break
        return q


def _pread(path: str, position: int, length: int) -> bytearray:
    """Up to ``length`` bytes at ``position`` (fewer at the end of the file)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return pread_full(fd, position, length)
    finally:
        os.close(fd)


def _units_written(path: str, first: int, limit: int) -> int:
    """How many units of the ConsumeQueue file precede its first invalid one, searching [first, limit) (units
    are written in order: the valid ones are a prefix; a binary search reads ~20 of them, not the file)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        lo, hi = first, min(limit, os.fstat(fd).st_size // CQ_UNIT_SIZE)
        for _ in range(64):
            if lo >= hi:
                break
            mid = (lo + hi) // 2
            unit = units_from_bytes(os.pread(fd, CQ_UNIT_SIZE, mid * CQ_UNIT_SIZE))
            if len(unit) and valid_unit_mask(unit)[0]:
                lo = mid + 1
            else:
                hi = mid
        return lo
    finally:
        os.close(fd)
