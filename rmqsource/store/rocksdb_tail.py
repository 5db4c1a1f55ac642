"""Units a RocksDB ConsumeQueue database does not hold yet, dispatched from the CommitLog as the broker does.

A broker with ``storeType=defaultRocksDB`` writes its ConsumeQueue units without a write-ahead log
(``AbstractRocksDBStorage.initWriteOptions``: ``disableWAL``) into 128 MiB memtables, and its column
families flush atomically (``RocksDBOptionsFactory``: ``atomicFlush``).  So the database on disk holds
exactly the units of the records before its dispatch checkpoint (``CHECKPOINT_TOPIC``'s ``maxPhyOffset``,
written in the same batches); every unit dispatched since lives only in the broker's memory until the next
memtable flush or a clean shutdown.  A running broker can go through a million messages without one
flush: measured on 5.5.0, none of ~1,300 acknowledged messages was in the database while it ran.

The broker itself recovers from a crash this way (``RocksDBConsumeQueueStore.recover`` ->
``dispatchFromPhyOffset`` = the checkpoint): it dispatches the CommitLog again from the checkpoint.  The
reader does the same: :class:`CommitLogTail` walks the CommitLog from the checkpoint to its valid end (CRC
checked: a record the broker is still writing ends the walk) and keeps, per queue, the units dispatch
gives (NOT/COMMIT records, tagsCode as ``consume_queue_tags_code``, LMQ copies from
``INNER_MULTI_DISPATCH``/``INNER_MULTI_QUEUE_OFFSET``).  :class:`~rmqsource.store.rocksdb_queue.RocksDbQueueStore`
serves each queue's units from the database up to its last unit there, then from the tail.

A tail belongs to one snapshot of the database (kept in its ``memo``) and grows: each new store opened on
the same snapshot walks only the records written since the last walk, then freezes what it saw
(:meth:`CommitLogTail.view`), so one reader answers from one consistent end.  Twin: RocksDbTail.java.
"""

from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ..errors import CorruptRecordError
from ..format import columnar_headers as hdr
from ..format.columnar_properties import parse_properties_columns
from ..format.consumequeue import CQ_UNIT_DTYPE
from ..format.javahash import tags_code as java_tags_code
from ..format.record import TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK, TRANSACTION_NOT_TYPE, Kind, MessageRecord
from ..format.tagscode import SCHEDULE_TOPIC, consume_queue_tags_code
from .config import StoreConfig

INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"          # MessageConst.PROPERTY_INNER_MULTI_DISPATCH
INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"  # MessageConst.PROPERTY_INNER_MULTI_QUEUE_OFFSET
LMQ_PREFIX = "%LMQ%"                                   # MixAll.LMQ_PREFIX
LMQ_QUEUE_ID = 0                                       # MixAll.LMQ_QUEUE_ID
LMQ_DISPATCH_SEPARATOR = ","                           # MixAll.LMQ_DISPATCH_SEPARATOR
DEFAULT_DELAY_LEVELS_MS = StoreConfig().message_delay_levels_ms
CHUNK_BYTES = 8 << 20                                  # CommitLog bytes decoded at once on the fast path
FIRST_CHUNK_BYTES = 64 << 10       # a walk's first read, doubled up to CHUNK_BYTES: a walk often starts at the end


@dataclass(frozen=True)
class TailQueue:
    """One queue's units past the database: queue offsets ``first_offset`` on, without a gap."""

    first_offset: int
    units: np.ndarray               # CQ_UNIT_DTYPE

    @property
    def end_offset(self) -> int:
        return self.first_offset + len(self.units)


class _GrowingQueue:
    """A queue's tail as it grows: units appended as arrays (a chunk's run) or one at a time."""

    __slots__ = ("first_offset", "count", "_parts", "_rows", "frozen")

    def __init__(self, first_offset: int):
        self.first_offset = first_offset
        self.count = 0
        self._parts: list[np.ndarray] = []
        self._rows: list[tuple[int, int, int]] = []
        self.frozen: Optional[TailQueue] = None

    @property
    def next_offset(self) -> int:
        return self.first_offset + self.count

    def append(self, unit: tuple[int, int, int]) -> None:
        self._rows.append(unit)
        self.count += 1

    def extend(self, units: np.ndarray) -> None:
        self._flush_rows()
        self._parts.append(units)
        self.count += len(units)

    def drop_last_if(self, phy_offset: int) -> bool:
        """Drops the last unit when it points at ``phy_offset`` (a record the walk takes back)."""
        if self._rows:
            if self._rows[-1][0] != phy_offset:
                return False
            self._rows.pop()
        else:
            while self._parts and not len(self._parts[-1]):
                self._parts.pop()
            if not self._parts or int(self._parts[-1]["phy_offset"][-1]) != phy_offset:
                return False
            self._parts[-1] = self._parts[-1][:-1]       # a view: a frozen array is never written
        self.count -= 1
        return True

    def _flush_rows(self) -> None:
        if self._rows:
            self._parts.append(np.array(self._rows, dtype=CQ_UNIT_DTYPE))
            self._rows = []

    def freeze(self) -> TailQueue:
        if self.frozen is None or len(self.frozen.units) != self.count:
            self._flush_rows()
            if len(self._parts) > 1:
                self._parts = [np.concatenate(self._parts).astype(CQ_UNIT_DTYPE, copy=False)]
            units = self._parts[0] if self._parts else np.empty(0, dtype=CQ_UNIT_DTYPE)
            units.flags.writeable = False
            self.frozen = TailQueue(self.first_offset, units)
        return self.frozen


