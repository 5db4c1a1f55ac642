"""ConsumeQueue, read side: units of one (topic, queueId), min/max offsets (spec §3).

Two implementations share one interface: :class:`ConsumeQueue` over the
queue's files, and :class:`InMemoryConsumeQueue` over units re-derived from
the CommitLog when the files are missing (a read-only view of what dispatch
would rebuild).
"""

from __future__ import annotations

import os
from functools import cached_property
from typing import Optional

import numpy as np

from ..errors import CorruptRecordError
from ..format.consumequeue import CQ_UNIT_DTYPE, CQ_UNIT_SIZE, PRE_BLANK_SIZE, units_from_bytes
from ..io.segments import Segment, SegmentReader, common_segment_size, list_segments, offset_to_file_name

DEFAULT_CQ_FILE_SIZE = 300_000 * CQ_UNIT_SIZE


class ConsumeQueueBase:
    topic: str
    queue_id: int
    units_per_file: int

    # Subclasses provide: max_offset, max_physic_offset, first_file_start_offset, _read(start, count)
    def require_contiguous(self) -> None:
        """Raises CorruptRecordError where the queue's files leave a gap (units in memory have none)."""

    def read_units(self, start_offset: int, count: int) -> np.ndarray:
        """Units [start_offset, start_offset + count) clipped to [0, max_offset)."""
        start = max(0, start_offset)
        end = min(self.max_offset, start_offset + max(0, count))
        if end <= start:
            return np.empty(0, dtype=CQ_UNIT_DTYPE)
        return self._read(start, end - start)

    def read_units_in_file(self, start_offset: int, max_count: int) -> np.ndarray:
        """Like :meth:`read_units` but never past the end of the file holding ``start_offset``."""
        file_end = (start_offset // self.units_per_file + 1) * self.units_per_file
        return self.read_units(start_offset, min(max_count, file_end - start_offset))

    def has_file_for(self, offset: int) -> bool:
        return True

    def close(self) -> None:
        """Release open files (units in memory or in RocksDB hold none)."""

    def locate(self, offset: int) -> tuple[str, int]:
        """(file, byte position) that holds, or would hold, unit ``offset``: errors name the file."""
        return f"{self.topic}:{self.queue_id} (re-derived from the CommitLog)", offset * CQ_UNIT_SIZE

    def _unit_or_none(self, offset: int):
        """The unit at ``offset``, or None where no file holds it (a deleted or short file in the middle)."""
        units = self._read(offset, 1)
        return units[0] if len(units) else None

    def unit_at(self, offset: int) -> Optional[tuple[int, int, int]]:
        units = self.read_units(offset, 1)
        if len(units) == 0:
            return None
        u = units[0]
        return int(u["phy_offset"]), int(u["size"]), int(u["tags_code"])

    def capped_max_offset(self, commitlog_end: int) -> int:
        """Max offset ignoring units at or past the CommitLog's valid end (truncateDirtyLogicFiles)."""
        hi = self.max_offset
        lo = self.first_file_start_offset
        if hi <= lo or self.max_physic_offset <= commitlog_end:
            return hi
        # Units are ordered by phyOffset: binary search the first unit starting at/after the end.
        while lo < hi:
            mid = (lo + hi) // 2
            u = self._unit_or_none(mid)          # (a missing unit counts as below the end)
            if u is not None and int(u["size"]) != PRE_BLANK_SIZE and int(u["phy_offset"]) >= commitlog_end:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def min_offset(self, commitlog_min_offset: int, *, engine_v5: bool, max_offset: Optional[int] = None) -> int:
        """The broker's minLogicOffset (spec §3.4), per engine generation.

        4.9 scans only the first file for the first unit pointing at or above the
        CommitLog min offset (and keeps the file start otherwise); 5.x searches
        every file and treats a queue whose last unit is below it as fully expired.
        """
        max_off = self.max_offset if max_offset is None else max_offset
        first = self.first_file_start_offset
        if max_off <= first:
            return max_off if engine_v5 else first
        if engine_v5:
            last = self._unit_or_none(max_off - 1)
            if last is not None and int(last["phy_offset"]) < commitlog_min_offset \
                    and int(last["size"]) != PRE_BLANK_SIZE:
                return max_off
            lo, hi = first, max_off
        else:
            lo, hi = first, min(max_off, first + self.units_per_file)
        end_of_scan = hi
        while lo < hi:
            mid = (lo + hi) // 2
            u = self._unit_or_none(mid)          # (a missing unit counts as expired)
            live = u is not None and int(u["size"]) != PRE_BLANK_SIZE and int(u["phy_offset"]) >= commitlog_min_offset
            if live:
                hi = mid
            else:
                lo = mid + 1
        if lo >= end_of_scan:
            # 4.9: nothing qualifying in the first file → value left unchanged.
            return max_off if engine_v5 else first
        return lo


class ConsumeQueue(ConsumeQueueBase):
    """One queue's files under ``consumequeue/{topic}/{queueId}/``."""

    def __init__(self, directory: str | os.PathLike, topic: str, queue_id: int,
                 file_size: Optional[int] = None):
        self.directory = os.fspath(directory)
        self.topic = topic
        self.queue_id = queue_id
        segments = list_segments(self.directory)
        size = common_segment_size(segments, file_size) or DEFAULT_CQ_FILE_SIZE
        if size % CQ_UNIT_SIZE:
            raise CorruptRecordError(f"ConsumeQueue file size {size} is not a multiple of {CQ_UNIT_SIZE}",
                                     file=segments[0].path if segments else self.directory, offset=0)
        self.file_size = size
        self.units_per_file = size // CQ_UNIT_SIZE
        self.reader = SegmentReader(segments, size)

    @property
    def segments(self) -> list[Segment]:
        return self.reader.segments

    def close(self) -> None:
        self.reader.close()

    @cached_property
    def first_file_start_offset(self) -> int:
        return self.segments[0].start_offset // CQ_UNIT_SIZE if self.segments else 0

    def require_contiguous(self) -> None:
        """A gap between the queue's files is corruption (spec §3): the error names the missing file.

        Checked from the file names alone, so a file named far past the others (a range of
        ~1e17 units) is refused at once, never walked unit by unit.
        """
        for prev, nxt in zip(self.segments, self.segments[1:]):
            expected = prev.start_offset + self.file_size
            if nxt.start_offset != expected:
                raise CorruptRecordError(
                    f"ConsumeQueue {self.topic}:{self.queue_id} has a gap: file {os.path.basename(prev.path)} is "
                    f"followed by {os.path.basename(nxt.path)}, not {offset_to_file_name(expected)}",
                    file=os.path.join(self.directory, offset_to_file_name(expected)), offset=0)

    @cached_property
    def _tail(self) -> tuple[int, int]:
        """(max offset, max physic end) from the last file with a valid unit (spec §3.3).

        Scans backwards over at most the last three files, as recovery does, so a
        trailing all-zero file does not hide the data before it.
        """
        if not self.segments:
            return 0, -1
        for seg in reversed(self.segments[-3:]):
            n = self._valid_prefix_units(seg)
            if n > 0:
                last = units_from_bytes(self.reader.pread(seg, (n - 1) * CQ_UNIT_SIZE, CQ_UNIT_SIZE))[0]
                phy_end = int(last["phy_offset"]) + int(last["size"]) if int(last["size"]) != PRE_BLANK_SIZE else -1
                return seg.start_offset // CQ_UNIT_SIZE + n, phy_end
        return self.segments[-1].start_offset // CQ_UNIT_SIZE, -1

    def _valid_prefix_units(self, seg: Segment) -> int:
        """Units before the first invalid one: a binary search, units are written front to back."""
        def valid(i: int) -> bool:
            raw = self.reader.pread(seg, i * CQ_UNIT_SIZE, CQ_UNIT_SIZE)
            if len(raw) < CQ_UNIT_SIZE:
                return False
            u = units_from_bytes(raw)[0]
            return int(u["phy_offset"]) >= 0 and int(u["size"]) > 0
        lo, hi = 0, min(self.units_per_file, seg.size_bytes // CQ_UNIT_SIZE)
        if hi and valid(hi - 1):
            return hi
        while lo < hi:
            mid = (lo + hi) // 2
            if valid(mid):
                lo = mid + 1
            else:
                hi = mid
        return lo

    @property
    def max_offset(self) -> int:
        return self._tail[0]

    @property
    def max_physic_offset(self) -> int:
        """End (phyOffset + size) of the last valid unit's record; -1 when empty."""
        return self._tail[1]

    def has_file_for(self, offset: int) -> bool:
        return self.reader.find(offset * CQ_UNIT_SIZE) is not None

    def locate(self, offset: int) -> tuple[str, int]:
        start = offset // self.units_per_file * self.units_per_file
        return (os.path.join(self.directory, offset_to_file_name(start * CQ_UNIT_SIZE)),
                (offset - start) * CQ_UNIT_SIZE)

    def _read(self, start: int, count: int) -> np.ndarray:
        out = []
        offset = start
        remaining = count
        while remaining > 0:
            byte_offset = offset * CQ_UNIT_SIZE
            seg = self.reader.find(byte_offset)
            if seg is None:
                break
            pos = byte_offset - seg.start_offset
            n = min(remaining, (self.file_size - pos) // CQ_UNIT_SIZE)
            if n <= 0:
                break
            data = self.reader.pread(seg, pos, n * CQ_UNIT_SIZE)
            units = units_from_bytes(data)
            if len(units) == 0:
                break
            out.append(units)
            offset += len(units)
            remaining -= len(units)
            if len(units) < n:
                break
        if not out:
            return np.empty(0, dtype=CQ_UNIT_DTYPE)
        return out[0] if len(out) == 1 else np.concatenate(out)


class InMemoryConsumeQueue(ConsumeQueueBase):
    """Units held in memory (re-derived from the CommitLog), same interface as ConsumeQueue."""

    def __init__(self, topic: str, queue_id: int, units: np.ndarray, *, first_offset: int = 0,
                 units_per_file: int = 300_000):
        self.topic = topic
        self.queue_id = queue_id
        self.units = units.astype(CQ_UNIT_DTYPE, copy=False)
        self.first_file_start_offset = first_offset
        self.units_per_file = units_per_file

    @property
    def max_offset(self) -> int:
        return self.first_file_start_offset + len(self.units)

    @property
    def max_physic_offset(self) -> int:
        if len(self.units) == 0:
            return -1
        u = self.units[-1]
        return int(u["phy_offset"]) + int(u["size"])

    def _read(self, start: int, count: int) -> np.ndarray:
        i = start - self.first_file_start_offset
        return self.units[max(0, i):max(0, i + count)]


class TailedConsumeQueue(ConsumeQueueBase):
    """A queue's file units followed by its units dispatched from the CommitLog past every queue (a stopped
    store whose writer died between its CommitLog write and its dispatch: ``MessageStoreReader``'s
    undispatched tail).  ``tail()`` gives the queue's :class:`~rmqsource.store.rocksdb_tail.TailQueue` (None:
    the files alone); it is asked only when a question reaches past the files (a read inside them, as a
    planned range's task makes, never walks the CommitLog).  Units are served while they run without a gap.
    Twin: TailedQueue.java."""

    def __init__(self, files: ConsumeQueueBase, tail):
        self.files = files
        self._tail_of = tail
        self.topic = files.topic
        self.queue_id = files.queue_id
        self.units_per_file = files.units_per_file

    @cached_property
    def tail(self):
        t = self._tail_of()
        return t if t is not None and len(t.units) else None

    @property
    def max_offset(self) -> int:
        t = self.tail
        return self.files.max_offset if t is None else max(self.files.max_offset, t.end_offset)

    @property
    def max_physic_offset(self) -> int:
        t = self.tail
        if t is None:
            return self.files.max_physic_offset
        u = t.units[-1]
        return int(u["phy_offset"]) + int(u["size"])

    @property
    def first_file_start_offset(self) -> int:
        t = self.tail
        if t is not None and self.files.max_offset <= self.files.first_file_start_offset:
            return min(self.files.first_file_start_offset, t.first_offset)
        return self.files.first_file_start_offset

    def require_contiguous(self) -> None:
        self.files.require_contiguous()

    def has_file_for(self, offset: int) -> bool:
        t = self.tail
        return (t is not None and offset >= t.first_offset) or self.files.has_file_for(offset)

    def locate(self, offset: int) -> tuple[str, int]:
        return self.files.locate(offset)

    def close(self) -> None:
        self.files.close()

    def read_units(self, start_offset: int, count: int) -> np.ndarray:
        if 0 <= start_offset and start_offset + count <= self.files.max_offset:
            return self.files.read_units(start_offset, count)       # inside the files: the tail is not asked
        return super().read_units(start_offset, count)

    def _read(self, start: int, count: int) -> np.ndarray:
        end = start + count
        files_end = self.files.max_offset
        head = self.files._read(start, min(end, files_end) - start) if start < files_end \
            else np.empty(0, dtype=CQ_UNIT_DTYPE)
        t = self.tail
        if t is None or end <= t.first_offset or start + len(head) < t.first_offset:
            return head
        lo = max(start, t.first_offset)
        rest = t.units[lo - t.first_offset:end - t.first_offset]
        if len(head) == 0:
            return rest
        return np.concatenate([head.astype(CQ_UNIT_DTYPE, copy=False), rest.astype(CQ_UNIT_DTYPE, copy=False)])
