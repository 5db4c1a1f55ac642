"""Vectorized encoding helpers for the writer's columnar fast path (pure: no file I/O).

The per-message writer (``MessageStoreWriter._prepare`` + ``_put_locked``) is
the reference.  This module computes the same bytes for many messages at once
with numpy and pyarrow.compute, from the columns of
:class:`~rmqsource.format.message_columns.MessageColumns`:

* :func:`serialize_properties` -- ``TAGS\\x01t\\x02KEYS\\x01k\\x02`` + the map
  entries, element-wise in Arrow; :func:`java_hashes` -- ``String.hashCode`` of
  many strings (ASCII vectorized over the Arrow data buffer, others scalar);
  :func:`head_array` -- the fixed 88-byte record heads (IPv4/IPv4) as a numpy
  structured array; :func:`join_records` -- ``binary_join_element_wise`` of
  head+body+topic+props: the data buffer of the result IS the CommitLog bytes.
* :func:`crc_digit_tails` -- the ``__CRC32#`` property tails (5.2+).

JSON-lines intake lives in :mod:`rmqsource.store.json_lines`, ``put.jsonl``
rendering in :mod:`rmqsource.store.put_jsonl`.
"""

from __future__ import annotations

import functools
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .javahash import java_string_hash
from .properties import CRC32

__all__ = ["HEAD_V4", "java_hashes", "serialize_properties", "head_array", "join_records", "crc_digit_tails",
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

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


# ---------------------------------------------------------------- arrow helpers

def binary_offsets(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets[n+1] as int64 absolute into data, data as uint8) of a (large_)binary/string array."""
    bufs = arr.buffers()
    wide = pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type)
    off = np.frombuffer(bufs[1], dtype=np.int64 if wide else np.int32, count=len(arr) + 1 + arr.offset)
    off = off[arr.offset:].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return off, data


def as_binary(arr) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if pa.types.is_string(arr.type):
        return arr.view(pa.binary())
    if pa.types.is_large_string(arr.type):
        return arr.view(pa.large_binary())
    return arr


def single_chunk(arr) -> pa.Array:
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
    arr = as_binary(arr)
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
    return np.where(s == INT32_MIN, 0, np.abs(s))


def tags_codes(tags: pa.Array) -> np.ndarray:
    """tagsCode of each TAGS value (0 for null/empty), hashing each distinct value once."""
    tags = single_chunk(tags)
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
    arr = as_binary(single_chunk(arr))
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
    arr = single_chunk(arr)
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
