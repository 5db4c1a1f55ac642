"""An IndexFile of a snapshot: the source file's entries below the snapshot's end, with hash slots and
header made to match them (spec §5).

A live IndexFile changes while it is read: the broker writes an entry, then its hash slot, then the header's
``indexCount``.  So the header is read first and only the entries it counts are taken (each was whole before
the count covered it); entries pointing at or past the snapshot's CommitLog end are dropped too (entries are
appended in CommitLog order, so they are a tail).  The hash slots, read after the entries, are kept when
none points past the counted entries; else (a torn read, or entries dropped) they are rebuilt from the kept
entries: each slot holds the newest entry whose ``keyHash % hashSlotNum`` is that slot, which is what the
broker's chain heads are; ``hashSlotCount`` is the number of chains (entries starting one) and
``beginPhyOffset``/``endPhyOffset`` are the first and last kept entries' offsets.  The result is the file a
broker would have written had it stopped at that entry, in the full size RocketMQ's loader expects.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ..errors import CorruptRecordError
from ..format.indexfile import HASH_SLOT_SIZE, INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, IndexHeader, index_file_size
from ..io.segments import pread_full

ENTRY_DTYPE = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("diff", ">i4"), ("prev", ">i4")])
assert ENTRY_DTYPE.itemsize == INDEX_ENTRY_SIZE


@dataclass
class IndexRead:
    """What was read of a source IndexFile: its header (read first) and the entries it counted."""
    path: str
    header: IndexHeader
    entries: np.ndarray          # entries 0 .. indexCount-1 (entry 0 is never used: zeros)
    raw: bytearray               # their bytes
    hash_slot_num: int
    file_size: int
    slots: bytearray             # the hash slots, read after the entries


@dataclass
class CutIndex:
    """The bytes of a snapshot's IndexFile up to its last entry (zeros follow, to ``file_size``)."""
    header: bytes
    slots: memoryview
    entries: memoryview      # entries 0 .. count-1, as read
    count: int               # indexCount: the next entry number
    source_count: int        # indexCount the source file's header had when read
    file_size: int

    @property
    def dropped(self) -> bool:
        """Whether entries the source counted were left out (at or past the end)."""
        return self.count < self.source_count


def read_index_file(path: str, hash_slot_num: int, index_num: int) -> IndexRead:
    """The header of the IndexFile at ``path``, then the entries it counts, then its hash slots."""
    size = index_file_size(hash_slot_num, index_num)
    fd = os.open(path, os.O_RDONLY)
    try:
        actual = os.fstat(fd).st_size
        if actual != size:
            raise CorruptRecordError(f"IndexFile is {actual} bytes, not the {size} of maxHashSlotNum="
                                     f"{hash_slot_num} maxIndexNum={index_num} (give the broker's values)",
                                     file=path, offset=0)
        header = IndexHeader.decode(os.pread(fd, INDEX_HEADER_SIZE, 0))
        if header.index_count > index_num:
            raise CorruptRecordError(f"indexCount {header.index_count} is larger than maxIndexNum {index_num}",
                                     file=path, offset=36)
        base = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE
        raw = _pread_exact(fd, path, header.index_count * INDEX_ENTRY_SIZE, base)
        slots = _pread_exact(fd, path, hash_slot_num * HASH_SLOT_SIZE, INDEX_HEADER_SIZE)
    finally:
        os.close(fd)
    return IndexRead(path, header, np.frombuffer(raw, dtype=ENTRY_DTYPE), raw, hash_slot_num, size, slots)


def cut_index(read: IndexRead, end: int, store_time_at: Callable[[int], Optional[int]]) -> CutIndex:
    """The IndexFile ``read`` holding only entries with phyOffset < ``end``.

    ``store_time_at(phy)`` gives the store timestamp of the record at ``phy`` (the new endTimestamp when
    entries were dropped)."""
    entries, hash_slot_num = read.entries, read.hash_slot_num
    header = dataclasses.replace(read.header)
    source_count = header.index_count
    phy = entries["phy"][1:].astype(np.int64)        # native order: one conversion for the searches below
    # Entries are in CommitLog order: those below the end are a prefix.
    count = 1 + int(np.searchsorted(phy, end, side="left")) if len(phy) else 1
    if count > 2 and np.any(phy[1:count - 1] < phy[:count - 2]):
        raise CorruptRecordError("IndexFile entries are not in CommitLog order", file=read.path,
                                 offset=INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE)
    kept = entries[:count]
    # Read after the entries, a slot below the count is the newest entry of its chain that was already
    # counted (a slot only moves to a newer entry); slots at or past it were moved by entries written since.
    read_slots = np.frombuffer(read.slots, dtype=">i4")
    if count == source_count and int(read_slots.max(initial=0)) < count and int(read_slots.min(initial=0)) >= 0:
        slots = memoryview(read.slots)
    else:
        rebuilt = np.zeros(hash_slot_num, dtype=np.int32)
        key_hash = kept["hash"][1:].astype(np.int32)
        ok = key_hash >= 0
        # The newest entry of each slot (entry numbers grow: the largest).
        np.maximum.at(rebuilt, key_hash[ok] % np.int32(hash_slot_num), np.arange(1, count, dtype=np.int32)[ok])
        slots = memoryview(rebuilt.astype(">i4")).cast("B")
    prev = kept["prev"][1:]
    if count > 1:
        header.begin_phy_offset = int(kept["phy"][1])
        header.end_phy_offset = int(kept["phy"][count - 1])
        if count < source_count:
            ts = store_time_at(header.end_phy_offset)
            if ts is not None:
                header.end_timestamp_ms = ts
    header.hash_slot_count = int(np.count_nonzero(prev == 0))
    header.index_count = count
    return CutIndex(header.encode(), slots,
                    memoryview(read.raw)[:count * INDEX_ENTRY_SIZE], count, source_count, read.file_size)


def _pread_exact(fd: int, path: str, length: int, position: int) -> bytearray:
    """``length`` bytes at ``position``; an IndexFile shorter than that is corrupt."""
    buf = pread_full(fd, position, length)
    if len(buf) < length:
        raise CorruptRecordError(f"IndexFile ends {length - len(buf)} bytes early", file=path,
                                 offset=position + len(buf))
    return buf