"""Read side of the store engine: getMessage, view by msgId, query by key.

Opening never writes.  The CommitLog's valid end is computed the way recovery
would (spec §7.3): from the ConsumeQueues' max physical end after a clean
shutdown, with the abnormal scan when an ``abort`` file says the last run
crashed.  ConsumeQueue units at or past that end are ignored, and a store
whose ``consumequeue/`` is missing is served from units re-derived from the
CommitLog in memory, as dispatch would rebuild them.  A stopped store whose
CommitLog runs past its ConsumeQueues (a writer killed between its CommitLog
write and its dispatch) has those records dispatched in memory, as the broker's
recovery dispatches them (spec §7.3, §7.5): each queue is its file units
followed by its tail units.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Optional

import numpy as np

from ..errors import OptionError
from ..format.checkpoint import Checkpoint
from ..format.consumequeue import PRE_BLANK_SIZE
from ..format.indexfile import index_file_size
from ..format.javahash import java_string_hash
from ..format.msgid import decode_offset_msg_id
from ..format.properties import split_keys
from ..format.record import Kind, MessageRecord
from ..io.lock import LockState, describe_holder, store_lock_state
from .commitlog import CommitLog
from .config import StoreConfig
from .consumequeue import ConsumeQueue, ConsumeQueueBase, InMemoryConsumeQueue, TailedConsumeQueue
from .index_service import IndexService, open_index_service_for_read
from .layout import StoreLayout
from .rocksdb_tail import CommitLogTail, TailQueue

# Defaults of MessageStoreConfig used by getMessage that corpora never override.
ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO = 40
MAX_TRANSFER_BYTES_ON_MESSAGE_IN_DISK = 64 * 1024
MAX_TRANSFER_COUNT_ON_MESSAGE_IN_DISK = 8


class GetMessageStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(frozen=True)
class CqUnit:
    commit_log_offset: int
    size: int
    tags_code: int


@dataclass(frozen=True)
class FoundMessage:
    record: MessageRecord
    cq: Optional[CqUnit]


@dataclass
class GetMessageResult:
    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[FoundMessage] = field(default_factory=list)


@dataclass(frozen=True)
class QueueInfo:
    topic: str
    queue_id: int
    min_offset: int
    max_offset: int
    cq_max_physic_offset: int


@dataclass
class ViewResult:
    store_host: str
    commit_log_offset: int
    message: Optional[FoundMessage]


@dataclass
class QueryResult:
    messages: list[FoundMessage]
    index_last_update_phy_offset: int
    index_last_update_timestamp_ms: int


class TagFilter:
    """Store-level tag filter: CQ tagsCode against the hashes of ``A || B`` (FilterAPI)."""

    def __init__(self, expression: Optional[str]):
        expr = (expression or "").strip()
        self.expression = expr or "*"
        self.match_all = self.expression == "*"
        tags = [t.strip() for t in self.expression.split("||")] if not self.match_all else []
        self.tags = frozenset(t for t in tags if t)
        self.codes = frozenset(java_string_hash(t) for t in self.tags)

    def matches_code(self, tags_code: int) -> bool:
        if self.match_all:
            return True
        # isMatchedByConsumeQueue compares tagsCode.intValue(): int64 truncated to int32.
        as_int = ((tags_code + (1 << 31)) % (1 << 32)) - (1 << 31)
        return as_int in self.codes

    def code_mask(self, tags_codes: np.ndarray) -> np.ndarray:
        if self.match_all:
            return np.ones(len(tags_codes), dtype=bool)
        as_int = tags_codes.astype(np.int64).astype(np.int32)
        return np.isin(as_int, np.fromiter(self.codes, dtype=np.int32, count=len(self.codes)))


def _total_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


class MessageStoreReader:
    """Read-only engine over one store root."""

    def __init__(self, root: str | os.PathLike, config: Optional[StoreConfig] = None, *,
                 commit_log_end: Optional[int] = None):
        """``commit_log_end`` pins the valid end found earlier (a planned snapshot of a
        store that may be growing): the reader then shows the store as it was then."""
        self.config = config or StoreConfig()
        self._pinned_end = commit_log_end
        self.layout = StoreLayout.for_config(root, self.config)
        self.layout.check_is_store()
        # Segment sizes come from the files (they must all be equal); the
        # configured size only matters for a store with no segment yet.
        self.commitlog = CommitLog(self.layout)
        self._queues: dict[tuple[str, int], ConsumeQueueBase] = {}
        self._disk_queues: dict[tuple[str, int], ConsumeQueueBase] = {}
        self._memory_bytes = int(_total_memory_bytes() * ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO / 100)

    # -- lifecycle ------------------------------------------------------------
    def close(self) -> None:
        self.commitlog.close()
        if "index_service" in self.__dict__:
            self.index_service.close()
        for q in self._disk_queues.values():
            if isinstance(q, ConsumeQueue):
                q.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def engine_v5(self) -> bool:
        return self.config.is_v5

    @cached_property
    def checkpoint(self) -> Checkpoint:
        try:
            return Checkpoint.decode(self.layout.checkpoint_path.read_bytes())
        except FileNotFoundError:
            return Checkpoint()

    @cached_property
    def abort_file_existed(self) -> bool:
        return self.layout.abort_exists()

    # -- queues -----------------------------------------------------------------
    @cached_property
    def rocksdb_queue_store(self):
        """The RocksDB ConsumeQueues (storeType=defaultRocksDB) opened read-only, or None for file queues."""
        if not self.layout.rocksdb_queues:
            return None
        from .rocksdb_queue import RocksDbQueueStore
        return RocksDbQueueStore(self.layout, units_per_file=self.config.consume_queue_units_per_file,
                                 delay_levels_ms=self.config.message_delay_levels_ms)

    @cached_property
    def _queue_keys_on_disk(self) -> list[tuple[str, int]]:
        if self.rocksdb_queue_store is not None:
            return self.rocksdb_queue_store.list_queues()
        return self.layout.list_queues()

    @cached_property
    def _rederived_queues(self) -> Optional[dict[tuple[str, int], InMemoryConsumeQueue]]:
        """Units re-derived from the CommitLog when consumequeue/ holds no queue at all: dispatched as the
        broker's recovery rebuilds them (LMQ copies included), by the walk that serves a RocksDB database's tail."""
        if self._queue_keys_on_disk or not self.commitlog.segments:
            return None
        tail = CommitLogTail(self.commitlog.min_offset, {}, self.config.message_delay_levels_ms,
                             check_crc=self.config.check_crc_on_recover)
        tail.extend(self.commitlog)
        upf = self.config.consume_queue_units_per_file
        return {k: InMemoryConsumeQueue(k[0], k[1], q.units, first_offset=q.first_offset, units_per_file=upf)
                for k, q in tail.view().items()}

    @property
    def has_consume_queue_files(self) -> bool:
        """Whether consumequeue/ holds any queue (else queues are re-derived from the CommitLog)."""
        return bool(self._queue_keys_on_disk)

    @cached_property
    def _undispatched_tail(self) -> dict[tuple[str, int], TailQueue]:
        """Units of the records past every ConsumeQueue, up to the CommitLog's valid end, for a stopped store
        with file queues (empty otherwise).  A writer killed between its CommitLog write and its dispatch
        leaves such records; the broker's recovery dispatches them (spec §7.3, §7.5: from the queues' max
        physical end to the CommitLog's end), each exactly once.  :class:`CommitLogTail` does the same walk
        as for a RocksDB database's tail, each queue's next offset its file max offset (a record below it
        is in the files already).  A live store shows only what was dispatched: it gets none.
        Twin: ``StoreReader.undispatchedTail``."""
        cl = self.commitlog
        if not self._tail_possible or self.live:
            return {}
        end = self.commit_log_max_offset
        start = max(self._last_units[1], cl.min_offset)
        if end <= start:
            return {}
        next_offsets = {key: self._queue_on_disk(key).max_offset for key in self._queue_keys_on_disk}
        tail = CommitLogTail(start, next_offsets, self.config.message_delay_levels_ms,
                             check_crc=self.config.check_crc_on_recover)
        tail.extend(cl)
        out = {}
        for key, t in tail.view().items():
            # Units of records at or past the valid end (a pinned end) are not served: capped as file units are.
            n = int(np.searchsorted(t.units["phy_offset"], end, side="left"))
            if n:
                out[key] = TailQueue(t.first_offset, t.units[:n])
        return out

    @cached_property
    def _tail_possible(self) -> bool:
        """Whether the store may have an undispatched tail: file queues and a CommitLog (cheap to tell: whether a
        writer holds it, and the tail itself, are found only when a question reaches past a queue's files)."""
        return self.rocksdb_queue_store is None and bool(self._queue_keys_on_disk) and bool(self.commitlog.segments)

    def queue_keys(self) -> list[tuple[str, int]]:
        if self._rederived_queues is not None:
            return sorted(self._rederived_queues)
        if self._undispatched_tail:
            return sorted(set(self._queue_keys_on_disk) | set(self._undispatched_tail))
        return list(self._queue_keys_on_disk)

    def topics(self) -> list[str]:
        return sorted({t for t, _ in self.queue_keys()})

    @cached_property
    def _queue_key_set_on_disk(self) -> frozenset:
        return frozenset(self._queue_keys_on_disk)

    def _queue_on_disk(self, key: tuple[str, int]) -> Optional[ConsumeQueueBase]:
        """The queue as its files (or the RocksDB database) hold it; None when there is none."""
        q = self._disk_queues.get(key)
        if q is None:
            if self.rocksdb_queue_store is not None:
                q = self.rocksdb_queue_store.queue(key[0], key[1])
            elif key in self._queue_key_set_on_disk:
                q = ConsumeQueue(self.layout.queue_dir(key[0], key[1]), key[0], key[1])
            if q is None:
                return None
            self._disk_queues[key] = q
        return q

    def consume_queue(self, topic: str, queue_id: int) -> Optional[ConsumeQueueBase]:
        key = (topic, int(queue_id))
        q = self._queues.get(key)
        if q is None:
            if self._rederived_queues is not None:
                q = self._rederived_queues.get(key)
            else:
                q = self._queue_on_disk(key)
                if q is not None and self._tail_possible:
                    q = TailedConsumeQueue(q, lambda: self._undispatched_tail.get(key))
                elif q is None and self._tail_possible:
                    t = self._undispatched_tail.get(key)
                    if t is not None:
                        q = InMemoryConsumeQueue(topic, key[1], t.units, first_offset=t.first_offset,
                                                 units_per_file=self.config.consume_queue_units_per_file)
            if q is None:
                return None
            self._queues[key] = q
        return q

    # -- CommitLog end ------------------------------------------------------------
    @cached_property
    def commit_log_max_offset(self) -> int:
        """Valid end of the CommitLog as recovery would find it; while a writer (or a broker) holds the
        store, only what dispatch has seen: records past it may be torn or in no ConsumeQueue yet."""
        if self._pinned_end is not None:
            return self._pinned_end
        cl = self.commitlog
        if not cl.segments:
            return 0
        end = self._recovered_end(cl)
        if self.live:
            end = min(end, max(self._last_units[1], cl.min_offset))
        return end

    def _recovered_end(self, cl) -> int:
        if cl.divided_offset is not None:
            # DLedger: what the leader serves once it re-commits its own tail (README "DLedger stores"),
            # found as DLedger recovery finds it, clean shutdown or not: a header failing a check before
            # the queues' last unit ends the data the engine serves.
            return cl.dledger_valid_end()
        check_crc = self.config.check_crc_on_recover
        if self.abort_file_existed and not self.live:
            start = cl.abnormal_recovery_start_index(self._abnormal_min_timestamp())
            return cl.find_valid_end(start, check_crc=check_crc)
        # Clean shutdown (or a live writer): trust the ConsumeQueues and validate
        # only from the record of their last unit on (5.3.2+ normal recovery
        # starts at that segment; starting at the record itself finds the same end).
        last_start, max_cq_end = self._last_units
        end = -1
        if last_start >= cl.min_offset and cl.reader.find(last_start) is not None:
            end = cl.find_valid_end_from(last_start, check_crc=check_crc)
            if end == last_start:
                end = -1  # the last unit's record is not valid: scan its whole segment
        if end < 0:
            start_index = max(0, len(cl.segments) - 3)
            if max_cq_end >= 0:
                start_index = max((i for i, seg in enumerate(cl.segments) if seg.start_offset <= max_cq_end),
                                  default=0)
            end = cl.find_valid_end(start_index, check_crc=check_crc)
        return end

    @cached_property
    def _last_units(self) -> tuple[int, int]:
        """(start of the latest record a queue's last unit points at, end of the furthest such record) over
        every queue on disk, -1 each when no queue has a unit."""
        last_start, max_cq_end = -1, -1
        for key in self._queue_keys_on_disk:
            q = self._queue_on_disk(key)
            if q.max_offset > q.first_file_start_offset:
                u = q.unit_at(q.max_offset - 1)
                if u and u[1] != PRE_BLANK_SIZE:
                    last_start = max(last_start, u[0])
                    max_cq_end = max(max_cq_end, u[0] + u[1])
        return last_start, max_cq_end

    @cached_property
    def lock_state(self) -> LockState:
        """Who holds the store's ``lock`` (tested once, read-only)."""
        return store_lock_state(self.layout.root)

    @cached_property
    def live(self) -> bool:
        """Whether a writer (or broker) holds the store's lock right now: then the tail is moving."""
        return self.abort_file_existed and self.lock_state.held

    def broker_note(self) -> Optional[str]:
        """One line for users when a running broker holds the store (None otherwise)."""
        state = self.lock_state
        if not state.by_broker:
            return None
        return (f"{self.layout.root} is in use by a running broker ({describe_holder(state)}): reads show only "
                f"the records it has dispatched so far, and nothing is written into the store")

    def _abnormal_min_timestamp(self) -> int:
        cp = self.checkpoint
        if self.config.message_index_enable and self.config.message_index_safe:
            return cp.min_timestamp_index_ms()
        return cp.min_timestamp_ms()

    def queue_max_offset(self, q: ConsumeQueueBase) -> int:
        return q.capped_max_offset(self.commit_log_max_offset)

    def queue_min_offset(self, q: ConsumeQueueBase, max_offset: Optional[int] = None) -> int:
        mx = self.queue_max_offset(q) if max_offset is None else max_offset
        return q.min_offset(self.commitlog.min_offset, engine_v5=self.engine_v5, max_offset=mx)

    def queue_infos(self) -> list[QueueInfo]:
        infos = []
        for topic, qid in self.queue_keys():
            q = self.consume_queue(topic, qid)
            mx = self.queue_max_offset(q)
            mn = self.queue_min_offset(q, mx)
            last_end = -1
            if mx > q.first_file_start_offset:
                u = q.unit_at(mx - 1)
                if u and u[1] != PRE_BLANK_SIZE:
                    last_end = u[0] + u[1]
            infos.append(QueueInfo(topic, qid, mn, mx, last_end))
        return infos

    # -- getMessage -------------------------------------------------------------
    def _is_in_disk(self, phy_offset: int) -> bool:
        return (self.commit_log_max_offset - phy_offset) > self._memory_bytes

    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                    tag_expression: Optional[str] = None) -> GetMessageResult:
        """RocketMQ's ``DefaultMessageStore.getMessage`` on a master (spec §9.3)."""
        if max_msg_nums <= 0:
            raise OptionError(f"maxMsgNums must be positive, got {max_msg_nums}")
        tag_filter = TagFilter(tag_expression)
        q = self.consume_queue(topic, queue_id)
        if q is None:
            # The engine creates a missing queue on demand: an empty queue.
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
        max_offset = self.queue_max_offset(q)
        min_offset = self.queue_min_offset(q, max_offset)
        if max_offset == 0:
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, min_offset, max_offset)
        if offset < min_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_TOO_SMALL, min_offset, min_offset, max_offset)
        if offset == max_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset, min_offset, max_offset)
        if offset > max_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, max_offset, min_offset, max_offset)
        if not q.has_file_for(offset):
            nxt = offset + q.units_per_file - offset % q.units_per_file
            return GetMessageResult(GetMessageStatus.OFFSET_FOUND_NULL, nxt, min_offset, max_offset)
        file_end = (offset // q.units_per_file + 1) * q.units_per_file
        # Only the units the scan may reach: reading to the file's end made each call cost the whole file.
        count = min(file_end, max_offset, offset + self._scan_limit(max_msg_nums)) - offset
        units = q.read_units(offset, count)
        return self._scan(units, offset, min_offset, max_offset, max_msg_nums, tag_filter)

    def _scan_limit(self, max_msg_nums: int) -> int:
        """Units one getMessage call scans at most: 4.9 scans ``max(16000, maxMsgNums * 20)`` bytes of
        units; 5.x allows one unit more (``maxFilterMessageSize``)."""
        if self.engine_v5:
            return max(self.config.max_filter_message_size_bytes, max_msg_nums * 20) // 20 + 1
        return max(16000, max_msg_nums * 20) // 20

    def _batch_full(self, size: int, max_msg_nums: int, buffer_total: int, message_total: int,
                    in_disk: bool) -> bool:
        if buffer_total == 0 or message_total == 0:
            return False
        if max_msg_nums <= message_total:
            return True
        if in_disk:
            return (buffer_total + size > MAX_TRANSFER_BYTES_ON_MESSAGE_IN_DISK
                    or message_total > MAX_TRANSFER_COUNT_ON_MESSAGE_IN_DISK - 1)
        return (buffer_total + size > self.config.max_transfer_bytes_on_message_in_memory
                or message_total > self.config.max_transfer_count_on_message_in_memory - 1)

    def _fetch(self, phy: int, size: int, tags_code: int) -> Optional[FoundMessage]:
        """The record a unit points at; None when its CommitLog data was removed."""
        if phy < self.commitlog.min_offset or self.commitlog.reader.find(phy) is None:
            return None
        record = self.commitlog.read_message(phy, size, keep_raw=True)
        return FoundMessage(record, CqUnit(phy, size, tags_code))

    def _scan(self, units, offset, min_offset, max_offset, max_msg_nums, tag_filter) -> GetMessageResult:
        """The getMessage scan over ``units``: those of one ConsumeQueue file the call may reach
        (:meth:`_scan_limit`, applied by the caller).

        The generations also differ in one detail: 4.9 skips units of a removed CommitLog
        segment before checking the batch caps where 5.x checks the caps first.  Either way
        nextBeginOffset is the first unit not processed.
        """
        v5 = self.engine_v5
        status = GetMessageStatus.NO_MATCHED_MESSAGE
        messages: list[FoundMessage] = []
        buffer_total = 0
        processed = 0
        next_phy_file_start = None
        phys = units["phy_offset"].tolist()
        sizes = units["size"].tolist()
        codes = units["tags_code"].tolist()
        for k in range(len(phys)):
            phy, size, code = phys[k], sizes[k], codes[k]
            in_removed_segment = next_phy_file_start is not None and phy < next_phy_file_start
            if in_removed_segment and not v5:
                processed = k + 1
                continue
            if self._batch_full(size, max_msg_nums, buffer_total, len(messages), self._is_in_disk(phy)):
                break
            processed = k + 1
            if in_removed_segment:
                continue
            if not tag_filter.matches_code(code):
                if buffer_total == 0:
                    status = GetMessageStatus.NO_MATCHED_MESSAGE
                continue
            found = self._fetch(phy, size, code)
            if found is None:
                if buffer_total == 0:
                    status = GetMessageStatus.MESSAGE_WAS_REMOVING
                next_phy_file_start = self.commitlog.roll_next_file(phy)
                continue
            messages.append(found)
            buffer_total += size
            status = GetMessageStatus.FOUND
            next_phy_file_start = None
        return GetMessageResult(status, offset + processed, min_offset, max_offset, messages)

    def get_loop(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                 tag_expression: Optional[str] = None, max_calls: int = 10_000_000):
        """Call getMessage from ``offset`` until the queue end, as a consumer pulls.

        Yields every :class:`GetMessageResult`; stops when a call makes no
        progress, returns a corrective status, or reaches the queue's max offset.
        """
        calls = 0
        while calls < max_calls:
            result = self.get_message(group, topic, queue_id, offset, max_msg_nums, tag_expression)
            calls += 1
            yield result
            if result.status not in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE,
                                     GetMessageStatus.MESSAGE_WAS_REMOVING):
                return
            if result.next_begin_offset <= offset or result.next_begin_offset >= result.max_offset:
                return
            offset = result.next_begin_offset

    # -- view by msgId -------------------------------------------------------------
    def cq_unit_for(self, record: MessageRecord) -> Optional[CqUnit]:
        """The unit at the record's (topic, queueId, queueOffset), as the engine's printer shows it."""
        q = self.consume_queue(record.topic, record.queue_id)
        if q is None:
            return None
        u = q.unit_at(record.queue_offset) if record.queue_offset < q.max_offset else None
        return CqUnit(*u) if u else None

    def view(self, msg_id: str) -> ViewResult:
        """``viewMessage``: decode the offset msgId and read the record at its offset."""
        mid = decode_offset_msg_id(msg_id)
        message = self.message_at(mid.phy_offset)
        return ViewResult(mid.store_host, mid.phy_offset, message)

    def message_at(self, phy_offset: int) -> Optional[FoundMessage]:
        """The message stored at ``phy_offset`` below the valid end, or None.

        After a clean shutdown a record that its own ConsumeQueue unit points at
        is known to be below the end, which saves computing the end (one read
        instead of one per queue); anything else is checked against the end.
        """
        if phy_offset < self.commitlog.min_offset:
            return None
        if "commit_log_max_offset" in self.__dict__ and phy_offset >= self.commit_log_max_offset:
            return None
        decoded, _ = self.commitlog.decode_at(phy_offset, keep_raw=True)
        if decoded.kind is not Kind.MESSAGE:
            return None
        record = decoded.record
        unit = self.cq_unit_for(record)
        dispatched = (unit is not None and unit.commit_log_offset == phy_offset and unit.size == record.store_size
                      and not self.abort_file_existed and self._pinned_end is None)
        if not dispatched and phy_offset + record.store_size > self.commit_log_max_offset:
            return None
        return FoundMessage(record, unit)

    # -- query by key ------------------------------------------------------------
    @cached_property
    def _index_files(self) -> list[str]:
        d = self.layout.index_dir
        if not d.is_dir():
            return []
        names = sorted(n for n in os.listdir(d) if n.isdigit() and len(n) == 17)
        return [str(d / n) for n in names]

    def index_file_paths(self) -> list[str]:
        """The IndexFiles of the store, oldest first (named by their creation time)."""
        return list(self._index_files)

    @cached_property
    def index_geometry(self) -> tuple[int, int]:
        """(hashSlotNum, indexNum): configured, or inferred from the file size when N = 4H.

        Inferred from the oldest file: the newest is the one a crash or a full disk may have cut short,
        and its size must not redefine the geometry of the others (it then fails naming itself).
        """
        h, n = self.config.max_hash_slot_num, self.config.max_index_num
        if self._index_files:
            size = os.path.getsize(self._index_files[0])
            if size != index_file_size(h, n) and (size - 40) % 84 == 0:
                h = (size - 40) // 84
                n = 4 * h
        return h, n

    @cached_property
    def index_service(self) -> IndexService:
        h, n = self.index_geometry
        return open_index_service_for_read(self.layout.index_dir, h, n, self.config.max_msgs_num_batch)

    def query_offsets(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int):
        """IndexFile hash walk (spec §5.4): (phy offsets newest first, lastUpdatePhy, lastUpdateTs)."""
        return self.index_service.query_offsets(topic, key, max_num, begin_ms, end_ms)

    def query_offsets_many(self, topic_keys: list[tuple[str, str]], max_num: int, begin_ms: int, end_ms: int, *,
                           covering: bool = False):
        """:meth:`query_offsets` of many (topic, key) at once, each IndexFile mapped once for all
        (IndexService.query_offsets_many): (offsets per key, lastUpdatePhy, lastUpdateTs)."""
        return self.index_service.query_offsets_many(topic_keys, max_num, begin_ms, end_ms, covering=covering)

    def query(self, topic: str, key: str, max_num: int = 32, begin_ms: int = 0,
              end_ms: int = (1 << 63) - 1, *, only_matching: bool = False) -> QueryResult:
        """``queryMessage``: IndexFile hits sorted by offset; ``only_matching`` drops hash collisions."""
        offsets, last_phy, last_ts = self.query_offsets(topic, key, max_num, begin_ms, end_ms)
        return self._query_result(topic, key, offsets, last_phy, last_ts, only_matching)

    def query_many(self, topic: str, keys: list[str], max_num: int = 32, begin_ms: int = 0,
                   end_ms: int = (1 << 63) - 1, *, only_matching: bool = False) -> list[QueryResult]:
        """:meth:`query` of each key (the same answers), the IndexFiles walked once for all keys."""
        found, last_phy, last_ts = self.query_offsets_many([(topic, k) for k in keys], max_num, begin_ms, end_ms)
        return [self._query_result(topic, k, offsets, last_phy, last_ts, only_matching)
                for k, offsets in zip(keys, found)]

    def _query_result(self, topic: str, key: str, offsets: list[int], last_phy: int, last_ts: int,
                      only_matching: bool) -> QueryResult:
        if not offsets:
            return QueryResult([], 0, 0)
        messages = []
        for phy in sorted(offsets):
            found = self.message_at(phy)
            if found is None:
                continue
            if only_matching and not key_matches(found.record, topic, key):
                continue
            messages.append(found)
        return QueryResult(messages, last_phy, last_ts)


def key_matches(record: MessageRecord, topic: str, key: str) -> bool:
    """Whether the record really carries ``key`` (hash collisions are possible in the index)."""
    if record.topic != topic:
        return False
    return record.uniq_key == key or key in split_keys(record.keys)
