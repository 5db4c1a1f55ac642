"""Task side: read one partition into ``pyarrow.RecordBatch``es (no Spark import needed).

Memory is bounded by ``batchSize`` rows and the CommitLog read chunk
(CHUNK_BYTES, or one record when a single record is larger), whatever the
segment size.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import limits
from ..errors import CorruptRecordError, DataLossError, DecompressionError
from ..format import columnar as col
from ..format.compression import inflate_body
from ..format.consumequeue import PRE_BLANK_SIZE
from ..format.dledger import ENTRY_HEADER_BYTES, EntryKind, decode_entry, header_problem
from ..format.javahash import java_string_hash
from ..format.record import COMPRESSED_FLAG, TRANSACTION_MASK, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from ..format.tagscode import SCHEDULE_TOPIC
from ..store.reader import MessageStoreReader
from .options import ReadOptions
from .planning import CommitLogRange, Lookup, QueueRange, QueueRanges, RmqPartition, StoreRef
from .pushdown import Pushed
from .schema import MAP_TYPE, output_schema

CHUNK_BYTES = 8 * 1024 * 1024        # CommitLog bytes read at a time by whole-store tasks
COALESCE_GAP = 8 * 1024              # records closer than this share one read (a pread costs ~ 8 KiB of copying)
MAX_RUN_BYTES = 16 * 1024 * 1024
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


class InflateBudget:
    """Bytes one task has inflated (``decompress=true``), against ``maxInflatedTaskBytes``."""

    def __init__(self, cap: int):
        self.cap = cap
        self.used = 0

    def spend(self, n: int, file: str, offset: int) -> None:
        self.used += n
        if self.used > self.cap:
            raise DecompressionError(f"this task has inflated {self.used} bytes of bodies, more than "
                                     f"maxInflatedTaskBytes={self.cap} (raise the option, or read without "
                                     f"decompress)", file=file, offset=offset)


@dataclass(frozen=True)
class ReadSpec:
    options: ReadOptions
    pushed: Pushed
    columns: tuple
    inflated: Optional[InflateBudget] = field(default=None, compare=False)     # set per task by read_partition

    @property
    def tag_codes(self) -> Optional[np.ndarray]:
        if self.pushed.tags is None:
            return None
        return np.array(sorted({java_string_hash(t) for t in self.pushed.tags}), dtype=np.int32)


def read_partition(spec: ReadSpec, part: RmqPartition) -> Iterator[pa.RecordBatch]:
    # The planned valid end: every task sees the store as it was at planning.
    reader = MessageStoreReader(part.store.root, part.store.config, commit_log_end=part.store.commit_log_max)
    if spec.options.decompress:
        spec = replace(spec, inflated=InflateBudget(spec.options.max_inflated_task_bytes))
    try:
        if isinstance(part, CommitLogRange):
            yield from _read_commitlog_range(spec, reader, part)
        elif isinstance(part, QueueRange):
            yield from _read_queue_range(spec, reader, part)
        elif isinstance(part, QueueRanges):
            for piece in part.pieces():
                yield from _read_queue_range(spec, reader, piece)
        elif isinstance(part, Lookup):
            yield from _read_lookup(spec, reader, part)
        else:
            raise TypeError(f"unknown partition {part!r}")
    finally:
        reader.close()


# --------------------------------------------------------------------------- shared row logic

class _Buffer:
    """Bytes read from CommitLog segments, with a map back to (file, position) for errors."""

    def __init__(self, data, buf_starts, seg_paths: list, seg_positions: list, words: Optional[np.ndarray] = None):
        self.data = data
        self.words = words
        self._starts = np.asarray(buf_starts, dtype=np.int64)
        self._paths = seg_paths
        self._positions = seg_positions

    def locate(self, pos: int) -> tuple[str, int]:
        i = int(np.searchsorted(self._starts, pos, side="right") - 1)
        i = max(i, 0)
        return self._paths[i], self._positions[i] + (pos - int(self._starts[i]))


def _row_mask(spec: ReadSpec, h: col.Headers, *, whole_store: bool) -> np.ndarray:
    p = spec.pushed
    m = np.ones(len(h), dtype=bool)
    if whole_store and not spec.options.include_transactional:
        tx = h.sys_flag & TRANSACTION_MASK
        m &= (tx != TRANSACTION_PREPARED_TYPE) & (tx != TRANSACTION_ROLLBACK_TYPE)
    if p.queue_ids is not None:
        m &= np.isin(h.queue_id, np.fromiter(p.queue_ids, dtype=np.int64))
    for arr, (lo, hi) in ((h.queue_offset, p.queue_offset), (h.phy_offset, p.phy_offset), (h.store_ts, p.store_ts)):
        if lo > _I64_MIN:
            m &= arr >= lo
        if hi < _I64_MAX:
            m &= arr < hi
    return m


def _topics(buf, h: col.Headers) -> pa.Array:
    return col.binary_to_string(col.spans_binary(buf, h.topic_pos, h.topic_len))


def _finish(spec: ReadSpec, store: StoreRef, buf: _Buffer, h: col.Headers, rows: Optional[np.ndarray],
            tags_code: Optional[np.ndarray], tags_valid: Optional[np.ndarray],
            topics: Optional[pa.Array] = None, *, words: Optional[np.ndarray] = None) -> Iterator[pa.RecordBatch]:
    """Exact string filters, then the output batch for ``rows`` of ``h`` (None: all rows).

    Usually one batch; with ``decompress`` a batch is cut early once its bodies reach
    ``maxInflatedBatchBytes`` (rows keep their order).
    """
    p = spec.pushed
    if rows is not None:
        if len(rows) == 0:
            return
        if len(rows) == len(h) and (len(rows) == 0 or (rows[0] == 0 and rows[-1] == len(h) - 1)):
            rows = None
    if rows is not None:
        h = h.take(rows)
        if tags_code is not None:
            tags_code = tags_code[rows]
            tags_valid = tags_valid[rows] if tags_valid is not None else None
        if topics is not None:
            topics = topics.take(pa.array(rows))
    if len(h) == 0:
        return
    if words is None:
        words = col.padded_words(buf.data)
    props = None
    keep = None
    if p.topics is not None:
        if topics is None:
            topics = _topics(buf.data, h)
        keep = np.asarray(pc.is_in(topics, value_set=pa.array(sorted(p.topics), type=pa.string()))
                          .to_numpy(zero_copy_only=False), dtype=bool)
    if p.tags is not None or p.uniq_keys is not None or p.msg_ids is not None:
        keep = np.ones(len(h), dtype=bool) if keep is None else keep
        if p.tags is not None or p.uniq_keys is not None:
            props = col.parse_properties_columns(buf.data, h, words=words)
        if p.tags is not None:
            keep &= col.exact_tag_mask(props, p.tags)
        if p.uniq_keys is not None:
            u = props.entry_values(props.value_index("UNIQ_KEY"))
            keep &= np.asarray(pc.fill_null(pc.is_in(u, value_set=pa.array(sorted(p.uniq_keys), type=pa.string())),
                                            False).to_numpy(zero_copy_only=False), dtype=bool)
        if p.msg_ids is not None:
            b = np.frombuffer(buf.data, dtype=np.uint8)
            ids = col.msg_id_strings(b, h, (h.sys_flag & 0x20) != 0)
            keep &= np.asarray(pc.is_in(ids, value_set=pa.array(sorted(p.msg_ids), type=pa.string()))
                               .to_numpy(zero_copy_only=False), dtype=bool)
    if keep is not None and not keep.all():
        sel = np.flatnonzero(keep)
        if len(sel) == 0:
            return
        h = h.take(sel)
        if tags_code is not None:
            tags_code = tags_code[sel]
            tags_valid = tags_valid[sel] if tags_valid is not None else None
        if topics is not None:
            topics = topics.take(pa.array(sel))
        props = None   # re-parse for the kept rows only
    if spec.options.decompress and "body" in spec.columns and (h.sys_flag & COMPRESSED_FLAG).any():
        yield from _inflated_batches(spec, store, buf, h, tags_code, tags_valid, topics, words)
        return
    yield _batch(spec, store, buf, h, tags_code, tags_valid, topics, words, props=props)


def _batch(spec: ReadSpec, store: StoreRef, buf: _Buffer, h: col.Headers, tags_code, tags_valid, topics, words,
           *, props=None, body: Optional[pa.Array] = None) -> pa.RecordBatch:
    arrays = col.build_columns(buf.data, h, spec.columns, tags_code=tags_code, tags_code_valid=tags_valid,
                               broker=store.broker, store_path=store.root, locate=buf.locate,
                               map_type=MAP_TYPE, props=props, words=words, topics=topics, body=body)
    return pa.RecordBatch.from_arrays([arrays[c] for c in spec.columns], schema=output_schema(spec.columns))


def _inflated_batches(spec: ReadSpec, store: StoreRef, buf: _Buffer, h: col.Headers, tags_code, tags_valid,
                      topics, words) -> Iterator[pa.RecordBatch]:
    """Batches of ``h`` with inflated bodies, each holding at most maxInflatedBatchBytes of bodies (or one row).

    Bodies are inflated one at a time (each capped by maxInflatedBodyBytes) and every inflated byte is
    charged to the task's budget, so neither a batch nor a task can grow without bound.
    """
    opts = spec.options
    budget = spec.inflated if spec.inflated is not None else InflateBudget(opts.max_inflated_task_bytes)
    compressed = ((h.sys_flag & COMPRESSED_FLAG) != 0).tolist()
    data = memoryview(buf.data).cast("B") if not isinstance(buf.data, (bytes, bytearray)) else memoryview(buf.data)
    n = len(h)

    def cut(a: int, b: int, bodies: list) -> pa.RecordBatch:
        sel = None if (a, b) == (0, n) else np.arange(a, b)
        return _batch(spec, store, buf, h if sel is None else h.take(sel),
                      tags_code if sel is None or tags_code is None else tags_code[sel],
                      tags_valid if sel is None or tags_valid is None else tags_valid[sel],
                      topics if sel is None or topics is None else topics.take(pa.array(sel)), words,
                      body=pa.array(bodies, type=pa.binary()))

    a, bodies, total = 0, [], 0
    for i, (p, ln) in enumerate(zip(h.body_pos.tolist(), h.body_len.tolist())):
        body = bytes(data[p:p + ln])
        if compressed[i]:
            file, offset = buf.locate(int(h.pos[i]))
            body = inflate_body(body, int(h.sys_flag[i]), max_bytes=opts.max_inflated_body_bytes,
                                file=file, offset=offset)
            budget.spend(len(body), file, offset)
        if i > a and total + len(body) > opts.max_inflated_batch_bytes:
            yield cut(a, i, bodies)
            a, bodies, total = i, [], 0
        bodies.append(body)
        total += len(body)
    if bodies:
        yield cut(a, n, bodies)




def _cq_tags_codes(reader: MessageStoreReader, buf, h: col.Headers, rows: np.ndarray,
                   topics: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """tagsCode of the ConsumeQueue unit at each record's (topic, queueId, queueOffset).

    Valid only when that unit points back at the record (same phyOffset and size).
    """
    n = len(rows)
    codes = np.zeros(n, dtype=np.int64)
    valid = np.zeros(n, dtype=bool)
    if n == 0:
        return codes, valid
    tx = h.sys_flag[rows] & TRANSACTION_MASK
    eligible = (tx != TRANSACTION_PREPARED_TYPE) & (tx != TRANSACTION_ROLLBACK_TYPE)
    enc = topics.dictionary_encode()
    tidx = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    names = enc.dictionary.to_pylist()
    qids = h.queue_id[rows].astype(np.int64)
    qoff = h.queue_offset[rows]
    phys = h.phy_offset[rows]
    sizes = h.total_size[rows]
    key = (tidx << 32) | (qids & 0xFFFFFFFF)
    for k in np.unique(key[eligible]).tolist():
        g = np.flatnonzero(eligible & (key == k))
        topic = names[k >> 32]
        q = reader.consume_queue(topic, int(qids[g[0]]))
        if q is None:
            continue
        offs = qoff[g]
        g, offs = g[offs >= 0], offs[offs >= 0]        # a negative queueOffset has no unit
        if len(g) == 0:
            continue
        lo, hi = int(offs.min()), int(offs.max()) + 1
        gis, us = [], []
        if hi - lo <= 4 * len(g) + 4096:
            units = q.read_units(lo, hi - lo)
            rel = offs - lo
            ok = rel < len(units)
            gis.append(g[ok])
            us.append(units[rel[ok]])
            # The read stops at a hole (a short or missing file): units past it are read one by one.
            g, offs = g[~ok], offs[~ok]
        for i, o in zip(g.tolist(), offs.tolist()):      # scattered offsets: one unit at a time
            u = q.read_units(int(o), 1)
            if len(u):
                gis.append(np.array([i], dtype=np.int64))
                us.append(u)
        if not gis:
            continue
        gi = np.concatenate(gis)
        u = np.concatenate(us)
        match = (u["phy_offset"].astype(np.int64) == phys[gi]) & (u["size"].astype(np.int64) == sizes[gi])
        codes[gi[match]] = u["tags_code"][match].astype(np.int64)
        valid[gi[match]] = True
    return codes, valid


def _tag_code_mask(codes: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """RocketMQ's store-level check: tagsCode.intValue() among the tag hashes."""
    return np.isin(codes.astype(np.int64).astype(np.int32), wanted)


