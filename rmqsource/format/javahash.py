"""Java ``String.hashCode`` over UTF-16 code units, and the hashes built on it.

RocketMQ hashes the Java String, not its UTF-8 bytes: characters outside the
BMP count as two code units (a surrogate pair).  tagsCode is this hash
sign-extended to int64; IndexFile keys use ``abs(hash)`` with MIN_VALUE → 0.
"""

from __future__ import annotations

import functools

import numpy as np


@functools.lru_cache(maxsize=65536)
def java_string_hash(text: str) -> int:
    """Return ``text.hashCode()`` as a signed int32."""
    units = np.frombuffer(text.encode("utf-16-be", "surrogatepass"), dtype=">u2")
    h = 0
    for unit in units.tolist():
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def tags_code(tags: str | None) -> int:
    """tagsCode of a TAGS property value: 0 when absent or empty (spec §4)."""
    if not tags:
        return 0
    return java_string_hash(tags)


def index_key_hash(key: str) -> int:
    """IndexFile keyHash: ``abs(hashCode)``, and 0 for Integer.MIN_VALUE (spec §5.2)."""
    h = java_string_hash(key)
    if h == -(1 << 31):
        return 0
    return abs(h)
