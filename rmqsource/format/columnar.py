"""Vectorized decoding of many CommitLog records into Arrow arrays (no Spark import).

Everything here works on one bytes-like buffer holding whole records and a
numpy array of record start positions inside it (ascending, non-overlapping).
Fixed-offset header fields are gathered with numpy fancy indexing; variable
fields (body, topic, property keys/values) become Arrow binary/string arrays
built from offsets into the buffer with a single C++ ``take`` (no per-row
Python objects).  Properties are split with numpy on the 0x01/0x02 separator
bytes (safe on UTF-8: those bytes never occur inside a multi-byte sequence),
following RocketMQ's parser (spec §2.8): empty keys/values and segments
without 0x01 are dropped, and a later duplicate key wins.

Main entry points:

* :func:`walk_chain` - follow the totalSize chain of a CommitLog chunk and
  return record positions (the only per-record Python loop; it touches 8
  bytes per record).
* :func:`decode_headers` - every fixed field of N records, validated the way
  ``decode_record`` validates (totalSize = sum of the lengths ...).
* :func:`build_columns` - Arrow arrays for the requested output columns.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import limits
from ..errors import CorruptRecordError
from .compression import inflate_body
from .record import (BLANK_MAGIC, BORNHOST_V6_FLAG, COMPRESSED_FLAG, MAGIC_V1, MAGIC_V2, STOREHOST_V6_FLAG,
                     TRANSACTION_MASK, topic_bytes_problem)

Locator = Callable[[int], tuple[str, int]]   # buffer position -> (file, offset in file)

_SIZE_MAGIC = struct.Struct(">ii")

# walk_chain stop reasons
STOP_LIMIT = "LIMIT"          # reached ``limit`` exactly (or the record count cap)
STOP_BLANK = "BLANK"          # end-of-segment blank record at stop position
STOP_END = "END"              # zeros / unknown magic at stop position (no record starts here)
STOP_SHORT = "SHORT"          # the next record runs past the end of the buffer (read more)
STOP_CORRUPT = "CORRUPT"      # a record magic with an impossible totalSize


@dataclass(frozen=True)
class ChainStop:
    position: int
    reason: str
    detail: str = ""
    total_size: int = 0


def walk_chain(buf, start: int, limit: int, *, segment_remaining: Optional[int] = None,
               max_records: Optional[int] = None,
               max_record_bytes: int = limits.MAX_RECORD_BYTES_READ) -> tuple[np.ndarray, ChainStop]:
    """Positions of consecutive records in ``buf[start:limit]``.

    ``limit`` is where this walk must stop (a split point or the end of the
    buffer); ``segment_remaining`` is how many bytes of the segment remain from
    ``buf[start]`` on (for the totalSize bound; default: the buffer).
    A record that starts before ``limit`` but runs past the end of ``buf`` stops
    the walk with STOP_SHORT so the caller can read further.
    """
    unpack = _SIZE_MAGIC.unpack_from
    n_buf = len(buf)
    seg_end = start + segment_remaining if segment_remaining is not None else n_buf
    out = []
    append = out.append
    pos = start
    cap = max_records if max_records is not None else -1
    while pos < limit:
        if len(out) == cap:
            return np.array(out, dtype=np.int64), ChainStop(pos, STOP_LIMIT)
        if pos + 8 > n_buf:
            if pos + 8 > seg_end:
                return np.array(out, dtype=np.int64), ChainStop(pos, STOP_END, "fewer than 8 bytes left in the segment")
            return np.array(out, dtype=np.int64), ChainStop(pos, STOP_SHORT)
        total, magic = unpack(buf, pos)
        if magic != MAGIC_V1 and magic != MAGIC_V2:
            if magic == BLANK_MAGIC:
                return np.array(out, dtype=np.int64), ChainStop(pos, STOP_BLANK)
            detail = "zero bytes" if (total == 0 and magic == 0) else f"unknown magic code 0x{magic & 0xFFFFFFFF:08X}"
            return np.array(out, dtype=np.int64), ChainStop(pos, STOP_END, detail)
        if total < limits.MIN_RECORD_BYTES or pos + total > seg_end or total > max_record_bytes:
            return np.array(out, dtype=np.int64), ChainStop(
                pos, STOP_CORRUPT, f"totalSize {total} outside [{limits.MIN_RECORD_BYTES}, "
                                   f"{min(seg_end - pos, max_record_bytes)}]", total)
        if pos + total > n_buf:
            return np.array(out, dtype=np.int64), ChainStop(pos, STOP_SHORT, total_size=total)
        append(pos)
        pos += total
    return np.array(out, dtype=np.int64), ChainStop(pos, STOP_LIMIT)


# --------------------------------------------------------------------------- headers
#
# Fixed-width big-endian fields are read through 8-byte windows: the buffer is
# viewed as native little-endian uint64 words (padded by >= 8 zero bytes), the
# window at byte p is (w[p>>3] >> 8r) | (w[(p>>3)+1] << (64-8r)) with r = p & 7,
# and a byteswap turns it into the big-endian value of bytes p..p+7.  A record's
# fixed first 88 bytes are gathered whole instead (:func:`header_block`).

_AR = {w: np.arange(w, dtype=np.int64) for w in (1, 2, 4, 8)}
_M32 = np.uint64(0xFFFFFFFF)
_U32 = np.uint64(32)
_U64_0 = np.uint64(0)


def padded_words(buf) -> np.ndarray:
    """``buf`` as little-endian uint64 words followed by at least one zero word (copies unless pre-padded)."""
    if isinstance(buf, PaddedBuffer):
        return buf.words
    b = np.frombuffer(buf, dtype=np.uint8)
    nw = len(b) // 8 + 16
    out = np.zeros(nw, dtype="<u8")
    out.view(np.uint8)[:len(b)] = b
    return out


class PaddedBuffer:
    """Bytes read into an 8-byte aligned array with zero padding: ``view`` has the data, ``words`` the uint64 words.

    Supports the buffer protocol through :attr:`view` (callers pass ``pb.view``
    as the record buffer and ``pb`` as ``words`` source).
    """

    __slots__ = ("array", "view", "words", "n")

    def __init__(self, capacity: int):
        nw = capacity // 8 + 16
        self.words = np.empty(nw, dtype="<u8")
        self.array = self.words.view(np.uint8)
        self.n = 0
        self.view = self.array[:0]

    def set_length(self, n: int) -> None:
        self.n = n
        self.array[n:] = 0           # windows past the data read zeros
        self.view = self.array[:n]


def read_padded(fd: int, size: int, position: int) -> PaddedBuffer:
    """``os.preadv`` ``size`` bytes at ``position`` into a fresh :class:`PaddedBuffer` (short at end of file)."""
    import os
    pb = PaddedBuffer(size)
    got = 0
    mv = memoryview(pb.array)
    while got < size:
        k = os.preadv(fd, [mv[got:size]], position + got)
        if k <= 0:
            break
        got += k
    pb.set_length(got)
    return pb


def window_at(w: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Big-endian uint64 of the 8 bytes at each position ``p`` (bytes past the data read as the padding)."""
    wi = p >> 3
    r = ((p & 7) << 3).astype(np.uint64)
    x = (w[wi] >> r) | (w[wi + 1] << (np.uint64(64) - r))
    return x.byteswap()


