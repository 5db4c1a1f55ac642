"""zlib's CRC-32 of many byte spans of one buffer at once, vectorized over the spans with numpy.

One ``zlib.crc32`` call per span costs ~0.3 µs of Python per call, more than the
CRC of a short body itself.  Here all spans of a buffer advance together, eight
bytes per numpy step (slice-by-8, four 16-bit table lookups per step):

* CRC-32 is affine: ``crc(M) = raw(M) ^ crc(zeros(len M))``, where ``raw`` has a
  zero initial register and no final xor.  ``raw`` ignores leading zero bytes,
  so every span is read right-aligned - its last byte at the end of the last
  8-byte column - with the bytes in front of it masked to zero; spans of
  different lengths then run through the same columns.
* Spans are grouped by length (up to :data:`MAX_VECTOR_SPAN`) so short spans do
  not pay for long ones; longer spans take one ``zlib.crc32`` call each (for
  them the call overhead is small against the bytes).

The result equals ``zlib.crc32(buf[start:start + length])`` for every span
(tests compare both on random spans).
"""

from __future__ import annotations

import zlib

import numpy as np

MAX_VECTOR_SPAN = 1024       # longer spans: one zlib call each
_BLOCK_ROWS = 4096
_BUCKET_WIDTHS = (64, 128, 256, 512, MAX_VECTOR_SPAN)
_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


def _tables() -> np.ndarray:
    """16-bit lookup tables U[0..3]: the raw CRC contribution of bytes 2j, 2j+1 of an 8-byte step.

    From the byte tables of slice-by-8: T[0] is zlib's table (poly 0xEDB88320,
    reflected); T[k][b] = (T[k-1][b] >> 8) ^ T[0][T[k-1][b] & 0xFF] is byte b
    followed by k zero bytes.  Byte i of a step is followed by 7 - i bytes.
    """
    t0 = np.zeros(256, dtype=np.uint64)
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        t0[b] = c
    t = [t0]
    for _ in range(7):
        prev = t[-1]
        t.append((prev >> np.uint64(8)) ^ t0[(prev & np.uint64(0xFF)).astype(np.intp)])
    v = np.arange(1 << 16, dtype=np.uint64)
    lo, hi = (v & np.uint64(0xFF)).astype(np.intp), (v >> np.uint64(8)).astype(np.intp)
    # Step bytes b0..b7 (little-endian); pair j = bytes 2j (low) and 2j+1 (high).
    return np.stack([t[7 - 2 * j][lo] ^ t[6 - 2 * j][hi] for j in range(4)]).astype(np.uint32)


_U = _tables()
_U0, _U1, _U2, _U3 = (_U[j] for j in range(4))
_ZERO_CRC: dict[int, int] = {}


def padded_words(data) -> np.ndarray:
    """Little-endian uint64 words over ``data`` with 16 zero words after it (reads past the end stay inside)."""
    b = np.frombuffer(data, dtype=np.uint8)
    w = np.zeros(len(b) // 8 + 16, dtype="<u8")
    w.view(np.uint8)[:len(b)] = b
    return w


def crc32_spans(data, starts: np.ndarray, lengths: np.ndarray, *, words: np.ndarray | None = None) -> np.ndarray:
    """``zlib.crc32(data[s:s + n])`` for every (s, n), as int64.

    ``words``: :func:`padded_words` of ``data`` when the caller has them (e.g.
    ``columnar_headers.PaddedBuffer.words``: little-endian words, zero-padded after the data).
    """
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    out = np.zeros(len(starts), dtype=np.int64)
    if len(starts) == 0:
        return out
    if words is None:
        words = padded_words(data)
    ends = starts + lengths
    lo = 0
    for width in _BUCKET_WIDTHS:
        rows = np.flatnonzero((lengths > lo) & (lengths <= width))
        lo = width
        if len(rows) == 0:
            continue
        e, n = (ends, lengths) if len(rows) == len(starts) else (ends[rows], lengths[rows])
        raw = np.empty(len(rows), dtype=np.int64)
        for a in range(0, len(rows), _BLOCK_ROWS):        # blocks keep the temporaries in cache
            raw[a:a + _BLOCK_ROWS] = _raw_right_aligned(words, e[a:a + _BLOCK_ROWS], n[a:a + _BLOCK_ROWS], width)
        out[rows] = raw
    long_rows = np.flatnonzero(lengths > MAX_VECTOR_SPAN)
    if len(long_rows):
        mv = memoryview(np.frombuffer(data, dtype=np.uint8))
        out[long_rows] = [zlib.crc32(mv[s:e]) for s, e in zip(starts[long_rows].tolist(), ends[long_rows].tolist())]
        lengths = np.where(lengths > MAX_VECTOR_SPAN, 0, lengths)      # raw is the CRC already
    out ^= _zero_crcs(lengths)
    return out


def _zero_crcs(lengths: np.ndarray) -> np.ndarray:
    """crc32 of ``length`` zero bytes per row (0 for length 0), from a small cache."""
    uniq, inv = np.unique(lengths, return_inverse=True)
    for n in uniq.tolist():
        if n not in _ZERO_CRC:
            _ZERO_CRC[n] = zlib.crc32(bytes(n)) if n else 0
    return np.array([_ZERO_CRC[n] for n in uniq.tolist()], dtype=np.int64)[inv]


def _raw_right_aligned(words: np.ndarray, ends: np.ndarray, lengths: np.ndarray, width: int) -> np.ndarray:
    """Raw CRC (zero initial register, no final xor) of spans ending at ``ends``, all ``<= width`` bytes."""
    steps = (width + 7) // 8
    wi = ends >> 3
    r = ((ends & 7) << 3).astype(np.uint64)
    rl = np.uint64(64) - r
    if int(wi.min()) < steps:          # spans near the buffer's start: columns before it read word 0 (masked)
        def word(k):
            return words[np.maximum(wi - k, 0)]
    else:
        def word(k):
            return words[wi - k]
    full = int(lengths.min()) // 8     # columns k < full hold 8 span bytes in every row
    crc = None
    # Column k holds the 8 bytes ending 8k bytes before the span's end; columns run first to last.
    hi = word(steps)
    for k in range(steps - 1, -1, -1):
        lo = hi
        hi = word(k)
        x = lo >> r
        x |= hi << rl                                    # little-endian 8 bytes [end-8k-8, end-8k)
        if k >= full:                                    # bytes in front of the span read as 0
            drop = np.clip(8 * (k + 1) - lengths, 0, 8).astype(np.uint64) << np.uint64(3)
            x &= _ONES << drop
        if crc is not None:
            x ^= crc
        xi = x.view(np.int64)
        crc = _U0[xi & 0xFFFF]
        crc ^= _U1[(xi >> 16) & 0xFFFF]
        crc ^= _U2[(xi >> 32) & 0xFFFF]
        crc ^= _U3[(xi >> 48) & 0xFFFF]
    return crc.astype(np.int64)
