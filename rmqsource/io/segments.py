"""Segment lists and positional reads (RocketMQ's MappedFileQueue, read side).

A CommitLog or ConsumeQueue is a list of equal-sized files named by the
20-digit offset of their first byte.  Reads use ``os.pread`` on cached file
descriptors: no mmap, so reading a whole segment never pins it in memory.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .. import limits
from ..errors import CorruptRecordError, FormatError

SEGMENT_NAME = re.compile(r"^\d{20}$")
INT64_MAX = (1 << 63) - 1


def offset_to_file_name(offset: int) -> str:
    return f"{offset:020d}"


READ_BLOCK_BYTES = 8 * 1024 * 1024


def pread_full(fd: int, position: int, length: int) -> bytearray:
    """``length`` bytes of ``fd`` at ``position`` read straight into one buffer, a block at a time (a pread may
    return less than asked); shorter only where the file ends."""
    buf = bytearray(max(0, length))
    view = memoryview(buf)
    done = 0
    while done < length:
        n = os.preadv(fd, [view[done:done + READ_BLOCK_BYTES]], position + done)
        if n <= 0:
            break
        done += n
    view.release()
    if done < len(buf):
        del buf[done:]
    return buf


@dataclass(frozen=True)
class Segment:
    start_offset: int
    path: str
    size_bytes: int        # length of the file on disk
    dledger: bool = False  # a DLedger data file: 48-byte entry headers before the records

    @property
    def end_offset(self) -> int:
        return self.start_offset + self.size_bytes


def list_segments(directory: str | os.PathLike, *, expected_size: Optional[int] = None,
                  dledger: bool = False) -> list[Segment]:
    """Sorted segments of one queue directory; files not named by 20 digits are ignored.

    Zero-length files (a 5.x broker deletes a zero-length last file on load)
    are skipped.
    """
    d = Path(directory)
    if not d.is_dir():
        return []
    segments = []
    with os.scandir(d) as it:
        for entry in it:
            if not SEGMENT_NAME.match(entry.name) or not entry.is_file():
                continue
            size = entry.stat().st_size
            if size == 0:
                continue
            start = int(entry.name)
            if start > INT64_MAX:       # the broker parses names as a long (spec 1.1)
                raise FormatError("segment file name is past the int64 range", file=entry.path)
            segments.append(Segment(start, entry.path, size, dledger))
            if len(segments) > limits.MAX_SEGMENTS:
                raise FormatError(f"more than {limits.MAX_SEGMENTS} segment files", file=str(d))
    segments.sort(key=lambda s: s.start_offset)
    return segments


def common_segment_size(segments: list[Segment], configured: Optional[int] = None) -> Optional[int]:
    """Segment size: the configured one, else the longest file's length or, when smaller, the
    smallest distance between the start offsets in consecutive file names.

    Segment files are created at their full size, so the longest one tells it even when the first
    was cut short (and a missing file leaves no gap to misread); the names tell it when a file has
    grown past its size, so the file that has is the one found at fault, not its neighbours.
    """
    if configured:
        return configured
    if not segments:
        return None
    size = max(s.size_bytes for s in segments)
    for a, b in zip(segments, segments[1:]):
        if 0 < b.start_offset - a.start_offset < size:
            size = b.start_offset - a.start_offset
    return size


class SegmentReader:
    """Positional reads over one segment list, with a small fd cache.

    ``segment_size`` is the size every segment has (taken from the files when
    not configured).  Thread-safe: ``os.pread`` does not move a file position.
    """

    def __init__(self, segments: list[Segment], segment_size: Optional[int] = None):
        self.segments = list(segments)
        self.segment_size = common_segment_size(self.segments, segment_size) or 0
        self._starts = [s.start_offset for s in self.segments]
        self._fds: dict[str, int] = {}
        self._lock = threading.Lock()

    # -- lookup -----------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.segments[0].start_offset if self.segments else 0

    def find(self, offset: int) -> Optional[Segment]:
        """The segment holding ``offset`` (spec §1.4), or None when no file covers it."""
        if not self.segments or offset < 0:
            return None
        z = self.segment_size
        first = self.segments[0].start_offset
        if z:
            k = offset // z - first // z
            if 0 <= k < len(self.segments):
                seg = self.segments[k]
                if seg.start_offset <= offset < seg.start_offset + z:
                    return seg
        # Fallback: binary search (gaps, odd sizes).
        import bisect
        i = bisect.bisect_right(self._starts, offset) - 1
        if i >= 0:
            seg = self.segments[i]
            if offset < seg.start_offset + max(seg.size_bytes, z):
                return seg
        return None

    # -- reads ------------------------------------------------------------
    def _fd(self, path: str) -> int:
        fd = self._fds.get(path)
        if fd is None:
            with self._lock:
                fd = self._fds.get(path)
                if fd is None:
                    fd = os.open(path, os.O_RDONLY)
                    self._fds[path] = fd
        return fd

    def pread(self, segment: Segment, position: int, size: int) -> bytes:
        """Read ``size`` bytes at ``position`` inside ``segment`` (short at end of file)."""
        try:
            return os.pread(self._fd(segment.path), size, position)
        except FileNotFoundError:
            return b""

    def read_at(self, offset: int, size: int) -> Optional[bytes]:
        """Read bytes at a global offset, never crossing a segment; None if no segment covers it."""
        seg = self.find(offset)
        if seg is None:
            return None
        pos = offset - seg.start_offset
        if size < 0 or pos + size > max(seg.size_bytes, self.segment_size):
            raise CorruptRecordError(f"read of {size} bytes at position {pos} crosses the segment end",
                                     file=seg.path, offset=pos)
        return self.pread(seg, pos, size)

    def close(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._fds.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
