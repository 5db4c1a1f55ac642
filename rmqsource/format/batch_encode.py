"""Vectorized encoding helpers for the writer's columnar fast path (pure: no file I/O).

The per-message writer (``MessageStoreWriter._prepare`` + ``_put_locked``) is
the reference.  This module computes the same bytes for many messages at once
with numpy and pyarrow.compute:

* :class:`MessageColumns` -- a batch of messages as columns, built from a
  pyarrow Table/RecordBatch (:func:`columns_from_arrow`) or from JSON lines
  parsed by pyarrow's C++ reader (:func:`columns_from_json_lines`).  Rows the
  columnar encoder cannot prove equivalent for (verbatim properties strings,
  TAGS/KEYS/DELAY/``__CRC32#`` inside the properties map, duplicate map keys,
  nulls where a default does not apply, ...) are flagged in ``slow`` and the
  writer runs them through the per-message code (:meth:`MessageColumns.message`).
* :func:`serialize_properties` -- ``TAGS\\x01t\\x02KEYS\\x01k\\x02`` + the map
  entries, element-wise in Arrow; :func:`java_hashes` -- ``String.hashCode`` of
  many strings (ASCII vectorized over the Arrow data buffer, others scalar);
  :func:`head_array` -- the fixed 88-byte record heads (IPv4/IPv4) as a numpy
  structured array; :func:`join_records` -- ``binary_join_element_wise`` of
  head+body+topic+props: the data buffer of the result IS the CommitLog bytes.
* :func:`crc_digit_tails` -- the ``__CRC32#`` property tails (5.2+).
* :func:`render_put_jsonl` -- ``put.jsonl`` lines for many results at once.
"""

from __future__ import annotations

import binascii
import functools
import zlib
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .javahash import java_string_hash
from .properties import CRC32, DELAY, KEYS, TAGS, UNIQ_KEY

__all__ = ["HEAD_V4", "MessageColumns", "columns_from_arrow", "columns_from_json_lines", "java_hashes",
           "serialize_properties", "head_array", "join_records", "crc_digit_tails", "render_put_jsonl",
           "binary_offsets", "segment_positions"]

# Record head for IPv4 born and store hosts: TOTALSIZE .. BODYLENGTH, 88 bytes (spec §2.1).
HEAD_V4 = np.dtype({
    "names": ["total", "magic", "body_crc", "queue_id", "flag", "queue_offset", "phy", "sys_flag", "born_ts",
              "born_addr", "born_port", "store_ts", "store_addr", "store_port", "reconsume", "prepared_tx",
              "body_len"],
    "formats": [">i4", ">i4", ">i4", ">i4", ">i4", ">i8", ">i8", ">i4", ">i8", ">u4", ">i4", ">i8", ">u4", ">i4",
                ">i4", ">i8", ">i4"],
    "offsets": [0, 4, 8, 12, 16, 20, 28, 36, 40, 48, 52, 56, 64, 68, 72, 76, 84],
    "itemsize": 88})
HEAD_V4_SIZE = 88
# totalSize = 88 + body + 1 (topic length) + topic + 2 (properties length) + properties.
FIXED_V4_V1 = HEAD_V4_SIZE + 1 + 2

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_SPECIAL_MAP_KEYS = (TAGS, KEYS, DELAY, CRC32)


# ---------------------------------------------------------------- arrow helpers

