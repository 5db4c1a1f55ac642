"""Vectorized decoding of the variable fields of CommitLog records into Arrow arrays: spans of the buffer as
binary/string arrays, and the properties (no Spark import).

Variable fields become Arrow binary/string arrays built from offsets into the buffer with a single C++
``take`` (no per-row Python objects). Properties are split with numpy on the 0x01/0x02 separator bytes (safe
on UTF-8: those bytes never occur inside a multi-byte sequence), following RocketMQ's parser (spec §2.8):
empty keys/values and segments without 0x01 are dropped, and a later duplicate key wins. Record headers
come from :mod:`columnar_headers`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .columnar_headers import Headers, padded_words, spans_binary, window_at



def binary_to_string(arr: pa.Array) -> pa.Array:
    """Cast binary to string; invalid UTF-8 is replaced with U+FFFD as Java does."""
    try:
        return arr.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array([None if v is None else v.decode("utf-8", "replace") for v in arr.to_pylist()],
                        type=pa.string())


def split_spans(seps: np.ndarray, starts: np.ndarray, ends: np.ndarray):
    """Cut spans [starts[i], ends[i]) at separator positions ``seps`` (sorted, all inside spans).

    Returns (token_starts, token_ends, token_span) of the NON-EMPTY tokens.
    Spans must be ascending and disjoint.
    """
    t_start = np.sort(np.concatenate([starts, seps + 1]), kind="stable")
    t_end = np.sort(np.concatenate([seps, ends]), kind="stable")
    keep = t_end > t_start
    t_start = t_start[keep]
    t_end = t_end[keep]
    span = np.searchsorted(starts, t_start, side="right") - 1
    return t_start, t_end, span


def seps_inside(seps: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The separator positions that fall inside one of the spans."""
    if len(seps) == 0 or len(starts) == 0:
        return seps[:0]
    i = np.searchsorted(starts, seps, side="right") - 1
    ok = i >= 0
    ok[ok] = seps[ok] < ends[i[ok]]
    return seps[ok]


_GOLD = np.uint64(0x9E3779B97F4A7C15)
_INF = np.iinfo(np.int64).max


def _name_word(name: bytes) -> int:
    """The big-endian window value of a key of <= 8 bytes, masked to its length (see :func:`_masked_first8`)."""
    return int.from_bytes(name, "big")


