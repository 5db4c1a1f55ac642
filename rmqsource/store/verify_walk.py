"""The CommitLog walk of ``rmq verify`` (:mod:`rmqsource.store.verify`): segment by segment, window by window.

Each window (CHUNK_BYTES of one segment, or whole DLedger entries) is walked along its totalSize chain
(jumping over runs of records the ConsumeQueue units claim, :func:`_chain_with_hints`); every record's
fields, PHYSICALOFFSET, body CRC and ``__CRC32#`` property are checked, and the window's records (their
position, size, queue, tagsCode and the LMQ copies their multi-dispatch gives) are handed to the unit
matching (:mod:`rmqsource.store.verify_units`).
The end of the valid data is where the chain ends (zeros after the last segment's end, a blank record at
a segment's end).  JVM twin: ``io.rmqsource.verify.CommitLogWalk``.
"""

from __future__ import annotations

import os
from typing import Optional

import numpy as np
import pyarrow as pa

from .. import limits
from ..errors import CorruptRecordError
from ..format import columnar_headers as hdr
from ..format.dledger import ENTRY_HEADER_BYTES, EntryKind, decode_entry, header_problem
from ..format.crc32 import crc32_spans
from ..format.javahash import java_string_hash
from ..format.properties import parse_properties
from ..format.record import (MAGIC_V1, MAGIC_V2, TRANSACTION_MASK, TRANSACTION_PREPARED_TYPE,
                             TRANSACTION_ROLLBACK_TYPE, decode_record)
from ..format.tagscode import SCHEDULE_TOPIC, consume_queue_tags_code
from .commitlog import CommitLog
from .rocksdb_tail import INNER_MULTI_DISPATCH, INNER_MULTI_QUEUE_OFFSET, multi_dispatch_copies
from .verify_cursors import first_non_zero
from .verify_report import Problem


CHUNK_BYTES = 16 * 1024 * 1024
_CRC_PROP_WORD = int.from_bytes(b"__CRC32#", "big")
_TAGS_KEY = np.frombuffer(b"TAGS\x01", dtype=np.uint8)
_POW10 = 10 ** np.arange(10, dtype=np.int64)
_MULTI_DISPATCH_KEY = np.frombuffer(INNER_MULTI_DISPATCH.encode() + b"\x01", dtype=np.uint8)