def binary_offsets(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets[n+1] as int64 absolute into data, data as uint8) of a (large_)binary/string array."""
    bufs = arr.buffers()
    wide = pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type)
    off = np.frombuffer(bufs[1], dtype=np.int64 if wide else np.int32, count=len(arr) + 1 + arr.offset)
    off = off[arr.offset:].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return off, data


def _as_binary(arr) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if pa.types.is_string(arr.type):
        return arr.view(pa.binary())
    if pa.types.is_large_string(arr.type):
        return arr.view(pa.large_binary())
    return arr


def _chunk(arr) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        return arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    return arr


@functools.lru_cache(maxsize=8)
def _pow31(width: int) -> np.ndarray:
    out = np.empty(width + 1, dtype=np.uint32)
    v = 1
    for k in range(width + 1):
        out[k] = v
        v = (v * 31) & 0xFFFFFFFF
    return out


_INV31 = pow(31, -1, 1 << 32)                   # 31 is odd: invertible mod 2^32
_POW_BLOCK = 1 << 22                            # bytes hashed per cumulative pass


@functools.lru_cache(maxsize=4)
def _powers(base: int, n: int) -> np.ndarray:
    """base^k mod 2^32 for k in [0, n) as uint32 (built from two small tables)."""
    b = 1 << 11
    small = np.empty(b, np.uint32)
    v = 1
    for k in range(b):
        small[k] = v
        v = (v * base) & 0xFFFFFFFF
    nb = -(-n // b)
    big = np.empty(nb, np.uint32)
    v, step = 1, pow(base, b, 1 << 32)
    for k in range(nb):
        big[k] = v
        v = (v * step) & 0xFFFFFFFF
    return (big[:, None] * small[None, :]).reshape(-1)[:n]


def _hash_fixed(seg: np.ndarray, k: int, width: int) -> np.ndarray:
    """hashCode of k back-to-back ASCII strings of ``width`` bytes (Horner over the columns)."""
    m = seg.reshape(k, width)
    h = np.zeros(k, np.uint32)
    w31 = np.uint32(31)
    for j in range(width):
        h *= w31
        h += m[:, j]
    return h


def _hash_cumulative(seg: np.ndarray, rel: np.ndarray) -> np.ndarray:
    """hashCode of the ASCII strings seg[rel[i]:rel[i+1]] (uint32).

    hash(s[a:b]) = 31^(b-1) * (Q[b] - Q[a]) with Q[j] = sum_{k<j} s[k] * 31^-k (mod 2^32),
    Q a running sum over the buffer; done in passes of at most _POW_BLOCK bytes
    (rows never straddle a pass)."""
    n = len(rel) - 1
    h = np.empty(n, np.uint32)
    inv = _powers(_INV31, _POW_BLOCK)
    fwd = _powers(31, _POW_BLOCK)
    i = 0
    for _ in range(n + 1):
        if i >= n:
            break
        c = int(rel[i])
        j = int(np.searchsorted(rel, c + _POW_BLOCK, side="right")) - 1   # rows [i, j) fit
        if j <= i:                                   # one string longer than a pass: scalar
            s = seg[c:int(rel[i + 1])].tolist()
            v = 0
            for x in s:
                v = (v * 31 + x) & 0xFFFFFFFF
            h[i] = v
            i += 1
            continue
        span = int(rel[j]) - c
        q = np.empty(span + 1, np.uint32)
        q[0] = 0
        np.cumsum(seg[c:c + span] * inv[:span], dtype=np.uint32, out=q[1:])
        a = rel[i:j] - c
        b = rel[i + 1:j + 1] - c
        h[i:j] = (q[b] - q[a]) * fwd[np.maximum(b - 1, 0)]
        i = j
    return h


def java_hashes(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``String.hashCode`` (uint32 bit pattern) and UTF-16 length of each string of ``arr``.

    ASCII strings are hashed over the Arrow data buffer at once (byte = UTF-16
    unit): a Horner pass over the columns when all have one length, else a
    running-sum formulation (:func:`_hash_cumulative`); strings with other
    bytes go through :func:`java_string_hash`.  Null entries hash to 0 with
    length 0.
    """
    arr = _as_binary(arr)
    n = len(arr)
    off, data = binary_offsets(arr)
    lengths = np.diff(off)
    if n == 0:
        return np.zeros(0, np.uint32), np.zeros(0, np.int64)
    lo, hi = int(off[0]), int(off[-1])
    seg = data[lo:hi]
    if not seg.size:
        return np.zeros(n, np.uint32), lengths
    width = int(lengths[0])
    if width * n == seg.size and width <= 64 and not arr.null_count and int(lengths.min()) == width:
        h = _hash_fixed(seg, n, width)
    else:
        h = _hash_cumulative(seg, off - lo)
    hb = np.flatnonzero(seg >= 0x80)
    if hb.size:
        rows = np.unique(np.searchsorted(off, hb + lo, side="right") - 1)
        vals = arr.take(pa.array(rows)).to_pylist()
        for i, v in zip(rows.tolist(), vals):
            text = v.decode("utf-8", "surrogatepass")
            h[i] = java_string_hash(text) & 0xFFFFFFFF
            lengths[i] = len(text.encode("utf-16-le", "surrogatepass")) // 2
    if arr.null_count:
        valid = np.asarray(arr.is_valid())
        h[~valid] = 0
        lengths = np.where(valid, lengths, 0)
    return h, lengths


def combine_hash(prefix_hash: np.ndarray, suffix_hash: np.ndarray, suffix_len: np.ndarray) -> np.ndarray:
    """hashCode(prefix + suffix) from the parts (uint32 arithmetic wraps like Java int)."""
    width = int(suffix_len.max()) if suffix_len.size else 0
    return (prefix_hash.astype(np.uint32) * _pow31(width)[suffix_len] + suffix_hash.astype(np.uint32)).astype(np.uint32)


def index_hash(h: np.ndarray) -> np.ndarray:
    """IndexFile keyHash from hashCode bit patterns: abs(int), MIN_VALUE -> 0 (spec §5.2)."""
    s = h.astype(np.uint32).view(np.int32).astype(np.int64)
    return np.where(s == _INT32_MIN, 0, np.abs(s))


def tags_codes(tags: pa.Array) -> np.ndarray:
    """tagsCode of each TAGS value (0 for null/empty), hashing each distinct value once."""
    tags = _chunk(tags)
    if len(tags) == 0:
        return np.zeros(0, np.int64)
    enc = pc.dictionary_encode(tags)
    codes, _ = java_hashes(enc.dictionary)
    signed = codes.view(np.int32).astype(np.int64)
    idx = np.asarray(enc.indices.fill_null(0))
    out = signed[idx] if signed.size else np.zeros(len(tags), np.int64)
    if tags.null_count:
        out = np.where(np.asarray(tags.is_valid()), out, 0)
    return out


# ---------------------------------------------------------------- properties

def entries_string(keys: pa.Array, values: pa.Array, offsets: np.ndarray) -> pa.Array:
    """Per row: ``k\\x01v\\x02`` of its entries (null values skipped), rows given by ``offsets``."""
    ent = pc.binary_join_element_wise(keys, "\x01", values, "\x02", "")
    ent = pc.fill_null(ent, "")
    lst = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), ent)
    return pc.fill_null(pc.binary_join(lst, ""), "")


def rows_with_separators(arr: pa.Array) -> np.ndarray:
    """Rows of a string/binary array holding a 0x01 or 0x02 byte (one scan of the data buffer)."""
    arr = _as_binary(_chunk(arr))
    if len(arr) == 0:
        return np.zeros(0, np.int64)
    off, data = binary_offsets(arr)
    lo, hi = int(off[0]), int(off[-1])
    hit = np.flatnonzero((data[lo:hi] - np.uint8(1)) < 2)     # 1 or 2 (0 wraps to 255)
    if not hit.size:
        return np.zeros(0, np.int64)
    return np.unique(np.searchsorted(off, hit + lo, side="right") - 1)


