"""The driver's view of a streamed store's queues, followed incrementally between batches (the JVM twin:
StoreWatcher.java)."""

from __future__ import annotations

import os
import re
from typing import Optional

import numpy as np

from ..errors import CorruptRecordError
from ..format.consumequeue import CQ_UNIT_DTYPE, CQ_UNIT_SIZE, PRE_BLANK_SIZE, count_valid_prefix, units_from_bytes
from ..format.record import Kind
from ..format.system_topics import is_internal_topic
from ..io.segments import common_segment_size, list_segments
from ..store.commitlog import CommitLog
from ..store.consumequeue import ConsumeQueue, ConsumeQueueBase, InMemoryConsumeQueue
from ..store.layout import StoreLayout
from ..store.queues import list_queues, open_queue
from .stream_offsets import Key
from .stream_options import StreamOptions

# Bytes of ConsumeQueue read per pread while following a queue's tail.
TAIL_CHUNK_BYTES = 1 << 20


class StoreWatcher:
    """Driver-side view of the queues of one store, cheap to refresh between batches."""

    def __init__(self, opts: StreamOptions):
        self.opts = opts
        self.config = opts.read.store_config
        self.layout = StoreLayout.for_config(opts.root, self.config)
        self._tails: dict[Key, int] = {}
        rd = opts.read
        self._topics = set(rd.topics) if rd.topics is not None else None
        self._pattern = re.compile(rd.topic_pattern) if rd.topic_pattern is not None else None
        self._queues = set(rd.queues) if rd.queues is not None else None
        self._commitlog: Optional[CommitLog] = None
        self._dledger_end: Optional[tuple[CommitLog, int]] = None     # (the listing, its DLedger valid end)

    # -- selection --------------------------------------------------------------
    def wanted(self, key: Key) -> bool:
        topic, _ = key
        if self._queues is not None:
            return key in self._queues
        if self._topics is not None:
            return topic in self._topics
        if self._pattern.fullmatch(topic) is None:
            return False
        return not (self.opts.read.internal_topics_excluded and is_internal_topic(topic))

    def keys(self) -> list[Key]:
        # Every trigger: the store may have gained a folder of a layout not read, or (a broker restarted in
        # DLedger mode) DLedger data files that continue the CommitLog.
        fresh = StoreLayout(self.layout.root, self.layout.commitlog_dirs, self.layout.keys)
        fresh.check_supported()
        if fresh.dledger_dir != self.layout.dledger_dir:
            self.close()
            self.layout = fresh
        return [k for k in list_queues(self.layout) if self.wanted(k)]

    # -- CommitLog --------------------------------------------------------------
    def commitlog(self, refresh: bool = False) -> CommitLog:
        if self._commitlog is None or refresh:
            if self._commitlog is not None:
                self._commitlog.close()
            self._commitlog = CommitLog(self.layout)
        return self._commitlog

    def dledger_end(self, cl: CommitLog) -> int:
        """DLedger recovery's end of the data, once per CommitLog listing (as the JVM stream): a unit's own
        entry header may pass while an earlier one fails, and the engine serves nothing past that."""
        if self._dledger_end is None or self._dledger_end[0] is not cl:
            self._dledger_end = (cl, cl.dledger_valid_end())
        return self._dledger_end[1]

    def commit_log_min(self) -> int:
        segs = commitlog_segments(self.layout)
        return segs[0].start_offset if segs else 0

    def close(self) -> None:
        if self._commitlog is not None:
            self._commitlog.close()
            self._commitlog = None
        self._dledger_end = None

    # -- ConsumeQueue tail --------------------------------------------------------
    def max_offset(self, key: Key) -> int:
        """Queue offset after the last unit that is written and verified (cached, forward-only)."""
        known = self._tails.get(key, 0)
        if self.layout.rocksdb_queues:
            return self._rocksdb_max_offset(key, known)
        qdir = self.layout.queue_dir(*key)
        segs = list_segments(qdir)
        if not segs:
            return known
        file_size = common_segment_size(segs)          # as the batch read: a first file cut short misleads
        if file_size % CQ_UNIT_SIZE:
            return known
        upf = file_size // CQ_UNIT_SIZE
        by_start = {s.start_offset: s for s in segs}
        off = max(known, segs[0].start_offset // CQ_UNIT_SIZE)
        last_unit = None
        for _ in range(1 + len(segs) * (file_size // TAIL_CHUNK_BYTES + 2)):
            file_start = (off // upf) * upf
            seg = by_start.get(file_start * CQ_UNIT_SIZE)
            if seg is None:
                if segs[-1].start_offset > file_start * CQ_UNIT_SIZE:
                    self._refuse_gap(key)
                break
            pos = (off - file_start) * CQ_UNIT_SIZE
            want = min(TAIL_CHUNK_BYTES - TAIL_CHUNK_BYTES % CQ_UNIT_SIZE, seg.size_bytes - pos)
            if want <= 0:
                if seg.size_bytes < file_size and seg is not segs[-1]:
                    raise CorruptRecordError(
                        f"ConsumeQueue {key[0]}:{key[1]} ends at unit {off}, {seg.size_bytes} of its file's "
                        f"{file_size} bytes, and later files follow: the units between are missing", file=seg.path,
                        offset=seg.size_bytes)
                off = file_start + upf
                continue
            try:
                fd = os.open(seg.path, os.O_RDONLY)
            except FileNotFoundError:
                break
            try:
                data = os.pread(fd, want, pos)
            finally:
                os.close(fd)
            units = units_from_bytes(data)
            n = count_valid_prefix(units)
            if n:
                last_unit = units[n - 1]
            off += n
            if n < len(units) or len(data) < want:
                break
        if off > known and last_unit is not None and not self._verify(key, off - 1, last_unit):
            off = self._first_unverified(key, known, off - 1)
        if off > known:
            self._tails[key] = off
        return max(off, known)

    def _rocksdb_max_offset(self, key: Key, known: int) -> int:
        """The tail of a queue kept in RocksDB: its ``max`` entry (written with the units, in one batch),
        the last unit checked against its record as for file queues."""
        q = self.consume_queue(key)
        off = q.max_offset
        if off > known:
            last = q.read_units(off - 1, 1)
            if len(last) == 0 or not self._verify(key, off - 1, last[0]):
                off = self._first_unverified(key, known, off - 1)
        if off > known:
            self._tails[key] = off
        return max(off, known)

    def _refuse_gap(self, key: Key) -> None:
        """A file missing between the queue's files (local files are never written out of order): the batch
        read's error naming the missing file, rather than a stream that stops there without a word."""
        q = self.consume_queue(key)
        try:
            q.require_contiguous()
        finally:
            q.close()

    def _first_unverified(self, key: Key, lo: int, bad: int) -> int:
        """The first unit in [lo, bad] its record does not confirm, given that unit ``bad`` fails.

        A unit caught half-written is only the last one (admitted next time), but after a crash every
        unit past the valid CommitLog end fails (a suffix of the queue, as units follow the
        CommitLog) and none may be admitted: a binary search, as the batch read caps such units.
        """
        q = self.consume_queue(key)
        try:
            a, b = lo, bad
            while a < b:
                mid = (a + b) // 2
                u = q.read_units(mid, 1)
                ok = len(u) == 1 and int(u[0]["phy_offset"]) >= 0 and int(u[0]["size"]) > 0 \
                    and self._verify(key, mid, u[0])
                if ok:
                    a = mid + 1
                else:
                    b = mid
            return a
        finally:
            q.close()

    def _verify(self, key: Key, offset: int, unit) -> bool:
        size = int(unit["size"])
        if size == PRE_BLANK_SIZE:
            return True
        phy = int(unit["phy_offset"])
        for refresh in (False, True):
            cl = self.commitlog(refresh)
            seg = cl.reader.find(phy)
            if seg is None or (seg.dledger and phy >= self.dledger_end(cl)):
                continue                                   # not there yet: look again in a fresh listing
            decoded, _ = cl.decode_at(phy, size_hint=size)
            if not cl.entry_holds_record(phy, size):
                return False
            if decoded.kind is Kind.CORRUPT and decoded.size == size and seg.dledger:
                # A whole DLedger entry whose record is damaged stays below DLedger's end: admitted, and
                # reading it fails with the typed error a batch read gives (never skipped in silence).
                return True
            if decoded.kind is not Kind.MESSAGE or decoded.size != size:
                return False
            r = decoded.record
            if key[0].startswith("%LMQ%"):
                return True
            return r.queue_id == key[1] and r.queue_offset == offset and r.topic == key[0]
        return False

    def consume_queue(self, key: Key) -> ConsumeQueueBase:
        if self.layout.rocksdb_queues:      # the database as it is now (a new snapshot when it changed)
            q = open_queue(self.layout, *key)
            return q if q is not None else InMemoryConsumeQueue(key[0], key[1], np.empty(0, dtype=CQ_UNIT_DTYPE))
        return ConsumeQueue(self.layout.queue_dir(*key), key[0], key[1])

    def min_offset(self, key: Key, max_offset: int, cl_min: int) -> int:
        q = self.consume_queue(key)
        try:
            if isinstance(q, ConsumeQueue) and not q.segments:
                return max_offset
            if cl_min == 0 and q.first_file_start_offset == 0:
                u = q._read(0, 1)
                if len(u) and int(u[0]["size"]) != PRE_BLANK_SIZE:
                    return 0
            return min(max_offset, q.min_offset(cl_min, engine_v5=self.config.is_v5, max_offset=max_offset))
        finally:
            q.close()

    def unit_sizes(self, key: Key, start: int, count: int) -> np.ndarray:
        q = self.consume_queue(key)
        try:
            units = q.read_units(start, count)
            sizes = units["size"].astype(np.int64)
            sizes[sizes == PRE_BLANK_SIZE] = 0
            return sizes
        finally:
            q.close()

    def offset_by_time(self, key: Key, lo: int, hi: int, ts: int) -> int:
        """First offset in [lo, hi) whose record's storeTimestamp >= ts (hi if none)."""
        q = self.consume_queue(key)
        cl = self.commitlog(refresh=True)
        try:
            a, b = lo, hi
            while a < b:
                mid = (a + b) // 2
                u = q.read_units(mid, 1)
                t = None
                if len(u) and int(u[0]["size"]) != PRE_BLANK_SIZE and cl.reader.find(int(u[0]["phy_offset"])):
                    decoded, _ = cl.decode_at(int(u[0]["phy_offset"]), size_hint=int(u[0]["size"]))
                    if decoded.kind is Kind.MESSAGE:
                        t = decoded.record.store_timestamp_ms
                if t is not None and t >= ts:
                    b = mid
                else:
                    a = mid + 1
            return a
        finally:
            q.close()


def commitlog_segments(layout: StoreLayout) -> list:
    """CommitLog segments of the store in offset order (DLedger data files included)."""
    cl = CommitLog(layout)
    cl.close()
    return cl.segments
