"""Vectorized decoding of CommitLog record headers (no Spark import): the record chain walk and every fixed field.

Everything here works on one bytes-like buffer holding whole records and a numpy array of record start
positions inside it (ascending, non-overlapping). Fixed-offset header fields are gathered with numpy fancy
indexing. The variable fields are in :mod:`columnar_properties` (properties, keys, tags) and
:mod:`columnar` (hosts, msgId, bodies and the whole Arrow batch).

* :func:`walk_chain` - follow the totalSize chain of a CommitLog chunk and return record positions (the only
  per-record Python loop; it touches 8 bytes per record).
* :func:`decode_headers` - every fixed field of N records, validated the way ``decode_record`` validates
  (totalSize = sum of the lengths ...).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import pyarrow as pa

from .. import limits
from ..errors import CorruptRecordError
from .record import BLANK_MAGIC, BORNHOST_V6_FLAG, MAGIC_V1, MAGIC_V2, STOREHOST_V6_FLAG, topic_bytes_problem

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