def invalid_utf8_rows(arr: pa.Array) -> np.ndarray:
    """Rows of a string array that are not valid UTF-8 (Arrow built from raw buffers, pyarrow's JSON
    reader); one vectorized validation, a row search only when it fails."""
    arr = _chunk(arr)
    if len(arr) == 0 or arr.null_count == len(arr):
        return np.zeros(0, np.int64)
    try:
        arr.validate(full=True)
        return np.zeros(0, np.int64)
    except pa.ArrowInvalid:
        pass
    values = arr.view(pa.large_binary() if pa.types.is_large_string(arr.type) else pa.binary()).to_pylist()
    bad = []
    for i, v in enumerate(values):
        if v is not None:
            try:
                v.decode("utf-8")
            except UnicodeDecodeError:
                bad.append(i)
    return np.array(bad, np.int64)


def serialize_properties(tags: pa.Array, keys: pa.Array, map_part: pa.Array, trailing: bool) -> pa.Array:
    """``_serialize({TAGS, KEYS, **map})``: TAGS then KEYS (when not null), then the map entries
    (``map_part`` = their ``k\\x01v\\x02`` concatenation), last 0x02 dropped unless ``trailing``."""
    if trailing and not tags.null_count and not keys.null_count and not map_part.null_count:
        return pc.binary_join_element_wise("TAGS\x01", tags, "\x02KEYS\x01", keys, "\x02", map_part, "")
    t = pc.fill_null(pc.binary_join_element_wise("TAGS\x01", tags, "\x02", ""), "")
    k = pc.fill_null(pc.binary_join_element_wise("KEYS\x01", keys, "\x02", ""), "")
    s = pc.binary_join_element_wise(t, k, map_part, "")
    if not trailing:
        s = pc.if_else(pc.greater(pc.binary_length(s), 0), pc.utf8_slice_codeunits(s, 0, -1), s)
    return s


# ---------------------------------------------------------------- message columns

@dataclass
class MessageColumns:
    """A batch of messages as columns (see the module doc).  ``None`` columns take the defaults
    of :class:`~rmqsource.format.message.MessageExtBrokerInner`."""

    n: int
    topic: pa.Array                                  # string, no nulls
    queue_id: np.ndarray                             # int64
    body: pa.Array                                   # binary (nulls = empty)
    flag: np.ndarray
    sys_flag: np.ndarray
    born_ts: np.ndarray
    reconsume: np.ndarray
    prepared_tx: np.ndarray
    store_ts: np.ndarray                             # int64 (valid where store_ts_valid)
    store_ts_valid: np.ndarray                       # bool
    born_host: pa.Array                              # string, nulls = default
    store_host: pa.Array
    tags: pa.Array                                   # string, nullable
    keys: pa.Array                                   # string, nullable
    map_part: pa.Array                               # per row "k\x01v\x02..." of the properties map
    map_count: np.ndarray                            # non-null map entries per row
    uniq: pa.Array                                   # UNIQ_KEY value from the map (nullable)
    slow: np.ndarray                                 # rows for the per-message path
    row_message: Any = None                          # callable(i) -> MessageExtBrokerInner (slow rows)
    extra: dict = field(default_factory=dict)
    # True when map keys and values were checked for 0x01/0x02 (rows with them are in ``slow``):
    # then only tags/keys need the check before the properties are trusted.
    map_checked: bool = False

    def message(self, i: int):
        return self.row_message(i)


def _int_column(col, n: int, default: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """(values, bad mask): nulls take ``default``; values outside [lo, hi] are flagged bad."""
    if col is None:
        return np.full(n, default, dtype=np.int64), np.zeros(n, bool)
    col = _chunk(col)
    if pa.types.is_null(col.type):
        return np.full(n, default, dtype=np.int64), np.zeros(n, bool)
    if not pa.types.is_integer(col.type):
        raise TypeError(f"integer column expected, got {col.type}")
    col = col.cast(pa.int64()) if col.type != pa.int64() else col
    v = np.asarray(col.fill_null(default) if col.null_count else col)
    return v, (v < lo) | (v > hi)


def _string_column(col, n: int) -> pa.Array:
    if col is None:
        return pa.nulls(n, pa.string())
    col = _chunk(col)
    if pa.types.is_null(col.type):
        return pa.nulls(n, pa.string())
    if pa.types.is_large_string(col.type):
        col = col.cast(pa.string())
    if not pa.types.is_string(col.type):
        raise TypeError(f"string column expected, got {col.type}")
    return col


def _map_from_struct(col: pa.Array, n: int, slow: np.ndarray, special_row: np.ndarray):
    """Properties given as a struct (pyarrow's JSON inference): entries in field order.

    JSON object key order is only known per row when a row has at most one
    non-null field; rows with more are flagged slow (their order comes from the
    text).  Returns (map_part, map_count, uniq)."""
    names = [col.type.field(i).name for i in range(col.type.num_fields)]
    parts, count = [], np.zeros(n, np.int64)
    uniq = pa.nulls(n, pa.string())
    valid_struct = np.asarray(col.is_valid()) if col.null_count else None
    for i, name in enumerate(names):
        f = col.field(i)
        if pa.types.is_null(f.type):
            continue
        if not pa.types.is_string(f.type):
            raise TypeError(f"property {name!r} is not a string column")
        if valid_struct is not None:
            f = pc.if_else(pa.array(valid_struct), f, pa.scalar(None, pa.string()))
        present = np.asarray(f.is_valid())
        count += present
        if name in _SPECIAL_MAP_KEYS or "\x01" in name or "\x02" in name:
            special_row |= present
        special_row[rows_with_separators(f)] = True
        parts.append(pc.fill_null(pc.binary_join_element_wise(name + "\x01", f, "\x02", ""), ""))
        if name == UNIQ_KEY:
            uniq = f
    slow |= count > 1
    if not parts:
        return pa.array([""] * n, pa.string()) if n else pa.array([], pa.string()), count, uniq
    map_part = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "")
    return map_part, count, uniq


