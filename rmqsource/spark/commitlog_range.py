"""Whole-store tasks: a CommitLog offset range read front to back, with record starts from the ConsumeQueues
where they can be trusted (the JVM twin: CommitLogRangeReader.java)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import limits
from ..errors import CorruptRecordError, DataLossError
from ..format import columnar_headers as hdr
from ..format.consumequeue import PRE_BLANK_SIZE
from ..format.dledger import ENTRY_HEADER_BYTES, EntryKind, decode_entry, header_problem
from ..format.record import TRANSACTION_MASK, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from ..format.tagscode import SCHEDULE_TOPIC
from ..store.reader import MessageStoreReader
from .planning import CommitLogRange
from .read_spec import ReadSpec
from .record_batches import RecordBuffer, cq_tags_codes, finish_rows, row_mask, tag_code_mask, topics_of

CHUNK_BYTES = 8 * 1024 * 1024        # CommitLog bytes read at a time by whole-store tasks

# Record starts come from the ConsumeQueues where they can be trusted: the units
# of every queue that point into the window are merged by phyOffset, and a run of
# units that tile the CommitLog exactly (each record ends where the next starts)
# is read with one pread and decoded without walking the header chain, after a
# vectorized check that each unit's record has that totalSize and PHYSICALOFFSET.
# Everything else (gaps: records with no unit such as prepared transactions, a
# unit that does not check out, stores without ConsumeQueue files) is walked
# record by record as before, so the rows are the same either way.

CQ_WINDOW_BYTES = 64 * 1024 * 1024     # CommitLog bytes whose units are merged at a time
CQ_UNIT_BLOCK = 8192
MAX_CQ_QUEUES = 4096                   # more queues than this: walk the chain instead


def _first_unit_at_or_after(q, lo: int, hi: int, phy: int) -> int:
    """First unit index in [lo, hi) whose phyOffset >= ``phy`` (pre-blank units count as below)."""
    a, b = lo, hi
    while a < b:
        mid = (a + b) // 2
        u = q.read_units(mid, 1)
        if len(u) == 0:
            b = mid
            continue
        if int(u[0]["size"]) != PRE_BLANK_SIZE and int(u[0]["phy_offset"]) >= phy:
            b = mid
        else:
            a = mid + 1
    return a


@dataclass
class _WindowUnits:
    phy: np.ndarray
    end: np.ndarray
    size: np.ndarray
    code: np.ndarray
    qk: np.ndarray          # index into the queue key list
    qoff: np.ndarray        # unit index = queue offset
    multi: np.ndarray       # phyOffset shared with another unit (multi-dispatch): tagsCode the slow way


def _window_units(queues: list, lo: int, hi: int) -> _WindowUnits:
    """Units of every queue with phyOffset in [lo, hi), sorted by phyOffset, one per phyOffset."""
    parts = []
    for i, (q, qlo, qhi) in enumerate(queues):
        if qhi <= qlo:
            continue
        a = _first_unit_at_or_after(q, qlo, qhi, lo)
        while a < qhi:
            u = q.read_units(a, min(CQ_UNIT_BLOCK, qhi - a))
            if len(u) == 0:
                break
            phy = u["phy_offset"].astype(np.int64)
            size = u["size"].astype(np.int64)
            live = (size != PRE_BLANK_SIZE) & (size > 0)
            inside = live & (phy >= lo) & (phy < hi)
            idx = np.flatnonzero(inside)
            if len(idx):
                parts.append((phy[idx], size[idx], u["tags_code"][idx].astype(np.int64),
                              np.full(len(idx), i, dtype=np.int64), a + idx))
            # units are in phyOffset order: stop once past the window
            if (live & (phy >= hi)).any():
                break
            a += len(u)
    if not parts:
        z = np.empty(0, dtype=np.int64)
        return _WindowUnits(z, z, z, z, z, z, np.empty(0, dtype=bool))
    phy, size, code, qk, qoff = (np.concatenate([p[j] for p in parts]) for j in range(5))
    order = np.argsort(phy, kind="stable")
    phy, size, code, qk, qoff = phy[order], size[order], code[order], qk[order], qoff[order]
    dup = np.zeros(len(phy), dtype=bool)
    if len(phy) > 1:
        same = phy[1:] == phy[:-1]
        if same.any():
            dup[1:] = same
            multi = dup.copy()
            multi[:-1] |= same
            keep = ~dup
            return _WindowUnits(phy[keep], phy[keep] + size[keep], size[keep], code[keep], qk[keep], qoff[keep],
                                multi[keep])
    return _WindowUnits(phy, phy + size, size, code, qk, qoff, dup)


def _unit_tags_codes(reader, buf, h: hdr.Headers, topics: pa.Array, u: _WindowUnits, a: int, b: int,
                     queue_topic_idx: np.ndarray, topic_names: list) -> tuple[np.ndarray, np.ndarray]:
    """tagsCode of the records decoded from units [a, b) (same rows), as :func:`cq_tags_codes` defines it."""
    n = len(h)
    codes = u.code[a:b].copy()
    tx = h.sys_flag & TRANSACTION_MASK
    eligible = (tx != TRANSACTION_PREPARED_TYPE) & (tx != TRANSACTION_ROLLBACK_TYPE)
    enc = topics.dictionary_encode()
    names = enc.dictionary.to_pylist()
    lookup = {t: i for i, t in enumerate(topic_names)}
    dict_tid = np.array([lookup.get(t, -1) for t in names], dtype=np.int64)
    row_tid = dict_tid[np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)] if n else \
        np.empty(0, np.int64)
    qk = u.qk[a:b]
    from_unit = (row_tid == queue_topic_idx[qk, 0]) & (h.queue_id.astype(np.int64) == queue_topic_idx[qk, 1]) \
        & (h.queue_offset == u.qoff[a:b])
    valid = from_unit & eligible
    slow = np.flatnonzero(eligible & (~from_unit | u.multi[a:b]))
    if len(slow):
        c, v = cq_tags_codes(reader, buf, h, slow, topics.take(pa.array(slow)))
        codes[slow] = c
        valid[slow] = v
    codes[~valid] = 0
    return codes, valid


def read_commitlog_range(spec: ReadSpec, reader: MessageStoreReader, part: CommitLogRange):
    import os
    cl = reader.commitlog
    seg = cl.reader.find(part.start)
    if seg is None:
        raise DataLossError(f"CommitLog segment for offset {part.start} of {part.store.root} is gone "
                            f"(deleted while the query ran?)")
    try:
        fd = os.open(seg.path, os.O_RDONLY)
    except FileNotFoundError:
        raise DataLossError(f"CommitLog segment {seg.path} of {part.store.root} is gone "
                            f"(deleted while the query ran?)") from None
    try:
        yield from _scan_segment(spec, reader, part, seg, fd)
    finally:
        os.close(fd)


def _scan_segment(spec: ReadSpec, reader: MessageStoreReader, part: CommitLogRange, seg, fd: int):
    seg_len = part.segment_end - part.segment_start
    base = seg.start_offset
    batch = spec.options.batch_size
    tag_codes = spec.tag_codes
    cq_needed = "tagsCode" in spec.columns or tag_codes is not None
    keys = reader.queue_keys() if part.store.cq_on_disk else []
    use_cq = 0 < len(keys) <= MAX_CQ_QUEUES
    queues, topic_names, qti = [], [], None
    if use_cq:
        topic_names = sorted({t for t, _ in keys})
        tindex = {t: i for i, t in enumerate(topic_names)}
        qti = np.array([(tindex[t], q) for t, q in keys], dtype=np.int64).reshape(-1, 2)
        for k in keys:
            q = reader.consume_queue(*k)
            queues.append((q, q.first_file_start_offset, q.max_offset) if q is not None else (None, 0, 0))
    state = {"first": not seg.dledger}     # a DLedger range may start at its file start, an entry header

    def emit(pb: hdr.PaddedBuffer, rel_pos: np.ndarray, h: hdr.Headers, file_pos: int, units=None, ua=0, ub=0):
        """Filters, tagsCode and the output batch for records ``h`` read at ``file_pos``."""
        buf = RecordBuffer(pb.view, [0], [seg.path], [file_pos])
        if state["first"]:
            if int(h.phy_offset[0]) != part.start:
                raise CorruptRecordError(f"no record starts at CommitLog offset {part.start} (the record "
                                         f"here says PHYSICALOFFSET {int(h.phy_offset[0])})",
                                         file=seg.path, offset=file_pos)
            state["first"] = False
        mask = row_mask(spec, h, whole_store=True)
        rows = None if mask.all() else np.flatnonzero(mask)
        topics = codes = valid = None
        nsel = len(h) if rows is None else len(rows)
        if nsel and cq_needed:
            topics = topics_of(pb.view, h)
            if units is not None:
                codes, valid = _unit_tags_codes(reader, pb.view, h, topics, units, ua, ub, qti, topic_names)
                if rows is not None:
                    codes = np.where(mask, codes, 0)
                    valid = valid & mask
            else:
                r = np.arange(len(h)) if rows is None else rows
                codes_r, valid_r = cq_tags_codes(reader, pb.view, h, r, topics.take(pa.array(r)))
                codes = np.zeros(len(h), dtype=np.int64)
                valid = np.zeros(len(h), dtype=bool)
                codes[r], valid[r] = codes_r, valid_r
            if tag_codes is not None:
                # Records with a unit are skipped unless the unit's tagsCode can match; records
                # without one (or in SCHEDULE_TOPIC_XXXX, whose tagsCode is a time) get the exact check.
                sched = np.asarray(pc.equal(topics, SCHEDULE_TOPIC).to_numpy(zero_copy_only=False), dtype=bool)
                keep = ~valid | sched | tag_code_mask(codes, tag_codes)
                keep &= mask
                rows = None if keep.all() else np.flatnonzero(keep)
        if rows is not None and len(rows) == 0:
            return ()
        return finish_rows(spec, part.store, buf, h, rows, codes, valid, topics, words=pb.words, whole_store=True)

    if seg.dledger:
        yield from _scan_dledger_segment(spec, part, seg, fd, emit)
        return
    pos = part.start - base          # position inside the segment file
    end = part.end - base
    while pos < end:
        units = None
        if use_cq:
            wend = min(end, pos + CQ_WINDOW_BYTES)
            units = _window_units(queues, base + pos, base + wend)
            if len(units.phy):
                tiles = units.end[:-1] == units.phy[1:]
                brk = np.append(np.flatnonzero(~tiles), len(units.phy) - 1)   # last index of each tiled run
            else:
                brk = np.empty(0, dtype=np.int64)
        else:
            wend = end
        while pos < wend:
            ui = int(np.searchsorted(units.phy, base + pos)) if units is not None else 0
            if units is not None and ui < len(units.phy) and int(units.phy[ui]) == base + pos:
                run_last = int(brk[np.searchsorted(brk, ui)])
                j = min(run_last + 1, ui + batch)
                # at most CHUNK_BYTES per read (at least one record)
                lim = int(np.searchsorted(units.end[ui:j], base + pos + CHUNK_BYTES, side="right")) + ui
                j = max(ui + 1, min(j, lim))
                stop_at = int(units.end[j - 1]) - base
                if stop_at <= end and stop_at - pos <= limits.MAX_RECORD_BYTES_READ:
                    pb = hdr.read_padded(fd, stop_at - pos, pos)
                    rel = units.phy[ui:j] - (base + pos)
                    ok, win = hdr.cq_positions_match(pb.view, rel, units.phy[ui:j], units.size[ui:j],
                                                     words=pb.words) if pb.n == stop_at - pos else (None, None)
                    if ok is not None and ok.all():
                        buf = RecordBuffer(pb.view, [0], [seg.path], [pos])
                        h = hdr.decode_headers(pb.view, rel, locate=buf.locate, words=pb.words, windows=win)
                        yield from emit(pb, rel, h, pos, units, ui, j)
                        pos = stop_at
                        continue
                    limit = stop_at        # a unit does not check out: walk this stretch
                else:
                    limit = min(end, stop_at)
            else:
                limit = int(units.phy[ui]) - base if units is not None and ui < len(units.phy) else wend
                limit = min(limit, end)
            # ---- walk the header chain from pos up to ``limit`` (one read of up to CHUNK_BYTES)
            # At most two reads: a chunk, then (a record longer than the chunk) exactly that record.
            # A read that comes back short means the file ends inside the record: corruption.
            read_size = CHUNK_BYTES
            for _ in range(2):
                want = min(max(read_size, 8), end - pos)
                pb = hdr.read_padded(fd, want, pos)
                data = pb.view
                if len(data) < min(8, end - pos):
                    raise CorruptRecordError(f"file ends at position {pos + len(data)} before the valid CommitLog "
                                             f"end {part.end}", file=seg.path, offset=pos + len(data))
                positions, stop = hdr.walk_chain(data, 0, min(len(data), max(limit - pos, 1)),
                                                 segment_remaining=seg_len - pos, max_records=batch)
                if stop.reason != hdr.STOP_SHORT or len(positions):
                    break
                if stop.total_size and pos + stop.total_size > end:
                    raise CorruptRecordError(f"record of {stop.total_size} bytes runs past the range end "
                                             f"{part.end} (the valid CommitLog end or a split point)",
                                             file=seg.path, offset=pos)
                if stop.total_size == 0 and pos + 8 > end:
                    raise CorruptRecordError(f"a record header runs past the range end {part.end} (the valid "
                                             f"CommitLog end or a split point)", file=seg.path, offset=pos)
                if len(data) < want or stop.total_size <= len(data):
                    raise CorruptRecordError(f"the file ends at position {pos + len(data)}, inside the record of "
                                             f"{stop.total_size or 'unknown'} bytes that starts here (a truncated "
                                             f"segment)", file=seg.path, offset=pos)
                read_size = stop.total_size
            else:
                raise CorruptRecordError(f"the record here ({stop.total_size} bytes) could not be read whole",
                                         file=seg.path, offset=pos)
            if len(positions):
                buf = RecordBuffer(data, [0], [seg.path], [pos])
                h = hdr.decode_headers(data, positions, locate=buf.locate, words=pb.words)
                yield from emit(pb, positions, h, pos)
            pos += stop.position
            if stop.reason in (hdr.STOP_LIMIT, hdr.STOP_SHORT):
                continue
            if stop.reason == hdr.STOP_BLANK:
                return
            if pos >= end:
                return
            raise CorruptRecordError(f"no valid record at CommitLog offset {seg.start_offset + pos}, below the "
                                     f"valid end {part.end}: {stop.detail}", file=seg.path, offset=pos)
    if pos != end:
        raise CorruptRecordError(f"records run past the split point {part.end}: the last record ends at "
                                 f"{seg.start_offset + pos}", file=seg.path, offset=pos)


def _scan_dledger_segment(spec: ReadSpec, part: CommitLogRange, seg, fd: int, emit):
    """The records of a DLedger data file in ``part`` (record offsets in [start, end)): walk the entry
    headers as DLedger recovery does, decode the records behind them as a normal scan does.

    ``part.start`` is the file start or a record offset (its entry 48 bytes before); a header failing a
    check or the data ending below ``part.end`` (at most the valid end) means the file changed since
    planning; a record that does not fill its entry exactly or does not carry its own offset is corrupt.
    """
    base, batch = seg.start_offset, spec.options.batch_size
    seg_len = part.segment_end - part.segment_start
    pos = part.start - base - ENTRY_HEADER_BYTES if part.start > base else 0
    end = part.end - base                # record positions below this are in the range
    prev_index = prev_term = None
    while pos + ENTRY_HEADER_BYTES < end:
        pb = hdr.read_padded(fd, min(max(CHUNK_BYTES, ENTRY_HEADER_BYTES), seg_len - pos), pos)
        data, rel, positions, sizes, done = pb.view, 0, [], [], False
        while len(positions) < batch and pos + rel + ENTRY_HEADER_BYTES < end:
            entry = decode_entry(data, rel, pb.n)
            at = pos + rel
            if entry.kind is EntryKind.BLANK:
                done = True
                break
            if entry.kind is EntryKind.END:
                raise CorruptRecordError(f"the DLedger data ends at CommitLog offset {base + at}, below the end "
                                         f"{part.end} this read was planned with", file=seg.path, offset=at)
            h = entry.header
            problem = header_problem(h, base + at, prev_index, prev_term)
            if problem is None and at + h.size > seg_len:
                problem = ("size", f"entry size {h.size} runs past the end of the file")
            if problem is not None:
                raise CorruptRecordError(f"DLedger entry header below the end {part.end} this read was planned "
                                         f"with: {problem[1]}", file=seg.path, offset=at)
            if rel + h.size > pb.n:
                if rel == 0:             # one entry longer than a chunk: read exactly that entry
                    pb = hdr.read_padded(fd, h.size, pos)
                    data = pb.view
                    if pb.n < h.size:
                        raise CorruptRecordError(f"the file ends inside the DLedger entry of {h.size} bytes that "
                                                 f"starts here", file=seg.path, offset=pos)
                else:
                    break
            positions.append(rel + ENTRY_HEADER_BYTES)
            sizes.append(h.body_len)
            prev_index, prev_term = h.index, h.term
            rel += h.size
        if positions:
            rel_pos = np.array(positions, dtype=np.int64)
            buf = RecordBuffer(data, [0], [seg.path], [pos])
            h = hdr.decode_headers(data, rel_pos, locate=buf.locate, words=pb.words,
                                   expected_sizes=np.array(sizes, dtype=np.int64))
            wrong = np.flatnonzero(h.phy_offset != rel_pos + (base + pos))
            if len(wrong):
                i = int(wrong[0])
                raise CorruptRecordError(f"record PHYSICALOFFSET {int(h.phy_offset[i])} is not its offset "
                                         f"{base + pos + int(rel_pos[i])}", file=seg.path, offset=pos + int(rel_pos[i]))
            yield from emit(pb, rel_pos, h, pos)
        pos += rel
        if done:
            return
