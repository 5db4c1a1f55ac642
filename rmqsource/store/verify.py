"""``rmq verify``: check every byte structure of a store, read-only (an fsck).

One pass over the CommitLog, window by window (CHUNK_BYTES of one segment):

* records: the totalSize chain from each segment start (blank record at the
  segment end, zeros after the last segment's valid end), every length inside
  the record (the decoder's checks), PHYSICALOFFSET = where the record is,
  body CRC, and the ``__CRC32#`` whole-record CRC property where present;
* ConsumeQueue units pointing into the window: a record starts there with
  that size, topic, queueId, queueOffset and tagsCode; and every record a
  unit should point at (NOT/COMMIT transaction types) has one;
* IndexFile entries pointing into the window: a record starts there
  (structure and chains: :mod:`rmqsource.store.verify_index`);

then the checkpoint and the config JSON files.  DLedger data files are walked by their
entry headers (DLedger recovery's checks, component ``dledger``), the record inside each
valid entry checked as above; then the DLedger index and checkpoint (verify_dledger.py).  Record starts come from the
ConsumeQueue units where they tile the CommitLog (a vectorized check of
totalSize and contiguity), so the per-record Python walk runs only over gaps
(records without units); the chain is proven either way.  Units expired by
retention (below the CommitLog's first segment) are counted, not reported.

The walk has a JVM twin (``io.rmqsource.verify``, run by
:mod:`rmqsource.commands.verify_jvm`) with the same windows, order and messages:
a change here goes there too (tests compare the two reports problem for problem).
"""

from __future__ import annotations

import heapq
import os
from typing import Callable, Optional

import numpy as np
import pyarrow as pa

from .. import limits
from ..errors import CorruptRecordError, FormatError, RmqError
from ..format import columnar as col
from ..format.checkpoint import CHECKPOINT_FILE_SIZE, Checkpoint
from ..format.configjson import loads_fastjson
from ..format.dledger import ENTRY_HEADER_BYTES, EntryKind, decode_entry, header_problem
from ..format.crc32 import crc32_spans
from ..format.javahash import java_string_hash
from ..format.properties import parse_properties
from ..format.record import (MAGIC_V1, MAGIC_V2, TRANSACTION_MASK, TRANSACTION_PREPARED_TYPE,
                             TRANSACTION_ROLLBACK_TYPE, decode_record)
from ..format.tagscode import SCHEDULE_TOPIC, consume_queue_tags_code
from ..io.lock import is_store_locked
from .commitlog import CommitLog
from .config import StoreConfig
from .layout import StoreLayout
from .verify_cursors import IndexCursor, QueueCursor, note
from .verify_dledger import check_dledger_files
from .verify_index import check_index_file, index_files, index_geometry
from .verify_report import ERROR, WARNING, Problem, VerifyReport

CHUNK_BYTES = 16 * 1024 * 1024
PER_CHECK_DETAIL = 200            # problems of one kind listed per window (all are counted)
_CRC_PROP_WORD = int.from_bytes(b"__CRC32#", "big")
_TAGS_KEY = np.frombuffer(b"TAGS\x01", dtype=np.uint8)
_POW10 = 10 ** np.arange(10, dtype=np.int64)

Progress = Callable[[int], None]         # called with the number of CommitLog bytes just checked


def verify_store(root: str | os.PathLike, config: Optional[StoreConfig] = None, *,
                 progress: Optional[Progress] = None) -> VerifyReport:
    """Check the store at ``root`` (never written) and return what was found."""
    config = config or StoreConfig()
    root = os.fspath(root)
    layout = StoreLayout.for_config(root, config)
    layout.check_is_store()
    report = VerifyReport(os.path.abspath(root))
    _Verifier(layout, config, report, progress).run()
    return report


def commit_log_bytes(root: str | os.PathLike, config: Optional[StoreConfig] = None) -> int:
    """Bytes :func:`verify_store` reports through ``progress`` (for a progress bar's total)."""
    config = config or StoreConfig()
    layout = StoreLayout.for_config(os.fspath(root), config)
    cl = CommitLog(layout)
    try:
        return sum(max(s.size_bytes, cl.segment_size) for s in cl.segments)
    finally:
        cl.close()