def _map_from_maparray(col: pa.Array, n: int, slow: np.ndarray, special_row: np.ndarray):
    """Properties given as map<string,string> (Parquet/Arrow input)."""
    offsets = np.asarray(col.offsets).astype(np.int64)
    if col.null_count:
        offsets = offsets.copy()      # a null map has an empty (or ignorable) range
    lo, hi = int(offsets[0]), int(offsets[-1])
    keys = _string_column(col.keys.slice(lo, hi - lo), hi - lo)
    vals = _string_column(col.items.slice(lo, hi - lo), hi - lo)
    rel = offsets - lo
    lens = np.diff(rel)
    if col.null_count:
        lens = np.where(np.asarray(col.is_valid()), lens, 0)
        # rebuild offsets so that null rows have no entries
        keep = np.repeat(np.asarray(col.is_valid()), np.diff(rel))
        keys, vals = keys.filter(pa.array(keep)), vals.filter(pa.array(keep))
        rel = np.concatenate([[0], np.cumsum(lens)])
    row_of = np.repeat(np.arange(n), lens)
    vvalid = np.asarray(vals.is_valid()) if vals.null_count else np.ones(len(vals), bool)
    count = np.bincount(row_of[vvalid], minlength=n).astype(np.int64) if len(vals) else np.zeros(n, np.int64)
    uniq = pa.nulls(n, pa.string())
    if len(keys):
        enc = pc.dictionary_encode(keys)
        dict_names = enc.dictionary.to_pylist()
        codes = np.asarray(enc.indices)
        bad_names = np.array([k in _SPECIAL_MAP_KEYS or "\x01" in k or "\x02" in k for k in dict_names])
        bad_entry = bad_names[codes]
        if bad_entry.any():
            special_row[np.unique(row_of[bad_entry])] = True
        if lens.size and int(lens.max()) > 1:          # duplicate key within a row: dict() semantics
            multi = np.repeat(lens > 1, lens)
            srt = np.sort(row_of[multi] * len(dict_names) + codes[multi])
            dup = srt[1:][srt[1:] == srt[:-1]] // len(dict_names)
            slow[np.unique(dup)] = True
        if len(vals):
            bad_vals = rows_with_separators(vals)
            if bad_vals.size:
                special_row[np.unique(row_of[bad_vals])] = True
        if UNIQ_KEY in dict_names:
            u = dict_names.index(UNIQ_KEY)
            hit = np.flatnonzero(codes == u)
            idx = np.full(n, -1, np.int64)
            idx[row_of[hit]] = hit
            if hit.size == n and len(vals) == n and bool(np.all(idx == np.arange(n))):
                uniq = vals                              # the only entry of every row
            elif len(vals):
                uniq = vals.take(pa.array(np.where(idx >= 0, idx, 0)))
                if not bool(np.all(idx >= 0)):
                    uniq = pc.if_else(pa.array(idx >= 0), uniq, pa.scalar(None, pa.string()))
    if n and len(keys) == n and not vals.null_count and int(rel[-1]) == n and bool(np.all(lens == 1)):
        map_part = pc.binary_join_element_wise(keys, "\x01", vals, "\x02", "")   # one entry per row
    else:
        map_part = entries_string(keys, vals, rel)
    return map_part, count, uniq


_ALIASES = {"queueId": "queue_id", "bornTimestamp": "born_timestamp_ms", "bornHost": "born_host",
            "storeHost": "store_host", "sysFlag": "sys_flag", "reconsumeTimes": "reconsume_times",
            "preparedTransactionOffset": "prepared_transaction_offset", "storeTimestamp": "store_timestamp_ms",
            "propertiesString": "properties_string", "born_timestamp": "born_timestamp_ms",
            "store_timestamp": "store_timestamp_ms"}
FIELDS = ("topic", "queue_id", "body", "flag", "properties", "properties_string", "tags", "keys",
          "born_timestamp_ms", "born_host", "store_host", "sys_flag", "reconsume_times",
          "prepared_transaction_offset", "store_timestamp_ms")