def _i32(x: np.ndarray) -> np.ndarray:
    return (x & _M32).astype(np.uint32).view(np.int32)


def _hi32(x: np.ndarray) -> np.ndarray:
    return (x >> _U32).astype(np.uint32).view(np.int32)


def _gather(b: np.ndarray, idx: np.ndarray, width: int, dtype: str) -> np.ndarray:
    """Big-endian integers of ``width`` bytes at positions ``idx`` of uint8 array ``b``."""
    if len(idx) == 0:
        return np.empty(0, dtype=np.dtype(dtype).newbyteorder("="))
    g = b[idx[:, None] + _AR[width]]
    return g.view(dtype).reshape(-1).astype(np.dtype(dtype).newbyteorder("="))


@dataclass
class Headers:
    """Fixed fields and variable-field spans of N records (positions in the buffer)."""

    pos: np.ndarray
    total_size: np.ndarray
    magic: np.ndarray
    body_crc: np.ndarray
    queue_id: np.ndarray
    flag: np.ndarray
    queue_offset: np.ndarray
    phy_offset: np.ndarray
    sys_flag: np.ndarray
    born_ts: np.ndarray
    born_host_pos: np.ndarray     # start of the born address
    store_ts: np.ndarray
    store_host_pos: np.ndarray
    reconsume_times: np.ndarray
    prepared_tx_offset: np.ndarray
    body_pos: np.ndarray
    body_len: np.ndarray
    topic_pos: np.ndarray
    topic_len: np.ndarray
    props_pos: np.ndarray
    props_len: np.ndarray
    born_key: np.ndarray          # uint64 big-endian window at born_host_pos (IPv4: address << 32 | port)
    store_key: np.ndarray         # same at store_host_pos
    topic_index: np.ndarray       # row -> index into ``topics``
    topics: list                  # the distinct topic bytes

    def __len__(self) -> int:
        return len(self.pos)

    def take(self, rows: np.ndarray) -> "Headers":
        return Headers(**{k: getattr(self, k)[rows] for k in self.__dataclass_fields__ if k != "topics"},
                       topics=self.topics)