class _Verifier:
    def __init__(self, layout: StoreLayout, config: StoreConfig, report: VerifyReport,
                 progress: Optional[Progress]):
        self.layout = layout
        self.config = config
        self.report = report
        self.progress = progress or (lambda n: None)
        self.delays = config.message_delay_levels_ms
        self.topic_ids: dict[str, int] = {}
        self.records = 0
        self.max_store_ts = 0
        self.unmatched: dict[tuple[int, int], list] = {}     # (topic id, queueId) -> [count, first phy]
        self.invalid_at = 1 << 62       # first record recovery would stop at (fields that do not add up)
        self.dledger_entries: list[tuple[int, int, int, int, int]] = []   # (index, pos, size, term, magic)
        self.dledger_ended = False      # DLedger recovery stopped: later data files are past the end

    # ------------------------------------------------------------------ driver
    def run(self) -> None:
        note_unclean_shutdown(self.layout, self.report)
        cl = CommitLog(self.layout)
        try:
            self.cl = cl
            self.cl_min = cl.min_offset
            self._check_segment_files(cl)
            self._open_cursors()
            end = self._walk_commitlog(cl)
            if cl.divided_offset is None:
                end = min(end, self.invalid_at)   # DLedger recovery checks entry headers only
            self._drain_cursors(end)
        finally:
            cl.close()
        if self.layout.dledger_dir is not None:
            check_dledger_files(self.layout, self.report, self.dledger_entries)
        self._report_unmatched_records()
        check_checkpoint(self.layout, self.config, self.report, end, self.records, self.max_store_ts)
        check_config(self.layout, self.config, self.report,
                     {(q.topic, q.queue_id): q.max_offset for q in self.queues})
        self.report.stats.update({"records": self.records, "commitLogMinOffset": self.cl_min, "commitLogEnd": end,
                                  "segments": len(cl.segments), "queues": len(self.queues),
                                  "cqUnits": sum(q.units for q in self.queues),
                                  "cqUnitsExpired": sum(q.expired for q in self.queues),
                                  "indexFiles": len(self.index_paths)})

    def _check_segment_files(self, cl: CommitLog) -> None:
        rep = self.report
        z = cl.segment_size
        for prev, seg in zip(cl.segments, cl.segments[1:]):
            if seg.start_offset != prev.start_offset + z:
                rep.add(Problem("commitlog", "segment-missing", rep.rel(seg.path), None,
                                "CommitLog segments are not consecutive (a segment in between is missing)",
                                f"{prev.start_offset + z:020d}", os.path.basename(seg.path)))
        for seg in cl.segments:
            if seg.size_bytes != z:
                rep.add(Problem("commitlog", "segment-size", rep.rel(seg.path), 0,
                                "CommitLog segments differ in size", str(z), str(seg.size_bytes)))
            if z and seg.start_offset % z:
                rep.add(Problem("commitlog", "segment-name", rep.rel(seg.path), None,
                                "segment start offset is not a multiple of the segment size",
                                f"a multiple of {z}", str(seg.start_offset)))

    def _open_cursors(self) -> None:
        self.queues = []
        for topic, qid in self.layout.list_queues():
            q = QueueCursor(str(self.layout.queue_dir(topic, qid)), topic, qid, self.report, self.cl_min)
            if q.segments:
                q.topic_id = self._topic_id(topic)
                self.queues.append(q)
        self.heap = []
        self.pending = None
        for i, q in enumerate(self.queues):
            p = q.next_phy()
            if p is not None:
                self.heap.append((p, i))
        heapq.heapify(self.heap)
        self.queue_key_index = {(q.topic_id, q.queue_id): i for i, q in enumerate(self.queues)}
        files = index_files(str(self.layout.index_dir))
        h, n = index_geometry(files, self.config.max_hash_slot_num, self.config.max_index_num)
        self.index_paths = files
        usable = [x for x in (check_index_file(f, h, n, self.report) for f in files) if x is not None]
        self.index = IndexCursor(usable, h, self.report, self.cl_min)

    def _listed(self, bad: np.ndarray, check: str) -> list[int]:
        """Indexes of the first PER_CHECK_DETAIL true entries; the others are only counted (as ``check``)."""
        idx = np.flatnonzero(bad)
        if len(idx) > PER_CHECK_DETAIL:
            self.report.counts[(ERROR, check)] += len(idx) - PER_CHECK_DETAIL
        return idx[:PER_CHECK_DETAIL].tolist()

    def _topic_id(self, topic: str) -> int:
        i = self.topic_ids.get(topic)
        if i is None:
            i = self.topic_ids[topic] = len(self.topic_ids)
        return i

    # ------------------------------------------------------------------ CommitLog
    def _walk_commitlog(self, cl: CommitLog) -> int:
        """Check every segment; returns the end of the valid data."""
        end = cl.min_offset
        for si, seg in enumerate(cl.segments):
            seg_len = max(seg.size_bytes, cl.segment_size)
            last = si == len(cl.segments) - 1
            fd = os.open(seg.path, os.O_RDONLY)
            try:
                walk = self._walk_dledger_segment if seg.dledger else self._walk_segment
                seg_end = walk(fd, seg, seg_len, last)
            finally:
                os.close(fd)
            if seg_end is not None:
                end = seg_end
        return end

    def _walk_segment(self, fd: int, seg, seg_len: int, last: bool) -> Optional[int]:
        """Windows of one segment; returns the valid end when the data ends inside it."""
        rep = self.report
        rel = rep.rel(seg.path)
        pos = 0
        for _ in range(seg_len // limits.MIN_RECORD_BYTES + 2):          # each round advances or returns
            if pos >= seg_len:
                self.progress(0)
                return None
            want = min(CHUNK_BYTES, seg_len - pos)
            pb = col.read_padded(fd, want, pos)
            n = pb.n
            self._take_units(seg.start_offset + pos + n)
            if n == 0:
                return self._data_ends(fd, rel, seg, pos, seg_len, last, "the file ends here, before the segment size")
            hints = self._hints() - (seg.start_offset + pos)
            positions, stop = _chain_with_hints(pb, n, seg_len - pos, hints)
            if stop.reason == col.STOP_SHORT and len(positions) == 0:
                if stop.total_size > want:         # one record larger than a chunk: read exactly it
                    pb = col.read_padded(fd, stop.total_size, pos)
                    n = pb.n
                    self._take_units(seg.start_offset + pos + n)
                    positions, stop = _chain_with_hints(pb, n, seg_len - pos, np.zeros(0, np.int64))
                if len(positions) == 0:
                    rep.add(Problem("commitlog", "record-length", rel, pos,
                                    "record runs past the end of the segment file", f"<= {n} bytes",
                                    str(stop.total_size)))
                    return seg.start_offset + pos
            window_end = seg.start_offset + pos + stop.position
            self._check_records(pb, positions, seg, pos)
            self._check_units_and_entries(window_end)
            self.progress(stop.position)
            if stop.reason in (col.STOP_LIMIT, col.STOP_SHORT):
                pos += stop.position
                continue
            p = pos + stop.position
            if stop.reason == col.STOP_BLANK:
                total = int.from_bytes(bytes(pb.view[stop.position:stop.position + 4]), "big", signed=True)
                if total != seg_len - p:
                    rep.add(Problem("commitlog", "blank-size", rel, p,
                                    "the end-of-segment blank record does not cover the rest of the segment",
                                    str(seg_len - p), str(total)))
                self.progress(seg_len - p)
                return seg.start_offset + p if last else None
            if stop.reason == col.STOP_CORRUPT:
                rep.add(Problem("commitlog", "record-length", rel, p, f"record header is not valid: {stop.detail}",
                                f"totalSize in [{limits.MIN_RECORD_BYTES}, {seg_len - p}]", str(stop.total_size)))
                self.progress(seg_len - p)
                return seg.start_offset + p
            return self._data_ends(fd, rel, seg, p, seg_len, last, stop.detail)
        return seg.start_offset + pos

    def _walk_dledger_segment(self, fd: int, seg, seg_len: int, last: bool) -> Optional[int]:
        """Windows of one DLedger data file: entry headers as DLedger recovery checks them (the first one
        failing a check ends the data: ``entry-header``), the record inside each valid entry as any record."""
        rep = self.report
        rel = rep.rel(seg.path)
        pos = 0
        if self.dledger_ended:
            self.progress(seg_len)
            return None
        prev = self.dledger_entries[-1] if self.dledger_entries else None
        for _ in range(seg_len // ENTRY_HEADER_BYTES + 2):              # each round advances or returns
            if pos >= seg_len:
                return None
            want = min(CHUNK_BYTES, seg_len - pos)
            pb = col.read_padded(fd, want, pos)
            n, r, positions, sizes, stop = pb.n, 0, [], [], None
            while stop is None:
                at = pos + r
                if r + ENTRY_HEADER_BYTES > n and n == want and pos + n < seg_len:
                    break                                  # the header continues in the next window
                entry = decode_entry(pb.view, r, n)
                if entry.kind is not EntryKind.ENTRY:
                    stop = entry.kind
                    break
                h = entry.header
                problem = header_problem(h, seg.start_offset + at, prev[0] if prev else None,
                                         prev[3] if prev else None)
                if problem is None and h.size > seg_len - at:
                    problem = ("size", f"entry size {h.size} runs past the end of the file ({seg_len - at} bytes left)")
                if problem is not None:
                    rep.add(Problem("dledger", "entry-header", rel, at,
                                    f"DLedger entry header fails recovery's {problem[0]} check: {problem[1]}; the "
                                    f"data ends here", None, problem[0]))
                    stop = "header"
                    break
                if r + h.size > n:
                    if r > 0:
                        break                              # the entry continues in the next window
                    pb = col.read_padded(fd, h.size, pos)  # one entry larger than a window
                    n = pb.n
                    if n < h.size:
                        rep.add(Problem("commitlog", "record-length", rel, at + ENTRY_HEADER_BYTES,
                                        "record runs past the end of the data file", str(h.body_len),
                                        str(n - ENTRY_HEADER_BYTES)))
                        stop = "header"
                        break
                positions.append(r + ENTRY_HEADER_BYTES)
                sizes.append(h.body_len)
                prev = (h.index, seg.start_offset + at, h.size, h.term, h.magic)
                self.dledger_entries.append(prev)
                r += h.size
            self._take_units(seg.start_offset + pos + n)
            self._check_records(pb, self._records_filling_entries(pb, positions, sizes, rel, pos), seg, pos)
            self._check_units_and_entries(seg.start_offset + pos + r)
            self.progress(r)
            if stop is None:
                pos += r
                continue
            p = pos + r
            self.progress(seg_len - p)
            if stop is EntryKind.BLANK:
                return seg.start_offset + p if last else None
            self.dledger_ended = True
            if stop is EntryKind.END:
                return self._data_ends(fd, rel, seg, p, seg_len, last, "zero bytes")
            return seg.start_offset + p
        return seg.start_offset + pos

    def _records_filling_entries(self, pb, positions: list, sizes: list, rel: str, chunk_pos: int) -> np.ndarray:
        """Record positions whose totalSize is the entry's bodyLen; each other one is a record-length problem."""
        pos = np.array(positions, dtype=np.int64)
        if not len(pos):
            return pos
        b = np.frombuffer(pb.view, dtype=np.uint8)
        total = ((b[pos].astype(np.int64) << 24) | (b[pos + 1].astype(np.int64) << 16)
                 | (b[pos + 2].astype(np.int64) << 8) | b[pos + 3].astype(np.int64))
        total = np.where(total >= 1 << 31, total - (1 << 32), total)
        want = np.array(sizes, dtype=np.int64)
        for i in self._listed(total != want, "record-length"):
            self.report.add(Problem("commitlog", "record-length", rel, chunk_pos + int(pos[i]),
                                    "record totalSize is not the DLedger entry's bodyLen", str(int(want[i])),
                                    str(int(total[i]))))
        return pos[total == want]

    def _data_ends(self, fd: int, rel: str, seg, p: int, seg_len: int, last: bool, detail: str) -> int:
        """No record starts at ``p`` (zeros, an unknown magic, the file's end): the valid data ends there."""
        self.progress(seg_len - p)
        if not last:
            self.report.add(Problem("commitlog", "segment-end", rel, p,
                                    f"records end inside a segment that is not the last ({detail}); recovery "
                                    f"would drop every later segment", "a blank end-of-segment record",
                                    detail or "no record"))
        else:
            self._check_tail_zero(fd, rel, p, seg_len)
        return seg.start_offset + p

    def _check_tail_zero(self, fd: int, rel: str, start: int, seg_len: int) -> None:
        pos = start
        for _ in range((seg_len - start) // CHUNK_BYTES + 2):
            if pos >= seg_len:
                return
            chunk = os.pread(fd, min(CHUNK_BYTES, seg_len - pos), pos)
            if not chunk:
                return
            nz = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8))
            if nz.size:
                self.report.add(Problem(
                    "commitlog", "tail-garbage", rel, pos + int(nz[0]),
                    f"non-zero bytes after the CommitLog's valid end at {start} (a torn or garbage tail; "
                    f"rmq recover zero-fills it)", "zeros", "non-zero bytes"))
                return
            pos += len(chunk)

    def _take_units(self, hi: int) -> None:
        """Move the units with phy < ``hi`` from the queue cursors into ``self.pending`` (sorted by phy)."""
        parts = [self.pending] if self.pending is not None and len(self.pending[0]) else []
        for _ in range(len(self.heap) + 1):
            if not self.heap or self.heap[0][0] >= hi:
                break
            _, i = heapq.heappop(self.heap)
            q = self.queues[i]
            for uphy, usize, ucode, uqoff in q.take_below(hi):
                parts.append((uphy, usize, ucode, uqoff, np.full(len(uphy), i, dtype=np.int64)))
            p = q.next_phy()
            if p is not None:
                heapq.heappush(self.heap, (p, i))
        if not parts:
            self.pending = None
            return
        cols = [np.concatenate([p[k] for p in parts]) for k in range(5)] if len(parts) > 1 else list(parts[0])
        order = np.argsort(cols[0], kind="stable")
        self.pending = tuple(c[order] for c in cols)

    def _hints(self) -> np.ndarray:
        """Record starts claimed by the pending units (distinct, ascending)."""
        if self.pending is None:
            return np.zeros(0, dtype=np.int64)
        phy = self.pending[0]
        if len(phy) > 1:
            keep = np.empty(len(phy), dtype=bool)
            keep[0] = True
            np.not_equal(phy[1:], phy[:-1], out=keep[1:])
            return phy[keep]
        return phy

    def _check_records(self, pb, positions: np.ndarray, seg, chunk_pos: int) -> None:
        if len(positions) == 0:
            return
        rep = self.report
        rel = rep.rel(seg.path)
        base = self.window_base = seg.start_offset + chunk_pos
        locate = lambda p: (seg.path, chunk_pos + p)  # noqa: E731
        try:
            h = col.decode_headers(pb.view, positions, locate=locate, words=pb.words)
        except CorruptRecordError:
            positions = self._drop_corrupt(pb, positions, rel, chunk_pos)
            if len(positions) == 0:
                return
            h = col.decode_headers(pb.view, positions, locate=locate, words=pb.words)
        n = len(h)
        self.records += n
        phy = base + h.pos
        self.max_store_ts = max(self.max_store_ts, int(h.store_ts.max()))
        for i in self._listed(h.phy_offset != phy, "phy-offset"):
            rep.add(Problem("commitlog", "phy-offset", rel, chunk_pos + int(h.pos[i]),
                            "PHYSICALOFFSET field is not where the record is", str(int(phy[i])),
                            str(int(h.phy_offset[i]))))
        self._check_crcs(pb, h, rel, chunk_pos)
        names = [t.decode("utf-8", "replace") for t in h.topics]
        ids = np.array([self._topic_id(t) for t in names], dtype=np.int64)
        topic_id = ids[h.topic_index]
        tx = h.sys_flag & TRANSACTION_MASK
        eligible = (tx != TRANSACTION_PREPARED_TYPE) & (tx != TRANSACTION_ROLLBACK_TYPE)
        codes = self._tags_codes(pb, h, names, topic_id, ids)
        self.window = (phy, h.total_size.astype(np.int64), topic_id, h.queue_id.astype(np.int64),
                       h.queue_offset, codes, eligible, np.zeros(n, dtype=bool), rel, chunk_pos, h.pos)

    def _drop_corrupt(self, pb, positions: np.ndarray, rel: str, chunk_pos: int) -> np.ndarray:
        """Records whose inner lengths do not add up: report each, keep the others."""
        keep = []
        for p in positions.tolist():
            d = decode_record(pb.view, p, pb.n)
            if d.record is None:
                self.invalid_at = min(self.invalid_at, self.window_base + p)
                self.report.add(Problem("commitlog", "record-fields", rel, chunk_pos + p,
                                        f"record fields do not add up: {d.reason}", "a decodable record", d.kind.value))
            else:
                keep.append(p)
        return np.array(keep, dtype=np.int64)

    def _check_crcs(self, pb, h: col.Headers, rel: str, chunk_pos: int) -> None:
        rep = self.report
        got = crc32_spans(pb.view, h.body_pos, h.body_len, words=pb.words)
        got &= 0x7FFFFFFF
        stored = h.body_crc.astype(np.int64) & 0xFFFFFFFF
        for i in self._listed(got != stored, "body-crc"):
            rep.add(Problem("commitlog", "body-crc", rel, chunk_pos + int(h.pos[i]),
                            f"body CRC does not match the body ({int(h.body_len[i])} bytes at "
                            f"{chunk_pos + int(h.body_pos[i])})", str(int(stored[i])), str(int(got[i]))))
        # __CRC32# (5.2+ enabledAppendPropCRC): the last 20 bytes of the record, CRC of everything before.
        end = h.pos + h.total_size
        b = np.frombuffer(pb.view, dtype=np.uint8)
        cand = np.flatnonzero(h.props_len >= 20)
        cand = cand[b[end[cand] - 12] == 1]          # the key's 0x01 first: one byte rules most records out
        if len(cand) == 0:
            return
        tail = end[cand] - 20
        word = col.window_at(pb.words, tail)
        has = (word == np.uint64(_CRC_PROP_WORD)) & (b[end[cand] - 1] == 2)
        rows = cand[has]
        if len(rows) == 0:
            return
        digits = b[(end[rows] - 11)[:, None] + np.arange(10)].astype(np.int64) - 48
        value = (np.clip(digits, 0, 9) * _POW10).sum(axis=1)
        valid_digits = ((digits >= 0) & (digits <= 9)).all(axis=1)
        got = crc32_spans(pb.view, h.pos[rows], h.total_size[rows].astype(np.int64) - 20, words=pb.words)
        got &= 0x7FFFFFFF
        for j in self._listed(~valid_digits | (got != value), "record-crc"):
            i = int(rows[j])
            rep.add(Problem("commitlog", "record-crc", rel, chunk_pos + int(h.pos[i]),
                            "__CRC32# property does not match the record's bytes",
                            str(int(got[j])), str(int(value[j])) if valid_digits[j] else "not 10 digits"))

    def _tags_codes(self, pb, h: col.Headers, names: list, topic_id: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """The tagsCode dispatch computes for each record (spec §4), without a full properties parse.

        TAGS is found by its ``TAGS\\x01`` key at an entry start; rows with more
        than one, an empty value, or in SCHEDULE_TOPIC_XXXX take the exact
        per-record path.
        """
        n = len(h)
        codes = np.zeros(n, dtype=np.int64)
        props = col.spans_binary(pb.view, h.props_pos, h.props_len)
        offsets = np.frombuffer(props.buffers()[1], dtype=np.int32, count=n + 1 + props.offset)[props.offset:]
        offsets = offsets.astype(np.int64)
        data = np.frombuffer(props.buffers()[2], dtype=np.uint8) if props.buffers()[2] is not None else \
            np.zeros(0, np.uint8)
        slow = np.zeros(n, dtype=bool)
        if SCHEDULE_TOPIC in self.topic_ids:
            slow |= topic_id == self.topic_ids[SCHEDULE_TOPIC]
        if len(data) >= 5:
            d = data
            cand = np.flatnonzero(d[:-4] == _TAGS_KEY[0])
            for k in range(1, 5):
                cand = cand[d[cand + k] == _TAGS_KEY[k]]
            if len(cand):
                row = np.searchsorted(offsets, cand, side="right") - 1
                at_entry = (cand == offsets[row]) | (d[np.maximum(cand - 1, 0)] == 2)
                inside = cand + 5 <= offsets[row + 1]
                ok = at_entry & inside
                cand, row = cand[ok], row[ok]
                per_row = np.bincount(row, minlength=n)
                slow |= per_row > 1
                seps = np.flatnonzero(d == 2)
                nxt = np.searchsorted(seps, cand + 5, side="left")
                vend = np.where(nxt < len(seps), seps[np.minimum(nxt, len(seps) - 1)], len(d))
                vend = np.minimum(vend, offsets[row + 1])
                vstart = cand + 5
                empty = vend <= vstart
                slow[row[empty]] = True
                use = ~empty & ~slow[row]
                if use.any():
                    vals = col.spans_binary(pa.py_buffer(d), vstart[use], vend[use] - vstart[use]).dictionary_encode()
                    dict_codes = np.array([java_string_hash(v.decode("utf-8", "replace"))
                                           for v in vals.dictionary.to_pylist()], dtype=np.int64)
                    codes[row[use]] = dict_codes[np.asarray(vals.indices.to_numpy(zero_copy_only=False), np.int64)]
        for i in np.flatnonzero(slow).tolist():
            raw = bytes(pb.view[int(h.props_pos[i]):int(h.props_pos[i] + h.props_len[i])])
            topic = bytes(pb.view[int(h.topic_pos[i]):int(h.topic_pos[i] + h.topic_len[i])]).decode("utf-8", "replace")
            codes[i] = consume_queue_tags_code(topic, parse_properties(raw), int(h.store_ts[i]), self.delays)
        return codes

    # ------------------------------------------------------------------ units and entries
    def _check_units_and_entries(self, window_end: int) -> None:
        win = getattr(self, "window", None)
        self.window = None
        starts = _RecordStarts(win[0] if win is not None else np.zeros(0, np.int64))
        self._match_units(window_end, win, starts)
        self._match_entries(window_end, win, starts)
        if win is not None:
            self._collect_unmatched(win)

    def _match_units(self, window_end: int, win, starts: "_RecordStarts") -> None:
        """Units with phy < ``window_end`` against the window's records (all queues at once)."""
        rep = self.report
        if self.pending is None:
            return
        uphy, usize, ucode, uqoff, uq = self.pending
        cut = int(np.searchsorted(uphy, window_end, side="left"))
        if cut == 0:
            return
        self.pending = tuple(a[cut:] for a in self.pending)
        uphy, usize, ucode, uqoff, uq = uphy[:cut], usize[:cut], ucode[:cut], uqoff[:cut], uq[:cut]
        q_topic = np.array([q.topic_id for q in self.queues], dtype=np.int64)
        q_qid = np.array([q.queue_id for q in self.queues], dtype=np.int64)

        def unit_problem(j: int, check: str, message: str, expected: str, found: str) -> None:
            q = self.queues[int(uq[j])]
            f, off = q.file_and_position(int(uqoff[j]))
            rep.add(Problem("consumequeue", check, f, off,
                            f"unit {int(uqoff[j])} of {q.topic}/{q.queue_id} {message}", expected, found))

        idx = starts.rows(uphy)
        found = idx >= 0
        for j in self._listed(~found, "cq-target"):
            unit_problem(j, "cq-target", f"points at CommitLog offset {int(uphy[j])}, where no valid record starts",
                         "a record start", "no valid record")
        if not found.any():
            return
        sel = np.flatnonzero(found)
        ri = idx[sel]
        _, r_size, r_topic, r_qid, r_qoff, r_code, _, matched, *_ = win
        same_queue = (r_topic[ri] == q_topic[uq[sel]]) & (r_qid[ri] == q_qid[uq[sel]]) & (r_qoff[ri] == uqoff[sel])
        matched[ri[same_queue]] = True
        for j in self._listed(~same_queue, "cq-queue"):
            u, r = int(sel[j]), int(ri[j])
            q = self.queues[int(uq[u])]
            unit_problem(u, "cq-queue", f"points at the record at CommitLog offset {int(uphy[u])} of another "
                                        f"queue position", f"{q.topic}/{q.queue_id}/{int(uqoff[u])}",
                         f"{self._topic_name(int(r_topic[r]))}/{int(r_qid[r])}/{int(r_qoff[r])}")
        for check, what, want, got in (("cq-size", "size", r_size[ri], usize[sel]),
                                        ("cq-tagscode", "tagsCode", r_code[ri], ucode[sel])):
            for j in self._listed(want != got, check):
                u = int(sel[j])
                unit_problem(u, check, f"{what} differs from the record at CommitLog offset {int(uphy[u])}",
                             str(int(want[j])), str(int(got[j])))

    def _topic_name(self, tid: int) -> str:
        for t, i in self.topic_ids.items():
            if i == tid:
                return t
        return "?"

    def _match_entries(self, window_end: int, win, starts: "_RecordStarts") -> None:
        rep = self.report
        for fi, numbers, ephy in self.index.take_below(window_end):
            found = starts.rows(ephy) >= 0
            path, _, base = self.index.files[fi]
            for j in self._listed(~found, "index-target"):
                rep.add(Problem("index", "index-target", rep.rel(path), base + int(numbers[j]) * 20,
                                f"entry {int(numbers[j])} points at CommitLog offset {int(ephy[j])}, where no record "
                                f"starts", "a record start", "no record"))

    def _collect_unmatched(self, win) -> None:
        phy, _, r_topic, r_qid, _, _, eligible, matched, *_ = win
        missing = np.flatnonzero(eligible & ~matched)
        if len(missing) == 0:
            return
        key = (r_topic[missing] << 32) | (r_qid[missing] & 0xFFFFFFFF)
        uniq, first, counts = np.unique(key, return_index=True, return_counts=True)
        for k, f, c in zip(uniq.tolist(), first.tolist(), counts.tolist()):
            entry = self.unmatched.setdefault((k >> 32, k & 0xFFFFFFFF), [0, int(phy[missing[f]])])
            entry[0] += c          # keyed by the unsigned queueId: the JVM walk's order

    def _report_unmatched_records(self) -> None:
        rep = self.report
        for (tid, unsigned_qid), (count, first) in sorted(self.unmatched.items()):
            qid = unsigned_qid - (1 << 32) if unsigned_qid >= 1 << 31 else unsigned_qid      # the record's int field
            topic = self._topic_name(tid)
            i = self.queue_key_index.get((tid, qid))
            where = rep.rel(self.layout.queue_dir(topic, qid))
            has_files = i is not None
            rep.add(Problem("consumequeue", "cq-missing-unit", where, None,
                            f"{count} record(s) of {topic}/{qid} have no ConsumeQueue unit "
                            f"(first at CommitLog offset {first})"
                            + ("" if has_files else "; the queue has no ConsumeQueue files (dispatch rebuilds them)"),
                            "a unit per record", f"{count} missing"))

    def _drain_cursors(self, end: int) -> None:
        """Units and entries left after the walk point past the CommitLog's valid end."""
        rep = self.report
        self.window = None
        self._take_units(1 << 62)
        if self.pending is not None and len(self.pending[0]):
            uphy, _, _, uqoff, uq = self.pending
            for j in self._listed(np.ones(len(uphy), dtype=bool), "cq-past-end"):
                q = self.queues[int(uq[j])]
                f, off = q.file_and_position(int(uqoff[j]))
                rep.add(Problem("consumequeue", "cq-past-end", f, off,
                                f"unit {int(uqoff[j])} of {q.topic}/{q.queue_id} points at CommitLog offset "
                                f"{int(uphy[j])}, past the CommitLog's valid end (recovery trims it)",
                                f"< {end}", str(int(uphy[j]))))
        for fi, numbers, ephy in self.index.take_below(1 << 62):
            path, _, base = self.index.files[fi]
            listed = self._listed(np.ones(len(ephy), dtype=bool), "index-past-end")
            rep.counts[(WARNING, "index-past-end")] += rep.counts.pop((ERROR, "index-past-end"), 0)
            for j in listed:
                rep.add(Problem("index", "index-past-end", rep.rel(path), base + int(numbers[j]) * 20,
                                f"entry {int(numbers[j])} points at CommitLog offset {int(ephy[j])}, past the "
                                f"CommitLog's valid end", f"< {end}", str(int(ephy[j])), severity=WARNING))


# ---------------------------------------------------------------------- outside the walk (both engines)

def note_unclean_shutdown(layout: StoreLayout, rep: VerifyReport) -> None:
    if layout.abort_exists():
        live = is_store_locked(layout.root)
        note(rep, "layout", "unclean-shutdown", "abort",
             "a process holds the store's lock: the tail is moving, problems at the end may be transient"
             if live else "abort file present: the last run did not shut down cleanly (rmq recover repairs)")


def check_checkpoint(layout: StoreLayout, config: StoreConfig, rep: VerifyReport, end: int, records: int,
                     max_store_ts: int) -> None:
    """The checkpoint against the walk's figures: the CommitLog's valid ``end``, the latest store time."""
    path = layout.checkpoint_path
    if not path.exists():
        note(rep, "checkpoint", "checkpoint-missing", "checkpoint", "no checkpoint file (a store never shut down)")
        return
    data = path.read_bytes()
    if len(data) != CHECKPOINT_FILE_SIZE:
        rep.add(Problem("checkpoint", "checkpoint-size", "checkpoint", 0, "checkpoint file has the wrong size",
                        str(CHECKPOINT_FILE_SIZE), str(len(data))))
        return
    cp = Checkpoint.decode(data)
    for name, off, value in (("physicMsgTimestamp", 0, cp.physic_msg_timestamp_ms),
                             ("logicsMsgTimestamp", 8, cp.logics_msg_timestamp_ms),
                             ("indexMsgTimestamp", 16, cp.index_msg_timestamp_ms)):
        if value < 0:
            rep.add(Problem("checkpoint", "checkpoint-value", "checkpoint", off, f"{name} is negative",
                            ">= 0", str(value)))
        elif records and value > max_store_ts:
            rep.add(Problem("checkpoint", "checkpoint-ahead", "checkpoint", off,
                            f"{name} is later than every record's store time (data the checkpoint "
                            f"counted as flushed is missing)", f"<= {max_store_ts}", str(value),
                            severity=WARNING))
    if cp.confirm_phy_offset > end and config.is_v5:
        rep.add(Problem("checkpoint", "checkpoint-ahead", "checkpoint", 32,
                        "confirmPhyOffset is past the CommitLog's valid end", f"<= {end}",
                        str(cp.confirm_phy_offset), severity=WARNING))


def check_config(layout: StoreLayout, config: StoreConfig, rep: VerifyReport,
                 max_offsets: dict[tuple[str, int], int]) -> None:
    """Every config JSON file parses as the broker's JSON; committed offsets lie within their queues."""
    d = layout.config_dir
    if not d.is_dir():
        return
    for name in sorted(os.listdir(d)):
        if not (name.endswith(".json") or name.endswith(".json.bak")):
            continue
        path = d / name
        try:
            text = path.read_bytes().decode("utf-8")
            if text.strip():
                loads_fastjson(text, file=str(path))
        except (UnicodeDecodeError, FormatError) as e:
            rep.add(Problem("config", "config-json", rep.rel(path), getattr(e, "offset", None),
                            f"not readable as the broker's JSON: {' '.join(str(e).split())}",
                            "fastjson text", "unparseable"))
    _check_consumer_offsets(layout, config, rep, max_offsets)


def _check_consumer_offsets(layout: StoreLayout, config: StoreConfig, rep: VerifyReport,
                            max_offsets: dict[tuple[str, int], int]) -> None:
    from .consumer_offsets import ConsumerOffsets
    try:
        entries = ConsumerOffsets(layout.root, config=config).all_entries()
    except RmqError:
        return                      # reported by the JSON check above
    for e in entries:
        mx = max_offsets.get((e.topic, e.queue_id))
        if e.offset < 0 or (mx is not None and e.offset > mx):
            rep.add(Problem("config", "consumer-offset", "config/consumerOffset.json", None,
                            f"group {e.group} commits offset {e.offset} for {e.topic}/{e.queue_id}",
                            f"0..{mx}" if mx is not None else ">= 0", str(e.offset), severity=WARNING))


class _RecordStarts:
    """Row of the window's record starting at a CommitLog offset, by 64-byte block.

    A record is at least MIN_RECORD_BYTES (> 64) long, so no block holds two
    record starts: one gather and one compare per lookup instead of a binary search.
    """

    BLOCK_SHIFT = 6

    def __init__(self, phy: np.ndarray):
        self.phy = phy
        self.base = int(phy[0]) if len(phy) else 0
        span = int(phy[-1]) - self.base + 1 if len(phy) else 0
        self.blocks = np.full((span >> self.BLOCK_SHIFT) + 1, -1, dtype=np.int64)
        self.blocks[(phy - self.base) >> self.BLOCK_SHIFT] = np.arange(len(phy), dtype=np.int64)

    def rows(self, offsets: np.ndarray) -> np.ndarray:
        """Row of the record starting at each offset, -1 where no record of the window starts."""
        if len(self.phy) == 0:
            return np.full(len(offsets), -1, dtype=np.int64)
        b = (offsets - self.base) >> self.BLOCK_SHIFT
        np.clip(b, 0, len(self.blocks) - 1, out=b)
        row = self.blocks[b]
        row[self.phy[row] != offsets] = -1         # row -1 reads the last record: compared like any other
        return row


assert limits.MIN_RECORD_BYTES > 1 << _RecordStarts.BLOCK_SHIFT


def _chain_with_hints(pb, n: int, seg_remaining: int, hints: np.ndarray) -> tuple[np.ndarray, col.ChainStop]:
    """Record positions from 0 in ``pb`` (as :func:`columnar.walk_chain`), jumping over runs of hinted records.

    A run of hints where each record's totalSize leads exactly to the next hint
    is taken as a whole (vectorized); between runs, and wherever a hint is not
    on the chain, the chain is walked record by record.  The result is the
    same as walking from 0: every position is reached through totalSizes.
    """
    hints = hints[(hints >= 0) & (hints + 8 <= n)]
    out = []
    pos = 0
    if len(hints):
        win0 = col.window_at(pb.words, hints)
        total = (win0 >> np.uint64(32)).astype(np.uint32).view(np.int32).astype(np.int64)
        magic = (win0 & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32)
        nxt = hints + total
        ok = (((magic == MAGIC_V1) | (magic == MAGIC_V2)) & (total >= limits.MIN_RECORD_BYTES)
              & (nxt <= n) & (total <= limits.MAX_RECORD_BYTES_READ) & (hints + total <= seg_remaining))
        link = np.zeros(len(hints), dtype=bool)
        link[:-1] = ok[:-1] & (nxt[:-1] == hints[1:])
        breaks = np.flatnonzero(~link)              # run i..b ends at the first hint that does not link on
    i = 0
    H = len(hints)
    for _ in range(2 * H + n // limits.MIN_RECORD_BYTES + 2):
        if pos >= n:
            break
        if i < H and hints[i] < pos:
            i = int(np.searchsorted(hints, pos, side="left"))
        if i < H and hints[i] == pos and ok[i]:
            b = int(breaks[np.searchsorted(breaks, i, side="left")])
            if ok[b]:                                # hints i..b are consecutive records
                out.append(hints[i:b + 1])
                pos, i = int(nxt[b]), b + 1
            else:                                    # i..b-1 are; b needs the record-by-record walk
                out.append(hints[i:b])
                pos, i = int(hints[b]), b
                p, stop = col.walk_chain(pb.view, pos, n, segment_remaining=seg_remaining - pos, max_records=1)
                out.append(p)
                if stop.reason != col.STOP_LIMIT:
                    return _cat(out), stop
                pos, i = stop.position, b + 1
            continue
        limit = int(hints[i + 1]) if (i < H and hints[i] == pos and i + 1 < H) else (int(hints[i]) if i < H else n)
        if limit <= pos:
            limit = n
        p, stop = col.walk_chain(pb.view, pos, min(limit, n), segment_remaining=seg_remaining - pos)
        out.append(p)
        if stop.reason != col.STOP_LIMIT:
            return _cat(out), stop
        pos = stop.position
    return _cat(out), col.ChainStop(pos, col.STOP_LIMIT)


def _cat(parts: list) -> np.ndarray:
    parts = [p for p in parts if len(p)]
    if not parts:
        return np.zeros(0, dtype=np.int64)
    return parts[0].astype(np.int64, copy=False) if len(parts) == 1 else np.concatenate(parts).astype(np.int64)