def _masked_first8(win: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Keep the first min(length, 8) bytes of big-endian windows (as an integer of that many bytes)."""
    sh = (np.uint64(8) * (np.uint64(8) - np.minimum(length, 8).astype(np.uint64)))
    return np.where(length > 0, win >> sh, np.uint64(0))   # shift by 64 reads as 0 anyway


@dataclass
class PropertyColumns:
    """Parsed properties of N records: entries in row order (RocketMQ parse rules, spec §2.8).

    ``s``/``k``/``e`` are each valid entry's key start, 0x01 position and end in
    ``data`` (all rows' properties concatenated, ``row_offsets`` per row).
    Duplicate keys are kept here; :attr:`keys`/:attr:`values`/:attr:`offsets`
    apply "later wins" for the map, and :meth:`value_index` picks the last
    entry of a name, which is what a later-wins map lookup returns.
    """

    n: int
    data_buf: pa.Buffer
    row_offsets: np.ndarray      # int64, n + 1
    s: np.ndarray
    k: np.ndarray
    e: np.ndarray
    entry_row: np.ndarray
    first8: np.ndarray           # masked first <= 8 key bytes of each entry (big-endian integer)
    key_len: np.ndarray
    rec_key_pos: Optional[np.ndarray] = None
    words: Optional[np.ndarray] = None
    _map: Optional[tuple] = None

    @property
    def value_start(self) -> np.ndarray:
        return self.k + 1

    @property
    def value_end(self) -> np.ndarray:
        return self.e

    def value_index(self, name: str) -> np.ndarray:
        """Per row: index of the LAST entry whose key is ``name``, -1 when the row has none."""
        out = np.full(self.n, -1, dtype=np.int64)
        raw = name.encode("utf-8")
        if len(raw) <= 8:
            hit = np.flatnonzero((self.key_len == len(raw)) & (self.first8 == np.uint64(_name_word(raw))))
        else:
            keys = self._raw_keys_binary()
            hit = np.flatnonzero(np.asarray(pc.equal(keys, pa.scalar(raw, type=pa.binary()))
                                            .to_numpy(zero_copy_only=False), dtype=bool))
        if len(hit):
            out[self.entry_row[hit]] = hit          # ascending: the last assignment (last entry) wins
        return out

    def entry_values(self, idx: np.ndarray) -> pa.Array:
        """String values of entries ``idx`` per row (null where idx < 0)."""
        has = idx >= 0
        n = len(idx)
        if not has.any():
            return pa.nulls(n, type=pa.string())
        sel = idx[has]
        vals = binary_to_string(spans_binary(self.data_buf, self.k[sel] + 1, self.e[sel] - self.k[sel] - 1))
        if has.all():
            return vals
        pos = np.cumsum(has) - 1
        return vals.take(pa.array(np.where(has, pos, 0).astype(np.int32), mask=~has))

    def _raw_keys_binary(self) -> pa.Array:
        return spans_binary(self.data_buf, self.s, self.k - self.s)

    def _build_map(self):
        m = len(self.s)
        row = self.entry_row
        s, k, e = self.s, self.k, self.e
        if m:
            off = np.empty(4 * m, dtype=np.int64)
            off[0::4] = s
            off[1::4] = k
            off[2::4] = k + 1
            off[3::4] = e
            base = int(off[0])
            rel = (off - base).astype(np.int32)
            inter = pa.Array.from_buffers(pa.binary(), 4 * m - 1,
                                          [None, pa.py_buffer(rel), self.data_buf.slice(base, int(off[-1]) - base)])
            keys_b = inter.take(pa.array(np.arange(0, 4 * m, 4, dtype=np.int32)))
            vals_b = inter.take(pa.array(np.arange(2, 4 * m, 4, dtype=np.int32)))
            keys_valid = True
            try:
                keys = keys_b.cast(pa.string())
            except pa.ArrowInvalid:
                keys_valid = False
                keys = binary_to_string(keys_b)
            values = binary_to_string(vals_b)
            keep = self._later_wins(keys, keys_valid)
            if keep is not None:
                sel = pa.array(np.flatnonzero(keep))
                keys = keys.take(sel)
                values = values.take(sel)
                row = row[keep]
        else:
            keys = pa.array([], type=pa.string())
            values = pa.array([], type=pa.string())
        counts = np.bincount(row, minlength=self.n) if self.n else np.zeros(0, np.int64)
        offsets = np.zeros(self.n + 1, dtype=np.int32)
        np.cumsum(counts, out=offsets[1:])
        self._map = (offsets, keys, values)

    def _later_wins(self, keys: pa.Array, keys_valid: bool) -> Optional[np.ndarray]:
        """Mask of entries to keep (None: keep all): of equal keys in a row only the last survives."""
        m = len(self.s)
        row = self.entry_row
        if keys_valid:
            # Fingerprint of the key bytes (equal keys -> equal fingerprints); rows whose
            # fingerprints repeat are then checked on the real bytes.
            fp = self.first8 ^ (self.key_len.astype(np.uint64) * _GOLD)
            long_ = np.flatnonzero(self.key_len > 8)
            if len(long_):
                last8 = self._key_window(long_, self.k[long_] - 8)
                fp[long_] ^= (last8 * _GOLD) ^ (last8 >> np.uint64(29))
            codes = np.asarray(pa.array(fp.view(np.int64)).dictionary_encode().indices
                               .to_numpy(zero_copy_only=False), dtype=np.int64)
        else:
            # Invalid UTF-8 decodes with U+FFFD, so different bytes can be the same Java key: compare strings.
            codes = np.asarray(keys.dictionary_encode().indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        counts = np.bincount(row, minlength=self.n)
        nonempty = np.flatnonzero(counts)
        starts_e = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(counts, out=starts_e[1:])
        bits = np.left_shift(np.uint64(1), (codes & 63).astype(np.uint64))
        orv = np.bitwise_or.reduceat(bits, starts_e[nonempty]) if len(nonempty) else np.empty(0, np.uint64)
        suspect = nonempty[np.bitwise_count(orv) != counts[nonempty]]
        if len(suspect) == 0:
            return None
        # Exact (by code) duplicates among the suspect rows, vectorized: sort (row, code) pairs.
        ent = np.concatenate([np.arange(starts_e[r], starts_e[r + 1]) for r in suspect.tolist()]) \
            if len(suspect) < 64 else np.flatnonzero(np.isin(row, suspect))
        key = row[ent] * (int(codes.max()) + 1) + codes[ent]
        order = np.argsort(key, kind="stable")
        ks = key[order]
        dup_rows = np.unique(row[ent][order][1:][ks[1:] == ks[:-1]])
        if len(dup_rows) == 0:
            return None
        keep = np.ones(m, dtype=bool)
        keys_l = keys
        for r in dup_rows.tolist():
            lo, hi = int(starts_e[r]), int(starts_e[r + 1])
            names = keys_l.slice(lo, hi - lo).to_pylist()
            seen = set()
            for j in range(hi - lo - 1, -1, -1):
                if names[j] in seen:
                    keep[lo + j] = False
                else:
                    seen.add(names[j])
        return None if keep.all() else keep

    def _key_window(self, ent: np.ndarray, data_pos: np.ndarray) -> np.ndarray:
        """Windows at data positions ``data_pos`` of entries ``ent``, read from the record buffer."""
        if self.words is not None:
            return window_at(self.words, self.rec_key_pos[ent] + (data_pos - self.s[ent]))
        d = np.frombuffer(self.data_buf, dtype=np.uint8, count=int(self.row_offsets[-1]))
        return window_at(padded_words(d), data_pos)

    @property
    def offsets(self) -> np.ndarray:
        if self._map is None:
            self._build_map()
        return self._map[0]

    @property
    def keys(self) -> pa.Array:
        if self._map is None:
            self._build_map()
        return self._map[1]

    @property
    def values(self) -> pa.Array:
        if self._map is None:
            self._build_map()
        return self._map[2]

    def map_array(self, map_type: pa.DataType) -> pa.Array:
        return pa.MapArray.from_arrays(pa.array(self.offsets, type=pa.int32()), self.keys, self.values,
                                       type=map_type)


def parse_properties_columns(buf, h: Headers, *, words: Optional[np.ndarray] = None) -> PropertyColumns:
    """Split every record's properties into entries (spec §2.8, RocketMQ's string2messageProperties).

    Entries are the 0x02-separated pieces of each row; a piece is kept when its
    first 0x01 leaves a non-empty key and a non-empty value.  One scan finds
    all 0x01/0x02 bytes; pieces are laid out per row with index arithmetic.
    """
    n = len(h)
    props = spans_binary(buf, h.props_pos, h.props_len)
    if n:
        bufs = props.buffers()
        if props.offset:
            raise AssertionError("unexpected sliced array")
        po = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1).astype(np.int64)
        po -= po[0]
        data_buf = bufs[2] if bufs[2] is not None else pa.py_buffer(b"")
        total = int(po[-1])
    else:
        po = np.zeros(1, np.int64)
        data_buf = pa.py_buffer(b"")
        total = 0
    data = np.frombuffer(data_buf, dtype=np.uint8, count=total)
    seps = np.flatnonzero(data < 3)
    cls = data[seps]
    nz = cls != 0
    q = seps[nz]                         # positions of 0x01 and 0x02 bytes
    c = cls[nz]
    i2 = np.flatnonzero(c == 2)
    sep2 = q[i2]
    m2 = len(sep2)
    cnt = np.diff(np.searchsorted(sep2, po))               # 0x02 bytes per row
    ccum = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(cnt, out=ccum[1:])
    t = n + m2
    rows = np.arange(n, dtype=np.int64)
    row_of_sep = np.repeat(rows, cnt)
    idx_sep = np.arange(m2, dtype=np.int64) + row_of_sep
    first_tok = rows + ccum[:-1]
    S = np.empty(t, dtype=np.int64)
    E = np.empty(t, dtype=np.int64)
    K = np.empty(t, dtype=np.int64)
    S[first_tok] = po[:-1]
    S[idx_sep + 1] = sep2 + 1
    E[idx_sep] = sep2
    E[rows + ccum[1:]] = po[1:]
    # First 0x01/0x02 at or after each piece start: the next separator after its 0x02,
    # or (first piece of a row) a search from the row start.
    q_ext = np.append(q, _INF)
    K[idx_sep + 1] = q_ext[i2 + 1]
    K[first_tok] = q_ext[np.searchsorted(q, po[:-1])]
    valid = (S < K) & (K < E - 1)
    sel = np.flatnonzero(valid)
    s, k, e = S[sel], K[sel], E[sel]
    entry_row = np.repeat(rows, cnt + 1)[sel]
    key_len = k - s
    # The key's first bytes, read from the record buffer (padded words) where the key lives.
    rec_key_pos = h.props_pos[entry_row] + (s - po[:-1][entry_row])
    if len(s):
        w = padded_words(buf) if words is None else words
        first8 = _masked_first8(window_at(w, rec_key_pos), key_len)
    else:
        w = None
        first8 = np.zeros(0, dtype=np.uint64)
    return PropertyColumns(n=n, data_buf=data_buf, row_offsets=po, s=s, k=k, e=e, entry_row=entry_row,
                           first8=first8, key_len=key_len, rec_key_pos=rec_key_pos, words=w)


def take_values(values: pa.Array, idx: np.ndarray) -> pa.Array:
    """``values[idx[r]]`` per row, null where idx is -1."""
    mask = idx < 0
    if mask.all():
        return pa.nulls(len(idx), type=values.type)
    return values.take(pa.array(np.where(mask, 0, idx), mask=mask))


def split_keys_column(pc_: PropertyColumns, keys_idx: np.ndarray) -> pa.Array:
    """``list<string>`` of KEYS split on single spaces, empty items dropped; null when no KEYS."""
    n = len(keys_idx)
    has = keys_idx >= 0
    list_type = pa.list_(pa.field("element", pa.string(), True))
    if not has.any():
        return pa.nulls(n, type=list_type)
    sel = keys_idx[has]
    vals = spans_binary(pc_.data_buf, pc_.k[sel] + 1, pc_.e[sel] - pc_.k[sel] - 1)
    parts = pc.split_pattern(vals, " ")
    lo = np.frombuffer(parts.buffers()[1], dtype=np.int32, count=len(parts) + 1)[parts.offset:].astype(np.int64) \
        if parts.offset else np.frombuffer(parts.buffers()[1], dtype=np.int32, count=len(parts) + 1).astype(np.int64)
    items = parts.values
    if parts.offset or lo[0] != 0:
        items = items.slice(int(lo[0]), int(lo[-1] - lo[0]))
        lo = lo - lo[0]
    ilen = pc.binary_length(items).to_numpy(zero_copy_only=False)
    nonempty = ilen > 0
    cum = np.zeros(len(ilen) + 1, dtype=np.int64)
    np.cumsum(nonempty, out=cum[1:])
    per_sel = np.diff(cum[lo])
    if not nonempty.all():
        items = items.filter(pa.array(nonempty))
    items = binary_to_string(items) if len(items) else pa.array([], type=pa.string())
    per_row = np.zeros(n, dtype=np.int64)
    per_row[has] = per_sel
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(per_row, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), items, type=list_type,
                                    mask=pa.array(~has) if not has.all() else None)


def exact_tag_mask(props: PropertyColumns, tags: frozenset) -> np.ndarray:
    """Rows whose TAGS property equals one of ``tags`` exactly."""
    idx = props.value_index("TAGS")
    n = len(idx)
    if not tags:
        return np.zeros(n, dtype=bool)
    vals = props.entry_values(idx)
    return np.asarray(pc.fill_null(pc.is_in(vals, value_set=pa.array(sorted(tags), type=pa.string())), False)
                      .to_numpy(zero_copy_only=False), dtype=bool)