# --------------------------------------------------------------------------- whole store
#
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


def _unit_tags_codes(reader, buf, h: col.Headers, topics: pa.Array, u: _WindowUnits, a: int, b: int,
                     queue_topic_idx: np.ndarray, topic_names: list) -> tuple[np.ndarray, np.ndarray]:
    """tagsCode of the records decoded from units [a, b) (same rows), as :func:`_cq_tags_codes` defines it."""
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
        c, v = _cq_tags_codes(reader, buf, h, slow, topics.take(pa.array(slow)))
        codes[slow] = c
        valid[slow] = v
    codes[~valid] = 0
    return codes, valid


def _read_commitlog_range(spec: ReadSpec, reader: MessageStoreReader, part: CommitLogRange):
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

    def emit(pb: col.PaddedBuffer, rel_pos: np.ndarray, h: col.Headers, file_pos: int, units=None, ua=0, ub=0):
        """Filters, tagsCode and the output batch for records ``h`` read at ``file_pos``."""
        buf = _Buffer(pb.view, [0], [seg.path], [file_pos])
        if state["first"]:
            if int(h.phy_offset[0]) != part.start:
                raise CorruptRecordError(f"no record starts at CommitLog offset {part.start} (the record "
                                         f"here says PHYSICALOFFSET {int(h.phy_offset[0])})",
                                         file=seg.path, offset=file_pos)
            state["first"] = False
        mask = _row_mask(spec, h, whole_store=True)
        rows = None if mask.all() else np.flatnonzero(mask)
        topics = codes = valid = None
        nsel = len(h) if rows is None else len(rows)
        if nsel and cq_needed:
            topics = _topics(pb.view, h)
            if units is not None:
                codes, valid = _unit_tags_codes(reader, pb.view, h, topics, units, ua, ub, qti, topic_names)
                if rows is not None:
                    codes = np.where(mask, codes, 0)
                    valid = valid & mask
            else:
                r = np.arange(len(h)) if rows is None else rows
                codes_r, valid_r = _cq_tags_codes(reader, pb.view, h, r, topics.take(pa.array(r)))
                codes = np.zeros(len(h), dtype=np.int64)
                valid = np.zeros(len(h), dtype=bool)
                codes[r], valid[r] = codes_r, valid_r
            if tag_codes is not None:
                # Records with a unit are skipped unless the unit's tagsCode can match; records
                # without one (or in SCHEDULE_TOPIC_XXXX, whose tagsCode is a time) get the exact check.
                sched = np.asarray(pc.equal(topics, SCHEDULE_TOPIC).to_numpy(zero_copy_only=False), dtype=bool)
                keep = ~valid | sched | _tag_code_mask(codes, tag_codes)
                keep &= mask
                rows = None if keep.all() else np.flatnonzero(keep)
        if rows is not None and len(rows) == 0:
            return ()
        return _finish(spec, part.store, buf, h, rows, codes, valid, topics, words=pb.words)

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
                    pb = col.read_padded(fd, stop_at - pos, pos)
                    rel = units.phy[ui:j] - (base + pos)
                    ok, win = col.cq_positions_match(pb.view, rel, units.phy[ui:j], units.size[ui:j],
                                                     words=pb.words) if pb.n == stop_at - pos else (None, None)
                    if ok is not None and ok.all():
                        buf = _Buffer(pb.view, [0], [seg.path], [pos])
                        h = col.decode_headers(pb.view, rel, locate=buf.locate, words=pb.words, windows=win)
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
                pb = col.read_padded(fd, want, pos)
                data = pb.view
                if len(data) < min(8, end - pos):
                    raise CorruptRecordError(f"file ends at position {pos + len(data)} before the valid CommitLog "
                                             f"end {part.end}", file=seg.path, offset=pos + len(data))
                positions, stop = col.walk_chain(data, 0, min(len(data), max(limit - pos, 1)),
                                                 segment_remaining=seg_len - pos, max_records=batch)
                if stop.reason != col.STOP_SHORT or len(positions):
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
                buf = _Buffer(data, [0], [seg.path], [pos])
                h = col.decode_headers(data, positions, locate=buf.locate, words=pb.words)
                yield from emit(pb, positions, h, pos)
            pos += stop.position
            if stop.reason in (col.STOP_LIMIT, col.STOP_SHORT):
                continue
            if stop.reason == col.STOP_BLANK:
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
        pb = col.read_padded(fd, min(max(CHUNK_BYTES, ENTRY_HEADER_BYTES), seg_len - pos), pos)
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
                    pb = col.read_padded(fd, h.size, pos)
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
            buf = _Buffer(data, [0], [seg.path], [pos])
            h = col.decode_headers(data, rel_pos, locate=buf.locate, words=pb.words,
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


# --------------------------------------------------------------------------- reads by offset

def fetch_records(reader: MessageStoreReader, phys: np.ndarray, sizes: np.ndarray) -> tuple[_Buffer, np.ndarray]:
    """Read the records at ascending CommitLog offsets into one padded buffer; nearby records share one read."""
    import os
    cl = reader.commitlog
    n = len(phys)
    if n == 0:
        return _Buffer(b"", [0], [""], [0]), np.empty(0, dtype=np.int64)
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
    pb = col.PaddedBuffer(int(run_buf[-1]))
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
    buf = _Buffer(pb.view, run_buf[:-1], paths, seg_pos)
    buf.words = pb.words
    return buf, positions


def _read_queue_range(spec: ReadSpec, reader: MessageStoreReader, part: QueueRange):
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
            keep &= _tag_code_mask(code, tag_codes)
        if plo > _I64_MIN:
            keep &= phy >= plo
        if phi < _I64_MAX:
            keep &= phy < phi
        idx = np.flatnonzero(keep)
        off += count
        if len(idx) == 0:
            continue
        order = np.argsort(phy[idx], kind="stable")
        idx = idx[order]
        buf, positions = fetch_records(reader, phy[idx], size[idx])
        h = col.decode_headers(buf.data, positions, locate=buf.locate, expected_sizes=size[idx], words=buf.words)
        bad = h.phy_offset != phy[idx]
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            f, o = buf.locate(int(positions[i]))
            raise CorruptRecordError(f"ConsumeQueue {part.topic}:{part.queue_id} unit points at CommitLog offset "
                                     f"{int(phy[idx][i])} but the record there says {int(h.phy_offset[i])}",
                                     file=f, offset=o)
        rows = np.flatnonzero(_row_mask(spec, h, whole_store=False))
        valid = np.ones(len(idx), dtype=bool)
        # Output in queue order.  Rows of h are in CommitLog order; when the queue order differs (rare),
        # each stretch of queue order that ascends in the CommitLog is decoded as it is.
        runs = [rows]
        if len(rows) > 1 and not np.all(np.diff(idx[rows]) > 0):
            rows = rows[np.argsort(idx[rows], kind="stable")]
            runs = np.split(rows, np.flatnonzero(np.diff(rows) < 0) + 1)
        for run in runs:
            yield from _finish(spec, part.store, buf, h, run, code[idx], valid, words=buf.words)


def _read_lookup(spec: ReadSpec, reader: MessageStoreReader, part: Lookup):
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
    h = col.decode_headers(buf.data, positions, locate=buf.locate, words=buf.words)
    ok = h.phy_offset == phys
    rows = np.flatnonzero(ok & _row_mask(spec, h, whole_store=True))
    topics = _topics(buf.data, h)
    codes = np.zeros(len(h), dtype=np.int64)
    valid = np.zeros(len(h), dtype=bool)
    if len(rows):
        c, v = _cq_tags_codes(reader, buf.data, h, rows, topics.take(pa.array(rows)))
        codes[rows], valid[rows] = c, v
    if part.queues is not None:
        tl = topics.to_pylist()
        keep = []
        for r in rows.tolist():
            rng = part.queues.get((tl[r], int(h.queue_id[r])))
            if rng and rng[0] <= int(h.queue_offset[r]) < rng[1] and valid[r]:
                keep.append(r)
        rows = np.array(keep, dtype=np.int64)
    yield from _finish(spec, part.store, buf, h, rows, codes, valid, topics, words=buf.words)
