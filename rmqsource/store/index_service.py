"""IndexFiles, write and raw lookup: RocketMQ's IndexService / IndexFile (spec §5).

Writing follows ``IndexService.buildIndex`` and ``IndexFile.putKey`` exactly:
the last file is fetched (or created, inheriting the previous file's end
phyOffset/timestamp) on *every* dispatched record, keys are UNIQ_KEY then each
non-empty KEYS piece, ROLLBACK records are skipped, entries chain newest-first
through the hash slots.  Header fields reach the file when Java's setters would
write them (``indexCount`` of a fresh file stays 0 on disk until the first
put or a flush).

Files are memory-mapped (an IndexFile is 420 MB by default and written at
random slots); only the newest file is written.
"""

from __future__ import annotations

import datetime as _dt
import functools
import mmap
import os
import struct
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

from .. import limits
from ..errors import CorruptRecordError
from ..format.indexfile import (INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, IndexHeader, index_file_size,
                                time_diff_seconds)
from ..format.javahash import index_key_hash
from ..io import files

import numpy as np
from ..format.properties import split_keys
from ..format.record import TRANSACTION_MASK, TRANSACTION_ROLLBACK_TYPE

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_ENTRY = struct.Struct(">iqii")
_HEADER = struct.Struct(">qqqqii")
_ENTRY_DTYPE = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("diff", ">i4"), ("prev", ">i4")])
_NAME_DIGITS = 17
_RESERVE_STEP_BYTES = 1 << 20         # entry blocks reserved ahead of the writes


def _mmap_read(fd: int, length: int, writable: bool) -> mmap.mmap:
    return mmap.mmap(fd, length, access=mmap.ACCESS_READ)


