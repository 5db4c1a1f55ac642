"""What :func:`rmqsource.store.recovery.recover_store` would change, computed without writing (``recover --dry-run``).

The steps of recovery are replayed on a model: the CommitLog's valid end is
found by the same walks, ConsumeQueues are loaded into memory and fed the
same dispatch and trim rules (``ConsumeQueueWriter.put`` /
``truncate_from_phy``), IndexFiles newer than the checkpoint are marked for
deletion and the keys re-dispatch would add are counted.  The result lists
every file recovery deletes, zero-fills, writes or creates, with byte ranges.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..format.checkpoint import Checkpoint
from ..format.consumequeue import CQ_UNIT_DTYPE, CQ_UNIT_SIZE, PRE_BLANK_SIZE
from ..format.indexfile import INDEX_HEADER_SIZE, IndexHeader
from ..format.properties import split_keys
from ..format.record import TRANSACTION_MASK, TRANSACTION_ROLLBACK_TYPE, Kind
from ..io.segments import offset_to_file_name
from .commitlog import CommitLog
from .config import StoreConfig
from .consumequeue import ConsumeQueue
from .dispatch import request_from_record
from .layout import StoreLayout
from .reader import MessageStoreReader
from .recovery import _tail_is_zero
from .verify_index import index_files, index_geometry

ZERO_SCAN_BYTES = 1 << 20


@dataclass
class FileChange:
    file: str                      # relative to the store root
    action: str                    # delete | zero | write | create
    start: Optional[int] = None    # byte range [start, end) for zero / write / create
    end: Optional[int] = None
    detail: str = ""

    def to_json(self) -> dict:
        return {"file": self.file, "action": self.action, "from": self.start, "to": self.end, "detail": self.detail}


@dataclass
class RecoveryPlan:
    abort_file_existed: bool
    commit_log_end: int
    changes: list[FileChange] = field(default_factory=list)
    redispatched_from: Optional[int] = None
    index_keys_added: int = 0
    index_added_from: Optional[int] = None
    # (topic, queueId) -> (first file start unit, final units) for the queues recovery writes
    cq_units: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"abortFileExisted": self.abort_file_existed, "commitLogEnd": self.commit_log_end,
                "redispatchedFrom": self.redispatched_from, "indexKeysAdded": self.index_keys_added,
                "indexAddedFrom": self.index_added_from, "changes": [c.to_json() for c in self.changes]}


class _QueueModel:
    """One ConsumeQueue as dispatch sees it: units from the first file's start, and the put/trim rules."""

    def __init__(self, topic: str, queue_id: int, units_per_file: int, cq: Optional[ConsumeQueue]):
        self.topic, self.queue_id, self.units_per_file = topic, queue_id, units_per_file
        if cq is not None and cq.segments:
            self.first_start = cq.first_file_start_offset
            self.write_offset = cq.max_offset
            self.max_physic_offset = max(cq.max_physic_offset, 0)
            units = cq.read_units(self.first_start, self.write_offset - self.first_start)
            self.units = [tuple(int(x) for x in u) for u in units.tolist()]
            self.files = {s.start_offset // CQ_UNIT_SIZE for s in cq.segments}
        else:
            self.first_start = None
            self.write_offset = 0
            self.max_physic_offset = 0
            self.units = []
            self.files = set()
        self.original = list(self.units)
        self.original_start = self.first_start

    def put(self, phy: int, size: int, tags_code: int, cq_offset: int) -> bool:
        if phy + size <= self.max_physic_offset:
            return False
        if self.first_start is None:
            start = cq_offset - cq_offset % self.units_per_file
            self.first_start = self.write_offset = start
            if cq_offset > start:
                self.units.extend([(0, PRE_BLANK_SIZE, 0)] * (cq_offset - start))
                self.write_offset = cq_offset
        elif cq_offset != 0 and cq_offset < self.write_offset:
            return False
        self.units.append((phy, size, tags_code))
        self.write_offset += 1
        self.max_physic_offset = phy + size
        return True

    def truncate_from_phy(self, end: int) -> None:
        if self.first_start is None:
            return
        new_end = self.write_offset
        while new_end > self.first_start:
            u = self.units[new_end - 1 - self.first_start]
            if u[1] != PRE_BLANK_SIZE and u[0] + u[1] > end:
                new_end -= 1
            else:
                break
        for i in range(new_end, self.write_offset):
            self.units[i - self.first_start] = (0, 0, 0)
        self.write_offset = new_end
        last = self.units[new_end - 1 - self.first_start] if new_end > self.first_start else None
        self.max_physic_offset = last[0] + last[1] if last and last[1] != PRE_BLANK_SIZE else 0


def plan_recovery(root: str | os.PathLike, config: Optional[StoreConfig] = None) -> RecoveryPlan:
    """The changes ``recover_store(root, config)`` would make (nothing is written)."""
    config = config or StoreConfig()
    layout = StoreLayout.for_config(root, config)
    layout.check_recoverable()
    root_s = os.fspath(layout.root)
    rel = lambda p: os.path.relpath(os.fspath(p), root_s)  # noqa: E731
    abort = layout.abort_exists()
    try:
        checkpoint = Checkpoint.decode(layout.checkpoint_path.read_bytes())
    except FileNotFoundError:
        checkpoint = Checkpoint()
    changes: list[FileChange] = []
    upf = config.mapped_file_size_consume_queue_bytes // CQ_UNIT_SIZE

    # IndexFiles: after a crash, files newer than the checkpoint are deleted (rebuilt by dispatch).
    idx_files = index_files(str(layout.index_dir)) if config.message_index_enable else []
    headers = {p: IndexHeader.decode(open(p, "rb").read(INDEX_HEADER_SIZE)) for p in idx_files}
    kept_index = list(idx_files)
    if abort and config.message_index_enable:
        kept_index = [p for p in idx_files if headers[p].end_timestamp_ms <= checkpoint.index_msg_timestamp_ms]
        changes += [FileChange(rel(p), "delete", detail="IndexFile newer than the checkpoint")
                    for p in idx_files if p not in kept_index]

    queues: dict[tuple[str, int], _QueueModel] = {}
    for topic, qid in layout.list_queues():
        cq = ConsumeQueue(layout.queue_dir(topic, qid), topic, qid, config.mapped_file_size_consume_queue_bytes)
        try:
            queues[(topic, qid)] = _QueueModel(topic, qid, upf, cq)
        finally:
            cq.close()

    def queue(topic: str, qid: int) -> _QueueModel:
        q = queues.get((topic, qid))
        if q is None:
            q = queues[(topic, qid)] = _QueueModel(topic, qid, upf, None)
        return q

    index_end = headers[kept_index[-1]].end_phy_offset if kept_index else 0
    index_count = headers[kept_index[-1]].index_count if kept_index else 0
    keys_added, keys_from = 0, None

    def dispatch(record) -> None:
        nonlocal keys_added, keys_from, index_end, index_count
        req = request_from_record(record, config.message_delay_levels_ms)
        tx = req.sys_flag & TRANSACTION_MASK
        if tx in (0, 8):
            queue(req.topic, req.queue_id).put(req.commit_log_offset, req.msg_size, req.tags_code,
                                               req.consume_queue_offset)
        if config.message_index_enable and tx != TRANSACTION_ROLLBACK_TYPE:
            p = req.commit_log_offset
            if not (p < index_end or (p == index_end and (index_count > 1 or index_end > 0))):
                n = (req.uniq_key is not None) + len(split_keys(req.keys))
                if n:
                    keys_added += n
                    keys_from = p if keys_from is None else keys_from
                    index_end, index_count = p, index_count + n

    commitlog = CommitLog(layout)
    redispatched_from = None
    try:
        if not commitlog.segments:
            end = 0
            changes += [FileChange(rel(layout.queue_dir(t, q)), "delete", detail="no CommitLog: queue removed")
                        for (t, q) in queues]
            changes += [FileChange(rel(p), "delete", detail="no CommitLog: IndexFile removed") for p in kept_index]
            return RecoveryPlan(abort, 0, changes)
        if abort:
            min_ts = (checkpoint.min_timestamp_index_ms()
                      if config.message_index_enable and config.message_index_safe else checkpoint.min_timestamp_ms())
            start = commitlog.segments[commitlog.abnormal_recovery_start_index(min_ts)].start_offset
            redispatched_from = start
            end = start
            for step in commitlog.walk(start, check_crc=config.check_crc_on_recover):
                kind = step.decoded.kind
                if kind is Kind.MESSAGE:
                    dispatch(step.decoded.record)
                    end = step.phy_offset + step.decoded.size
                elif kind is Kind.BLANK:
                    last = step.segment is commitlog.segments[-1]
                    end = step.phy_offset if last else step.segment.start_offset + max(
                        step.segment.size_bytes, commitlog.segment_size)
                else:
                    end = step.phy_offset
                    break
        else:
            with MessageStoreReader(layout.root, config) as reader:
                end = reader.commit_log_max_offset
        # CommitLog: later segments deleted, the invalid tail of the last one zero-filled.
        for seg in commitlog.segments:
            if seg.start_offset > end:
                changes.append(FileChange(rel(seg.path), "delete", detail="CommitLog segment past the valid end"))
        seg = commitlog.reader.find(end)
        if seg is not None and not _tail_is_zero(commitlog, end, full_check=abort):
            pos, size = end - seg.start_offset, max(seg.size_bytes, commitlog.segment_size)
            nonzero = _count_nonzero(seg.path, pos, size)
            changes.append(FileChange(rel(seg.path), "zero", pos, size,
                                      f"torn or garbage tail after the valid end {end} ({nonzero} non-zero bytes)"))
        # ConsumeQueues: units past the end trimmed, then catch-up dispatch from their end.
        for q in queues.values():
            if q.max_physic_offset > end:
                q.truncate_from_phy(end)
        resume = max((q.max_physic_offset for q in queues.values()), default=0)
        if config.message_index_enable:
            resume = min(resume, index_end if kept_index or keys_added else 0)
        resume = max(resume, commitlog.min_offset)
        if resume < end:
            redispatched_from = resume if redispatched_from is None else min(redispatched_from, resume)
            for step in commitlog.walk(resume, stop_offset=end):
                if step.decoded.kind is Kind.MESSAGE:
                    dispatch(step.decoded.record)
                elif step.decoded.kind is not Kind.BLANK:
                    break
    finally:
        commitlog.close()

    plan = RecoveryPlan(abort, end, changes, redispatched_from, keys_added, keys_from)
    for key in sorted(queues):
        _queue_changes(queues[key], layout, rel, plan)
    if keys_added:
        _, index_num = index_geometry(idx_files, config.max_hash_slot_num, config.max_index_num)
        room = index_num - headers[kept_index[-1]].index_count if kept_index else 0
        what = f"{keys_added} IndexFile keys for records from CommitLog offset {keys_from}"
        if room > 0:
            changes.append(FileChange(rel(kept_index[-1]), "write", detail=what))
        if keys_added > room:
            changes.append(FileChange(rel(layout.index_dir), "create", detail=f"new IndexFile(s): {what}"))
    if abort:
        changes.append(FileChange("abort", "delete", detail="clean shutdown marker"))
    return plan


def _queue_changes(q: _QueueModel, layout: StoreLayout, rel, plan: RecoveryPlan) -> None:
    """Byte ranges of this queue's files that differ between the model's start and end."""
    if q.first_start is None:
        return
    old_start = q.original_start if q.original_start is not None else q.first_start
    changed_units = []
    for i, u in enumerate(q.units):
        off = q.first_start + i
        j = off - old_start
        old = q.original[j] if q.original and 0 <= j < len(q.original) else None
        if old != u and not (old is None and u == (0, 0, 0)):
            changed_units.append(off)
    if not changed_units:
        return
    qdir = layout.queue_dir(q.topic, q.queue_id)
    plan.cq_units[(q.topic, q.queue_id)] = (q.first_start, np.array(q.units, dtype=CQ_UNIT_DTYPE))
    runs = []
    for off in changed_units:
        if runs and runs[-1][1] == off:
            runs[-1][1] = off + 1
        else:
            runs.append([off, off + 1])
    for a, b in runs:
        for file_start in range(a - a % q.units_per_file, b, q.units_per_file):
            lo, hi = max(a, file_start), min(b, file_start + q.units_per_file)
            name = offset_to_file_name(file_start * CQ_UNIT_SIZE)
            path = qdir / name
            zeroed = all(q.units[o - q.first_start] == (0, 0, 0) for o in range(lo, hi))
            action = "zero" if zeroed else ("write" if file_start in q.files else "create")
            what = (f"{q.topic}/{q.queue_id} units {lo}..{hi - 1} past the CommitLog end trimmed" if zeroed
                    else f"{q.topic}/{q.queue_id} units {lo}..{hi - 1} dispatched")
            plan.changes.append(FileChange(rel(path), action, (lo - file_start) * CQ_UNIT_SIZE,
                                           (hi - file_start) * CQ_UNIT_SIZE, what))


def _count_nonzero(path: str, start: int, end: int) -> int:
    total = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        pos = start
        for _ in range((end - start) // ZERO_SCAN_BYTES + 2):
            if pos >= end:
                break
            chunk = os.pread(fd, min(ZERO_SCAN_BYTES, end - pos), pos)
            if not chunk:
                break
            total += len(chunk) - chunk.count(0)
            pos += len(chunk)
    finally:
        os.close(fd)
    return total