def _fail(locate: Optional[Locator], pos: int, reason: str):
    file, offset = locate(pos) if locate else ("<buffer>", pos)
    raise CorruptRecordError(reason, file=file, offset=offset)


def _first(bad: np.ndarray) -> int:
    return int(np.flatnonzero(bad)[0])


# A record's first 88 bytes (IPv4 hosts: totalSize .. bodyLength) as one big-endian struct.  One
# gather through a stride-1 view of the buffer copies them for all records at once; the fields
# are then plain (strided) array reads.
HEADER_V4 = np.dtype([("total", ">i4"), ("magic", ">i4"), ("body_crc", ">i4"), ("queue_id", ">i4"),
                      ("flag", ">i4"), ("queue_offset", ">i8"), ("phy_offset", ">i8"), ("sys_flag", ">i4"),
                      ("born_ts", ">i8"), ("born_key", ">u8"), ("store_ts", ">i8"), ("store_key", ">u8"),
                      ("reconsume", ">i4"), ("prepared", ">i8"), ("body_len", ">i4")])
assert HEADER_V4.itemsize == 88
_HEADER_BYTES = np.dtype((np.void, HEADER_V4.itemsize))


def header_block(w: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """HEADER_V4 rows of the records at ``pos`` (``w``: padded words; bytes past the data read as padding)."""
    b = w.view(np.uint8)
    view = np.ndarray(shape=(len(b) - HEADER_V4.itemsize + 1,), dtype=_HEADER_BYTES, buffer=b, strides=(1,))
    return view[pos].view(HEADER_V4)


def cq_positions_match(buf, positions: np.ndarray, phys: np.ndarray, sizes: np.ndarray, *,
                       words: Optional[np.ndarray] = None) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """Per position: a message record whose totalSize and PHYSICALOFFSET equal the ConsumeQueue unit's.

    Never raises (positions must lie inside the buffer): used to trust ConsumeQueue
    units as record starts before decoding.  Also returns the header rows for
    :func:`decode_headers` (``windows=``).
    """
    n = len(positions)
    if n == 0:
        return np.zeros(0, dtype=bool), None
    w = padded_words(buf) if words is None else words
    hb = header_block(w, np.asarray(positions, dtype=np.int64))
    total = hb["total"].astype(np.int64)
    magic = hb["magic"]
    ok = (((magic == MAGIC_V1) | (magic == MAGIC_V2)) & (total == sizes) & (hb["phy_offset"] == phys)
          & (total <= limits.MAX_RECORD_BYTES_READ))
    return ok, hb


def _topic_dictionary(b: np.ndarray, topic_pos: np.ndarray, topic_len: np.ndarray) -> tuple[np.ndarray, list]:
    """(index of each row's topic in the list, distinct topic bytes): records share a few topics."""
    if len(topic_pos) == 0:
        return np.zeros(0, dtype=np.int32), []
    enc = spans_binary(b, topic_pos, topic_len).dictionary_encode()
    return enc.indices.to_numpy(zero_copy_only=False), enc.dictionary.to_pylist()


def _first_bad_topic(topic_index: np.ndarray, topics: list) -> Optional[int]:
    """First row whose topic bytes :func:`~rmqsource.format.record.topic_bytes_problem` refuses."""
    bad = [k for k, t in enumerate(topics) if topic_bytes_problem(t)]
    return _first(np.isin(topic_index, bad)) if bad else None


def decode_headers(buf, positions: np.ndarray, *, locate: Optional[Locator] = None,
                   expected_sizes: Optional[np.ndarray] = None, words: Optional[np.ndarray] = None,
                   windows: Optional[np.ndarray] = None) -> Headers:
    """Decode and validate the fixed part of the records at ``positions``.

    Raises CorruptRecordError (file and offset via ``locate``) for the first
    record whose lengths do not add up to its totalSize, exactly the checks of
    :func:`rmqsource.format.record.decode_record` (CRC excluded).
    ``expected_sizes`` (ConsumeQueue sizes) must equal the totalSize fields.
    ``words`` is :func:`padded_words` of ``buf`` when the caller has it;
    ``windows`` the rows :func:`cq_positions_match` returned for these positions.
    """
    b = np.frombuffer(buf, dtype=np.uint8)
    pos = np.asarray(positions, dtype=np.int64)
    n = len(pos)
    nb = len(b)
    if n and (pos[0] < 0 or pos[-1] + 8 > nb):
        _fail(locate, int(pos[-1] if pos[-1] + 8 > nb else pos[0]), "record header outside the buffer")
    w = padded_words(buf) if words is None else words
    hb = windows if windows is not None else header_block(w, pos)
    total = hb["total"].astype(np.int64)
    magic = hb["magic"].astype(np.int32)
    bad = (magic != MAGIC_V1) & (magic != MAGIC_V2)
    if bad.any():
        i = _first(bad)
        m = int(magic[i]) & 0xFFFFFFFF
        _fail(locate, int(pos[i]), f"no message record here: magic code 0x{m:08X}")
    end = pos + total
    bad = (total < limits.MIN_RECORD_BYTES) | (end > nb)
    if bad.any():
        i = _first(bad)
        _fail(locate, int(pos[i]), f"totalSize {int(total[i])} outside [{limits.MIN_RECORD_BYTES}, {nb - int(pos[i])}]")
    if expected_sizes is not None:
        bad = total != np.asarray(expected_sizes, dtype=np.int64)
        if bad.any():
            i = _first(bad)
            _fail(locate, int(pos[i]), f"ConsumeQueue says {int(expected_sizes[i])} bytes but the record's "
                                       f"totalSize is {int(total[i])}")
    # Every record is >= 91 bytes: the first 88 bytes (IPv4 layout up to bodyLength) lie inside it.
    body_crc = hb["body_crc"].astype(np.int32)
    queue_id = hb["queue_id"].astype(np.int32)
    flag = hb["flag"].astype(np.int32)
    queue_offset = hb["queue_offset"].astype(np.int64)
    phy_offset = hb["phy_offset"].astype(np.int64)
    sys_flag = hb["sys_flag"].astype(np.int32)
    born_ts = hb["born_ts"].astype(np.int64)
    born_host_pos = pos + 48
    born_key = hb["born_key"].astype(np.uint64)
    v6 = (sys_flag & (BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)) != 0
    if not v6.any():
        # IPv4 layout: storeTimestamp @56, storeHost @64, reconsumeTimes @72, prepared @76, bodyLength @84
        store_ts = hb["store_ts"].astype(np.int64)
        store_host_pos = pos + 64
        store_key = hb["store_key"].astype(np.uint64)
        reconsume = hb["reconsume"].astype(np.int32)
        prepared = hb["prepared"].astype(np.int64)
        body_len = hb["body_len"].astype(np.int64)
        tail = pos + 72
    else:
        born_len = np.where(sys_flag & BORNHOST_V6_FLAG, 20, 8).astype(np.int64)
        store_len = np.where(sys_flag & STOREHOST_V6_FLAG, 20, 8).astype(np.int64)
        store_ts_pos = born_host_pos + born_len
        store_host_pos = store_ts_pos + 8
        tail = store_host_pos + store_len            # reconsumeTimes
        # The IPv6 layouts' fixed part may run past a short record: check before reading.
        bad = tail + 16 + np.where(magic == MAGIC_V2, 2, 1) + 2 > end
        if bad.any():
            i = _first(bad)
            _fail(locate, int(pos[i]), f"totalSize {int(total[i])} is smaller than the fixed fields")
        store_ts = window_at(w, store_ts_pos).view(np.int64)
        store_key = window_at(w, store_host_pos)
        t0 = window_at(w, tail)
        t1 = window_at(w, tail + 8)
        reconsume = _hi32(t0)
        prepared = (((t0 & _M32) << _U32) | (t1 >> _U32)).view(np.int64)
        body_len = _i32(t1).astype(np.int64)
    body_pos = tail + 16
    v2 = magic == MAGIC_V2
    tlen_width = np.where(v2, 2, 1)
    # Fixed part incl. topic length and properties length must fit (IPv6 hosts add 24 bytes).
    bad = body_pos + tlen_width + 2 > end
    if bad.any():
        i = _first(bad)
        _fail(locate, int(pos[i]), f"totalSize {int(total[i])} is smaller than the fixed fields")
    bad = (body_len < 0) | (body_pos + body_len + tlen_width > end)
    if bad.any():
        i = _first(bad)
        _fail(locate, int(pos[i]), f"body length {int(body_len[i])} runs past the record end")
    tl_pos = body_pos + body_len
    tw = window_at(w, tl_pos) if n else np.zeros(0, dtype=np.uint64)
    # v2: 2-byte topic length (signed short), then the topic; v1: 1 signed byte.
    topic_len = np.where(v2, (tw >> np.uint64(48)).astype(np.uint16).view(np.int16),
                         (tw >> np.uint64(56)).astype(np.uint8).view(np.int8)).astype(np.int64)
    topic_pos = tl_pos + tlen_width
    bad = (topic_len < 0) | (topic_pos + topic_len + 2 > end)
    if bad.any():
        i = _first(bad)
        _fail(locate, int(pos[i]), f"topic length {int(topic_len[i])} runs past the record end")
    topic_index, topics = _topic_dictionary(b, topic_pos, topic_len)
    i = _first_bad_topic(topic_index, topics)
    if i is not None:
        raw = b[int(topic_pos[i]):int(topic_pos[i] + topic_len[i])].tobytes()
        _fail(locate, int(pos[i]), f"not a topic: {topic_bytes_problem(raw)}")
    pl_pos = topic_pos + topic_len
    pw = window_at(w, pl_pos) if n else np.zeros(0, dtype=np.uint64)
    props_len = (pw >> np.uint64(48)).astype(np.uint16).view(np.int16).astype(np.int64)
    props_pos = pl_pos + 2
    bad = (props_len < 0) | (props_pos + props_len != end)
    if bad.any():
        i = _first(bad)
        if props_len[i] < 0 or props_pos[i] + props_len[i] > end[i]:
            _fail(locate, int(pos[i]), f"properties length {int(props_len[i])} runs past the record end")
        _fail(locate, int(pos[i]), f"totalSize {int(total[i])} but fields add up to "
                                   f"{int(props_pos[i] + props_len[i] - pos[i])}")
    return Headers(pos=pos, total_size=total, magic=magic, body_crc=body_crc, queue_id=queue_id, flag=flag,
                   queue_offset=queue_offset, phy_offset=phy_offset, sys_flag=sys_flag, born_ts=born_ts,
                   born_host_pos=born_host_pos, store_ts=store_ts, store_host_pos=store_host_pos,
                   reconsume_times=reconsume, prepared_tx_offset=prepared, body_pos=body_pos, body_len=body_len,
                   topic_pos=topic_pos, topic_len=topic_len, props_pos=props_pos, props_len=props_len,
                   born_key=born_key, store_key=store_key, topic_index=topic_index, topics=topics)


# --------------------------------------------------------------------------- variable fields

def spans_binary(data, starts: np.ndarray, lengths: np.ndarray, arrow_type=pa.binary()) -> pa.Array:
    """Arrow array of ``data[starts[i]:starts[i]+lengths[i]]`` (spans ascending, disjoint).

    Builds one array over ``data`` whose offsets alternate span/gap
    (:func:`span_gap_array`) and lets Arrow's C++ ``take`` copy the spans into a
    fresh contiguous array.
    """
    n = len(starts)
    if n == 0:
        return pa.array([], type=arrow_type)
    interleaved = span_gap_array(data, starts, lengths)
    out = interleaved.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int32)))
    if arrow_type != pa.binary():
        out = out.cast(arrow_type)
    return out


