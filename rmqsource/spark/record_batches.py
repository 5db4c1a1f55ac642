"""Shared row logic of every read path: which decoded records become rows, their columns, and the Arrow
batches of one buffer of CommitLog bytes (the JVM twin: RecordBatchReader.java)."""

from __future__ import annotations

from typing import Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..format import columnar as col, columnar_headers as hdr, columnar_properties as colprops
from ..format.compression import inflate_body
from ..format.system_topics import internal_topic_mask
from ..format.record import COMPRESSED_FLAG, TRANSACTION_MASK, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from ..store.reader import MessageStoreReader
from .planning import StoreRef
from .read_spec import InflateBudget, ReadSpec
from .schema import MAP_TYPE, output_schema

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


class RecordBuffer:
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


def row_mask(spec: ReadSpec, h: hdr.Headers, *, whole_store: bool) -> np.ndarray:
    p = spec.pushed
    m = np.ones(len(h), dtype=bool)
    if whole_store and not spec.options.include_transactional:
        tx = h.sys_flag & TRANSACTION_MASK
        m &= (tx != TRANSACTION_PREPARED_TYPE) & (tx != TRANSACTION_ROLLBACK_TYPE)
    if p.queue_ids is not None:
        m &= np.isin(h.queue_id, np.fromiter(p.queue_ids, dtype=np.int64))
    for arr, (lo, hi) in ((h.queue_offset, p.queue_offset), (h.phy_offset, p.phy_offset), (h.store_ts, p.store_ts)):
        if lo > I64_MIN:
            m &= arr >= lo
        if hi < I64_MAX:
            m &= arr < hi
    return m


def keys_mask(props: colprops.PropertyColumns, keys: frozenset) -> np.ndarray:
    """Rows whose KEYS, split on spaces as the ``keys`` column is, hold one of ``keys`` (the exact check of a
    lookup by key: an IndexFile hit may be a hash collision or another key)."""
    n = props.n
    out = np.zeros(n, dtype=bool)
    if not keys or n == 0:
        return out
    lists = colprops.split_keys_column(props, props.value_index("KEYS"))
    items = lists.flatten()
    if len(items) == 0:
        return out
    hit = np.asarray(pc.is_in(items, value_set=_key_set(keys)).to_numpy(zero_copy_only=False), dtype=bool)
    if hit.any():
        parents = np.asarray(pc.list_parent_indices(lists).to_numpy(zero_copy_only=False), dtype=np.int64)
        out[parents[hit]] = True
    return out


_KEY_SETS: dict = {}


def _key_set(keys: frozenset) -> pa.Array:
    """The keys as an Arrow array, built once per set (a task checks every batch against the same keys)."""
    got = _KEY_SETS.get(id(keys))
    if got is None or got[0] is not keys:
        _KEY_SETS.clear()
        got = _KEY_SETS[id(keys)] = (keys, pa.array(sorted(keys), type=pa.string()))
    return got[1]


def topics_of(buf, h: hdr.Headers) -> pa.Array:
    return colprops.binary_to_string(hdr.spans_binary(buf, h.topic_pos, h.topic_len))


def finish_rows(spec: ReadSpec, store: StoreRef, buf: RecordBuffer, h: hdr.Headers, rows: Optional[np.ndarray],
                tags_code: Optional[np.ndarray], tags_valid: Optional[np.ndarray],
                topics: Optional[pa.Array] = None, *, words: Optional[np.ndarray] = None,
                whole_store: bool = False) -> Iterator[pa.RecordBatch]:
    """Exact string filters, then the output batch for ``rows`` of ``h`` (None: all rows).

    ``whole_store``: the rows come from a CommitLog walk or point reads, not from planned queues, so
    RocketMQ's own topics are dropped here when the read leaves them out (topic reads drop their
    queues at planning).

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
        words = hdr.padded_words(buf.data)
    props = None
    keep = None
    if p.topics is not None:
        if topics is None:
            topics = topics_of(buf.data, h)
        keep = np.asarray(pc.is_in(topics, value_set=pa.array(sorted(p.topics), type=pa.string()))
                          .to_numpy(zero_copy_only=False), dtype=bool)
    if whole_store and spec.options.internal_topics_excluded:
        if topics is None:
            topics = topics_of(buf.data, h)
        own = internal_topic_mask(topics)
        if own.any():
            keep = ~own if keep is None else keep & ~own
    lookup_keys = spec.options.keys
    if p.tags is not None or p.uniq_keys is not None or p.msg_ids is not None or lookup_keys is not None:
        keep = np.ones(len(h), dtype=bool) if keep is None else keep
        if p.tags is not None or p.uniq_keys is not None or lookup_keys is not None:
            props = colprops.parse_properties_columns(buf.data, h, words=words)
        if lookup_keys is not None:
            keep &= keys_mask(props, lookup_keys)
        if p.tags is not None:
            keep &= colprops.exact_tag_mask(props, p.tags)
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
        yield from inflated_batches(spec, store, buf, h, tags_code, tags_valid, topics, words)
        return
    yield record_batch(spec, store, buf, h, tags_code, tags_valid, topics, words, props=props)


def record_batch(spec: ReadSpec, store: StoreRef, buf: RecordBuffer, h: hdr.Headers, tags_code, tags_valid, topics,
                 words, *, props=None, body: Optional[pa.Array] = None) -> pa.RecordBatch:
    arrays = col.build_columns(buf.data, h, spec.columns, tags_code=tags_code, tags_code_valid=tags_valid,
                               broker=store.broker, store_path=store.root, locate=buf.locate,
                               map_type=MAP_TYPE, props=props, words=words, topics=topics, body=body)
    return pa.RecordBatch.from_arrays([arrays[c] for c in spec.columns], schema=output_schema(spec.columns))


def inflated_batches(spec: ReadSpec, store: StoreRef, buf: RecordBuffer, h: hdr.Headers, tags_code, tags_valid,
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
        return record_batch(spec, store, buf, h if sel is None else h.take(sel),
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




def cq_tags_codes(reader: MessageStoreReader, buf, h: hdr.Headers, rows: np.ndarray,
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


def tag_code_mask(codes: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """RocketMQ's store-level check: tagsCode.intValue() among the tag hashes."""
    return np.isin(codes.astype(np.int64).astype(np.int32), wanted)