def _build(cols: dict, n: int, *, null_is_default: bool, row_message) -> MessageColumns:
    """Common part of the Arrow and JSON converters (``cols`` keyed by snake_case field)."""
    slow = np.zeros(n, bool)
    topic = cols.get("topic")
    if topic is None:
        raise KeyError("topic")
    topic = _string_column(topic, n)
    if topic.null_count:
        slow |= ~np.asarray(topic.is_valid())
        topic = topic.fill_null("")
    ints = {}
    for name, default, lo, hi in (("queue_id", 0, 0, _INT32_MAX), ("flag", 0, _INT32_MIN, _INT32_MAX),
                                  ("sys_flag", 0, _INT32_MIN, _INT32_MAX),
                                  ("born_timestamp_ms", 0, -(1 << 63), (1 << 63) - 1),
                                  ("reconsume_times", 0, _INT32_MIN, _INT32_MAX),
                                  ("prepared_transaction_offset", 0, -(1 << 63), (1 << 63) - 1)):
        col = cols.get(name)
        if col is not None and not null_is_default and _chunk(col).null_count:
            slow |= ~np.asarray(_chunk(col).is_valid())
        v, bad = _int_column(col, n, default, lo, hi)
        slow |= bad
        ints[name] = v
    st = cols.get("store_timestamp_ms")
    if st is None:
        store_ts, st_valid = np.zeros(n, np.int64), np.zeros(n, bool)
    else:
        st = _chunk(st)
        if not pa.types.is_integer(st.type) and not pa.types.is_null(st.type):
            raise TypeError("storeTimestamp must be integers")
        st_valid = np.asarray(st.is_valid()) if st.null_count else np.ones(n, bool)
        store_ts = np.asarray(st.cast(pa.int64()).fill_null(0))
    body = cols.get("body")
    if body is None:
        body = pa.array([b""] * n, pa.binary()) if n else pa.array([], pa.binary())
    else:
        body = _chunk(body)
        if pa.types.is_null(body.type):
            body = pa.array([b""] * n, pa.binary())
        elif pa.types.is_string(body.type):
            body = body.view(pa.binary())
        elif pa.types.is_large_string(body.type) or pa.types.is_large_binary(body.type):
            body = body.cast(pa.binary())
        elif not pa.types.is_binary(body.type):
            raise TypeError(f"body must be binary or string, got {body.type}")
        if body.null_count:
            body = body.fill_null(b"")
    hosts = {}
    for name in ("born_host", "store_host"):
        col = cols.get(name)
        if col is not None and not null_is_default and _chunk(col).null_count:
            slow |= ~np.asarray(_chunk(col).is_valid())
        hosts[name] = _string_column(col, n)
    tags = _string_column(cols.get("tags"), n)
    keys = _string_column(cols.get("keys"), n)
    special = np.zeros(n, bool)
    props = cols.get("properties")
    pstr = cols.get("properties_string")
    if pstr is not None:
        pstr = _chunk(pstr)
        slow |= np.asarray(pstr.is_valid()) if null_is_default else np.ones(n, bool)
    if props is None or pa.types.is_null(_chunk(props).type):
        map_part = pa.array([""] * n, pa.string()) if n else pa.array([], pa.string())
        count = np.zeros(n, np.int64)
        uniq = pa.nulls(n, pa.string())
    else:
        props = _chunk(props)
        if pa.types.is_map(props.type):
            map_part, count, uniq = _map_from_maparray(props, n, slow, special)
        elif pa.types.is_struct(props.type):
            map_part, count, uniq = _map_from_struct(props, n, slow, special)
        elif pa.types.is_string(props.type) or pa.types.is_large_string(props.type):
            slow |= np.asarray(props.is_valid())       # verbatim properties strings: per message
            map_part = pa.array([""] * n, pa.string()) if n else pa.array([], pa.string())
            count = np.zeros(n, np.int64)
            uniq = pa.nulls(n, pa.string())
        else:
            raise TypeError(f"properties must be a map/struct of strings or a string, got {props.type}")
    slow |= special
    for col in (topic, hosts["born_host"], hosts["store_host"], tags, keys, map_part, uniq):
        slow[invalid_utf8_rows(col)] = True            # the per-message path refuses them
    uniq = pc.if_else(pc.equal(pc.binary_length(uniq), 0), pa.scalar(None, pa.string()), uniq) \
        if uniq.null_count < len(uniq) else uniq
    return MessageColumns(
        n=n, topic=topic, queue_id=ints["queue_id"], body=body, flag=ints["flag"], sys_flag=ints["sys_flag"],
        born_ts=ints["born_timestamp_ms"], reconsume=ints["reconsume_times"],
        prepared_tx=ints["prepared_transaction_offset"], store_ts=store_ts, store_ts_valid=st_valid,
        born_host=hosts["born_host"], store_host=hosts["store_host"], tags=tags, keys=keys,
        map_part=map_part, map_count=count, uniq=uniq, slow=slow, row_message=row_message, map_checked=True)


def columns_from_arrow(batch, allowed_unknown=()) -> MessageColumns:
    """Columns of a pyarrow Table/RecordBatch (snake_case field names or the corpus camelCase).

    Nulls take the field defaults (like the per-row ``put_arrow_batch``).  A
    ``properties`` column may be map<string,string>, a struct of strings or
    verbatim strings; ``propertiesString`` is a verbatim string."""
    from ..errors import OptionError
    cols: dict[str, Any] = {}
    for i, name in enumerate(batch.schema.names):
        if name in allowed_unknown:
            continue
        key = _ALIASES.get(name, name)
        if key not in FIELDS:
            raise OptionError(f"unknown columns for put_arrow_batch: {[name]}")
        if key in cols:
            raise OptionError(f"columns {name!r} and another alias both give {key!r}")
        cols[key] = batch.column(i)
    n = batch.num_rows

    def row_message(r: int):
        from .message import MessageExtBrokerInner
        kw = {}
        for k, col in cols.items():
            x = col[r].as_py()
            if x is None:
                continue
            if k == "properties_string":
                k = "properties"
            if k == "body" and isinstance(x, str):
                x = x.encode("utf-8")
            elif k == "properties" and isinstance(x, list):
                x = dict(x)
            elif k == "properties" and isinstance(x, dict):
                x = {a: b for a, b in x.items()}
            kw[k] = x
        kw.setdefault("queue_id", 0)
        if "properties" in kw and isinstance(kw["properties"], dict) and "properties_string" in cols \
                and cols["properties_string"][r].as_py() is not None:
            kw["properties"] = cols["properties_string"][r].as_py()
        return MessageExtBrokerInner(**kw)

    return _build(cols, n, null_is_default=True, row_message=row_message)


_JSON_INT_FIELDS = ("queue_id", "flag", "sys_flag", "born_timestamp_ms", "reconsume_times",
                    "prepared_transaction_offset", "store_timestamp_ms")


# Brackets allowed on one input line before it goes to the per-line parser (pyarrow's reader
# crashes past ~10,000 levels of nesting; a line's bracket count bounds its depth).
JSON_MAX_BRACKETS_PER_LINE = 1000


