"""Store writer: RocketMQ's ``DefaultMessageStore.putMessage(s)`` over the file store.

Byte-for-byte like the engine generation named by ``engineVersion`` (spec §2,
§7.6, §11.2): record encoding, properties trailing separator, magic v2 for long
topics (5.1+), ``__CRC32#`` (5.2+ ``enabledAppendPropCRC``), the 4.9 store's
delay-level rewrite to ``SCHEDULE_TOPIC_XXXX``, queue offsets per
``topic-queueId`` (PREPARED/ROLLBACK get 0 and do not advance), 8-byte blank
rule at segment ends, full-size zero-filled segments with the next one
pre-allocated, ``abort`` while open, ``checkpoint`` at close.

Write path: a batch is encoded into one buffer per segment and written with
one ``os.pwrite``; results say PUT_OK only for bytes that were written (and
fsynced under SYNC_FLUSH).  Dispatch (ConsumeQueue + IndexFile) runs
synchronously after each write from the requests built while encoding.

The writer is split by responsibility: put checks and statuses
(``put_checks``, ``put_result``), CommitLog append and roll
(``commitlog_append``), flush and durability (``flush``), the columnar batch
path (``columnar_put``, ``columnar_encode``, ``batch_results``, ``json_lines``).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Iterable, Mapping, Optional, Sequence

from .. import limits
from ..errors import StoreError
from ..format.checkpoint import Checkpoint
from ..format.message import Message, MessageExtBrokerInner
from ..io import files
from ..io.durable import fsync_dir, write_file_atomically
from ..io.lock import StoreLock
from ..io.segments import list_segments
from .batch_results import BatchPutResults
from .columnar_put import ColumnarPut
from .commitlog_append import CommitLogAppend, Segment
from .config import FlushDiskType, StoreConfig
from .config_rdb import require_rocksdict_for_configs, uses_config_rdb
from .dispatch import Dispatcher
from .flush import Durability
from .index_service import IndexService
from .layout import StoreLayout
from .put_checks import PutChecks, delete_property, input_view
from .put_result import (AppendMessageResult, AppendMessageStatus, PutMessageResult, PutMessageStatus,
                         failed_result)
from .recovery import recover_store

__all__ = [
    "AppendMessageResult", "AppendMessageStatus", "BatchPutResults", "Message", "MessageExtBrokerInner",
    "MessageStoreWriter", "PutMessageResult", "PutMessageStatus", "delete_property", "input_view",
    "open_writer", "put_all",
]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class MessageStoreWriter(ColumnarPut, CommitLogAppend, Durability):
    """Exclusive writer of one store root (use as a context manager; close() = clean shutdown)."""

    def __init__(self, root: str | os.PathLike, config: Optional[StoreConfig] = None, *,
                 lock_timeout_s: float = 0.0, strict_broker_topic_check: bool = False,
                 clock_ms=None):
        self.root = os.fspath(root)
        self.config = config or StoreConfig()
        self.strict_broker_topic_check = strict_broker_topic_check
        self._clock_ms = clock_ms or _now_ms
        c = self.config
        self.segment_size = c.mapped_file_size_commit_log_bytes
        self._v5 = c.is_v5
        self._trailing = c.trailing_property_separator
        self._append_crc = c.append_prop_crc
        self._delay_levels = tuple(c.message_delay_levels_ms)
        self._max_body = c.max_message_size_bytes
        self._max_record = c.max_message_size_bytes + limits.RECORD_HEADROOM_BYTES
        self._sync_flush = c.flush_disk_type == FlushDiskType.SYNC_FLUSH
        self._checks = PutChecks(c, self.segment_size, strict_broker_topic_check)
        self._put_lock = threading.RLock()
        self._flush_lock = threading.Lock()         # one flush at a time; close() waits for it
        self._writable = False
        self._closed = False
        self._error: Optional[BaseException] = None
        self._routed_queue_count = 0                # queues counted when topics.json was last routed (flush.py)
        self._config_rdb = uses_config_rdb(self.root, c)    # routes go to config/rdb/ (config_rdb.py)
        if self._config_rdb:
            require_rocksdict_for_configs()
        # A store of another layout (or a DLedger store) is written by its own engine: refuse before creating
        # anything.
        StoreLayout.for_config(self.root, c).check_writable()
        os.makedirs(self.root, exist_ok=True)
        self._lock = StoreLock(self.root, timeout_s=lock_timeout_s).acquire()
        self._flusher: Optional[threading.Thread] = None
        self._stop = threading.Event()
        try:
            self._open()
        except BaseException:
            self.abandon()                  # close what the open opened; release the lock
            raise
        if not self._sync_flush:
            self._flusher = threading.Thread(target=self._flush_loop, name="rmq-flush-commitlog", daemon=True)
            self._flusher.start()

    # -- open / recovery ----------------------------------------------------------
    def _open(self) -> None:
        c = self.config
        self.commitlog_dirs = tuple(c.commit_log_dirs(self.root))
        for d in self.commitlog_dirs:
            os.makedirs(d, exist_ok=True)
        self.layout = StoreLayout.for_root(self.root, ",".join(self.commitlog_dirs))
        ck_path = os.path.join(self.root, "checkpoint")
        try:
            with open(ck_path, "rb") as f:
                self._checkpoint = Checkpoint.decode(f.read(40))
        except FileNotFoundError:
            self._checkpoint = Checkpoint()
            write_file_atomically(ck_path, Checkpoint().encode(v5=self._v5))
        abort_path = os.path.join(self.root, "abort")
        self.abort_existed = os.path.exists(abort_path)
        self.index_service = None
        if c.message_index_enable:
            self.index_service = IndexService(os.path.join(self.root, "index"), c.max_hash_slot_num,
                                              c.max_index_num, max_msgs_num_batch=c.max_msgs_num_batch,
                                              clock_ms=self._clock_ms,
                                              on_full_file_flushed=self._on_index_full)
        self.dispatcher = Dispatcher(self.root, cq_file_size=c.mapped_file_size_consume_queue_bytes,
                                     delay_levels_ms=self._delay_levels, index_service=self.index_service)
        self._segments: list[Segment] = []
        self._prealloc: Optional[Segment] = None
        self._current: Optional[Segment] = None
        self._physic_ts = self._checkpoint.physic_msg_timestamp_ms
        self._last_store_ts = 0
        self._recover()
        self._queue_offsets: dict[tuple[str, int], int] = self.dispatcher.max_offsets()
        # The store runs: abort marks it not cleanly shut down until close().
        fd = files.ops.open(abort_path, os.O_WRONLY | os.O_CREAT, 0o644)
        files.ops.close(fd)
        fsync_dir(self.root)
        self._writable = True

    def _recover(self) -> None:
        """Repair the store in place (recovery.py), then reopen its segments for appending."""
        z = self.segment_size
        for d in self.commitlog_dirs:
            for s in list_segments(d):
                if s.size_bytes != z:
                    raise StoreError(f"CommitLog segment {s.path} is {s.size_bytes} bytes; "
                                     f"mappedFileSizeCommitLog is {z}")
        report = recover_store(self.root, self.config, dispatcher=self.dispatcher)
        self._open_segments(report.commit_log_max_offset)

    # -- puts -----------------------------------------------------------------------
    def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        return self.put_messages([msg])[0]

    def put_messages(self, msgs: Sequence[MessageExtBrokerInner]) -> list[PutMessageResult]:
        """Append messages in order; one result per message (RocketMQ statuses).

        Each message is an independent put (not a RocketMQ batch): a refused
        message does not stop the others.
        """
        msgs = list(msgs)
        for m in msgs:                  # a timer message refuses the whole batch before anything is written
            if isinstance(m, MessageExtBrokerInner):
                self._checks.refuse_unsupported(m)
        results: list[Optional[PutMessageResult]] = [None] * len(msgs)
        with self._put_lock:
            if not self._writable:
                why = "store is closed" if self._closed else f"store is not writable: {files.describe(self._error)}"
                return [failed_result(m, PutMessageStatus.SERVICE_NOT_AVAILABLE, reason=why) for m in msgs]
            self._put_locked(msgs, results)
            self._route_acknowledged(results)
        return results  # type: ignore[return-value]

    @property
    def commit_log_max_offset(self) -> int:
        seg = self._current
        return seg.start + seg.wrote if seg is not None else (self._segments[-1].start if self._segments else 0)

    def queue_offset(self, topic: str, queue_id: int) -> int:
        """Next queue offset the writer will assign in ``topic``/``queue_id``."""
        return self._queue_offsets.get((topic, queue_id), 0)

    def __enter__(self) -> "MessageStoreWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_writer(root: str | os.PathLike, config_path: Optional[str | os.PathLike] = None,
                overrides: Optional[Mapping[str, Any]] = None, **kwargs) -> MessageStoreWriter:
    """Open a writer with a ``store.properties``-style config file (or defaults)."""
    config = StoreConfig.from_properties_file(config_path, overrides) if config_path else \
        StoreConfig().with_overrides(overrides or {})
    return MessageStoreWriter(root, config, **kwargs)


def put_all(writer: MessageStoreWriter, msgs: Iterable[MessageExtBrokerInner],
            batch_size: int = 8192) -> list[PutMessageResult]:
    """Put an iterable in batches (bounded memory per batch)."""
    out: list[PutMessageResult] = []
    batch: list[MessageExtBrokerInner] = []
    for m in msgs:
        batch.append(m)
        if len(batch) >= batch_size:
            out.extend(writer.put_messages(batch))
            batch = []
    if batch:
        out.extend(writer.put_messages(batch))
    return out
