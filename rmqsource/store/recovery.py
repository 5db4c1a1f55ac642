"""Recovery at open: repair a store in place the way RocketMQ's load/recover does (spec §7.3).

Runs once, under the writer lock, before anything is appended:

1. after an abnormal shutdown (``abort`` present) IndexFiles newer than the
   checkpoint's index timestamp are deleted (they are rebuilt below);
2. the CommitLog's valid end is found: normal recovery trusts the
   ConsumeQueues and scans from the segment holding their max physical end;
   abnormal recovery scans from the last segment older than the checkpoint and
   re-dispatches every valid record it passes;
3. segments after the end are deleted and the torn or garbage tail of the
   last segment is zero-filled (RocketMQ leaves it, which lets stale records
   look valid to a later scan; zeroing is what a fresh segment holds anyway);
4. ConsumeQueue units past the end are trimmed (zeroed on disk);
5. dispatch catches up from the ConsumeQueues' max physical end, which
   rebuilds missing ConsumeQueues and IndexFile entries.

Indexes are rebuildable caches of the CommitLog, never the truth.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..format.checkpoint import Checkpoint
from ..format.record import Kind
from ..io.durable import fsync_dir
from ..names import SCHEDULE_TOPIC
from .commitlog import CommitLog
from .config import StoreConfig
from .dispatch import Dispatcher, request_from_record
from .index_service import IndexService
from .layout import StoreLayout
from .reader import MessageStoreReader, QueueInfo

ZERO_CHUNK_BYTES = 1 << 20


@dataclass
class RecoveryReport:
    abort_file_existed: bool
    commit_log_min_offset: int
    commit_log_max_offset: int
    confirm_offset: int
    dispatch_behind_bytes: int
    queues: list[QueueInfo] = field(default_factory=list)
    deleted_segments: list[str] = field(default_factory=list)
    zeroed_tail_bytes: int = 0
    redispatched_from: Optional[int] = None

    @property
    def topic_queue_table(self) -> dict[str, int]:
        return dict(sorted((f"{q.topic}-{q.queue_id}", q.max_offset) for q in self.queues))


def _zero_fill(path: str, start: int, end: int) -> int:
    """Overwrite [start, end) of a file with zeros; returns bytes written."""
    if end <= start:
        return 0
    fd = os.open(path, os.O_RDWR)
    try:
        done = 0
        zeros = bytes(min(ZERO_CHUNK_BYTES, end - start))
        pos = start
        # Bounded: each round writes at least one byte or raises.
        for _ in range((end - start) + 1):
            if pos >= end:
                break
            n = os.pwrite(fd, zeros[:min(len(zeros), end - pos)], pos)
            pos += n
            done += n
        os.fsync(fd)
        return done
    finally:
        os.close(fd)


def _tail_is_zero(commitlog: CommitLog, end: int, *, full_check: bool) -> bool:
    """Whether the bytes after ``end`` in its segment are zero (all of them with ``full_check``)."""
    seg = commitlog.reader.find(end)
    if seg is None:
        return True
    pos = end - seg.start_offset
    size = max(seg.size_bytes, commitlog.segment_size)
    if not full_check:
        return commitlog.reader.pread(seg, pos, 8) in (b"", bytes(8))
    for _ in range(size // ZERO_CHUNK_BYTES + 2):
        if pos >= size:
            break
        chunk = commitlog.reader.pread(seg, pos, min(ZERO_CHUNK_BYTES, size - pos))
        if not chunk:
            break
        if chunk.count(0) != len(chunk):
            return False
        pos += len(chunk)
    return True


def recover_store(root: str | os.PathLike, config: Optional[StoreConfig] = None, *,
                  dispatcher: Optional[Dispatcher] = None, mark_clean: bool = False) -> RecoveryReport:
    """Recover the store at ``root`` in place and report what the engine would report.

    The caller holds the store's writer lock.  ``dispatcher`` is the writer's own
    (so its in-memory queue state stays right); one is made when not given.
    ``mark_clean`` removes the ``abort`` file afterwards, as a clean shutdown
    does, once CommitLog, ConsumeQueues and IndexFiles are consistent again.
    """
    config = config or StoreConfig()
    layout = StoreLayout.for_config(root, config)
    layout.check_recoverable()
    abort = layout.abort_exists()
    try:
        checkpoint = Checkpoint.decode(layout.checkpoint_path.read_bytes())
    except FileNotFoundError:
        checkpoint = Checkpoint()
    own_dispatcher = dispatcher is None
    if dispatcher is None:
        index = IndexService(layout.index_dir, config.max_hash_slot_num, config.max_index_num,
                             max_msgs_num_batch=config.max_msgs_num_batch) if config.message_index_enable else None
        dispatcher = Dispatcher(layout.root, cq_file_size=config.mapped_file_size_consume_queue_bytes,
                                delay_levels_ms=config.message_delay_levels_ms, index_service=index)
    report_deleted: list[str] = []
    redispatched_from = None
    try:
        if abort and dispatcher.index_service is not None:
            dispatcher.index_service.delete_files_after(checkpoint.index_msg_timestamp_ms)
        commitlog = CommitLog(layout)
        try:
            if not commitlog.segments:
                dispatcher.delete_all()
                end = 0
            elif abort:
                min_ts = (checkpoint.min_timestamp_index_ms()
                          if config.message_index_enable and config.message_index_safe
                          else checkpoint.min_timestamp_ms())
                start_index = commitlog.abnormal_recovery_start_index(min_ts)
                start = commitlog.segments[start_index].start_offset
                redispatched_from = start
                end = _walk_and_dispatch(commitlog, dispatcher, start, config)
            else:
                # Normal recovery trusts the ConsumeQueues: validate from their last record on.
                with MessageStoreReader(layout.root, config) as reader:
                    end = reader.commit_log_max_offset
            zeroed = 0
            if commitlog.segments:
                report_deleted, zeroed = _truncate_commitlog(commitlog, end, full_check=abort)
        finally:
            commitlog.close()
        dispatcher.truncate_dirty(end)
        # Catch-up dispatch (reput): from where the ConsumeQueues end to the CommitLog end.
        commitlog = CommitLog(layout)
        try:
            resume = dispatcher.max_physic_offset()
            index = dispatcher.index_service
            if index is not None and abort:
                # IndexFiles may lag the ConsumeQueues (deleted after a crash): catch them up too;
                # already-present units and entries are skipped by dispatch's duplicate rules. After a
                # clean shutdown they do not lag, and a store whose messages carry no keys has no
                # IndexFile at all: no walk of its whole CommitLog at every open.
                last = index.last_file
                resume = min(resume, last.header.end_phy_offset if last is not None else 0)
            resume = max(resume, commitlog.min_offset)
            if commitlog.segments and resume < end:
                redispatched_from = resume if redispatched_from is None else min(redispatched_from, resume)
                dispatcher.dispatch_from_commitlog(commitlog, resume, end_offset=end)
            dispatcher.sync()
        finally:
            commitlog.close()
    finally:
        if own_dispatcher:
            dispatcher.close()

    if mark_clean and abort:
        layout.abort_path.unlink(missing_ok=True)
        fsync_dir(layout.root)
    with MessageStoreReader(layout.root, config) as reader:
        queues = reader.queue_infos()
        cl_min = reader.commitlog.min_offset
        cl_max = reader.commit_log_max_offset
    if not config.is_v5:
        # 4.9 keeps an (empty) in-memory queue per delay level of SCHEDULE_TOPIC_XXXX.
        present = {(q.topic, q.queue_id) for q in queues}
        for level in range(config.max_delay_level):
            if (SCHEDULE_TOPIC, level) not in present:
                queues.append(QueueInfo(SCHEDULE_TOPIC, level, 0, 0, -1))
        queues.sort(key=lambda q: (q.topic, q.queue_id))
    return RecoveryReport(
        abort_file_existed=abort, commit_log_min_offset=cl_min, commit_log_max_offset=cl_max,
        confirm_offset=cl_max if config.is_v5 else -1, dispatch_behind_bytes=0, queues=queues,
        deleted_segments=report_deleted, zeroed_tail_bytes=zeroed, redispatched_from=redispatched_from)


def _walk_and_dispatch(commitlog: CommitLog, dispatcher: Dispatcher, start: int, config: StoreConfig) -> int:
    """Abnormal recovery scan: re-dispatch every valid record, return the valid end."""
    end = start
    pending = []
    for step in commitlog.walk(start, check_crc=config.check_crc_on_recover):
        kind = step.decoded.kind
        if kind is Kind.MESSAGE:
            pending.append(request_from_record(step.decoded.record, config.message_delay_levels_ms))
            end = step.phy_offset + step.decoded.size
            if len(pending) >= 4096:
                dispatcher.dispatch(pending)
                pending = []
        elif kind is Kind.BLANK:
            last = step.segment is commitlog.segments[-1]
            end = step.phy_offset if last else step.segment.start_offset + max(
                step.segment.size_bytes, commitlog.segment_size)
        else:
            end = step.phy_offset
            break
    if pending:
        dispatcher.dispatch(pending)
    return end


def _truncate_commitlog(commitlog: CommitLog, end: int, *, full_check: bool) -> tuple[list[str], int]:
    """Delete segments after ``end`` and zero the invalid tail of the segment holding it."""
    deleted = []
    for seg in commitlog.segments:
        if seg.start_offset > end:
            deleted.append(seg.path)
    for path in deleted:
        os.unlink(path)
    if deleted:
        fsync_dir(str(Path(deleted[0]).parent))
    zeroed = 0
    seg = commitlog.reader.find(end)
    if seg is not None and not _tail_is_zero(commitlog, end, full_check=full_check):
        pos = end - seg.start_offset
        size = max(seg.size_bytes, commitlog.segment_size)
        zeroed = _zero_fill(seg.path, pos, size)
    return deleted, zeroed