def span_gap_array(data, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """Binary array over ``data`` (no copy): element 2i is span i, element 2i+1 the gap after it.

    Spans must be ascending and disjoint (at least one).  Arrow kernels that run
    per element (``find_substring`` ...) then read the spans in place; take the
    even elements of their result.
    """
    n = len(starts)
    starts = np.asarray(starts, dtype=np.int64)
    ends = starts + np.asarray(lengths, dtype=np.int64)
    offsets = np.empty(2 * n, dtype=np.int64)
    offsets[0::2] = starts
    offsets[1::2] = ends
    base = int(offsets[0])
    top = int(offsets[-1])
    if top - base >= 2 ** 31 - 1:
        raise ValueError("spans cover more than 2 GiB")
    buf = pa.py_buffer(data) if not isinstance(data, pa.Buffer) else data
    if base:
        buf = buf.slice(base, top - base)
    rel = (offsets - base).astype(np.int32)
    return pa.Array.from_buffers(pa.binary(), 2 * n - 1, [None, pa.py_buffer(rel), buf])


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


# --------------------------------------------------------------------------- hosts, msgId

_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_HEX2 = np.stack([_HEX[np.arange(256) >> 4], _HEX[np.arange(256) & 15]], axis=1)   # (256, 2)
_HEX16 = np.ascontiguousarray(_HEX2).view("<u2").reshape(256)                      # two hex chars per byte


def _host_bytes(b: np.ndarray, host_pos: np.ndarray, v6: np.ndarray) -> np.ndarray:
    """(n, 21) uint8: [v6 flag, 16 address bytes (IPv4 left-aligned), 4 port bytes]."""
    n = len(host_pos)
    out = np.zeros((n, 21), dtype=np.uint8)
    if n == 0:
        return out
    width = np.where(v6, 20, 8)
    col = np.arange(20)
    idx = host_pos[:, None] + np.minimum(col[None, :], width[:, None] - 1)
    g = b[idx]
    out[:, 0] = v6
    # IPv6: 16 address + 4 port; IPv4: 4 address (cols 1-4) + port at 17-20.
    out[v6, 1:21] = g[v6]
    v4 = ~v6
    out[v4, 1:5] = g[v4, 0:4]
    out[v4, 17:21] = g[v4, 4:8]
    return out


def _format_host(key: bytes) -> str:
    port = int.from_bytes(key[17:21], "big", signed=True)
    if key[0]:
        groups = struct.unpack(">8H", key[1:17])
        return "[" + ":".join(f"{g:x}" for g in groups) + f"]:{port}"
    a = key[1:5]
    return f"{a[0]}.{a[1]}.{a[2]}.{a[3]}:{port}"


def _format_v4_key(key: int) -> str:
    port = key & 0xFFFFFFFF
    if port >= 1 << 31:
        port -= 1 << 32
    a = key >> 32
    return f"{a >> 24}.{(a >> 16) & 255}.{(a >> 8) & 255}.{a & 255}:{port}"


def host_strings(b: np.ndarray, host_pos: np.ndarray, v6: np.ndarray, key: Optional[np.ndarray] = None) -> pa.Array:
    """``a.b.c.d:port`` / ``[x:x:...]:port`` (Java's uncompressed IPv6 form) per row.

    ``key``: the big-endian 8-byte window at ``host_pos`` (IPv4 address and port), when known.
    """
    n = len(host_pos)
    if n == 0:
        return pa.array([], type=pa.string())
    if not v6.any():
        if key is None:
            hb = _host_bytes(b, host_pos, v6)
            key = (hb[:, 1:5].copy().view(">u4").reshape(-1).astype(np.uint64) << np.uint64(32)) | \
                hb[:, 17:21].copy().view(">u4").reshape(-1).astype(np.uint64)
        enc = pa.array(key.view(np.int64)).dictionary_encode()
        names = pa.array([_format_v4_key(v & 0xFFFFFFFFFFFFFFFF) for v in enc.dictionary.to_pylist()],
                         type=pa.string())
        return names.take(enc.indices)
    hb = _host_bytes(b, host_pos, v6)
    voids = np.ascontiguousarray(hb).view(np.dtype((np.void, 21))).reshape(-1)
    uniq, first, inv = np.unique(voids, return_index=True, return_inverse=True)
    names = pa.array([_format_host(hb[i].tobytes()) for i in first.tolist()], type=pa.string())
    return names.take(pa.array(inv.reshape(-1).astype(np.int32)))


def msg_id_strings(b: np.ndarray, h: Headers, store_v6: np.ndarray) -> pa.Array:
    """Offset msgId: hex(storeIP + port + stored physical offset), 32 or 56 upper-case chars."""
    n = len(h)
    if n == 0:
        return pa.array([], type=pa.string())
    if not store_v6.any():
        raw = np.empty((n, 2), dtype=">u8")
        raw[:, 0] = h.store_key
        raw[:, 1] = h.phy_offset.view(np.uint64)
        chars = _HEX16[raw.view(np.uint8)]                     # (n, 16) uint16 = (n, 32) ASCII bytes
        offsets = np.arange(0, 32 * (n + 1), 32, dtype=np.int32)
        return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(chars)])
    width = np.where(store_v6, 28, 16)
    host_w = width - 8
    col = np.arange(28)[None, :]
    idx = np.where(col < host_w[:, None], h.store_host_pos[:, None] + col,
                   h.pos[:, None] + 28 + np.minimum(col - host_w[:, None], 7))
    raw = b[idx]                                    # (n, 28)
    mask = np.arange(28)[None, :] < width[:, None]
    data = _HEX16[raw[mask]]
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(2 * width, out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


_TX_NAMES = pa.array(["NOT_TYPE", "PREPARED_TYPE", "COMMIT_TYPE", "ROLLBACK_TYPE"], type=pa.string())


def transaction_type_strings(sys_flag: np.ndarray) -> pa.Array:
    return _TX_NAMES.take(pa.array(((sys_flag & TRANSACTION_MASK) >> 2).astype(np.int32)))


def timestamps_us(ms: np.ndarray) -> pa.Array:
    return pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), len(ms),
                                 [None, pa.py_buffer(np.ascontiguousarray(ms, dtype=np.int64) * 1000)])


