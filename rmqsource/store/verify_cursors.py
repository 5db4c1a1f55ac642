"""Cursors that hand out ConsumeQueue units and IndexFile entries in CommitLog order, block by block.

``rmq verify`` walks the CommitLog once, window by window; before checking a
window it takes, from every queue and every IndexFile, the units / entries
whose phyOffset lies below the window's end.  Units of one queue (and entries
of one IndexFile) are written in phyOffset order, so each cursor only moves
forward and memory stays at one block per queue, whatever the store size.
Structural problems met on the way (a file of the wrong size, bytes after a
queue's last unit, a unit going backwards) go straight into the report.
ConsumeQueues kept in RocksDB (``storeType=defaultRocksDB``) have their own
cursor over the database's units (:class:`RocksDbQueueCursor`).
"""

from __future__ import annotations

import os
from typing import Optional

import numpy as np

from ..format.consumequeue import CQ_UNIT_DTYPE, CQ_UNIT_SIZE, PRE_BLANK_SIZE
from ..format.rocksdb_queue import CQ_VALUE_SIZE, values_to_units
from ..io.segments import Segment, common_segment_size, list_segments
from .verify_report import WARNING, Problem, VerifyReport

CQ_BLOCK_UNITS = 16384
INDEX_BLOCK_ENTRIES = 1 << 20
INDEX_ENTRY_DTYPE = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("diff", ">i4"), ("prev", ">i4")])


def _pread_all(path: str, size: int, position: int) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, size, position)
    finally:
        os.close(fd)


def first_non_zero(path: str, start: int, end: int) -> Optional[int]:
    """Position of the first non-zero byte in [start, end) of the file (bytes past its length count as
    zero), or None.  JVM twin: ``io.rmqsource.verify.FileReads.firstNonZero``."""
    pos = start
    while pos < end:
        chunk = _pread_all(path, min(1 << 20, end - pos), pos)
        if not chunk:
            return None
        nz = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8))
        if nz.size:
            return pos + int(nz[0])
        pos += len(chunk)
    return None


