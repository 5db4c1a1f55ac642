"""The vectorized CRC-32 of many spans (rmqsource.format.crc32) equals zlib.crc32 span by span."""

from __future__ import annotations

import random
import zlib

import numpy as np
import pytest

from rmqsource.format.crc32 import MAX_VECTOR_SPAN, crc32_spans, padded_words

pytestmark = pytest.mark.unit

SEED = 20261123


def test_random_spans_equal_zlib():
    print(f"seed {SEED}")
    rng = random.Random(SEED)
    data = bytes(rng.getrandbits(8) for _ in range(20_000))
    edge = [0, 1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 63, 64, 65, 127, 128, 129, 511, 512, 513,
            MAX_VECTOR_SPAN - 1, MAX_VECTOR_SPAN, MAX_VECTOR_SPAN + 1, 5000]
    starts, lengths = [], []
    for _ in range(4000):
        n = rng.choice(edge + [rng.randrange(0, 2000)])
        s = rng.randrange(0, len(data) - n + 1)
        starts.append(s)
        lengths.append(n)
    # spans touching the buffer's first and last byte (columns read before the start are masked)
    starts += [0, 0, 1, len(data) - 1, len(data) - 70]
    lengths += [1, 70, 69, 1, 70]
    want = [zlib.crc32(data[s:s + n]) for s, n in zip(starts, lengths)]
    got = crc32_spans(data, np.array(starts), np.array(lengths))
    assert got.dtype == np.int64 and got.tolist() == want
    got_words = crc32_spans(data, np.array(starts), np.array(lengths), words=padded_words(data))
    assert got_words.tolist() == want


def test_empty_and_tiny_buffers():
    assert crc32_spans(b"", np.zeros(0, np.int64), np.zeros(0, np.int64)).tolist() == []
    assert crc32_spans(b"a", np.array([0, 0, 1]), np.array([1, 0, 0])).tolist() == [zlib.crc32(b"a"), 0, 0]