def json_lines_problem(data: bytes) -> Optional[str]:
    """Why pyarrow's JSON reader must not see this block of lines (None: it may).

    pyarrow.json.read_json dies (SIGSEGV) on a top-level ``null`` and on very
    deep nesting, and passes invalid UTF-8 through into string columns; a block
    with a line that does not start with ``{``, with invalid UTF-8 or with more
    than JSON_MAX_BRACKETS_PER_LINE brackets on a line goes to the per-line
    parser, which names the bad line.  Vectorized: about two passes over the bytes."""
    if not data.isascii():
        text = pa.Array.from_buffers(pa.large_string(), 1, [None, pa.py_buffer(np.array([0, len(data)], np.int64)),
                                                            pa.py_buffer(data)])
        try:
            text.validate(full=True)
        except pa.ArrowInvalid:
            return "not valid UTF-8"
    b = np.frombuffer(data, np.uint8)
    nl = np.flatnonzero(b == 10)
    starts = np.concatenate(([0], nl + 1))
    ends = np.concatenate((nl, [len(b)]))
    keep = starts < len(b)
    starts, ends = starts[keep], ends[keep]
    for s in starts[b[starts] != 123].tolist():             # blank or indented lines are fine
        end = data.find(b"\n", s)
        text = data[s:end if end >= 0 else len(data)].strip()
        if text and not text.startswith(b"{"):
            return "a line is not a JSON object"
    long = np.flatnonzero(ends - starts > JSON_MAX_BRACKETS_PER_LINE)
    for s, e in zip(starts[long].tolist(), ends[long].tolist()):   # only long lines can nest deeply
        if data.count(b"{", s, e) + data.count(b"[", s, e) > JSON_MAX_BRACKETS_PER_LINE:
            return "a line nests too deeply"
    return None


def columns_from_json_lines(data: bytes) -> Optional[MessageColumns]:
    """Columns of a block of JSON lines (``inputs.jsonl`` shape), parsed by pyarrow's C++ reader.

    Returns None when the block needs the per-line path (not plain JSON
    objects or not safe for pyarrow -- :func:`json_lines_problem` --, a type
    pyarrow infers differently from ``from_json_dict``, nulls where a default
    does not apply to a whole column...); the caller then
    parses it with ``json.loads`` and reports errors by line.  Bodies are
    base64-decoded strictly (invalid base64 -> None as well).
    """
    import pyarrow.json as pj
    if not data or data.isspace():                      # (no copy, unlike strip())
        return None
    if json_lines_problem(data) is not None:
        return None
    try:
        table = pj.read_json(pa.BufferReader(data), read_options=pj.ReadOptions(block_size=16 << 20))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    n = table.num_rows
    lines_cache: list = []

    def lines():
        if not lines_cache:
            lines_cache.append([ln for ln in data.split(b"\n") if ln.strip()])
        return lines_cache[0]

    n_lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    if n_lines != n and len(lines()) != n:
        return None
    cols: dict[str, Any] = {}
    for i, name in enumerate(table.schema.names):
        key = _ALIASES.get(name, name)
        if key not in FIELDS or key == "properties_string" and False:
            continue                                        # from_json_dict ignores unknown fields
        cols[key] = _chunk(table.column(i))
    if "topic" not in cols or not pa.types.is_string(cols["topic"].type) or cols["topic"].null_count:
        return None
    for k in _JSON_INT_FIELDS:
        c = cols.get(k)
        if c is not None and not (pa.types.is_integer(c.type) or pa.types.is_null(c.type)):
            return None
        if c is not None and k != "store_timestamp_ms" and c.null_count:
            return None                                      # int(None) fails per line
    for k in ("tags", "keys", "born_host", "store_host", "properties_string"):
        c = cols.get(k)
        if c is not None and not (pa.types.is_string(c.type) or pa.types.is_null(c.type)):
            return None
    for k in ("born_host", "store_host"):
        c = cols.get(k)
        if c is not None and (c.null_count or pa.types.is_null(c.type)):
            return None
    props = cols.get("properties")
    if props is not None and not (pa.types.is_struct(props.type) or pa.types.is_null(props.type)):
        return None
    body = cols.get("body")
    if body is not None:
        if pa.types.is_null(body.type):
            cols["body"] = None
        elif not pa.types.is_string(body.type):
            return None
        else:
            decoded = _b64decode_column(body)
            if decoded is None:
                return None
            cols["body"] = decoded
    pstr_rows = None
    if "properties_string" in cols:
        # "propertiesString": null and absent differ in from_json_dict; rows naming it go per line.
        pstr_rows = np.fromiter((b'"propertiesString"' in ln for ln in lines()), dtype=bool, count=n)

    def row_message(r: int):
        import json
        from .message import MessageExtBrokerInner
        return MessageExtBrokerInner.from_json_dict(json.loads(lines()[r]))

    try:
        mc = _build({k: v for k, v in cols.items() if k != "properties_string"}, n, null_is_default=True,
                    row_message=row_message)
    except TypeError:
        return None
    if pstr_rows is not None:
        mc.slow |= pstr_rows
    return mc


def _b64decode_column(col: pa.Array) -> Optional[pa.Array]:
    """Strict base64 decode of each string (null/empty -> b""); None when one is invalid.

    One ``a2b_base64(strict_mode=True)`` call per string over the Arrow data
    buffer (measured faster than a numpy decoder with the validation strict
    mode needs), decoded bytes joined into one buffer."""
    if col.null_count:
        col = col.fill_null("")
    off, data = binary_offsets(col.view(pa.binary()))
    return _b64decode_loop(off, data)


