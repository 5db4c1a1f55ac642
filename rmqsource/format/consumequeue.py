"""ConsumeQueue units: 20 bytes ``int64 phyOffset, int32 size, int64 tagsCode`` (spec §3).

Unit *n* of a queue lives at CQ byte offset ``n * 20``.  Units are handled as a
numpy structured array so whole files are decoded without a Python loop.
"""

from __future__ import annotations

import struct

import numpy as np

CQ_UNIT_SIZE = 20
CQ_UNIT_DTYPE = np.dtype([("phy_offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
assert CQ_UNIT_DTYPE.itemsize == CQ_UNIT_SIZE

# Pre-blank unit: fills slots before a queue's first offset in its first file.
PRE_BLANK_SIZE = 0x7FFFFFFF
_UNIT = struct.Struct(">qiq")
PRE_BLANK_UNIT = _UNIT.pack(0, PRE_BLANK_SIZE, 0)


def encode_unit(phy_offset: int, size: int, tags_code: int) -> bytes:
    return _UNIT.pack(phy_offset, size, tags_code)


def decode_unit(buf, pos: int = 0) -> tuple[int, int, int]:
    return _UNIT.unpack_from(buf, pos)


def units_from_bytes(buf) -> np.ndarray:
    """View whole units of ``buf`` as a structured array (no copy)."""
    n = len(buf) // CQ_UNIT_SIZE
    return np.frombuffer(buf, dtype=CQ_UNIT_DTYPE, count=n)


def valid_unit_mask(units: np.ndarray) -> np.ndarray:
    """The broker's validity test: ``phyOffset >= 0 && size > 0`` (pre-blank units pass)."""
    return (units["phy_offset"] >= 0) & (units["size"] > 0)


def count_valid_prefix(units: np.ndarray) -> int:
    """Number of units before the first invalid one (spec §3.3)."""
    bad = np.flatnonzero(~valid_unit_mask(units))
    return int(bad[0]) if bad.size else len(units)


def is_pre_blank(units: np.ndarray) -> np.ndarray:
    return units["size"] == PRE_BLANK_SIZE
