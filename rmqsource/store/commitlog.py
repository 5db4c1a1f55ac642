"""CommitLog, read side: segments, records at offsets, bounded walks, valid end.

The valid end follows RocketMQ's recovery loop (spec §7.3): walk records from a
start segment; a blank record moves to the next segment; the first position
that is not a valid record (zeros, unknown magic, size mismatch, bad CRC) is
the end.  Nothing after it is ever returned as a message.

A DLedger store continues the offsets in ``dledger-<id>/data/`` files (segments
marked ``dledger``): there every record follows a 48-byte entry header, the
record's offset is its own file position (entry pos + 48), and the end is where
the entry headers stop passing DLedger recovery's checks (format/dledger.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator, Optional

from .. import limits
from ..errors import CorruptRecordError, FormatError
from ..format.dledger import ENTRY_HEADER_BYTES, EntryHeader, EntryKind, decode_entry, header_problem
from ..format.record import Decoded, Kind, MessageRecord, decode_record
from ..io.segments import Segment, SegmentReader, list_segments
from .layout import StoreLayout

# Walks read this much at a time; a record longer than what is left in the
# buffer triggers a read of exactly that record.
WALK_CHUNK_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class WalkStep:
    phy_offset: int
    decoded: Decoded
    segment: Segment


@dataclass(frozen=True)
class EntryStep:
    """One position of a DLedger data walk: an entry header, a DLedger blank or the end of the data.

    ``problem`` is (field, reason) when the header fails a recovery check: the data ends there.
    ``buf[rel:]`` holds the entry (its whole record when the walk was asked for bodies).
    """
    kind: EntryKind
    entry_offset: int
    segment: Segment
    header: Optional[EntryHeader] = None
    problem: Optional[tuple[str, str]] = None
    buf: bytes = b""
    rel: int = 0


class CommitLog:
    """Read access to the CommitLog of a store (all segment directories merged)."""

    def __init__(self, layout: StoreLayout, segment_size: Optional[int] = None):
        self.layout = layout
        segments: list[Segment] = []
        for d in layout.commitlog_dirs:
            segments.extend(list_segments(d))
        segments.sort(key=lambda s: s.start_offset)
        data_dir = layout.dledger_data_dir
        dledger = list_segments(data_dir, dledger=True) if data_dir is not None else []
        if dledger and segments and segments[-1].start_offset >= dledger[0].start_offset:
            late = next(s for s in segments if s.start_offset >= dledger[0].start_offset)
            raise FormatError(f"CommitLog file starts at {late.start_offset}, not below the first DLedger data "
                              f"file {dledger[0].path} (offsets at and past it are DLedger's)", file=late.path)
        # dividedCommitlogOffset: where the DLedger data files take over the offsets (None: no DLedger data).
        self.divided_offset: Optional[int] = dledger[0].start_offset if dledger else None
        self.reader = SegmentReader(segments + dledger, segment_size)
        self.segment_size = self.reader.segment_size

    @property
    def segments(self) -> list[Segment]:
        return self.reader.segments

    @property
    def min_offset(self) -> int:
        """CommitLog min offset: start of the first segment (0 when there is none)."""
        return self.reader.min_offset

    def close(self) -> None:
        self.reader.close()

    def roll_next_file(self, offset: int) -> int:
        z = self.segment_size or 1
        return offset + z - offset % z

    # -- single records -----------------------------------------------------
    def decode_at(self, phy_offset: int, *, size_hint: Optional[int] = None, check_crc: bool = False,
                  keep_raw: bool = False) -> tuple[Decoded, Optional[Segment]]:
        """Decode whatever is at ``phy_offset``; (END, None) when no segment holds it.

        With ``size_hint`` (the ConsumeQueue's size) one positioned read suffices.
        """
        seg = self.reader.find(phy_offset)
        if seg is None:
            return Decoded(Kind.END, 0, None, "no CommitLog segment holds this offset"), None
        pos = phy_offset - seg.start_offset
        remaining = max(seg.size_bytes, self.segment_size) - pos
        buf = b""
        if size_hint is not None and 8 <= size_hint <= remaining:
            buf = self.reader.pread(seg, pos, size_hint)
            if len(buf) < 8 or int.from_bytes(buf[:4], "big", signed=True) != size_hint:
                buf = b""
        if not buf:
            head = self.reader.pread(seg, pos, 8)
            if len(head) < 8:
                return Decoded(Kind.END, 0, None, "file ends here"), seg
            total = int.from_bytes(head[:4], "big", signed=True)
            if 8 <= total <= min(remaining, limits.MAX_RECORD_BYTES_READ):
                buf = self.reader.pread(seg, pos, total)
            else:
                buf = head
        decoded = decode_record(buf, 0, len(buf), check_crc=check_crc, keep_raw=keep_raw)
        if decoded.kind is Kind.BLANK:
            decoded = Decoded(Kind.BLANK, remaining, None, decoded.reason)
        elif decoded.kind is Kind.CORRUPT and len(buf) == 8:
            total = int.from_bytes(buf[:4], "big", signed=True)
            decoded = Decoded(Kind.CORRUPT, 0, None,
                              f"totalSize {total} outside [{limits.MIN_RECORD_BYTES}, {remaining}]")
        return decoded, seg

    def read_message(self, phy_offset: int, size: Optional[int] = None, *, keep_raw: bool = True,
                     check_crc: bool = False) -> MessageRecord:
        """The message at ``phy_offset``; CorruptRecordError (file, position) when there is none."""
        decoded, seg = self.decode_at(phy_offset, size_hint=size, keep_raw=keep_raw, check_crc=check_crc)
        if decoded.kind is not Kind.MESSAGE:
            where = seg.path if seg else str(self.layout.commitlog_dirs[0])
            pos = phy_offset - seg.start_offset if seg else phy_offset
            raise CorruptRecordError(f"no valid message at CommitLog offset {phy_offset}: {decoded.reason}",
                                     file=where, offset=pos)
        if size is not None and decoded.size != size:
            raise CorruptRecordError(
                f"ConsumeQueue says {size} bytes but the record's totalSize is {decoded.size}",
                file=seg.path, offset=phy_offset - seg.start_offset)
        return decoded.record

    # -- walks --------------------------------------------------------------
    def walk(self, start_offset: int, *, check_crc: bool = False, keep_raw: bool = False,
             stop_offset: Optional[int] = None) -> Iterator[WalkStep]:
        """Yield every entry from ``start_offset`` in CommitLog order.

        Yields MESSAGE steps; a BLANK step at each segment end (then continues in
        the next segment); stops after yielding the first END or CORRUPT step,
        or at ``stop_offset``.  Bounded by the segment sizes.
        """
        seg_index = self._segment_index(start_offset)
        if seg_index is None:
            return
        pos = start_offset - self.segments[seg_index].start_offset
        while seg_index < len(self.segments):
            seg = self.segments[seg_index]
            if seg.dledger:
                yield from self._walk_dledger(seg_index, pos, check_crc=check_crc, keep_raw=keep_raw,
                                              stop_offset=stop_offset)
                return
            seg_len = max(seg.size_bytes, self.segment_size)
            chunk_start, chunk = pos, b""
            while True:
                phy = seg.start_offset + pos
                if stop_offset is not None and phy >= stop_offset:
                    return
                rel = pos - chunk_start
                if rel + 8 > len(chunk):
                    chunk_start, chunk, rel = pos, self.reader.pread(seg, pos, min(WALK_CHUNK_BYTES, seg_len - pos)), 0
                    if len(chunk) < 8:
                        yield WalkStep(phy, Decoded(Kind.END, 0, None, "end of segment file"), seg)
                        return
                total = int.from_bytes(chunk[rel:rel + 4], "big", signed=True)
                if rel + total > len(chunk) and 0 < total <= min(seg_len - pos, limits.MAX_RECORD_BYTES_READ):
                    chunk_start, chunk, rel = pos, self.reader.pread(seg, pos, min(max(WALK_CHUNK_BYTES, total), seg_len - pos)), 0
                limit = min(seg_len - chunk_start, len(chunk))
                decoded = decode_record(chunk, rel, limit, check_crc=check_crc, keep_raw=keep_raw)
                if decoded.kind is Kind.BLANK:
                    decoded = Decoded(Kind.BLANK, seg_len - pos, None, decoded.reason)
                yield WalkStep(phy, decoded, seg)
                if decoded.kind is Kind.MESSAGE:
                    pos += decoded.size
                    continue
                if decoded.kind is Kind.BLANK:
                    break
                return
            seg_index += 1
            pos = 0

    # -- DLedger data -----------------------------------------------------------
    @property
    def dledger_segments(self) -> list[Segment]:
        return [s for s in self.segments if s.dledger]

    def dledger_entries(self, seg_index: int, pos: int = 0, *, with_body: bool = False) -> Iterator[EntryStep]:
        """Walk DLedger entries from the entry at ``pos`` of segment ``seg_index`` (DLedger recovery's walk).

        Yields every entry header (stopping after the first that fails a check), a BLANK step
        per DLedger blank (then the next file), and one END step where the data ends.  The
        first entry walked sets the index the next must follow.
        """
        prev_index = prev_term = None
        while seg_index < len(self.segments):
            seg = self.segments[seg_index]
            seg_len = max(seg.size_bytes, self.segment_size)
            chunk_start, chunk = pos, b""
            while True:
                entry = seg.start_offset + pos
                rel = pos - chunk_start
                if rel + ENTRY_HEADER_BYTES > len(chunk):
                    chunk_start, chunk, rel = pos, self.reader.pread(seg, pos, min(WALK_CHUNK_BYTES, seg_len - pos)), 0
                decoded = decode_entry(chunk, rel, len(chunk))
                if decoded.kind is EntryKind.END:
                    yield EntryStep(EntryKind.END, entry, seg)
                    return
                if decoded.kind is EntryKind.BLANK:
                    yield EntryStep(EntryKind.BLANK, entry, seg)
                    break
                h = decoded.header
                problem = header_problem(h, entry, prev_index, prev_term)
                if problem is None and h.size > seg_len - pos:
                    problem = ("size", f"entry size {h.size} runs past the end of the file ({seg_len - pos} "
                                       f"bytes left)")
                if problem is None and with_body and rel + h.size > len(chunk):
                    chunk_start, chunk, rel = pos, self.reader.pread(seg, pos, min(max(WALK_CHUNK_BYTES, h.size),
                                                                                   seg_len - pos)), 0
                yield EntryStep(EntryKind.ENTRY, entry, seg, h, problem, chunk, rel)
                if problem is not None:
                    return
                prev_index, prev_term = h.index, h.term
                pos += h.size
            seg_index += 1
            pos = 0

    def dledger_valid_end(self, first: Optional[int] = None, pos: int = 0) -> int:
        """End of the last entry whose header passes DLedger recovery, walking from the 3rd-from-last data
        file as the engine does, or from the entry at ``pos`` of segment ``first`` (where the walk starts
        when no entry passes)."""
        if first is None:
            dledger = self.dledger_segments
            first = len(self.segments) - len(dledger) + max(0, len(dledger) - 3)
        end = self.segments[first].start_offset + pos
        for step in self.dledger_entries(first, pos):
            if step.kind is EntryKind.ENTRY and step.problem is None:
                end = step.entry_offset + step.header.size
            elif step.kind is EntryKind.BLANK and step.segment is not self.segments[-1]:
                end = step.segment.start_offset + max(step.segment.size_bytes, self.segment_size)
        return end

    def dledger_valid_end_from(self, phy_offset: int, size: int) -> Optional[int]:
        """The same end found from the entry of the record at ``phy_offset`` (``size`` bytes; the latest
        record a ConsumeQueue unit names after a clean shutdown): the walk covers only what follows it, as
        the normal CommitLog's end is found from the last unit.  None when no valid entry header holds
        that record (the caller then walks as recovery does)."""
        seg = self.reader.find(phy_offset)
        if seg is None or not seg.dledger or not self.entry_holds_record(phy_offset, size):
            return None
        seg_index = self._segment_index(phy_offset)
        return self.dledger_valid_end(seg_index, phy_offset - self.segments[seg_index].start_offset -
                                      ENTRY_HEADER_BYTES)

    def entry_holds_record(self, phy_offset: int, size: int) -> bool:
        """Whether the record of ``size`` bytes at ``phy_offset`` has an entry header DLedger recovery keeps
        (magic, pos, size = bodyLen + 48, bodyLen = ``size``); always true in a normal segment.

        The local part of recovery's checks (the index and term chain need the whole walk): what a
        reader that cannot afford the walk (a stream's trigger) checks before admitting a unit."""
        seg = self.reader.find(phy_offset)
        if seg is None or not seg.dledger:
            return True
        pos = phy_offset - seg.start_offset - ENTRY_HEADER_BYTES
        if pos < 0:
            return False
        decoded = decode_entry(self.reader.pread(seg, pos, ENTRY_HEADER_BYTES), 0, ENTRY_HEADER_BYTES)
        return decoded.kind is EntryKind.ENTRY and decoded.header.body_len == size and \
            header_problem(decoded.header, phy_offset - ENTRY_HEADER_BYTES, None, None) is None

    def _dledger_walk_start(self, seg_index: int, pos: int) -> tuple[int, int]:
        """(entry position to walk from, record offset to yield from) for a walk starting at ``pos``:
        a file start, or a record's offset (its entry header 48 bytes before it)."""
        seg = self.segments[seg_index]
        if pos >= ENTRY_HEADER_BYTES:
            decoded = decode_entry(self.reader.pread(seg, pos - ENTRY_HEADER_BYTES, ENTRY_HEADER_BYTES), 0,
                                   ENTRY_HEADER_BYTES)
            entry = seg.start_offset + pos - ENTRY_HEADER_BYTES
            if decoded.kind is EntryKind.ENTRY and header_problem(decoded.header, entry, None, None) is None:
                return pos - ENTRY_HEADER_BYTES, seg.start_offset + pos
        return 0, seg.start_offset + pos

    def _walk_dledger(self, seg_index: int, pos: int, *, check_crc: bool, keep_raw: bool,
                      stop_offset: Optional[int]) -> Iterator[WalkStep]:
        """:meth:`walk` through DLedger data: the record of every entry whose header passes the checks.

        A record that is not valid inside a valid header is a CorruptRecordError naming the data
        file and the record's position (the engine would serve it as garbage).
        """
        entry_pos, first_record = self._dledger_walk_start(seg_index, pos)
        for step in self.dledger_entries(seg_index, entry_pos, with_body=True):
            seg = step.segment
            if step.kind is not EntryKind.ENTRY or step.problem is not None:
                reason = step.problem[1] if step.problem else "end of the DLedger data"
                kind = Kind.BLANK if step.kind is EntryKind.BLANK else Kind.END
                size = seg.start_offset + max(seg.size_bytes, self.segment_size) - step.entry_offset \
                    if kind is Kind.BLANK else 0
                if stop_offset is not None and step.entry_offset >= stop_offset:
                    return
                yield WalkStep(step.entry_offset, Decoded(kind, size, None, reason), seg)
                if kind is Kind.END:
                    return
                continue
            h = step.header
            phy = step.entry_offset + ENTRY_HEADER_BYTES
            if stop_offset is not None and phy >= stop_offset:
                return
            if phy < first_record:
                continue
            start = step.rel + ENTRY_HEADER_BYTES
            if start + h.body_len > len(step.buf):
                raise CorruptRecordError(f"the file ends inside DLedger entry {h.index} ({h.size} bytes from "
                                         f"{step.entry_offset})", file=seg.path,
                                         offset=step.entry_offset - seg.start_offset)
            decoded = decode_record(step.buf, start, start + h.body_len, check_crc=check_crc, keep_raw=keep_raw)
            reason = decoded.reason
            if decoded.kind is Kind.MESSAGE and decoded.size != h.body_len:
                reason = f"record totalSize {decoded.size} but the entry holds {h.body_len} bytes"
            elif decoded.kind is Kind.MESSAGE and decoded.record.phy_offset != phy:
                reason = f"record PHYSICALOFFSET {decoded.record.phy_offset} is not its offset {phy}"
            elif decoded.kind is Kind.MESSAGE:
                yield WalkStep(phy, decoded, seg)
                continue
            raise CorruptRecordError(f"no valid message at CommitLog offset {phy} inside DLedger entry {h.index}: "
                                     f"{reason or decoded.kind.name}", file=seg.path, offset=phy - seg.start_offset)

    def _segment_index(self, offset: int) -> Optional[int]:
        seg = self.reader.find(offset)
        if seg is None:
            return None
        return self.segments.index(seg)

    def find_valid_end(self, start_segment_index: int = 0, *, check_crc: bool = True) -> int:
        """Valid end of the CommitLog scanning from a segment (spec §7.3)."""
        if not self.segments:
            return 0
        start_segment_index = max(0, min(start_segment_index, len(self.segments) - 1))
        return self.find_valid_end_from(self.segments[start_segment_index].start_offset, check_crc=check_crc)

    def find_valid_end_from(self, start_offset: int, *, check_crc: bool = True) -> int:
        """Valid end scanning from a known record boundary (a segment start or a record's offset)."""
        if self.divided_offset is not None:
            # DLedger data follows the normal part: its entry headers decide the end.
            return self.dledger_valid_end(self._segment_index(max(start_offset, self.divided_offset)))
        end = start_offset
        for step in self.walk(start_offset, check_crc=check_crc):
            if step.decoded.kind is Kind.MESSAGE:
                end = step.phy_offset + step.decoded.size
            elif step.decoded.kind is Kind.BLANK:
                # End stays at a blank record of the last segment; otherwise the
                # next segment starts.
                seg_end = step.segment.start_offset + max(step.segment.size_bytes, self.segment_size)
                is_last = step.segment is self.segments[-1]
                end = step.phy_offset if is_last else seg_end
            else:
                end = step.phy_offset
                break
        return end

    def abnormal_recovery_start_index(self, min_timestamp_ms: int) -> int:
        """Abnormal recovery start: last segment whose first record is older than the checkpoint."""
        for i in range(len(self.segments) - 1, -1, -1):
            decoded, _ = self.decode_at(self.segments[i].start_offset)
            if decoded.kind is Kind.MESSAGE:
                ts = decoded.record.store_timestamp_ms
                if ts != 0 and ts <= min_timestamp_ms:
                    return i
        return 0

    def segment_path_for(self, offset: int) -> str:
        seg = self.reader.find(offset)
        return seg.path if seg else os.fspath(self.layout.commitlog_dirs[0])
