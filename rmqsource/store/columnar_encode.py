"""Columnar encoding of the writer's fast rows: host columns, record bytes, IndexFile keys.

Pure functions over :class:`~rmqsource.format.message_columns.MessageColumns` and
numpy arrays, used by :mod:`rmqsource.store.columnar_put`.
"""

from __future__ import annotations

import numpy as np

from ..format.javahash import java_string_hash
from ..format.record import MAGIC_V1
from .put_checks import MAX_PORT

__all__ = ["encode_fast", "hosts_of", "index_entries"]


def hosts_of(col, n: int, default: str):
    """(codes, address uint32 per distinct host, port per distinct host, bad row mask) of a host
    string column (fast path: IPv4 only; others are flagged for the per-message path)."""
    import pyarrow.compute as pc
    from ..format.message_columns import parse_ipv4_hosts
    col = col.fill_null(default) if col.null_count else col
    if n and pc.all(pc.equal(col, col[0])).as_py():      # one host for the whole batch
        d = col.slice(0, 1)
        codes = np.zeros(n, np.int64)
    else:
        enc = pc.dictionary_encode(col)
        d = enc.dictionary
        codes = np.asarray(enc.indices).astype(np.int64)
    if not len(d):
        return codes, np.zeros(0, np.uint32), np.zeros(0, np.int64), np.zeros(n, bool)
    addr, port, ok = parse_ipv4_hosts(d)
    ok &= port <= MAX_PORT                 # others take the per-message path, which refuses them
    return codes, addr, port, (~ok)[codes]


def encode_fast(c, frows, rowpos, size, phy, qo, ts, tcode, tnames, bcode, baddr, bport, scode, saddr,
                 sport, sys_flag, props, plen, append_crc: bool):
    """Records of the fast rows (IPv4 hosts, magic v1), back to back in one Arrow buffer."""
    import pyarrow as pa
    from ..format import batch_encode as be
    k = len(frows)
    allrows = k == c.n
    take = None if allrows else pa.array(frows)
    body = c.body if allrows else c.body.take(take)
    pr = props if allrows else props.take(take)
    j = rowpos[frows]
    hd = be.head_array(k)
    hd["total"] = size[frows]
    hd["magic"] = MAGIC_V1
    hd["body_crc"] = be.body_crcs(body)
    hd["queue_id"] = c.queue_id[frows]
    hd["flag"] = c.flag[frows]
    hd["queue_offset"] = qo[j]
    hd["phy"] = phy[j]
    hd["sys_flag"] = sys_flag[frows]
    hd["born_ts"] = c.born_ts[frows]
    hd["born_addr"] = baddr[bcode[frows]]
    hd["born_port"] = bport[bcode[frows]]
    hd["store_ts"] = ts[j]
    hd["store_addr"] = saddr[scode[frows]]
    hd["store_port"] = sport[scode[frows]]
    hd["reconsume"] = c.reconsume[frows]
    hd["prepared_tx"] = c.prepared_tx[frows]
    hd["body_len"] = np.diff(be.binary_offsets(body)[0])
    heads = be.fixed_binary(hd.view(np.uint8), k, be.HEAD_V4_SIZE)
    tfield = pa.array([bytes((len(t),)) + t.encode("ascii") for t in tnames], pa.binary())
    topics = tfield.take(pa.array(tcode[frows]))
    pl = np.asarray(plen[frows], dtype=">i2")
    plens = be.fixed_binary(pl.view(np.uint8), k, 2)
    parts = [heads, body, topics, plens, pr.view(pa.binary())]
    recs = be.join_records(parts)
    if append_crc:
        recs = be.join_records([recs, be.crc_digit_tails(recs)])
    return recs


def index_entries(c, fast, rowpos, tcode, tnames, prepared):
    """(record number in write order, keyHash) of every index key, in buildIndex order."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from ..format import batch_encode as be
    from ..format.javahash import index_key_hash
    from ..format.properties import split_keys
    n = c.n
    u_rec = k_rec = np.zeros(0, np.int64)
    u_hash = k_hash = np.zeros(0, np.int64)
    k_rank = np.zeros(0, np.int64)
    frows = np.flatnonzero(fast)
    if frows.size:
        pref = np.array([java_string_hash(t + "#") & 0xFFFFFFFF for t in tnames] or [0], np.uint32)
        u = c.uniq
        uvalid = np.asarray(u.is_valid()) & fast if u.null_count else fast
        ur = np.flatnonzero(uvalid)
        if ur.size:
            h, ln = be.java_hashes(u if ur.size == n else u.take(pa.array(ur)))
            u_rec = rowpos[ur]
            u_hash = be.index_hash(be.combine_hash(pref[tcode[ur]], h, ln))
        kv = np.asarray(c.keys.is_valid()) & fast if c.keys.null_count else fast
        kr = np.flatnonzero(kv)
        if kr.size:
            karr = c.keys if kr.size == n else c.keys.take(pa.array(kr))
            koff, kdata = be.binary_offsets(karr.view(pa.binary()))
            if not bool(np.any(kdata[int(koff[0]):int(koff[-1])] == 32)):
                # no space anywhere: each non-empty KEYS value is one piece
                keep = np.diff(koff) > 0
                flat = karr if bool(keep.all()) else karr.filter(pa.array(keep))
                parent = kr[keep]
                piece_rank = np.ones(len(parent), np.int64)
            else:
                lists = pc.split_pattern(karr, " ")
                flat = pc.list_flatten(lists)
                parent = kr[np.asarray(pc.list_parent_indices(lists))]
                loff = np.asarray(lists.offsets)
                piece_rank = np.arange(len(flat)) - np.repeat(loff[:-1], np.diff(loff)) + 1
                keep = np.asarray(pc.greater(pc.binary_length(flat), 0))
                flat = flat.filter(pa.array(keep))
                parent, piece_rank = parent[keep], piece_rank[keep]
            if len(flat):
                h, ln = be.java_hashes(flat)
                k_rec = rowpos[parent]
                k_rank = piece_rank
                k_hash = be.index_hash(be.combine_hash(pref[tcode[parent]], h, ln))
    if not prepared:
        return be.merge_index_entries(u_rec, u_hash, k_rec, k_hash)
    r2, k2, h2 = [], [], []
    for i, p in prepared.items():
        j = int(rowpos[i])
        rank = 0
        if p.uniq_key is not None:
            r2.append(j), k2.append(0), h2.append(index_key_hash(f"{p.topic}#{p.uniq_key}"))
        for piece in split_keys(p.keys):
            rank += 1
            r2.append(j), k2.append(rank), h2.append(index_key_hash(f"{p.topic}#{piece}"))
    rec = np.concatenate([u_rec, k_rec, np.array(r2, np.int64)])
    rank = np.concatenate([np.zeros(len(u_rec), np.int64), k_rank, np.array(k2, np.int64)])
    hsh = np.concatenate([u_hash, k_hash, np.array(h2, np.int64)])
    order = np.lexsort((rank, rec))
    return rec[order], hsh[order]
