"""Reads by offset: a ConsumeQueue range of one queue, and the records of a key / msgId lookup, fetched at
their CommitLog offsets (the JVM twins: ConsumeQueueRangeReader.java, LookupReader.java)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import limits
from ..errors import CorruptRecordError, DataLossError
from ..format import columnar_headers as hdr
from ..format.consumequeue import PRE_BLANK_SIZE
from ..format.tagscode import SCHEDULE_TOPIC
from ..store.reader import MessageStoreReader
from .planning import Lookup, QueueRange
from .read_spec import ReadSpec
from .record_batches import (I64_MAX, I64_MIN, RecordBuffer, cq_tags_codes, finish_rows, row_mask, tag_code_mask,
                             topics_of)

COALESCE_GAP = 8 * 1024              # records closer than this share one read (a pread costs ~ 8 KiB of copying)
MAX_RUN_BYTES = 16 * 1024 * 1024


def fetch_records(reader: MessageStoreReader, phys: np.ndarray, sizes: np.ndarray) -> tuple[RecordBuffer, np.ndarray]:
    """Read the records at ascending CommitLog offsets into one padded buffer; nearby records share one read."""
    import os
    cl = reader.commitlog
    n = len(phys)
    if n == 0:
        return RecordBuffer(b"", [0], [""], [0]), np.empty(0, dtype=np.int64)
    z = cl.segment_size or 1
    ends = phys + sizes
    seg_no = phys // z
    block = phys // MAX_RUN_BYTES
    brk = np.ones(n, dtype=bool)
    brk[1:] = (phys[1:] - ends[:-1] > COALESCE_GAP) | (seg_no[1:] != seg_no[:-1]) | (block[1:] != block[:-1]) \
        | (phys[1:] < ends[:-1])
    run_starts = np.flatnonzero(brk)
    run_ends = np.append(run_starts[1:], n)
    run_first = phys[run_starts]
    run_last_end = np.maximum.reduceat(ends, run_starts)
    run_len = run_last_end - run_first
    run_buf = np.zeros(len(run_starts) + 1, dtype=np.int64)
    np.cumsum(run_len, out=run_buf[1:])
    positions = np.repeat(run_buf[:-1] - run_first, run_ends - run_starts) + phys
    pb = hdr.PaddedBuffer(int(run_buf[-1]))
    mv = memoryview(pb.array)
    paths, seg_pos = [], []
    fds: dict = {}
    preadv = os.preadv
    try:
        cur_seg_no, seg, fd = None, None, None
        for first, length, at, sn in zip(run_first.tolist(), run_len.tolist(), run_buf[:-1].tolist(),
                                         (run_first // z).tolist()):
            if sn != cur_seg_no or seg is None or not (seg.start_offset <= first < seg.start_offset + z):
                seg = cl.reader.find(first)
                if seg is None:
                    raise DataLossError(f"CommitLog offset {first} of {reader.layout.root} is in no segment "
                                        f"(deleted?)")
                fd = fds.get(seg.path)
                if fd is None:
                    try:
                        fd = fds[seg.path] = os.open(seg.path, os.O_RDONLY)
                    except FileNotFoundError:
                        raise DataLossError(f"CommitLog segment {seg.path} of {reader.layout.root} is gone "
                                            f"(deleted while the query ran?)") from None
                cur_seg_no = sn
            p = first - seg.start_offset
            got = preadv(fd, [mv[at:at + length]], p)
            if got < length:
                got += max(0, preadv(fd, [mv[at + got:at + length]], p + got)) if got > 0 else 0
                if got < length:
                    raise CorruptRecordError(f"file ends before the record at CommitLog offset {first + got}",
                                             file=seg.path, offset=p + got)
            paths.append(seg.path)
            seg_pos.append(p)
    finally:
        for fd in fds.values():
            os.close(fd)
    pb.set_length(int(run_buf[-1]))
    buf = RecordBuffer(pb.view, run_buf[:-1], paths, seg_pos)
    buf.words = pb.words
    return buf, positions


def read_queue_range(spec: ReadSpec, reader: MessageStoreReader, part: QueueRange):
    q = reader.consume_queue(part.topic, part.queue_id)
    if q is None:
        raise DataLossError(f"queue {part.topic}:{part.queue_id} of {part.store.root} disappeared")
    cl_min, cl_max = part.store.commit_log_min, part.store.commit_log_max
    first_seg = cl_min
    last_seg_end = (reader.commitlog.segments[-1].start_offset + max(reader.commitlog.segments[-1].size_bytes,
                                                                      reader.commitlog.segment_size)
                    if reader.commitlog.segments else 0)
    tag_codes = spec.tag_codes
    if tag_codes is not None and (part.topic == SCHEDULE_TOPIC or part.store.config.enable_consume_queue_ext):
        tag_codes = None          # tagsCode is a deliver time / ext address here: exact check only
    plo, phi = spec.pushed.phy_offset
    step = spec.options.batch_size
    off = part.start
    while off < part.end:
        count = min(step, part.end - off)
        units = q.read_units(off, count)
        if len(units) < count:
            file, at = q.locate(off + len(units))
            raise CorruptRecordError(f"ConsumeQueue {part.topic}:{part.queue_id} ends at unit {off + len(units)}, "
                                     f"the plan expected {part.end}", file=file, offset=at)
        phy = units["phy_offset"].astype(np.int64)
        size = units["size"].astype(np.int64)
        code = units["tags_code"].astype(np.int64)
        live = size != PRE_BLANK_SIZE
        lost = live & ((phy < first_seg) | (phy + size > last_seg_end))
        if lost.any():
            if spec.options.fail_on_data_loss:
                i = np.flatnonzero(lost)
                raise DataLossError(
                    f"{part.topic}:{part.queue_id} in {part.store.root}: queue offsets {off + int(i[0])}.."
                    f"{off + int(i[-1])} point at CommitLog offsets {int(phy[i[0]])}..{int(phy[i[-1]])}, which were "
                    f"deleted (the CommitLog now starts at {cl_min}); set failOnDataLoss=false to skip them")
            live &= ~lost
        beyond = live & (phy + size > cl_max)
        if beyond.any():
            i = int(np.flatnonzero(beyond)[0])
            file, at = q.locate(off + i)
            raise CorruptRecordError(f"ConsumeQueue unit {off + i} of {part.topic}:{part.queue_id} points past the "
                                     f"valid CommitLog end {cl_max}", file=file, offset=at)
        keep = live & (size > 0)
        if tag_codes is not None:
            keep &= tag_code_mask(code, tag_codes)
        if plo > I64_MIN:
            keep &= phy >= plo
        if phi < I64_MAX:
            keep &= phy < phi
        idx = np.flatnonzero(keep)
        off += count
        if len(idx) == 0:
            continue
        order = np.argsort(phy[idx], kind="stable")
        idx = idx[order]
        buf, positions = fetch_records(reader, phy[idx], size[idx])
        h = hdr.decode_headers(buf.data, positions, locate=buf.locate, expected_sizes=size[idx], words=buf.words)
        bad = h.phy_offset != phy[idx]
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            f, o = buf.locate(int(positions[i]))
            raise CorruptRecordError(f"ConsumeQueue {part.topic}:{part.queue_id} unit points at CommitLog offset "
                                     f"{int(phy[idx][i])} but the record there says {int(h.phy_offset[i])}",
                                     file=f, offset=o)
        rows = np.flatnonzero(row_mask(spec, h, whole_store=False))
        valid = np.ones(len(idx), dtype=bool)
        # Output in queue order.  Rows of h are in CommitLog order; when the queue order differs (rare),
        # each stretch of queue order that ascends in the CommitLog is decoded as it is.
        runs = [rows]
        if len(rows) > 1 and not np.all(np.diff(idx[rows]) > 0):
            rows = rows[np.argsort(idx[rows], kind="stable")]
            runs = np.split(rows, np.flatnonzero(np.diff(rows) < 0) + 1)
        for run in runs:
            yield from finish_rows(spec, part.store, buf, h, run, code[idx], valid, words=buf.words)


def read_lookup(spec: ReadSpec, reader: MessageStoreReader, part: Lookup):
    cl = reader.commitlog
    phys, sizes = [], []
    for phy in part.offsets:
        seg = cl.reader.find(phy)
        if seg is None or phy - seg.start_offset + 8 > seg.size_bytes:
            continue
        head = cl.reader.pread(seg, phy - seg.start_offset, 8)
        if len(head) < 8:
            continue
        total = int.from_bytes(head[:4], "big", signed=True)
        magic = int.from_bytes(head[4:8], "big", signed=True)
        if magic not in (-626843481, -626843477) or total < limits.MIN_RECORD_BYTES:
            continue      # not a record start (a msgId can name any offset)
        if phy + total > part.store.commit_log_max:
            continue
        phys.append(phy)
        sizes.append(total)
    if not phys:
        return
    phys = np.array(phys, dtype=np.int64)
    sizes = np.array(sizes, dtype=np.int64)
    buf, positions = fetch_records(reader, phys, sizes)
    h = hdr.decode_headers(buf.data, positions, locate=buf.locate, words=buf.words)
    ok = h.phy_offset == phys
    rows = np.flatnonzero(ok & row_mask(spec, h, whole_store=True))
    topics = topics_of(buf.data, h)
    codes = np.zeros(len(h), dtype=np.int64)
    valid = np.zeros(len(h), dtype=bool)
    if len(rows):
        c, v = cq_tags_codes(reader, buf.data, h, rows, topics.take(pa.array(rows)))
        codes[rows], valid[rows] = c, v
    if part.queues is not None:
        tl = topics.to_pylist()
        keep = []
        for r in rows.tolist():
            rng = part.queues.get((tl[r], int(h.queue_id[r])))
            if rng and rng[0] <= int(h.queue_offset[r]) < rng[1] and valid[r]:
                keep.append(r)
        rows = np.array(keep, dtype=np.int64)
    yield from finish_rows(spec, part.store, buf, h, rows, codes, valid, topics, words=buf.words,
                           whole_store=part.queues is None)
