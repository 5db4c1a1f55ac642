"""IndexFile: 40-byte header, H int32 hash slots, N 20-byte entries (spec §5).

Header: int64 beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset;
int32 hashSlotCount, indexCount.  Entry e (1 <= e < indexCount) at
``40 + H*4 + e*20``: int32 keyHash, int64 phyOffset, int32 timeDiff (seconds
from beginTimestamp), int32 previous entry in the slot's chain (0 = end).
H and N are not stored; they come from ``maxHashSlotNum``/``maxIndexNum``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_ENTRY_SIZE = 20
_HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")
_SLOT = struct.Struct(">i")


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE


def slot_position(slot: int) -> int:
    return INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE


def entry_position(hash_slot_num: int, entry_no: int) -> int:
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + entry_no * INDEX_ENTRY_SIZE


def index_key(topic: str, key: str) -> str:
    return f"{topic}#{key}"


@dataclass
class IndexHeader:
    begin_timestamp_ms: int = 0
    end_timestamp_ms: int = 0
    begin_phy_offset: int = 0
    end_phy_offset: int = 0
    hash_slot_count: int = 0
    index_count: int = 1

    @classmethod
    def decode(cls, buf, pos: int = 0) -> "IndexHeader":
        b, e, bp, ep, slots, count = _HEADER.unpack_from(buf, pos)
        # A fresh file holds 0 on disk; the loader treats it as 1 (spec §5.1).
        return cls(b, e, bp, ep, slots, count if count > 0 else 1)

    def encode(self) -> bytes:
        return _HEADER.pack(self.begin_timestamp_ms, self.end_timestamp_ms, self.begin_phy_offset,
                            self.end_phy_offset, self.hash_slot_count, self.index_count)


@dataclass(frozen=True)
class IndexEntry:
    key_hash: int
    phy_offset: int
    time_diff_s: int
    prev_entry: int

    @classmethod
    def decode(cls, buf, pos: int) -> "IndexEntry":
        return cls(*_ENTRY.unpack_from(buf, pos))

    def encode(self) -> bytes:
        return _ENTRY.pack(self.key_hash, self.phy_offset, self.time_diff_s, self.prev_entry)


def decode_slot(buf, pos: int) -> int:
    return _SLOT.unpack_from(buf, pos)[0]


def encode_slot(value: int) -> bytes:
    return _SLOT.pack(value)


def time_diff_seconds(store_timestamp_ms: int, begin_timestamp_ms: int) -> int:
    """timeDiff as IndexFile.putKey computes it: Java integer division, clamped."""
    if begin_timestamp_ms <= 0:
        return 0
    diff = store_timestamp_ms - begin_timestamp_ms
    seconds = int(diff / 1000)  # Java truncates toward zero
    if seconds > 0x7FFFFFFF:
        return 0x7FFFFFFF
    if seconds < 0:
        return 0
    return seconds