class CommitLogTail:
    """The units of the records from ``start`` (the database's dispatch checkpoint) to the CommitLog's end.

    ``next_offsets``: each queue's next offset in the database; a record whose queue offset is below it is
    already there (the broker's dispatch writes the same key again), and a queue's tail runs without a gap
    from its first unit (a record out of sequence is skipped, as rebuilding a queue from the CommitLog does).
    """

    def __init__(self, start: int, next_offsets: dict[tuple[str, int], int],
                 delay_levels_ms: Sequence[int] = DEFAULT_DELAY_LEVELS_MS, *, check_crc: bool = True):
        self.start = start
        self._check_crc = check_crc
        self.end = start
        self._next_offsets = next_offsets
        self._delays = tuple(delay_levels_ms)
        self._queues: dict[tuple[str, int], _GrowingQueue] = {}
        self._lock = threading.Lock()
        self._last: Optional[tuple[int, bytes]] = None   # the last record walked: CommitLog offset, bytes

    def extend(self, commitlog) -> None:
        """Walk the records written since the last walk (from ``start`` the first time)."""
        with self._lock:
            if not commitlog.segments:
                return
            at = max(self.end, commitlog.min_offset)
            self._last = None
            end = self._settle(commitlog, self._walk(commitlog, at))
            self.end = max(self.end, end)

    def _settle(self, commitlog, end: int) -> int:
        """The walk's last record read again, after its decoding.  A record the broker was still copying in
        when it was read (its body whole, so its CRC checked, but not yet its properties) reads differently
        now: its units are taken back and the walk ends before it, so the next walk reads it whole."""
        last = self._last
        if last is None or last[0] + len(last[1]) != end:
            return end                  # a blank or a record boundary follows: the record was whole
        phy, raw = last
        seg = commitlog.segments[commitlog._segment_index(phy)]
        if seg.dledger:
            return end                  # a DLedger entry's CRC covers the whole record
        if bytes(commitlog.reader.pread(seg, phy - seg.start_offset, len(raw))) == raw:
            return end
        for key in list(self._queues):
            q = self._queues[key]
            if q.drop_last_if(phy) and q.count == 0 and q.frozen is None:
                del self._queues[key]
        return phy

    def _walk(self, commitlog, at: int) -> int:
        """Dispatch every valid record from ``at``, a chunk of records at a time (vectorized decoding);
        returns where the valid records end.  Zeros or a position without a record's magic end the walk
        there (as they end the record walk); wherever else a chunk meets something that is not a plain run
        of valid records (a record failing a check, a truncated file, a DLedger file), the record-by-record
        walk takes over from there: it decides exactly as recovery does, and stops where the data ends."""
        want = min(FIRST_CHUNK_BYTES, CHUNK_BYTES)
        while True:
            index = commitlog._segment_index(at)
            if index is None:
                return at
            seg = commitlog.segments[index]
            if seg.dledger:
                return self._walk_records(commitlog, at)
            seg_len = max(seg.size_bytes, commitlog.segment_size)
            pos = at - seg.start_offset
            while pos < seg_len:
                asked = min(want, seg_len - pos)
                buf = commitlog.reader.pread(seg, pos, asked)
                positions, stop = hdr.walk_chain(buf, 0, len(buf), segment_remaining=seg_len - pos)
                done = self._dispatch_chunk(buf, positions, seg.start_offset + pos)
                if done < len(positions):
                    return self._walk_records(commitlog, seg.start_offset + pos + int(positions[done]))
                if stop.reason == hdr.STOP_BLANK:
                    break
                if stop.reason == hdr.STOP_END:
                    # Zeros or no record's magic (read, not past the file): the record walk ends here too,
                    # after reading a chunk of its own.
                    return seg.start_offset + pos + stop.position
                if stop.reason not in (hdr.STOP_LIMIT, hdr.STOP_SHORT) or len(buf) < asked:
                    # Not a run to go on with, or the file ends before its segment does (a truncated file).
                    return self._walk_records(commitlog, seg.start_offset + pos + stop.position)
                # A chunk that ended inside a record: read on from that record, a longer chunk when it is first.
                want = min(2 * want, CHUNK_BYTES) if stop.position else max(2 * want, stop.total_size)
                pos += stop.position
            at = seg.start_offset + seg_len

    def _walk_records(self, commitlog, at: int) -> int:
        """The record-by-record walk from ``at`` (CommitLog.walk with CRCs): returns where it stopped."""
        for step in commitlog.walk(at, check_crc=self._check_crc, keep_raw=True):
            kind = step.decoded.kind
            if kind is Kind.MESSAGE:
                self._last = (step.phy_offset, step.decoded.record.raw)
                self._dispatch(step.phy_offset, step.decoded.size, step.decoded.record)
                at = step.phy_offset + step.decoded.size
            elif kind is Kind.BLANK:
                at = step.segment.start_offset + max(step.segment.size_bytes, commitlog.segment_size)
            else:
                break
        return at

    def _dispatch_chunk(self, buf, positions: np.ndarray, base: int) -> int:
        """Dispatch the records at ``positions`` of ``buf`` (``buf[0]`` is CommitLog offset ``base``) up to
        the first that fails a check; returns how many were dispatched."""
        if len(positions) == 0:
            return 0
        try:
            h = hdr.decode_headers(buf, positions)
        except CorruptRecordError:
            return 0                                  # the record walk finds which record and why
        n = _valid_crc_prefix(buf, h) if self._check_crc else len(positions)
        if n < len(positions):
            h = h.take(slice(0, n))
        if n == 0:
            return 0
        last, size = int(h.pos[n - 1]), int(h.total_size[n - 1])
        self._last = (base + last, bytes(buf[last:last + size]))
        props = parse_properties_columns(buf, h)
        tags = props.entry_values(props.value_index("TAGS"))
        codes = _tags_codes(tags)
        topics = [t.decode("utf-8") for t in h.topics]
        tx = h.sys_flag & TRANSACTION_MASK
        eligible = (tx == TRANSACTION_NOT_TYPE) | (tx == TRANSACTION_COMMIT_TYPE)
        schedule = [i for i, t in enumerate(topics) if t == SCHEDULE_TOPIC]
        if schedule:                                  # delivery times instead of tag hashes
            rows = np.flatnonzero(np.isin(h.topic_index, schedule) & eligible)
            delays = props.entry_values(props.value_index("DELAY")).take(rows).to_pylist()
            for r, tag, delay in zip(rows.tolist(), tags.take(rows).to_pylist(), delays):
                codes[r] = consume_queue_tags_code(SCHEDULE_TOPIC, {"TAGS": tag, "DELAY": delay},
                                                   int(h.store_ts[r]), self._delays)
        phy = base + h.pos
        self._put_rows(h, topics, np.flatnonzero(eligible), phy, codes)
        lmq_rows = np.flatnonzero((props.value_index(INNER_MULTI_DISPATCH) >= 0) & eligible)
        if len(lmq_rows):
            names = props.entry_values(props.value_index(INNER_MULTI_DISPATCH)[lmq_rows]).to_pylist()
            offsets = props.entry_values(props.value_index(INNER_MULTI_QUEUE_OFFSET)[lmq_rows]).to_pylist()
            for r, row_names, row_offsets in zip(lmq_rows.tolist(), names, offsets):
                unit = (int(phy[r]), int(h.total_size[r]), int(codes[r]))
                self._dispatch_lmq(row_names, row_offsets, int(h.queue_id[r]), unit)
        return n

    def _put_rows(self, h, topics: list[str], rows: np.ndarray, phy: np.ndarray, codes: np.ndarray) -> None:
        """Each queue's rows of a chunk: a run that continues the queue goes in as one array; anything else
        (a queue's first unit, offsets out of sequence) one unit at a time through :meth:`_put`."""
        if len(rows) == 0:
            return
        qid = h.queue_id[rows].astype(np.int64)
        key = (h.topic_index[rows].astype(np.int64) << 32) | (qid & 0xFFFFFFFF)
        order = np.argsort(key, kind="stable")
        sorted_key = key[order]
        starts = np.flatnonzero(np.concatenate(([True], sorted_key[1:] != sorted_key[:-1])))
        ends = np.append(starts[1:], len(order))
        for a, b in zip(starts.tolist(), ends.tolist()):
            group = rows[order[a:b]]
            first = int(group[0])
            queue_key = (topics[int(h.topic_index[first])], int(h.queue_id[first]))
            if queue_key not in self._queues:         # its first unit decides where the queue's tail starts
                self._put(queue_key, int(h.queue_offset[first]), (int(phy[first]), int(h.total_size[first]),
                                                                  int(codes[first])))
                group = group[1:]
                if len(group) == 0:
                    continue
            offsets = h.queue_offset[group].astype(np.int64)
            q = self._queues.get(queue_key)
            if q is not None and int(offsets[0]) == q.next_offset and \
                    bool(np.all(offsets == np.arange(offsets[0], offsets[0] + len(group)))):
                units = np.empty(len(group), dtype=CQ_UNIT_DTYPE)
                units["phy_offset"] = phy[group]
                units["size"] = h.total_size[group]
                units["tags_code"] = codes[group]
                q.extend(units)
                continue
            for r in group.tolist():
                self._put(queue_key, int(h.queue_offset[r]), (int(phy[r]), int(h.total_size[r]), int(codes[r])))

    def view(self) -> dict[tuple[str, int], TailQueue]:
        """Each queue's tail as walked so far (immutable: later walks do not change it)."""
        with self._lock:
            return {key: q.freeze() for key, q in self._queues.items()}

    def _dispatch(self, phy_offset: int, size: int, record: MessageRecord) -> None:
        if not record.enters_consume_queue:
            return
        props = record.properties
        tags_code = consume_queue_tags_code(record.topic, props, record.store_timestamp_ms, self._delays)
        unit = (phy_offset, size, tags_code)
        self._put((record.topic, record.queue_id), record.queue_offset, unit)
        names, offsets = props.get(INNER_MULTI_DISPATCH), props.get(INNER_MULTI_QUEUE_OFFSET)
        if names and offsets:
            self._dispatch_lmq(names, offsets, record.queue_id, unit)

    def _dispatch_lmq(self, names: str, offsets: str, queue_id: int, unit: tuple[int, int, int]) -> None:
        for key_topic, key_queue_id, queue_offset in multi_dispatch_copies(names, offsets, queue_id):
            self._put((key_topic, key_queue_id), queue_offset, unit)

    def _put(self, key: tuple[str, int], queue_offset: int, unit: tuple[int, int, int]) -> None:
        q = self._queues.get(key)
        if q is None:
            if queue_offset < self._next_offsets.get(key, 0):
                return                  # in the database already
            q = self._queues[key] = _GrowingQueue(queue_offset)
        if queue_offset == q.next_offset:
            q.append(unit)