def constant_string(value: str, n: int) -> pa.Array:
    return pa.array([value], type=pa.string()).take(pa.array(np.zeros(n, dtype=np.int32)))


def int_array(values: np.ndarray, arrow_type) -> pa.Array:
    return pa.array(np.ascontiguousarray(values).astype(arrow_type.to_pandas_dtype(), copy=False), type=arrow_type)


# --------------------------------------------------------------------------- bodies

def body_array(buf, h: Headers, *, decompress: bool = False, max_inflated: int = limits.DEFAULT_MAX_INFLATED_BODY_BYTES,
               locate: Optional[Locator] = None) -> pa.Array:
    arr = spans_binary(buf, h.body_pos, h.body_len)
    if decompress:
        comp = np.flatnonzero(h.sys_flag & COMPRESSED_FLAG)
        if len(comp):
            new = []
            for i in comp.tolist():
                file, off = locate(int(h.pos[i])) if locate else (None, int(h.pos[i]))
                new.append(inflate_body(arr[i].as_py(), int(h.sys_flag[i]), max_bytes=max_inflated,
                                        file=file, offset=off))
            mask = np.zeros(len(h), dtype=bool)
            mask[comp] = True
            arr = pc.replace_with_mask(arr, pa.array(mask), pa.array(new, type=pa.binary()))
    return arr