class _UnitCursor:
    """What the queue cursors share: a queue's units handed out in CommitLog order, block by block.

    A subclass reads the next block of units in queue order (``_read_block``) and hands it to
    :meth:`_take_block`; it names a unit (:meth:`unit_name`) and says where it is (``file_and_position``).
    JVM twin: ``io.rmqsource.verify.UnitCursor``.
    """

    topic: str
    queue_id: int
    report: VerifyReport
    cl_min: int

    def _start(self) -> None:
        self.units = 0                 # valid units seen (pre-blank and expired included)
        self.expired = 0
        self.pre_blank = 0
        self._last_phy = -1
        self._block: Optional[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = None
        self._block_pos = 0

    def unit_name(self, queue_offset: int) -> str:
        return f"unit {queue_offset} of {self.topic}/{self.queue_id}"

    def _read_block(self) -> bool:
        raise NotImplementedError

    def file_and_position(self, queue_offset: int) -> tuple[str, Optional[int]]:
        raise NotImplementedError

    def _take_block(self, phy: np.ndarray, size: np.ndarray, code: np.ndarray, qoff: np.ndarray,
                    locate) -> bool:
        """A block's units in queue order: pre-blank units skipped, expired ones counted, the order along the
        queue checked (``locate(queue offset)`` places a unit out of order); True when units are left to
        hand out."""
        rep = self.report
        k = len(phy)
        self.units += k
        live = size != PRE_BLANK_SIZE
        self.pre_blank += int(k - np.count_nonzero(live))
        # phyOffset must grow along the queue (dispatch appends in CommitLog order).
        lp = phy[live]
        if len(lp):
            steps = np.diff(np.concatenate(([self._last_phy], lp)))
            back = np.flatnonzero(steps <= 0)
            for i in back[:16].tolist():
                j = int(np.flatnonzero(live)[i])
                where, position = locate(int(qoff[j]))
                rep.add(Problem("consumequeue", "cq-order", where, position,
                                f"{self.unit_name(int(qoff[j]))} does not follow the previous unit in the CommitLog",
                                f"phyOffset > {int(lp[i] - steps[i])}", str(int(lp[i]))))
            self._last_phy = int(lp[-1])
        # A negative phyOffset is no expired unit: it is matched, and points at no record.
        expired = live & (phy >= 0) & (phy < self.cl_min)
        self.expired += int(np.count_nonzero(expired))
        keep = live & ~expired
        self._block = _by_phy((phy[keep], size[keep], code[keep], qoff[keep]))
        self._block_pos = 0
        return len(self._block[0]) > 0

    def next_phy(self) -> Optional[int]:
        if self._block is None or self._block_pos >= len(self._block[0]):
            if not self._read_block():
                return None
        return int(self._block[0][self._block_pos])

    def take_below(self, end: int) -> list[tuple[np.ndarray, ...]]:
        """Blocks of (phy, size, tagsCode, queueOffset) with phy < ``end``."""
        out = []
        for _ in range(1 << 40):                 # bounded by the queue's length
            if self.next_phy() is None:
                break
            phy = self._block[0]
            stop = int(np.searchsorted(phy, end, side="left"))
            if stop <= self._block_pos:
                break
            a = self._block_pos
            out.append(tuple(arr[a:stop] for arr in self._block))
            self._block_pos = stop
            if stop < len(phy):
                break
        return out


class QueueCursor(_UnitCursor):
    """Valid units of one ConsumeQueue, in order, with their queue offsets."""

    def __init__(self, directory: str, topic: str, queue_id: int, report: VerifyReport, cl_min: int):
        self.topic = topic
        self.queue_id = queue_id
        self.report = report
        self.cl_min = cl_min
        self.segments: list[Segment] = list_segments(directory)
        self.file_size = common_segment_size(self.segments) or 0
        self.units_per_file = self.file_size // CQ_UNIT_SIZE
        self.max_offset = self.segments[0].start_offset // CQ_UNIT_SIZE if self.segments else 0
        self._file_index = 0
        self._file_pos = 0             # unit index inside the current file
        self._file_ended = False
        self._start()
        self._check_files()

    @property
    def has_units(self) -> bool:
        return bool(self.segments)

    # -- files ------------------------------------------------------------
    def _check_files(self) -> None:
        rep = self.report
        if self.file_size and self.file_size % CQ_UNIT_SIZE:
            rep.add(Problem("consumequeue", "cq-file-size", rep.rel(self.segments[0].path), 0,
                            "ConsumeQueue file size is not a multiple of 20 bytes",
                            "a multiple of 20", str(self.file_size)))
            self.segments = []
            return
        for prev, seg in zip(self.segments, self.segments[1:]):
            if seg.start_offset != prev.start_offset + self.file_size:
                rep.add(Problem("consumequeue", "cq-file-missing", rep.rel(seg.path), None,
                                f"ConsumeQueue files are not consecutive: the previous file ends at byte "
                                f"{prev.start_offset + self.file_size}",
                                f"file {prev.start_offset + self.file_size:020d}", os.path.basename(seg.path)))
        for seg in self.segments:
            if seg.size_bytes != self.file_size:
                rep.add(Problem("consumequeue", "cq-file-size", rep.rel(seg.path), 0,
                                "ConsumeQueue files of one queue differ in size",
                                str(self.file_size), str(seg.size_bytes)))

    def _read_block(self) -> bool:
        """Load the next block of valid units; False at the end of the queue."""
        rep = self.report
        while self._file_index < len(self.segments):
            seg = self.segments[self._file_index]
            if self._file_ended or self._file_pos >= self.units_per_file:
                self._file_index += 1
                self._file_pos = 0
                self._file_ended = False
                continue
            n = min(CQ_BLOCK_UNITS, self.units_per_file - self._file_pos)
            raw = _pread_all(seg.path, n * CQ_UNIT_SIZE, self._file_pos * CQ_UNIT_SIZE)
            units = np.frombuffer(raw, dtype=CQ_UNIT_DTYPE, count=len(raw) // CQ_UNIT_SIZE)
            first_unit = seg.start_offset // CQ_UNIT_SIZE + self._file_pos
            valid = (units["phy_offset"] >= 0) & (units["size"] > 0)
            bad = np.flatnonzero(~valid)
            k = int(bad[0]) if bad.size else len(units)
            if k < len(units) or len(units) < n:
                self._file_ended = True
                self._check_rest_is_zero(seg, self._file_pos + k)
            self._file_pos += k
            if k == 0:
                continue
            units = units[:k]
            self.max_offset = first_unit + k
            qoff = np.arange(first_unit, first_unit + k, dtype=np.int64)
            rel = rep.rel(seg.path)
            in_file = lambda q, seg=seg: (rel, q * CQ_UNIT_SIZE - seg.start_offset)  # noqa: E731
            if self._take_block(units["phy_offset"].astype(np.int64), units["size"].astype(np.int64),
                                units["tags_code"].astype(np.int64), qoff, in_file):
                return True
        self._block = None
        return False

    def _check_rest_is_zero(self, seg: Segment, unit_pos: int) -> None:
        """After a queue's last valid unit its file holds zeros; a later file means a hole."""
        rep = self.report
        is_last = seg is self.segments[-1]
        start = unit_pos * CQ_UNIT_SIZE
        where = first_non_zero(seg.path, start, self.file_size)
        if where is not None:
            rep.add(Problem("consumequeue", "cq-garbage", rep.rel(seg.path), where - where % CQ_UNIT_SIZE,
                            f"non-zero bytes after the last valid unit of {self.topic}/{self.queue_id} "
                            f"(the unit at {start} is not valid)", "zeros", "non-zero bytes"))
            return
        if not is_last:
            rep.add(Problem("consumequeue", "cq-hole", rep.rel(seg.path), start,
                            f"{self.topic}/{self.queue_id}: units end inside a file that is not the queue's last",
                            f"{self.units_per_file} units", f"{unit_pos} units"))

    def file_and_position(self, queue_offset: int) -> tuple[str, int]:
        """(file relative to the root, byte position) of the unit at ``queue_offset``."""
        byte = queue_offset * CQ_UNIT_SIZE
        for seg in self.segments:
            if seg.start_offset <= byte < seg.start_offset + self.file_size:
                return self.report.rel(seg.path), byte - seg.start_offset
        return self.report.rel(self.segments[0].path) if self.segments else "consumequeue", byte


class RocksDbQueueCursor(_UnitCursor):
    """Units of one queue of the RocksDB ConsumeQueue database (``storeType=defaultRocksDB``), in order, with
    :class:`QueueCursor`'s interface.

    Only the database's own units, those below the queue's ``max`` entry + 1: the broker writes them without
    a WAL and flushes its column families atomically, so they are what is on disk.  The readers continue a
    queue from the CommitLog past the database's dispatch checkpoint (``rocksdb_tail.py``); those units are
    derived from the CommitLog itself, and checking the CommitLog against them would prove nothing.  The
    database has no files (file sizes, zeros after the last unit, holes do not apply): a unit is named by
    its queue and offset in the database folder, and a value of the wrong length is a ``cq-value-size``
    problem.  JVM twin: ``io.rmqsource.verify.RocksDbQueueCursor``.
    """

    def __init__(self, store, topic: str, queue_id: int, report: VerifyReport, cl_min: int):
        self.topic = topic
        self.queue_id = queue_id
        self.report = report
        self.cl_min = cl_min
        self.folder = report.rel(store.folder)
        last = store.max_entries.get((topic, queue_id))
        self.max_offset = last[1] + 1 if last is not None else 0      # the database's units lie below it
        self._store = store
        self._next_offset = 0
        self._start()

    @property
    def has_units(self) -> bool:
        return self.max_offset > 0

    def unit_name(self, queue_offset: int) -> str:
        return f"RocksDB ConsumeQueue {self.topic}:{self.queue_id} unit {queue_offset}"

    def file_and_position(self, queue_offset: int) -> tuple[str, Optional[int]]:
        return self.folder, None

    def _read_block(self) -> bool:
        """Load the next block of units whose values have the unit's length; False at the end of the queue."""
        while self._next_offset < self.max_offset:
            offsets, values = self._store.database_units(self.topic, self.queue_id, self._next_offset,
                                                         self.max_offset, CQ_BLOCK_UNITS)
            if not offsets:
                break
            self._next_offset = offsets[-1] + 1
            sound = [i for i, v in enumerate(values) if len(v) == CQ_VALUE_SIZE]
            if len(sound) < len(values):
                self._report_value_sizes(offsets, values)
            units = values_to_units(b"".join(values[i] for i in sound))
            qoff = np.array([offsets[i] for i in sound], dtype=np.int64)
            if self._take_block(units["phy_offset"].astype(np.int64), units["size"].astype(np.int64),
                                units["tags_code"].astype(np.int64), qoff, self.file_and_position):
                return True
        self._block = None
        return False

    def _report_value_sizes(self, offsets: list[int], values: list[bytes]) -> None:
        for off, v in zip(offsets, values):
            if len(v) != CQ_VALUE_SIZE:
                self.report.add(Problem("consumequeue", "cq-value-size", self.folder, None,
                                        f"{self.unit_name(off)} has a {len(v)}-byte value: not a unit, no record "
                                        f"is matched to it", f"{CQ_VALUE_SIZE} bytes", f"{len(v)} bytes"))


class IndexCursor:
    """Entries (file, entry number, phyOffset) of the IndexFiles that passed the structural check."""

    def __init__(self, files: list[tuple[str, int, int]], hash_slot_num: int, report: VerifyReport, cl_min: int):
        self.files = files                # (path, indexCount, first entry position)
        self.report = report
        self.cl_min = cl_min
        self.hash_slot_num = hash_slot_num
        self.expired = 0
        self._fi = 0
        self._next_entry = 1
        self._block: Optional[tuple[np.ndarray, np.ndarray]] = None     # (entry numbers, phy)
        self._block_pos = 0
        self.file_index: Optional[int] = None

    def _read_block(self) -> bool:
        while self._fi < len(self.files):
            path, count, base = self.files[self._fi]
            if self._next_entry >= count:
                self._fi += 1
                self._next_entry = 1
                continue
            n = min(INDEX_BLOCK_ENTRIES, count - self._next_entry)
            raw = _pread_all(path, n * 20, base + self._next_entry * 20)
            entries = np.frombuffer(raw, dtype=INDEX_ENTRY_DTYPE, count=len(raw) // 20)
            numbers = np.arange(self._next_entry, self._next_entry + len(entries), dtype=np.int64)
            self._next_entry += max(len(entries), n)
            phy = entries["phy"].astype(np.int64)
            expired = phy < self.cl_min
            self.expired += int(np.count_nonzero(expired))
            phy, numbers = _by_phy((phy[~expired], numbers[~expired]))
            self._block = (numbers, phy)
            self.file_index = self._fi
            self._block_pos = 0
            if len(self._block[0]):
                return True
        self._block = None
        return False

    def take_below(self, end: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """(file index, entry numbers, phy) of the entries with phy < ``end`` (each file is phy-ordered)."""
        out = []
        for _ in range(1 << 40):
            if self._block is None or self._block_pos >= len(self._block[0]):
                if not self._read_block():
                    break
            nums, phy = self._block
            a = self._block_pos
            # Entries of one file are in phyOffset order (checked by the structural pass).
            stop = int(np.searchsorted(phy[a:], end, side="left")) + a
            if stop <= a:
                break
            out.append((self.file_index, nums[a:stop], phy[a:stop]))
            self._block_pos = stop
            if stop < len(phy):
                break
        return out


def _by_phy(columns: tuple) -> tuple:
    """A block's columns ordered by phyOffset (the first column), stably.

    Dispatch writes phyOffsets in order, so this is a no-op on a sound file; on a damaged one (a
    unit or entry out of order, already reported) every unit is still taken with its window.
    """
    phy = columns[0]
    if len(phy) < 2 or bool((phy[1:] >= phy[:-1]).all()):
        return columns
    order = np.argsort(phy, kind="stable")
    return tuple(c[order] for c in columns)


def note(report: VerifyReport, area: str, check: str, file: str, message: str) -> None:
    report.add(Problem(area, check, file, None, message, severity=WARNING))
