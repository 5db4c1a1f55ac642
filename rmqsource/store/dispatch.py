"""Dispatch ("reput", spec §7.5): CommitLog records -> ConsumeQueue units and IndexFile keys.

A :class:`DispatchRequest` carries what RocketMQ's ``checkMessageAndReturnSize``
extracts from a record.  The writer builds them from the records it has just
appended (no re-read); :meth:`Dispatcher.dispatch_from_commitlog` builds them by
walking the CommitLog (recovery catch-up, rebuild).  Both paths produce the
same bytes.

ConsumeQueue writes follow ``ConsumeQueue.putMessagePositionInfo``: units only
for NOT/COMMIT records, duplicates ignored (``phyOffset + size <=
maxPhysicOffset`` or an index below the queue's end), a queue's first file
created at a non-zero offset is pre-blank filled up to it.  Units are buffered
per queue and written with one ``pwrite`` per queue per batch.
"""

from __future__ import annotations

import os
import shutil

import numpy as np
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

from ..errors import CorruptRecordError
from ..format.consumequeue import CQ_UNIT_DTYPE, CQ_UNIT_SIZE, PRE_BLANK_UNIT, encode_unit
from ..format.tagscode import consume_queue_tags_code
from ..format.properties import KEYS, UNIQ_KEY
from ..format.record import (TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK, TRANSACTION_NOT_TYPE, Kind,
                             MessageRecord)
from ..io import files
from ..io.files import pwrite_all
from ..io.segments import list_segments, offset_to_file_name
from ..names import safe_join
from .consumequeue import ConsumeQueue
from .index_service import IndexService

@dataclass(frozen=True, slots=True)
class DispatchRequest:
    """What reput needs from one record (RocketMQ's DispatchRequest)."""

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp_ms: int
    consume_queue_offset: int
    keys: Optional[str]
    uniq_key: Optional[str]
    sys_flag: int


# One tagsCode rule for dispatch, the writer and the read-side re-derivation.
compute_tags_code = consume_queue_tags_code


def request_from_record(record: MessageRecord, delay_levels_ms: Sequence[int]) -> DispatchRequest:
    props = record.properties
    return DispatchRequest(
        topic=record.topic, queue_id=record.queue_id, commit_log_offset=record.phy_offset,
        msg_size=record.store_size,
        tags_code=compute_tags_code(record.topic, props, record.store_timestamp_ms, delay_levels_ms),
        store_timestamp_ms=record.store_timestamp_ms, consume_queue_offset=record.queue_offset,
        keys=props.get(KEYS), uniq_key=props.get(UNIQ_KEY), sys_flag=record.sys_flag)