# --------------------------------------------------------------------------- full batch

def needs_properties(columns: Iterable[str]) -> bool:
    return bool({"properties", "tags", "keys", "uniqKey"} & set(columns))


def build_columns(buf, h: Headers, columns: Sequence[str], *, tags_code: Optional[np.ndarray] = None,
                  tags_code_valid: Optional[np.ndarray] = None, broker: str = "", store_path: str = "",
                  decompress: bool = False, max_inflated: int = limits.DEFAULT_MAX_INFLATED_BODY_BYTES,
                  locate: Optional[Locator] = None, map_type: Optional[pa.DataType] = None,
                  props: Optional[PropertyColumns] = None, words: Optional[np.ndarray] = None,
                  topics: Optional[pa.Array] = None, body: Optional[pa.Array] = None) -> dict[str, pa.Array]:
    """Arrow arrays of the requested output columns for records ``h`` in ``buf``.

    ``words``: :func:`padded_words` of ``buf`` if the caller has them (saves a copy).
    ``body``: the body column when the caller built it (inflated bodies).
    """
    b = np.frombuffer(buf, dtype=np.uint8)
    n = len(h)
    cols = set(columns)
    out: dict[str, pa.Array] = {}
    if props is None and needs_properties(cols):
        if words is None:
            words = padded_words(buf)
        props = parse_properties_columns(buf, h, words=words)
    if "topic" in cols:
        out["topic"] = topics if topics is not None else binary_to_string(spans_binary(buf, h.topic_pos, h.topic_len))
    if "queueId" in cols:
        out["queueId"] = pa.array(h.queue_id, type=pa.int32())
    if "queueOffset" in cols:
        out["queueOffset"] = pa.array(h.queue_offset, type=pa.int64())
    if "commitLogOffset" in cols:
        out["commitLogOffset"] = pa.array(h.phy_offset, type=pa.int64())
    store_v6 = (h.sys_flag & STOREHOST_V6_FLAG) != 0
    if "msgId" in cols:
        out["msgId"] = msg_id_strings(b, h, store_v6)
    if props is not None:
        if "uniqKey" in cols:
            out["uniqKey"] = props.entry_values(props.value_index("UNIQ_KEY"))
        if "tags" in cols:
            out["tags"] = props.entry_values(props.value_index("TAGS"))
        if "keys" in cols:
            out["keys"] = split_keys_column(props, props.value_index("KEYS"))
        if "properties" in cols:
            out["properties"] = props.map_array(map_type or pa.map_(pa.field("key", pa.string(), False),
                                                                    pa.field("value", pa.string(), True)))
    if "body" in cols:
        out["body"] = body if body is not None else body_array(buf, h, decompress=decompress,
                                                               max_inflated=max_inflated, locate=locate)
    if "bornTimestamp" in cols:
        out["bornTimestamp"] = timestamps_us(h.born_ts)
    if "storeTimestamp" in cols:
        out["storeTimestamp"] = timestamps_us(h.store_ts)
    if "bornHost" in cols:
        out["bornHost"] = host_strings(b, h.born_host_pos, (h.sys_flag & BORNHOST_V6_FLAG) != 0, key=h.born_key)
    if "storeHost" in cols:
        out["storeHost"] = host_strings(b, h.store_host_pos, store_v6, key=h.store_key)
    if "sysFlag" in cols:
        out["sysFlag"] = pa.array(h.sys_flag, type=pa.int32())
    if "flag" in cols:
        out["flag"] = pa.array(h.flag, type=pa.int32())
    if "reconsumeTimes" in cols:
        out["reconsumeTimes"] = pa.array(h.reconsume_times, type=pa.int32())
    if "bodyCRC" in cols:
        out["bodyCRC"] = pa.array(h.body_crc, type=pa.int32())
    if "preparedTransactionOffset" in cols:
        out["preparedTransactionOffset"] = pa.array(h.prepared_tx_offset, type=pa.int64())
    if "transactionType" in cols:
        out["transactionType"] = transaction_type_strings(h.sys_flag)
    if "storeSize" in cols:
        out["storeSize"] = pa.array(h.total_size.astype(np.int32), type=pa.int32())
    if "tagsCode" in cols:
        if tags_code is None:
            out["tagsCode"] = pa.nulls(n, type=pa.int64())
        else:
            mask = None if tags_code_valid is None else ~tags_code_valid
            out["tagsCode"] = pa.array(np.asarray(tags_code, dtype=np.int64), type=pa.int64(),
                                       mask=mask if mask is not None and mask.any() else None)
    if "broker" in cols:
        out["broker"] = constant_string(broker, n)
    if "storePath" in cols:
        out["storePath"] = constant_string(store_path, n)
    return out


def exact_tag_mask(props: PropertyColumns, tags: frozenset) -> np.ndarray:
    """Rows whose TAGS property equals one of ``tags`` exactly."""
    idx = props.value_index("TAGS")
    n = len(idx)
    if not tags:
        return np.zeros(n, dtype=bool)
    vals = props.entry_values(idx)
    return np.asarray(pc.fill_null(pc.is_in(vals, value_set=pa.array(sorted(tags), type=pa.string())), False)
                      .to_numpy(zero_copy_only=False), dtype=bool)