def _b64decode_loop(off: np.ndarray, data: np.ndarray) -> Optional[pa.Array]:
    mv = memoryview(data)
    a2b = binascii.a2b_base64
    try:
        parts = [a2b(mv[a:b], strict_mode=True) if b > a else b"" for a, b in zip(off[:-1].tolist(), off[1:].tolist())]
    except binascii.Error:
        return None
    # Strictly valid base64 is 4-char groups, '=' padding only at the end: decoded sizes follow.
    enc_len = np.diff(off)
    ends = off[1:] - 1
    last = np.where(enc_len > 0, data[np.maximum(ends, 0)], 0) if len(ends) else ends
    last2 = np.where(enc_len > 1, data[np.maximum(ends - 1, 0)], 0) if len(ends) else ends
    lens = enc_len // 4 * 3 - (last == 61) - ((last == 61) & (last2 == 61))
    if not bool(np.all(enc_len % 4 == 0)):      # (strict mode would have refused; stay exact anyway)
        lens = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    offsets = np.zeros(len(parts) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    if offsets[-1] >= _INT32_MAX:
        return pa.array(parts, pa.binary())
    return pa.Array.from_buffers(pa.binary(), len(parts),
                                 [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(parts))])


_HOST_RE = (r"^(?P<a>0|[1-9][0-9]{0,2})\.(?P<b>0|[1-9][0-9]{0,2})\.(?P<c>0|[1-9][0-9]{0,2})\."
            r"(?P<d>0|[1-9][0-9]{0,2}):(?P<port>[0-9]{1,9})$")