def _tags_codes(tags) -> np.ndarray:
    """tagsCode of each row's TAGS (a string array, null where absent): each distinct tag hashed once."""
    encoded = tags.dictionary_encode()
    per_tag = np.array([java_tags_code(t) for t in encoded.dictionary.to_pylist()] + [0], dtype=np.int64)
    index = encoded.indices.fill_null(len(per_tag) - 1).to_numpy(zero_copy_only=False)
    return per_tag[index.astype(np.int64)]


def _valid_crc_prefix(buf, h) -> int:
    """How many of the decoded records, from the first, carry their body's CRC (``decode_record``'s check)."""
    view = memoryview(buf)
    for i, (p, n, crc) in enumerate(zip(h.body_pos.tolist(), h.body_len.tolist(), h.body_crc.tolist())):
        if zlib.crc32(view[p:p + n]) & 0x7FFFFFFF != crc:
            return i
    return len(h.pos)


def multi_dispatch_copies(names: Optional[str], offsets: Optional[str], queue_id: int) -> list[tuple[str, int, int]]:
    """(queue, queueId, queueOffset) of each copy a record's multi-dispatch writes (RocketMQ's dispatchLMQ):
    names and offsets paired by position (none when their counts differ: the broker logs a bug and skips),
    an offset ``Long.parseLong`` refuses skipped, LMQ queues (``%LMQ%`` names) are queue 0, any other name the
    record's queue.  JVM twin: ``RocksDbTail.multiDispatchCopies``."""
    if not names or not offsets:
        return []
    names_list, offsets_list = names.split(LMQ_DISPATCH_SEPARATOR), offsets.split(LMQ_DISPATCH_SEPARATOR)
    if len(names_list) != len(offsets_list):
        return []
    out = []
    for name, offset in zip(names_list, offsets_list):
        queue_offset = _java_parse_long(offset)
        if queue_offset is not None:
            out.append((name, LMQ_QUEUE_ID if name.startswith(LMQ_PREFIX) else queue_id, queue_offset))
    return out


def _java_parse_long(text: str) -> Optional[int]:
    """``Long.parseLong``: an optional sign and decimal digits, nothing around them (Python's ``int`` also
    takes spaces and underscores), within a long."""
    if not text or text != text.strip() or "_" in text:
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if -(1 << 63) <= value < (1 << 63) else None