class CommitLogWalk:
    """Mixin of the verifier (:class:`rmqsource.store.verify._Verifier`, whose state it reads and adds to): the
    CommitLog walk; each window's records go to :class:`~rmqsource.store.verify_units.UnitMatching`."""

    def _walk_commitlog(self, cl: CommitLog) -> int:
        """Check every segment; returns the end of the valid data."""
        end = cl.min_offset
        segments = _up_to_the_last_holding_data(cl.segments)
        for si, seg in enumerate(segments):
            seg_len = max(seg.size_bytes, cl.segment_size)
            last = si == len(segments) - 1
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
            pb = hdr.read_padded(fd, want, pos)
            n = pb.n
            self._take_units(seg.start_offset + pos + n)
            if n == 0:
                return self._data_ends(rel, seg, pos, seg_len, last, "the file ends here, before the segment size")
            hints = self._hints() - (seg.start_offset + pos)
            positions, stop = _chain_with_hints(pb, n, seg_len - pos, hints)
            if stop.reason == hdr.STOP_SHORT and len(positions) == 0:
                if stop.total_size > want:         # one record larger than a chunk: read exactly it
                    pb = hdr.read_padded(fd, stop.total_size, pos)
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
            if stop.reason in (hdr.STOP_LIMIT, hdr.STOP_SHORT):
                pos += stop.position
                continue
            p = pos + stop.position
            if stop.reason == hdr.STOP_BLANK:
                total = int.from_bytes(bytes(pb.view[stop.position:stop.position + 4]), "big", signed=True)
                if total != seg_len - p:
                    rep.add(Problem("commitlog", "blank-size", rel, p,
                                    "the end-of-segment blank record does not cover the rest of the segment",
                                    str(seg_len - p), str(total)))
                self.progress(seg_len - p)
                return seg.start_offset + p if last else None
            if stop.reason == hdr.STOP_CORRUPT:
                rep.add(Problem("commitlog", "record-length", rel, p, f"record header is not valid: {stop.detail}",
                                f"totalSize in [{limits.MIN_RECORD_BYTES}, {seg_len - p}]", str(stop.total_size)))
                self.progress(seg_len - p)
                return seg.start_offset + p
            return self._data_ends(rel, seg, p, seg_len, last, stop.detail)
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
            pb = hdr.read_padded(fd, want, pos)
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
                    pb = hdr.read_padded(fd, h.size, pos)  # one entry larger than a window
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
                return self._data_ends(rel, seg, p, seg_len, last, "zero bytes")
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

    def _data_ends(self, rel: str, seg, p: int, seg_len: int, last: bool, detail: str) -> int:
        """No record starts at ``p`` (zeros, an unknown magic, the file's end): the valid data ends there."""
        self.progress(seg_len - p)
        if not last:
            self.report.add(Problem("commitlog", "segment-end", rel, p,
                                    f"records end inside a segment that is not the last ({detail}); recovery "
                                    f"would drop every later segment", "a blank end-of-segment record",
                                    detail or "no record"))
        else:
            self._check_tail_zero(seg.path, rel, p, seg_len)
        return seg.start_offset + p

    def _check_tail_zero(self, path: str, rel: str, start: int, seg_len: int) -> None:
        where = first_non_zero(path, start, seg_len)
        if where is not None:
            self.report.add(Problem(
                "commitlog", "tail-garbage", rel, where,
                f"non-zero bytes after the CommitLog's valid end at {start} (a torn or garbage tail; "
                f"rmq recover zero-fills it)", "zeros", "non-zero bytes"))

    def _check_records(self, pb, positions: np.ndarray, seg, chunk_pos: int) -> None:
        if len(positions) == 0:
            return
        rep = self.report
        rel = rep.rel(seg.path)
        base = self.window_base = seg.start_offset + chunk_pos
        locate = lambda p: (seg.path, chunk_pos + p)  # noqa: E731
        try:
            h = hdr.decode_headers(pb.view, positions, locate=locate, words=pb.words)
        except CorruptRecordError:
            positions = self._drop_corrupt(pb, positions, rel, chunk_pos)
            if len(positions) == 0:
                return
            h = hdr.decode_headers(pb.view, positions, locate=locate, words=pb.words)
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
        props = _properties_column(pb, h)
        codes = self._tags_codes(pb, h, names, topic_id, ids, props)
        lmq_copies = _lmq_copies(props, h, eligible)
        self.window = (phy, h.total_size.astype(np.int64), topic_id, h.queue_id.astype(np.int64),
                       h.queue_offset, codes, eligible, np.zeros(n, dtype=bool), rel, chunk_pos, h.pos, lmq_copies)

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

    def _check_crcs(self, pb, h: hdr.Headers, rel: str, chunk_pos: int) -> None:
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
        word = hdr.window_at(pb.words, tail)
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

    def _tags_codes(self, pb, h: hdr.Headers, names: list, topic_id: np.ndarray, ids: np.ndarray,
                    props: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """The tagsCode dispatch computes for each record (spec §4), without a full properties parse.

        TAGS is found by its ``TAGS\\x01`` key at an entry start; rows with more
        than one, an empty value, or in SCHEDULE_TOPIC_XXXX take the exact
        per-record path.
        """
        n = len(h)
        codes = np.zeros(n, dtype=np.int64)
        offsets, data = props
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
                    vals = hdr.spans_binary(pa.py_buffer(d), vstart[use], vend[use] - vstart[use]).dictionary_encode()
                    dict_codes = np.array([java_string_hash(v.decode("utf-8", "replace"))
                                           for v in vals.dictionary.to_pylist()], dtype=np.int64)
                    codes[row[use]] = dict_codes[np.asarray(vals.indices.to_numpy(zero_copy_only=False), np.int64)]
        for i in np.flatnonzero(slow).tolist():
            raw = bytes(pb.view[int(h.props_pos[i]):int(h.props_pos[i] + h.props_len[i])])
            topic = bytes(pb.view[int(h.topic_pos[i]):int(h.topic_pos[i] + h.topic_len[i])]).decode("utf-8", "replace")
            codes[i] = consume_queue_tags_code(topic, parse_properties(raw), int(h.store_ts[i]), self.delays)
        return codes


def _properties_column(pb, h: hdr.Headers) -> tuple[np.ndarray, np.ndarray]:
    """The window's PROPERTIES fields as one column: (offsets: record i's are ``data[offsets[i]:offsets[i + 1]]``,
    data)."""
    n = len(h)
    props = hdr.spans_binary(pb.view, h.props_pos, h.props_len)
    offsets = np.frombuffer(props.buffers()[1], dtype=np.int32, count=n + 1 + props.offset)[props.offset:]
    data = np.frombuffer(props.buffers()[2], dtype=np.uint8) if props.buffers()[2] is not None else \
        np.zeros(0, np.uint8)
    return offsets.astype(np.int64), data


def _rows_with_property(props: tuple[np.ndarray, np.ndarray], key: np.ndarray) -> np.ndarray:
    """Rows whose properties hold an entry starting with ``key`` (a name and its 0x01), ascending."""
    offsets, data = props
    if len(data) < len(key):
        return np.zeros(0, dtype=np.int64)
    cand = np.flatnonzero(data[:len(data) - len(key) + 1] == key[0])
    for k in range(1, len(key)):
        cand = cand[data[cand + k] == key[k]]
    row = np.searchsorted(offsets, cand, side="right") - 1
    at_entry = (cand == offsets[row]) | (data[np.maximum(cand - 1, 0)] == 2)
    inside = cand + len(key) <= offsets[row + 1]
    return np.unique(row[at_entry & inside])


def _lmq_copies(props: tuple[np.ndarray, np.ndarray], h: hdr.Headers, eligible: np.ndarray) -> set:
    """(row, queue, queueId, queueOffset) of the copies the multi-dispatch of the window's records gives (LMQ):
    a record naming queues in INNER_MULTI_DISPATCH has a unit in each, at its offset in INNER_MULTI_QUEUE_OFFSET.
    Rows are found by the key at an entry start, then their properties parsed exactly."""
    offsets, data = props
    out = set()
    for r in _rows_with_property(props, _MULTI_DISPATCH_KEY).tolist():
        if not eligible[r]:
            continue                   # a prepared or rolled-back half is not dispatched at all
        p = parse_properties(data[offsets[r]:offsets[r + 1]].tobytes())
        for queue, queue_id, queue_offset in multi_dispatch_copies(p.get(INNER_MULTI_DISPATCH),
                                                                   p.get(INNER_MULTI_QUEUE_OFFSET), int(h.queue_id[r])):
            out.add((r, queue, queue_id, queue_offset))
    return out


def _chain_with_hints(pb, n: int, seg_remaining: int, hints: np.ndarray) -> tuple[np.ndarray, hdr.ChainStop]:
    """Record positions from 0 in ``pb`` (as :func:`columnar_headers.walk_chain`), jumping over runs of hinted records.

    A run of hints where each record's totalSize leads exactly to the next hint
    is taken as a whole (vectorized); between runs, and wherever a hint is not
    on the chain, the chain is walked record by record.  The result is the
    same as walking from 0: every position is reached through totalSizes.
    """
    hints = hints[(hints >= 0) & (hints + 8 <= n)]
    out = []
    pos = 0
    if len(hints):
        win0 = hdr.window_at(pb.words, hints)
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
                p, stop = hdr.walk_chain(pb.view, pos, n, segment_remaining=seg_remaining - pos, max_records=1)
                out.append(p)
                if stop.reason != hdr.STOP_LIMIT:
                    return _cat(out), stop
                pos, i = stop.position, b + 1
            continue
        limit = int(hints[i + 1]) if (i < H and hints[i] == pos and i + 1 < H) else (int(hints[i]) if i < H else n)
        if limit <= pos:
            limit = n
        p, stop = hdr.walk_chain(pb.view, pos, min(limit, n), segment_remaining=seg_remaining - pos)
        out.append(p)
        if stop.reason != hdr.STOP_LIMIT:
            return _cat(out), stop
        pos = stop.position
    return _cat(out), hdr.ChainStop(pos, hdr.STOP_LIMIT)


def _cat(parts: list) -> np.ndarray:
    parts = [p for p in parts if len(p)]
    if not parts:
        return np.zeros(0, dtype=np.int64)
    return parts[0].astype(np.int64, copy=False) if len(parts) == 1 else np.concatenate(parts).astype(np.int64)


def _up_to_the_last_holding_data(segments: list) -> list:
    """The segments up to the last one holding a non-zero byte (the first one at least).  A broker creates
    the next CommitLog file before it is needed (RocketMQ's AllocateMappedFileService): all zeros, it holds
    no record, and the broker's recovery deletes it; it is not a later segment the data failed to reach."""
    n = len(segments)
    while n > 1 and first_non_zero(segments[n - 1].path, 0, segments[n - 1].size_bytes) is None:
        n -= 1
    return segments[:n]