class ConsumeQueueWriter:
    """The write side of one ``consumequeue/{topic}/{queueId}`` (ConsumeQueue.putMessagePositionInfo)."""

    def __init__(self, directory: str, topic: str, queue_id: int, file_size: int):
        if file_size % CQ_UNIT_SIZE:
            raise CorruptRecordError(f"ConsumeQueue file size {file_size} is not a multiple of 20",
                                     file=directory, offset=0)
        self.directory = directory
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.units_per_file = file_size // CQ_UNIT_SIZE
        segments = list_segments(directory)
        if segments:
            cq = ConsumeQueue(directory, topic, queue_id, file_size)
            try:
                self.write_offset = cq.max_offset                 # next unit index (queue offset)
                self.max_physic_offset = max(cq.max_physic_offset, 0)
                self._first_start = cq.first_file_start_offset
            finally:
                cq.close()
            self._has_files = True
        else:
            self.write_offset = 0
            self.max_physic_offset = 0
            self._first_start = None
            self._has_files = False
        self._pending = bytearray()
        self._pending_start = self.write_offset
        self._fds: dict[int, int] = {}
        self._dirty: set[int] = set()

    @property
    def max_offset(self) -> int:
        return self.write_offset

    def put(self, phy_offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """Append one unit; False when it was a duplicate and was ignored."""
        if phy_offset + size <= self.max_physic_offset:
            return False
        if self._first_start is None:
            # First unit of a queue without files: its first file is the one holding
            # cq_offset, and the slots before it in that file are pre-blank (fillPreBlank).
            start = cq_offset - cq_offset % self.units_per_file
            self._first_start = self._pending_start = self.write_offset = start
            if cq_offset > start:
                self._pending += PRE_BLANK_UNIT * (cq_offset - start)
                self.write_offset = cq_offset
        elif cq_offset != 0 and cq_offset < self.write_offset:
            return False
        # (A gap, expected > current, is appended at the current end like RocketMQ does.)
        self._pending += encode_unit(phy_offset, size, tags_code)
        self.write_offset += 1
        self.max_physic_offset = phy_offset + size
        return True

    def put_many(self, phy: np.ndarray, size: np.ndarray, tags_code: np.ndarray, cq_offset: np.ndarray) -> int:
        """``put`` for many units in CommitLog order; returns how many were appended.

        Fast path (the writer's own batches): the first unit is new and the
        queue offsets continue the queue without gaps -- then every unit is
        appended, encoded at once.  Anything else goes unit by unit.
        """
        k = len(phy)
        if k == 0:
            return 0
        if self._first_start is None:          # a new queue: its first unit decides the first file
            done = int(self.put(int(phy[0]), int(size[0]), int(tags_code[0]), int(cq_offset[0])))
            return done + self.put_many(phy[1:], size[1:], tags_code[1:], cq_offset[1:])
        first = int(cq_offset[0])
        if (self._first_start is not None and int(phy[0]) + int(size[0]) > self.max_physic_offset
                and first == self.write_offset
                and (k == 1 or bool(np.all(np.diff(cq_offset) == 1) and np.all(np.diff(phy) > 0)))):
            units = np.empty(k, dtype=CQ_UNIT_DTYPE)
            units["phy_offset"] = phy
            units["size"] = size
            units["tags_code"] = tags_code
            self._pending += units.tobytes()
            self.write_offset += k
            self.max_physic_offset = int(phy[-1]) + int(size[-1])
            return k
        done = 0
        for p, s, t, o in zip(phy.tolist(), size.tolist(), tags_code.tolist(), cq_offset.tolist()):
            done += self.put(p, s, t, o)
        return done

    def _fd_for_file(self, file_start_unit: int) -> int:
        fd = self._fds.get(file_start_unit)
        if fd is None:
            os.makedirs(self.directory, exist_ok=True)
            path = os.path.join(self.directory, offset_to_file_name(file_start_unit * CQ_UNIT_SIZE))
            fd = files.ops.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                # Blocks for the whole file now: a full disk is an ENOSPC here, before any unit.
                files.ops.reserve(fd, 0, self.file_size)
            except BaseException:
                files.ops.close(fd)
                raise
            self._fds[file_start_unit] = fd
            self._has_files = True
        return fd

    def write_pending(self) -> None:
        """pwrite the buffered units into their files (creating full-size files as needed)."""
        if not self._pending:
            return
        unit = self._pending_start
        pos = 0
        n = len(self._pending)
        with memoryview(self._pending) as data:       # released even when a write fails
            # One round per CQ file touched.
            for _ in range(n // (self.units_per_file * CQ_UNIT_SIZE) + 2):
                if pos >= n:
                    break
                file_start = unit - unit % self.units_per_file
                in_file = (file_start + self.units_per_file - unit) * CQ_UNIT_SIZE
                chunk = data[pos:pos + in_file]
                self._sync_files_before(file_start)
                fd = self._fd_for_file(file_start)
                pwrite_all(fd, chunk, (unit - file_start) * CQ_UNIT_SIZE)
                self._dirty.add(file_start)
                pos += len(chunk)
                unit += len(chunk) // CQ_UNIT_SIZE
        self._pending = bytearray()
        self._pending_start = self.write_offset
        # Keep at most the newest two files open.
        if len(self._fds) > 2:
            for start in sorted(self._fds)[:-2]:
                if start in self._dirty:
                    files.ops.fsync(self._fds[start])
                    self._dirty.discard(start)
                files.ops.close(self._fds.pop(start))

    def _sync_files_before(self, file_start: int) -> None:
        """fsync this queue's earlier files before a later one is written: after a crash a queue's
        units are then a prefix (no hole in an earlier file below units of a later one)."""
        for start in [s for s in self._dirty if s < file_start]:
            files.ops.fsync(self._fds[start])
            self._dirty.discard(start)

    def sync(self) -> None:
        self.write_pending()
        for start in list(self._dirty):
            files.ops.fsync(self._fds[start])
            self._dirty.discard(start)

    def truncate_from_phy(self, commitlog_end: int) -> None:
        """Drop units whose record ends past the CommitLog's valid end (zeroed on disk)."""
        self.write_pending()
        if not self._has_files:
            return
        cq = ConsumeQueue(self.directory, self.topic, self.queue_id, self.file_size)
        try:
            first = cq.first_file_start_offset
            end = cq.max_offset
            new_end = end
            # Units are in phyOffset order: walk back from the end (bounded by the queue length).
            for _ in range(end - first):
                if new_end <= first:
                    break
                u = cq.unit_at(new_end - 1)
                if u is None or (u[1] != 0x7FFFFFFF and u[0] + u[1] > commitlog_end):
                    new_end -= 1
                else:
                    break
            last = cq.unit_at(new_end - 1) if new_end > first else None
        finally:
            cq.close()
        if new_end < end:
            zeros = bytes(CQ_UNIT_SIZE)
            for off in range(new_end, end):
                fs = off - off % self.units_per_file
                pwrite_all(self._fd_for_file(fs), zeros, (off - fs) * CQ_UNIT_SIZE)
                self._dirty.add(fs)
        self.write_offset = new_end
        self._pending_start = new_end
        self.max_physic_offset = (last[0] + last[1]) if last and last[1] != 0x7FFFFFFF else 0

    def close(self) -> None:
        try:
            self.sync()
        finally:
            for fd in self._fds.values():
                files.ops.close(fd)
            self._fds.clear()

    def release(self) -> None:
        """Close the files without writing what is buffered (the writer's process died)."""
        self._pending = bytearray()
        for fd in self._fds.values():
            try:
                files.ops.close(fd)
            except OSError:
                pass
        self._fds.clear()
        self._dirty.clear()


class Dispatcher:
    """ConsumeQueues + IndexService of one store, fed with DispatchRequests in CommitLog order."""

    def __init__(self, root: str | os.PathLike, *, cq_file_size: int, delay_levels_ms: Sequence[int],
                 index_service: Optional[IndexService], on_cq_write: Optional[Callable[[int], None]] = None):
        self.root = os.fspath(root)
        self.cq_dir = os.path.join(self.root, "consumequeue")
        self.cq_file_size = cq_file_size
        self.delay_levels_ms = tuple(delay_levels_ms)
        self.index_service = index_service
        self._queues: dict[tuple[str, int], ConsumeQueueWriter] = {}
        self._touched: set[tuple[str, int]] = set()
        self.logics_msg_timestamp_ms = 0
        self._on_cq_write = on_cq_write

    # -- queues -----------------------------------------------------------------
    def queue(self, topic: str, queue_id: int) -> ConsumeQueueWriter:
        key = (topic, queue_id)
        q = self._queues.get(key)
        if q is None:
            directory = str(safe_join(self.cq_dir, topic, str(int(queue_id))))
            q = ConsumeQueueWriter(directory, topic, queue_id, self.cq_file_size)
            self._queues[key] = q
        return q

    def existing_queues(self) -> list[tuple[str, int]]:
        """(topic, queueId) of every queue directory on disk."""
        out = []
        if not os.path.isdir(self.cq_dir):
            return out
        for t in sorted(os.listdir(self.cq_dir)):
            tdir = os.path.join(self.cq_dir, t)
            if not os.path.isdir(tdir):
                continue
            for q in sorted(os.listdir(tdir)):
                if q.isdigit() and os.path.isdir(os.path.join(tdir, q)):
                    out.append((t, int(q)))
        return out

    def max_offsets(self) -> dict[tuple[str, int], int]:
        """Next queue offset of every queue on disk or touched (recoverTopicQueueTable)."""
        for key in self.existing_queues():
            self.queue(*key)
        return {k: q.max_offset for k, q in self._queues.items()}

    def max_physic_offset(self) -> int:
        """Largest record end any ConsumeQueue points at (reput resumes there)."""
        for key in self.existing_queues():
            self.queue(*key)
        return max((q.max_physic_offset for q in self._queues.values()), default=0)

    # -- dispatch ---------------------------------------------------------------
    def dispatch(self, requests: Iterable[DispatchRequest]) -> None:
        """CommitLogDispatcherBuildConsumeQueue then ...BuildIndex, per record, in order."""
        index = self.index_service
        touched = self._touched
        queues = self._queues
        if not isinstance(requests, list):
            requests = list(requests)
        for r in requests:
            tran = r.sys_flag & TRANSACTION_MASK
            if tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE:
                key = (r.topic, r.queue_id)
                q = queues.get(key)
                if q is None:
                    q = self.queue(r.topic, r.queue_id)
                if q.put(r.commit_log_offset, r.msg_size, r.tags_code, r.consume_queue_offset):
                    touched.add(key)
                    self.logics_msg_timestamp_ms = r.store_timestamp_ms
        # CQ units and index keys are independent files, so per-batch order is enough.
        if index is not None:
            index.put_keys_batch(requests)
        self.write_pending()

    def dispatch_columns(self, topics: Sequence[str], topic_code: np.ndarray, queue_id: np.ndarray,
                         phy: np.ndarray, size: np.ndarray, tags_code: np.ndarray, store_ts: np.ndarray,
                         queue_offset: np.ndarray, sys_flag: np.ndarray,
                         index_entries: Optional[tuple[np.ndarray, np.ndarray]] = None) -> None:
        """:meth:`dispatch` for records given as columns (CommitLog order), same bytes.

        ConsumeQueue: NOT/COMMIT records grouped per queue (stable, so each
        queue keeps CommitLog order) and appended with ``put_many``.  Index:
        ``index_entries`` = (record number, keyHash) of every key in buildIndex
        order (UNIQ_KEY, then the KEYS pieces), handed to
        ``IndexService.put_hashed_batch``.
        """
        n = len(phy)
        if n == 0:
            return
        tran = sys_flag & TRANSACTION_MASK
        cq_rows = np.flatnonzero((tran == TRANSACTION_NOT_TYPE) | (tran == TRANSACTION_COMMIT_TYPE))
        if cq_rows.size:
            from ..format.batch_encode import group_rows
            _, _, order, counts = group_rows(topic_code[cq_rows], queue_id[cq_rows])
            ends = np.cumsum(counts)
            starts = ends - counts
            last_row = -1
            for a, b in zip(starts.tolist(), ends.tolist()):
                rows = cq_rows[order[a:b]]
                r0 = int(rows[0])
                key = (topics[int(topic_code[r0])], int(queue_id[r0]))
                q = self._queues.get(key)
                if q is None:
                    q = self.queue(*key)
                if q.put_many(phy[rows], size[rows], tags_code[rows], queue_offset[rows]):
                    self._touched.add(key)
                    last_row = max(last_row, int(rows[-1]))   # (the fast path appends all of them)
            if last_row >= 0:
                self.logics_msg_timestamp_ms = int(store_ts[last_row])
        if self.index_service is not None:
            rec, hashes = index_entries if index_entries is not None else (np.zeros(0, np.int64),) * 2
            self.index_service.put_hashed_batch(phy, store_ts, sys_flag, rec, hashes)
        self.write_pending()

    def write_pending(self) -> None:
        for key in self._touched:
            self._queues[key].write_pending()
        self._touched.clear()

    def dispatch_from_commitlog(self, commitlog, from_offset: int, end_offset: Optional[int] = None,
                                batch: int = 4096) -> int:
        """Walk the CommitLog from ``from_offset`` to its valid end and dispatch every record.

        Returns the offset where dispatching stopped (the valid end).
        """
        pending: list[DispatchRequest] = []
        reached = from_offset
        for step in commitlog.walk(from_offset, stop_offset=end_offset):
            kind = step.decoded.kind
            if kind is Kind.MESSAGE:
                pending.append(request_from_record(step.decoded.record, self.delay_levels_ms))
                reached = step.phy_offset + step.decoded.size
                if len(pending) >= batch:
                    self.dispatch(pending)
                    pending = []
            elif kind is Kind.BLANK:
                reached = step.segment.start_offset + max(step.segment.size_bytes, commitlog.segment_size)
            else:
                break
        if pending:
            self.dispatch(pending)
        return reached

    def truncate_dirty(self, commitlog_end: int) -> None:
        """``truncateDirtyLogicFiles``: every queue forgets units past the CommitLog end."""
        for key in self.existing_queues():
            self.queue(*key)
        for q in self._queues.values():
            if q.max_physic_offset > commitlog_end:
                q.truncate_from_phy(commitlog_end)

    def delete_all(self) -> None:
        """Remove every ConsumeQueue and IndexFile (before a rebuild from scratch)."""
        for q in self._queues.values():
            q.close()
        self._queues.clear()
        self._touched.clear()
        if os.path.isdir(self.cq_dir):
            shutil.rmtree(self.cq_dir)
        if self.index_service is not None:
            self.index_service.delete_all()

    def rebuild(self, commitlog, from_offset: int = 0) -> int:
        """Delete ConsumeQueues and IndexFiles and dispatch the CommitLog again from ``from_offset``."""
        self.delete_all()
        return self.dispatch_from_commitlog(commitlog, from_offset)

    def sync(self) -> None:
        for q in self._queues.values():
            q.sync()
        if self.index_service is not None:
            self.index_service.sync()

    def release(self) -> None:
        """Close every ConsumeQueue and IndexFile without writing or flushing anything."""
        for q in self._queues.values():
            q.release()
        self._queues.clear()
        self._touched.clear()
        if self.index_service is not None:
            for f in self.index_service.files:
                f.close()
            self.index_service.files = []

    def close(self) -> None:
        errors = []
        for q in self._queues.values():
            try:
                q.close()
            except OSError as exc:
                errors.append(exc)
        self._queues.clear()
        if self.index_service is not None:
            self.index_service.close()
        if errors:
            raise errors[0]