def time_millis_to_human_string(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString``: local ``yyyyMMddHHmmssSSS``."""
    t = _dt.datetime.fromtimestamp(ms / 1000.0)
    return t.strftime("%Y%m%d%H%M%S") + f"{ms % 1000:03d}"


@functools.lru_cache(maxsize=8)
def _powers_of_31(width: int) -> np.ndarray:
    out = np.empty(width, dtype=np.uint64)
    v = 1
    for k in range(width):
        out[k] = v
        v = (v * 31) & 0xFFFFFFFF
    return out


def index_key_hashes(keys: list[str]) -> list[int]:
    """``index_key_hash`` of many keys at once (numpy; BMP-only keys, others one by one)."""
    if not keys:
        return []
    arr = np.array(keys)
    width = arr.dtype.itemsize // 4
    if width == 0 or len(keys) < 16:
        return [index_key_hash(k) for k in keys]
    cps = arr.view(np.uint32).reshape(len(keys), width).astype(np.uint64)
    lengths = np.char.str_len(arr)
    exps = np.clip(lengths[:, None] - 1 - np.arange(width)[None, :], 0, None)
    h = ((cps * _powers_of_31(width)[exps]).sum(axis=1) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    h = np.where(h == np.int32(-(2 ** 31)), 0, np.abs(h.astype(np.int64))).tolist()
    non_bmp = np.flatnonzero(cps.max(axis=1) > 0xFFFF)
    for i in non_bmp.tolist():          # surrogate pairs: exact scalar path
        h[i] = index_key_hash(keys[i])
    return h


class IndexFile:
    """One mapped IndexFile with its header held in memory (IndexHeader)."""

    def __init__(self, path: str, hash_slot_num: int, index_num: int, *, create: bool,
                 end_phy_offset: int = 0, end_timestamp_ms: int = 0, writable: bool = True):
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.file_size = index_file_size(hash_slot_num, index_num)
        self._entries_base = INDEX_HEADER_SIZE + hash_slot_num * 4
        flags = os.O_RDWR if writable else os.O_RDONLY
        if create:
            flags |= os.O_CREAT | os.O_EXCL
        fd = (files.ops.open if writable else os.open)(path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
        self._fd = -1
        try:
            if create:
                files.ops.ftruncate(fd, self.file_size)
            size = os.fstat(fd).st_size
            if size != self.file_size:
                raise CorruptRecordError(
                    f"IndexFile is {size} bytes, expected {self.file_size} for maxHashSlotNum={hash_slot_num}"
                    f" maxIndexNum={index_num}", file=path, offset=0)
            if writable:   # disk blocks before any page is written through the mapping (no SIGBUS)
                count = IndexHeader.decode(os.pread(fd, INDEX_HEADER_SIZE, 0), 0).index_count if not create else 0
                self._reserved = min(self.file_size, self._entries_base + max(count, 0) * INDEX_ENTRY_SIZE)
                files.ops.reserve(fd, 0, self._reserved)
            self._mm = (files.ops.mmap if writable else _mmap_read)(fd, self.file_size, writable)
        except BaseException:
            (files.ops.close if writable else os.close)(fd)
            if create:
                os.unlink(path)
            raise
        if writable:
            self._fd = fd                          # kept to reserve entry blocks as the file fills
        else:
            os.close(fd)
        self.writable = writable
        self.header = IndexHeader.decode(self._mm, 0) if not create else IndexHeader()
        if create:
            # IndexFile constructor: the setters write inherited values straight into the buffer.
            if end_phy_offset > 0:
                self.header.begin_phy_offset = self.header.end_phy_offset = end_phy_offset
                _I64.pack_into(self._mm, 16, end_phy_offset)
                _I64.pack_into(self._mm, 24, end_phy_offset)
            if end_timestamp_ms > 0:
                self.header.begin_timestamp_ms = self.header.end_timestamp_ms = end_timestamp_ms
                _I64.pack_into(self._mm, 0, end_timestamp_ms)
                _I64.pack_into(self._mm, 8, end_timestamp_ms)

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def is_write_full(self) -> bool:
        return self.header.index_count >= self.index_num

    def put_key(self, key: str, phy_offset: int, store_timestamp_ms: int,
                key_hash: Optional[int] = None) -> bool:
        """``IndexFile.putKey``; False when the file is full."""
        h = self.header
        count = h.index_count
        if count >= self.index_num:
            return False
        self._reserve_entries(count + 1)
        mm = self._mm
        if key_hash is None:
            key_hash = index_key_hash(key)
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * 4
        slot_value = _I32.unpack_from(mm, slot_pos)[0]
        if slot_value <= 0 or slot_value > count:
            slot_value = 0
        time_diff = time_diff_seconds(store_timestamp_ms, h.begin_timestamp_ms)
        _ENTRY.pack_into(mm, self._entries_base + count * INDEX_ENTRY_SIZE,
                         key_hash, phy_offset, time_diff, slot_value)
        _I32.pack_into(mm, slot_pos, count)
        if count <= 1:
            h.begin_phy_offset = phy_offset
            h.begin_timestamp_ms = store_timestamp_ms
            _I64.pack_into(mm, 16, phy_offset)
            _I64.pack_into(mm, 0, store_timestamp_ms)
        if slot_value == 0:
            h.hash_slot_count += 1
            _I32.pack_into(mm, 32, h.hash_slot_count)
        h.index_count = count + 1
        h.end_phy_offset = phy_offset
        h.end_timestamp_ms = store_timestamp_ms
        _I32.pack_into(mm, 36, h.index_count)
        _I64.pack_into(mm, 24, phy_offset)
        _I64.pack_into(mm, 8, store_timestamp_ms)
        return True

    def put_hashed(self, hashes: np.ndarray, phy: np.ndarray, store_ts: np.ndarray) -> None:
        """``put_key`` for k keys that all fit in this file (k <= maxIndexNum - indexCount), at once.

        Entry e = count0 + j.  Its chain pointer is the previous entry of the
        same slot in this batch, else the slot's value on disk (0 when it is not
        in (0, e]).  hashSlotCount grows by the entries whose pointer is 0; the
        slots end with the last entry per slot; timeDiff is against the begin
        timestamp, which a fresh file (indexCount 1) takes from its first entry
        (after that entry's own timeDiff was computed against the old one).
        """
        k = len(hashes)
        if k == 0:
            return
        h = self.header
        c0 = h.index_count
        if c0 + k > self.index_num:
            raise ValueError("put_hashed: keys do not fit")
        self._reserve_entries(c0 + k)
        mm = self._mm
        slots = hashes.astype(np.int64) % self.hash_slot_num
        slot_view = np.frombuffer(mm, dtype=">i4", count=self.hash_slot_num, offset=INDEX_HEADER_SIZE)
        try:
            # Stable order by slot: sort (slot, position) packed in one uint64 (unique keys).
            if k < 1 << 31:
                key = slots.astype(np.uint64)
                key <<= np.uint64(32)
                key |= np.arange(k, dtype=np.uint64)
                key.sort()
                order = (key & np.uint64(0xFFFFFFFF)).view(np.int64)
                key >>= np.uint64(32)
                ss = key.view(np.int64)
            else:
                order = np.argsort(slots, kind="stable")
                ss = slots[order]
            same = ss[1:] == ss[:-1]                      # sorted entry i+1 follows one in its slot
            eo = order + c0                               # entry numbers, sorted
            prev_sorted = np.empty(k, np.int64)
            prev_sorted[0] = 0
            np.multiply(eo[:-1], same, out=prev_sorted[1:])
            # First entry of a slot in this batch: the slot's value on disk when it is in (0, e].
            fi = np.flatnonzero(~same) + 1
            fi = np.concatenate(([0], fi)) if fi.size else np.zeros(1, np.int64)
            disk = slot_view[ss[fi]].astype(np.int64)
            disk[(disk <= 0) | (disk > eo[fi])] = 0
            prev_sorted[fi] = disk
            prev = np.empty(k, np.int64)
            prev[order] = prev_sorted
            last = np.ones(k, bool)
            last[:-1] = ~same
            slot_view[ss[last]] = eo[last]
        finally:
            del slot_view
        b0 = h.begin_timestamp_ms

        def time_diff(ts, begin):
            if begin <= 0:
                return np.zeros(len(ts), np.int64)
            return np.clip((ts - begin) // 1000, 0, 0x7FFFFFFF)
        td = time_diff(store_ts, b0)
        if c0 <= 1 and k > 1:
            td[1:] = time_diff(store_ts[1:], int(store_ts[0]))
        entries = np.empty(k, dtype=_ENTRY_DTYPE)
        entries["hash"] = hashes
        entries["phy"] = phy
        entries["diff"] = td
        entries["prev"] = prev
        base = self._entries_base + c0 * INDEX_ENTRY_SIZE
        view = np.frombuffer(mm, dtype=np.uint8, count=k * INDEX_ENTRY_SIZE, offset=base)
        try:
            view[:] = entries.view(np.uint8)
        finally:
            del view
        if c0 <= 1:
            h.begin_phy_offset = int(phy[0])
            h.begin_timestamp_ms = int(store_ts[0])
            _I64.pack_into(mm, 16, h.begin_phy_offset)
            _I64.pack_into(mm, 0, h.begin_timestamp_ms)
        zeros = int(np.count_nonzero(prev == 0))
        if zeros:
            h.hash_slot_count += zeros
            _I32.pack_into(mm, 32, h.hash_slot_count)
        h.index_count = c0 + k
        h.end_phy_offset = int(phy[-1])
        h.end_timestamp_ms = int(store_ts[-1])
        _I32.pack_into(mm, 36, h.index_count)
        _I64.pack_into(mm, 24, h.end_phy_offset)
        _I64.pack_into(mm, 8, h.end_timestamp_ms)

    def _reserve_entries(self, count: int) -> None:
        """Disk blocks for entries [0, count) before they are written (ahead in steps)."""
        end = self._entries_base + count * INDEX_ENTRY_SIZE
        if end > self._reserved:
            upto = min(self.file_size, max(end, self._reserved + _RESERVE_STEP_BYTES))
            files.ops.reserve(self._fd, self._reserved, upto - self._reserved)
            self._reserved = upto

    def is_time_matched(self, begin_ms: int, end_ms: int) -> bool:
        b, e = self.header.begin_timestamp_ms, self.header.end_timestamp_ms
        return (begin_ms < b and end_ms > e) or (b <= begin_ms <= e) or (b <= end_ms <= e)

    def select_phy_offsets(self, out: list[int], key: str, max_num: int, begin_ms: int, end_ms: int) -> None:
        """``IndexFile.selectPhyOffset``: walk one hash chain newest-first (bounded)."""
        mm = self._mm
        count = self.header.index_count
        if count > self.index_num:       # entries past the file: a damaged header, not a short chain
            raise CorruptRecordError(f"indexCount {count} is more than the file's maxIndexNum {self.index_num}",
                                     file=self.path, offset=36)
        key_hash = index_key_hash(key)
        slot_value = _I32.unpack_from(mm, INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * 4)[0]
        if slot_value <= 0 or slot_value > count or count <= 1:
            return
        begin_ts = self.header.begin_timestamp_ms
        entry_no = slot_value
        for _ in range(min(count, limits.MAX_INDEX_CHAIN_STEPS) + 1):
            if len(out) >= max_num:
                return
            hash_read, phy_read, diff, prev = _ENTRY.unpack_from(mm, self._entries_base + entry_no * INDEX_ENTRY_SIZE)
            if diff < 0:
                return
            time_read = begin_ts + diff * 1000
            if hash_read == key_hash and begin_ms <= time_read <= end_ms:
                out.append(phy_read)
            # Entries are appended in order, so a chain only goes to lower entry
            # numbers; anything else is a loop in a damaged file.
            if prev <= 0 or prev > count or prev >= entry_no or time_read < begin_ms:
                return
            entry_no = prev

    def select_many(self, hashes: np.ndarray, counts: np.ndarray, max_num: int, begin_ms: int, end_ms: int,
                    covering: bool, hit_keys: list, hit_phys: list) -> None:
        """:meth:`select_phy_offsets` for many key hashes at once (see IndexService.query_offsets_many): the
        chains are walked one step of every chain at a time; ``counts`` (hits so far per key) grows, each
        step's hits go to ``hit_keys`` (key numbers) and ``hit_phys``."""
        mm = self._mm
        h = self.header
        count = h.index_count
        if count > self.index_num:
            raise CorruptRecordError(f"indexCount {count} is more than the file's maxIndexNum {self.index_num}",
                                     file=self.path, offset=36)
        if count <= 1:
            return
        begin_ts = h.begin_timestamp_ms
        slots = np.frombuffer(mm, dtype=">i4", count=self.hash_slot_num, offset=INDEX_HEADER_SIZE)
        usable = min(count + 1, self.index_num)          # entry numbers a chain may name, within the file
        entries = np.frombuffer(mm, dtype=_ENTRY_DTYPE, count=usable, offset=self._entries_base)
        try:
            active = np.flatnonzero(counts < max_num)
            entry = slots[hashes[active] % self.hash_slot_num].astype(np.int64)
            ok = (entry > 0) & (entry <= count) & (entry < usable)
            active, entry = active[ok], entry[ok]
            for _ in range(min(count, limits.MAX_INDEX_CHAIN_STEPS) + 1):
                if len(active) == 0:
                    break
                e = entries[entry]
                diff = e["diff"].astype(np.int64)
                live = diff >= 0
                time_read = begin_ts + diff * 1000
                if covering:
                    time_read = np.where(entry == 1, begin_ts, time_read)   # the file's first entry
                    latest = np.where(entry == 1, begin_ts, time_read + 999)
                else:
                    latest = time_read
                hit = live & (e["hash"].astype(np.int64) == hashes[active]) & (latest >= begin_ms) \
                    & (time_read <= end_ms)
                if hit.any():
                    k = active[hit]
                    hit_keys.append(k)
                    hit_phys.append(e["phy"][hit].astype(np.int64))
                    counts[k] += 1                   # a key is at most once in ``active``
                prev = e["prev"].astype(np.int64)
                go = live & (prev > 0) & (prev < usable) & (prev < entry) & (latest >= begin_ms)
                go &= counts[active] < max_num
                active, entry = active[go], prev[go]
        finally:
            del slots, entries

    def flush(self) -> None:
        """``IndexFile.flush``: write the whole in-memory header, then force to disk."""
        if not self.writable or self._mm is None:
            return
        self._mm[0:INDEX_HEADER_SIZE] = self.header.encode()
        self._mm.flush()

    def sync(self) -> None:
        if self.writable and self._mm is not None:
            self._mm.flush()

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            files.ops.close(fd)


class IndexService:
    """All IndexFiles of a store: ``put_keys`` (buildIndex) and ``query_offsets`` (queryOffset).

    ``on_full_file_flushed(end_timestamp_ms)`` is called when a full file has
    been flushed (RocketMQ then stores it as checkpoint.indexMsgTimestamp).
    ``clock_ms`` names new files (local ``yyyyMMddHHmmssSSS``); names are made
    strictly increasing even within one millisecond.
    """

    def __init__(self, index_dir: str | os.PathLike, hash_slot_num: int, index_num: int, *,
                 writable: bool = True, max_msgs_num_batch: int = limits.DEFAULT_MAX_MSGS_NUM_BATCH,
                 clock_ms: Optional[Callable[[], int]] = None,
                 on_full_file_flushed: Optional[Callable[[int], None]] = None):
        self.index_dir = os.fspath(index_dir)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.writable = writable
        self.max_msgs_num_batch = max_msgs_num_batch
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._on_full = on_full_file_flushed
        self._lock = threading.RLock()
        self.files: list[IndexFile] = []
        self.index_msg_timestamp_ms = 0   # endTimestamp of the newest full file flushed
        self._load()

    # -- lifecycle ------------------------------------------------------------
    def _load(self) -> None:
        d = Path(self.index_dir)
        if not d.is_dir():
            return
        names = sorted(n for n in os.listdir(d) if n.isdigit() and (d / n).is_file())
        for i, n in enumerate(names):
            last = i == len(names) - 1
            self.files.append(IndexFile(str(d / n), self.hash_slot_num, self.index_num, create=False,
                                        writable=self.writable and last))

    def delete_files_after(self, index_msg_timestamp_ms: int) -> list[str]:
        """Abnormal-start rule (spec §5.6): drop files whose endTimestamp > the checkpoint's."""
        removed = []
        with self._lock:
            keep = []
            for f in self.files:
                if f.header.end_timestamp_ms > index_msg_timestamp_ms:
                    f.close()
                    os.unlink(f.path)
                    removed.append(f.path)
                else:
                    keep.append(f)
            self.files = keep
            self._reopen_last_writable()
        return removed

    def delete_all(self) -> None:
        """Remove every IndexFile (used by a rebuild from scratch)."""
        with self._lock:
            for f in self.files:
                f.close()
                os.unlink(f.path)
            self.files = []

    def _reopen_last_writable(self) -> None:
        if self.writable and self.files and not self.files[-1].writable:
            last = self.files[-1]
            last.close()
            self.files[-1] = IndexFile(last.path, self.hash_slot_num, self.index_num, create=False)

    def flush(self) -> None:
        with self._lock:
            if self.files and self.files[-1].writable:
                self.files[-1].flush()

    def close(self) -> None:
        """Shutdown: flush the file being written, unmap all."""
        with self._lock:
            self.flush()
            for f in self.files:
                f.close()
            self.files = []

    # -- writing ----------------------------------------------------------------
    def _new_file_name(self) -> str:
        ms = self._clock_ms()
        if self.files:
            last = int(self.files[-1].name) if self.files[-1].name.isdigit() else 0
            name = time_millis_to_human_string(ms)
            # Same millisecond (or a clock step back): next free number keeps names increasing.
            if int(name) <= last:
                name = f"{last + 1:0{_NAME_DIGITS}d}"
            return name
        return time_millis_to_human_string(ms)

    def get_and_create_last_index_file(self) -> IndexFile:
        """``getAndCreateLastIndexFile``: the last file if not full, else a new one inheriting its end."""
        if self.files and not self.files[-1].is_write_full():
            return self.files[-1]
        prev = self.files[-1] if self.files else None
        end_phy = prev.header.end_phy_offset if prev else 0
        end_ts = prev.header.end_timestamp_ms if prev else 0
        os.makedirs(self.index_dir, exist_ok=True)
        name = self._new_file_name()
        f = IndexFile(os.path.join(self.index_dir, name), self.hash_slot_num, self.index_num,
                      create=True, end_phy_offset=end_phy, end_timestamp_ms=end_ts)
        self.files.append(f)
        if prev is not None:
            self._flush_full(prev)
        return f

    def _flush_full(self, f: IndexFile) -> None:
        """``IndexService.flush(f)``: a full file's endTimestamp becomes indexMsgTimestamp."""
        ts = f.header.end_timestamp_ms if f.is_write_full() else 0
        f.flush()
        if ts > 0:
            self.index_msg_timestamp_ms = ts
            if self._on_full is not None:
                self._on_full(ts)

    def put_keys(self, topic: str, phy_offset: int, store_timestamp_ms: int, sys_flag: int,
                 uniq_key: Optional[str], keys: Optional[str]) -> None:
        """``IndexService.buildIndex`` for one dispatched record.

        Records already indexed are skipped: phyOffset below the file's
        endPhyOffset (RocketMQ's rule), and also the record *at* endPhyOffset
        when the file already holds it, so dispatching twice changes nothing
        (RocketMQ would index that last record a second time).
        """
        with self._lock:
            f = self.get_and_create_last_index_file()
            h = f.header
            end = h.end_phy_offset
            if phy_offset < end or (phy_offset == end and (h.index_count > 1 or end > 0)):
                return
            if sys_flag & TRANSACTION_MASK == TRANSACTION_ROLLBACK_TYPE:
                return
            if uniq_key is not None:
                f = self._put_key(f, f"{topic}#{uniq_key}", phy_offset, store_timestamp_ms)
            if keys:
                for piece in split_keys(keys):
                    f = self._put_key(f, f"{topic}#{piece}", phy_offset, store_timestamp_ms)

    def put_keys_batch(self, requests) -> None:
        """``put_keys`` for many DispatchRequest-like records (hashes computed in one numpy pass)."""
        with self._lock:
            keyed = []
            flat: list[str] = []
            for r in requests:
                ks = []
                if r.uniq_key is not None:
                    ks.append(f"{r.topic}#{r.uniq_key}")
                if r.keys:
                    ks.extend(f"{r.topic}#{piece}" for piece in split_keys(r.keys))
                keyed.append((r, len(flat), len(ks)))
                flat.extend(ks)
            hashes = index_key_hashes(flat)
            for r, start, n in keyed:
                f = self.get_and_create_last_index_file()
                h = f.header
                end = h.end_phy_offset
                p = r.commit_log_offset
                if p < end or (p == end and (h.index_count > 1 or end > 0)):
                    continue
                if r.sys_flag & TRANSACTION_MASK == TRANSACTION_ROLLBACK_TYPE:
                    continue
                ts = r.store_timestamp_ms
                for j in range(start, start + n):
                    f = self._put_key(f, flat[j], p, ts, hashes[j])

    def put_hashed_batch(self, phy: np.ndarray, store_ts: np.ndarray, sys_flag: np.ndarray,
                         entry_record: np.ndarray, entry_hash: np.ndarray) -> None:
        """``buildIndex`` for many records at once, keys already hashed (same bytes as ``put_keys``).

        ``phy``/``store_ts``/``sys_flag`` describe the records (strictly
        increasing phyOffsets); ``entry_record[j]`` is the record of key j and
        ``entry_hash[j]`` its keyHash, keys in buildIndex order.  The last file
        is fetched (or created) for the first record; the skip rule (phyOffset
        at or below the file's end) is applied against that file's end (later
        records only have larger offsets); ROLLBACK records are skipped; keys
        then fill the file with :meth:`IndexFile.put_hashed` and a new file is
        created when it is full, like ``_put_key``; a full file is also replaced
        when a record follows the last key (``getAndCreateLastIndexFile`` runs
        for every record).
        """
        n = len(phy)
        if n == 0:
            return
        if n > 1 and not bool(np.all(np.diff(phy) > 0)):
            raise ValueError("put_hashed_batch needs strictly increasing phyOffsets")
        with self._lock:
            f = self.get_and_create_last_index_file()
            h = f.header
            end = h.end_phy_offset
            skip_equal = h.index_count > 1 or end > 0
            ok_rec = (phy > end) | ((phy == end) & (not skip_equal))
            ok_rec &= (sys_flag & TRANSACTION_MASK) != TRANSACTION_ROLLBACK_TYPE
            keep = ok_rec[entry_record] if len(entry_record) else np.zeros(0, bool)
            rec = entry_record[keep]
            hashes = entry_hash[keep]
            e_phy = phy[rec]
            e_ts = store_ts[rec]
            pos = 0
            total = len(rec)
            for _ in range(total + 1):
                if pos >= total:
                    break
                if f.is_write_full():
                    f = self.get_and_create_last_index_file()
                take = min(self.index_num - f.header.index_count, total - pos)
                f.put_hashed(hashes[pos:pos + take], e_phy[pos:pos + take], e_ts[pos:pos + take])
                pos += take
            last_rec = int(rec[-1]) if total else 0
            if f.is_write_full() and last_rec < n - 1:
                self.get_and_create_last_index_file()

    def _put_key(self, f: IndexFile, key: str, phy_offset: int, store_timestamp_ms: int,
                 key_hash: Optional[int] = None) -> IndexFile:
        # At most one new file per key: a fresh file always has room.
        for _ in range(2):
            if f.put_key(key, phy_offset, store_timestamp_ms, key_hash):
                return f
            f = self.get_and_create_last_index_file()
        raise CorruptRecordError("a fresh IndexFile refused a key (maxIndexNum < 2?)", file=f.path, offset=0)

    def sync(self) -> None:
        with self._lock:
            if self.files:
                self.files[-1].sync()

    # -- reading ----------------------------------------------------------------
    def query_offsets(self, topic: str, key: str, max_num: int, begin_ms: int,
                      end_ms: int) -> tuple[list[int], int, int]:
        """``IndexService.queryOffset`` (spec §5.4).

        Returns (phyOffsets newest-first as collected, indexLastUpdatePhyoffset,
        indexLastUpdateTimestamp).  Hash collisions are NOT filtered (the caller
        decodes each message and checks the key).  max_num is capped at
        maxMsgsNumBatch.
        """
        out: list[int] = []
        last_phy = last_ts = 0
        max_num = min(max_num, self.max_msgs_num_batch)
        full_key = f"{topic}#{key}"
        with self._lock:
            n = len(self.files)
            for i in range(n, 0, -1):
                f = self.files[i - 1]
                if i == n:
                    last_ts = f.header.end_timestamp_ms
                    last_phy = f.header.end_phy_offset
                if f.is_time_matched(begin_ms, end_ms):
                    f.select_phy_offsets(out, full_key, max_num, begin_ms, end_ms)
                if f.header.begin_timestamp_ms < begin_ms:
                    break
                if len(out) >= max_num:
                    break
        return out, last_phy, last_ts

    def query_offsets_many(self, topic_keys: list[tuple[str, str]], max_num: int, begin_ms: int, end_ms: int, *,
                           covering: bool = False) -> tuple[list[list[int]], int, int]:
        """:meth:`query_offsets` of many ``(topic, key)`` at once: per key the same offsets (newest first).

        Each file is mapped once for all keys: the hashes are computed in one numpy pass and the hash
        chains of all keys are walked side by side, one step of every chain at a time.

        ``covering``: every entry whose store time may lie in [begin_ms, end_ms] is kept, which RocketMQ's
        own check can miss: an entry keeps its time in whole seconds after the file's begin (the store time
        is up to 999 ms later), and a file's first entry is offset by the gap to the previous file (its
        time is the file's begin).  The caller re-checks each record's time.
        """
        n = len(topic_keys)
        found: list[list[int]] = [[] for _ in range(n)]
        last_phy = last_ts = 0
        max_num = min(max_num, self.max_msgs_num_batch)
        if n == 0 or max_num <= 0:
            with self._lock:
                if self.files:
                    last_ts, last_phy = self.files[-1].header.end_timestamp_ms, self.files[-1].header.end_phy_offset
            return found, last_phy, last_ts
        hashes = np.asarray(index_key_hashes([f"{t}#{k}" for t, k in topic_keys]), dtype=np.int64)
        counts = np.zeros(n, dtype=np.int64)
        hit_keys: list[np.ndarray] = []
        hit_phys: list[np.ndarray] = []
        with self._lock:
            nf = len(self.files)
            for i in range(nf, 0, -1):
                f = self.files[i - 1]
                if i == nf:
                    last_ts = f.header.end_timestamp_ms
                    last_phy = f.header.end_phy_offset
                if f.is_time_matched(begin_ms, end_ms):
                    f.select_many(hashes, counts, max_num, begin_ms, end_ms, covering, hit_keys, hit_phys)
                if f.header.begin_timestamp_ms < begin_ms:
                    break
                if bool((counts >= max_num).all()):
                    break
        if hit_keys:
            keys = np.concatenate(hit_keys)
            phys = np.concatenate(hit_phys)
            order = np.argsort(keys, kind="stable")       # per key: the order of the walk (newest first)
            keys, phys = keys[order], phys[order]
            starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
            ends = np.append(starts[1:], len(keys))
            pl = phys.tolist()
            for k, a, b in zip(keys[starts].tolist(), starts.tolist(), ends.tolist()):
                found[k] = pl[a:b]
        return found, last_phy, last_ts

    @property
    def last_file(self) -> Optional[IndexFile]:
        return self.files[-1] if self.files else None


def open_index_service_for_read(index_dir: str | os.PathLike, hash_slot_num: int, index_num: int,
                                max_msgs_num_batch: int = limits.DEFAULT_MAX_MSGS_NUM_BATCH) -> IndexService:
    """A read-only IndexService (files mapped read-only; nothing is created)."""
    return IndexService(index_dir, hash_slot_num, index_num, writable=False,
                        max_msgs_num_batch=max_msgs_num_batch)


def index_keys_of(uniq_key: Optional[str], keys: Optional[str]) -> Iterable[str]:
    """The keys buildIndex adds for a record, in order (without the topic prefix)."""
    if uniq_key is not None:
        yield uniq_key
    yield from split_keys(keys)