def parse_ipv4_hosts(col: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(address as uint32, port, ok) of ``a.b.c.d:port`` strings, element-wise.

    ``ok`` is False for anything else (IPv6, other spellings, octets > 255,
    nulls): the caller parses those with ``msgid.parse_host``."""
    n = len(col)
    m = pc.extract_regex(col, _HOST_RE)
    ok = np.asarray(m.is_valid()) if m.null_count else np.ones(n, bool)
    addr = np.zeros(n, np.uint64)
    port = np.zeros(n, np.int64)
    if not ok.any():
        return addr.astype(np.uint32), port, ok
    parts = []
    for name in ("a", "b", "c", "d", "port"):
        f = pc.struct_field(m, name)
        f = f.fill_null("0") if f.null_count else f
        parts.append(np.asarray(f.cast(pa.int64())))
    a, b, c, d, port = parts
    ok &= (a <= 255) & (b <= 255) & (c <= 255) & (d <= 255)
    addr = ((a << 24) | (b << 16) | (c << 8) | d).astype(np.uint64)
    return np.where(ok, addr, 0).astype(np.uint32), np.where(ok, port, 0), ok


# ---------------------------------------------------------------- records

def head_array(n: int) -> np.ndarray:
    return np.zeros(n, dtype=HEAD_V4)


def fixed_binary(buf: np.ndarray, n: int, width: int) -> pa.Array:
    """A binary array over ``n`` values of ``width`` bytes each stored back to back in ``buf``."""
    offsets = np.arange(n + 1, dtype=np.int32) * width
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(buf)])


def join_records(parts: list) -> pa.Array:
    """Element-wise concatenation; the result's data buffer holds the records back to back."""
    return pc.binary_join_element_wise(*parts, b"")


def body_crcs(body: pa.Array) -> np.ndarray:
    """BODYCRC of each body: ``crc32 & 0x7FFFFFFF`` (one zlib call per body)."""
    return _crcs(*binary_offsets(body)) & 0x7FFFFFFF


def _crcs(off: np.ndarray, data: np.ndarray) -> np.ndarray:
    """zlib.crc32 of each data[off[i]:off[i+1]] (C-level iterators, one zlib call per value)."""
    n = len(off) - 1
    if n == 0:
        return np.zeros(0, np.int64)
    lo, hi = int(off[0]), int(off[-1])
    width = int(off[1] - off[0])
    if width and width * n == hi - lo and bool(np.all(np.diff(off) == width)):
        # All one length: iterate the rows of a 2-D view (no slice objects).
        return np.fromiter(map(zlib.crc32, data[lo:hi].reshape(n, width)), dtype=np.int64, count=n)
    mv = memoryview(data)
    slices = map(slice, off[:-1].tolist(), off[1:].tolist())
    return np.fromiter(map(zlib.crc32, map(mv.__getitem__, slices)), dtype=np.int64, count=n)


def crc_digit_tails(records: pa.Array) -> pa.Array:
    """``__CRC32#\\x01`` + 10 digits (least significant first) + ``\\x02`` for each record, the CRC
    taken over the whole record (spec §2.12)."""
    c = _crcs(*binary_offsets(records)) & 0x7FFFFFFF
    n = len(records)
    out = np.empty((n, 20), np.uint8)
    out[:, :9] = np.frombuffer(CRC32.encode() + b"\x01", np.uint8)
    for k in range(10):
        out[:, 9 + k] = 48 + (c // 10 ** k) % 10
    out[:, 19] = 2
    return fixed_binary(out.reshape(-1), n, 20)


def segment_positions(sizes: np.ndarray, pos: int, seg_size: int, first_open: bool):
    """Place records with the 8-byte blank rule (spec §2.4).

    ``pos`` is the write position inside the current segment (``first_open``
    False: there is no current segment and the first record opens one).
    Returns (seg_index per record (0 = current/first), position in segment,
    [(first row, end row, blank bytes or 0, segment start position)])."""
    n = len(sizes)
    seg_of = np.zeros(n, np.int64)
    in_seg = np.zeros(n, np.int64)
    plan = []
    i = 0
    s = 0
    p = pos if first_open else 0
    while i < n:
        ends = p + np.cumsum(sizes[i:])
        k = int(np.searchsorted(ends, seg_size - 8, side="right"))   # rows with end + 8 <= seg_size
        in_seg[i:i + k] = ends[:k] - sizes[i:i + k]
        seg_of[i:i + k] = s
        end_pos = int(ends[k - 1]) if k else p
        if i + k < n:
            plan.append((i, i + k, seg_size - end_pos, p))
            i += k
            s += 1
            p = 0
        else:
            plan.append((i, n, 0, p))
            i = n
    return seg_of, in_seg, plan


def group_rows(tcode: np.ndarray, qid: np.ndarray):
    """Group rows by (topic code, queueId).

    Returns (gid of each group = topic code << 32 | queueId, ascending; group
    of each row; a stable order of the rows by group; rows per group).  Small
    code spaces use numpy's radix sort (uint16 keys), others a comparison sort."""
    tcode = np.asarray(tcode, np.int64)
    qid = np.asarray(qid, np.int64)
    k = len(tcode)
    if k == 0:
        z = np.zeros(0, np.int64)
        return z, z, z, z
    qmax, tmax = int(qid.max()), int(tcode.max())
    width = qmax + 1
    if int(qid.min()) >= 0 and int(tcode.min()) >= 0 and (tmax + 1) * width <= 1 << 16:
        dense = (tcode * width + qid).astype(np.uint16)
        counts_all = np.bincount(dense, minlength=(tmax + 1) * width)
        present = np.flatnonzero(counts_all)
        remap = np.zeros(len(counts_all), np.int64)
        remap[present] = np.arange(len(present))
        inv = remap[dense]
        order = np.argsort(dense, kind="stable")
        counts = counts_all[present]
        ug = (present // width) * (1 << 32) + present % width
        return ug.astype(np.int64), inv, order, counts.astype(np.int64)
    gid = tcode * (1 << 32) + qid
    ug, inv = np.unique(gid, return_inverse=True)
    inv = inv.reshape(-1)
    order = np.argsort(inv, kind="stable")
    counts = np.bincount(inv, minlength=len(ug)).astype(np.int64)
    return ug, inv, order, counts


def merge_index_entries(u_rec: np.ndarray, u_hash: np.ndarray, k_rec: np.ndarray, k_hash: np.ndarray):
    """Interleave UNIQ_KEY entries (one per record at most) and KEYS entries (several per record,
    already in piece order), both ascending by record: UNIQ_KEY first within a record."""
    nu, nk = len(u_rec), len(k_rec)
    rec = np.empty(nu + nk, np.int64)
    hsh = np.empty(nu + nk, np.int64)
    pu = np.arange(nu) + np.searchsorted(k_rec, u_rec, side="left")
    pk = np.arange(nk) + np.searchsorted(u_rec, k_rec, side="right")
    rec[pu], hsh[pu] = u_rec, u_hash
    rec[pk], hsh[pk] = k_rec, k_hash
    return rec, hsh


# ---------------------------------------------------------------- put.jsonl

_HEX = np.frombuffer(b"0123456789ABCDEF", np.uint8)


def hex_fixed(values: np.ndarray, digits: int) -> np.ndarray:
    """Upper-case hex of non-negative ints, ``digits`` wide: (n, digits) uint8."""
    v = values.astype(np.uint64)
    out = np.empty((len(v), digits), np.uint8)
    for k in range(digits):
        out[:, digits - 1 - k] = _HEX[((v >> np.uint64(4 * k)) & np.uint64(15)).astype(np.intp)]
    return out


_JSON_SPECIAL = np.zeros(256, bool)
_JSON_SPECIAL[[0, *range(3, 32), ord('"'), ord("\\")]] = True      # besides 0x01/0x02


def _json_str_needs_escape(arr: pa.Array) -> np.ndarray:
    """Rows holding a byte JSON must escape other than 0x01/0x02 (one LUT pass over the data)."""
    n = len(arr)
    out = np.zeros(n, bool)
    if n == 0:
        return out
    off, data = binary_offsets(_as_binary(arr))
    lo, hi = int(off[0]), int(off[-1])
    hit = np.flatnonzero(_JSON_SPECIAL[data[lo:hi]])
    if hit.size:
        out[np.searchsorted(off, hit + lo, side="right") - 1] = True
    return out


def json_escape_props(arr: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """JSON string bodies of properties strings (\\x01/\\x02 escaped) and the rows that need
    general escaping (done by the caller)."""
    s = pc.replace_substring(pc.replace_substring(arr, "\x01", "\\u0001"), "\x02", "\\u0002")
    return s, _json_str_needs_escape(arr)


def render_put_jsonl(first_i: int, ok_rows: np.ndarray, msg_ids: pa.Array, phy: np.ndarray, qo: np.ndarray,
                     size: np.ndarray, store_ts: np.ndarray, topic: pa.Array, qid: np.ndarray,
                     sys_flag: np.ndarray, tags_code: np.ndarray, props: pa.Array, newline: bool = False) -> pa.Array:
    """The put.jsonl lines (with a trailing newline if ``newline``) of PUT_OK rows, element-wise in Arrow.

    All arguments are already restricted to ``ok_rows``; ``topic`` and ``props``
    must not need JSON escaping beyond \\x01/\\x02 (checked by the caller)."""
    def s(a):
        return pc.cast(pa.array(a), pa.string())
    return pc.binary_join_element_wise(
        '{"i":', s(ok_rows + first_i),
        ',"status":"PUT_OK","appendStatus":"PUT_OK","msgId":"', msg_ids,
        '","commitLogOffset":', s(phy), ',"queueOffset":', s(qo), ',"size":', s(size),
        ',"storeTimestamp":', s(store_ts), ',"topic":"', topic, '","queueId":', s(qid),
        ',"sysFlag":', s(sys_flag), ',"tagsCode":', s(tags_code), ',"propertiesString":"', props,
        '"}\n' if newline else '"}', "")
