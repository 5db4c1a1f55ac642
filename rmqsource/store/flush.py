"""Flush and durability: when written CommitLog bytes become durable, and the clean shutdown.

SYNC_FLUSH: ``_written`` fsyncs the segment before a put is acknowledged (an
fsync failure is FLUSH_DISK_TIMEOUT and the writer stops accepting puts).
ASYNC_FLUSH: a flush thread fsyncs every ``flushIntervalCommitLog`` ms, on
duplicated fds outside the put lock.  ``close`` flushes everything, drops the
unused pre-allocated segment, writes the ``checkpoint`` and deletes ``abort``
only when all of that worked.

Routes: whatever makes messages durable (a flush; under SYNC_FLUSH the put call that
acknowledges them) first routes in ``config/topics.json`` (a config-v2 broker's store:
``config/rdb/``, config_rdb.py) the topics and queues written
since the last time, as the broker persists a topic it creates before acknowledging the
message: a writer killed before its close leaves a store a broker serves.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

from ..errors import FormatError, StoreError
from ..format.checkpoint import Checkpoint
from ..io import files
from ..io.durable import fsync_dir, write_file_atomically
from . import config_rdb
from .broker_configs import TOPICS_FILE_NAME, record_topic_queues
from .put_result import PutMessageStatus

__all__ = ["Durability"]


class Durability:
    """Mixin of :class:`~rmqsource.store.writer.MessageStoreWriter` (state lives on the writer)."""

    def _written(self, seg, wrote: int) -> PutMessageStatus:
        """Record bytes written up to ``wrote``; under SYNC_FLUSH they are acknowledged only once fsynced."""
        seg.wrote = wrote
        seg.dirty = True
        if not self._sync_flush:
            return PutMessageStatus.PUT_OK
        try:
            files.ops.fsync(seg.fd)
            seg.dirty = False
            return PutMessageStatus.PUT_OK
        except OSError as exc:
            # The bytes are in the CommitLog but not known to be on disk.  After a failed fsync the
            # kernel may have dropped those pages, and a later fsync would not say so: stop taking puts.
            self._error = exc
            self._writable = False
            return PutMessageStatus.FLUSH_DISK_TIMEOUT

    # -- flush / checkpoint ----------------------------------------------------------------
    def _on_index_full(self, end_ts: int) -> None:
        self._write_checkpoint(index_ts=end_ts)

    def _flush_loop(self) -> None:
        interval = max(self.config.flush_interval_commit_log_ms, 10) / 1000.0
        while not self._stop.wait(interval):
            try:
                self.flush()
            except Exception as exc:     # surfaced by the next put as SERVICE_NOT_AVAILABLE
                self._error = exc
                self._writable = False
                return

    def flush(self) -> None:
        """fsync CommitLog segments, ConsumeQueues and the IndexFile written so far.

        The CommitLog fsyncs run outside the put lock (on duplicated fds), so
        puts go on while the disk catches up; what was written before the call
        is durable when it returns."""
        with self._flush_lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        with self._put_lock:
            if self._closed:
                return
            todo = []
            try:
                for seg in self._segments:
                    if seg.dirty and seg.fd >= 0:
                        todo.append((seg, files.ops.dup(seg.fd)))
                        seg.dirty = False
            except OSError:
                for seg, fd in todo:
                    seg.dirty = True
                    files.ops.close(fd)
                raise
            ts = self._last_store_ts
        try:
            for _, fd in todo:
                files.ops.fsync(fd)
        except BaseException:
            with self._put_lock:
                for seg, _ in todo:
                    seg.dirty = True
            raise
        finally:
            for _, fd in todo:
                files.ops.close(fd)
        with self._put_lock:
            if self._closed:
                return
            if ts:
                self._physic_ts = ts
            self._retire_old_segments()
            self.dispatcher.sync()
            self._route_new_queues()

    # -- topic routes --------------------------------------------------------------------------
    def _written_queues(self) -> list[tuple[str, int]]:
        """(topic, queueId) of every queue written, parked delayed messages under their real ones."""
        return [*self._queue_offsets, *self._checks.parked_queues]

    def _route_new_queues(self) -> None:
        """Route in config/topics.json the topics and queues written since the last call (put lock held)."""
        count = len(self._queue_offsets) + len(self._checks.parked_queues)
        if count == self._routed_queue_count:
            return          # queues are only ever added: the same count, nothing new
        self._record_routes()
        self._routed_queue_count = count

    def _record_routes(self) -> None:
        if self._config_rdb:
            config_rdb.record_topic_queues(self.root, self._written_queues(), clock_ms=self._clock_ms)
        else:
            record_topic_queues(self.root, self._written_queues(), v5=self._v5, clock_ms=self._clock_ms)

    def _route_acknowledged(self, results) -> None:
        """SYNC_FLUSH: a put call acknowledges its messages as durable, so it routes them before it returns.

        When topics.json cannot be written its PUT_OK messages are stored but would not be served:
        FLUSH_DISK_TIMEOUT (the next put call or flush tries the routes again)."""
        if not self._sync_flush:
            return
        try:
            self._route_new_queues()
        except (OSError, FormatError, StoreError) as exc:
            where = config_rdb.RDB_DIR + "/" if self._config_rdb else TOPICS_FILE_NAME
            reason = f"stored, but config/{where} could not be written: {files.describe(exc)}"
            for i in range(len(results)):
                if results[i].ok:
                    results[i] = dataclasses.replace(results[i], status=PutMessageStatus.FLUSH_DISK_TIMEOUT,
                                                     reason=reason)

    def _write_checkpoint(self, index_ts: Optional[int] = None) -> None:
        old = self._checkpoint
        ck = Checkpoint(
            physic_msg_timestamp_ms=self._physic_ts or old.physic_msg_timestamp_ms,
            logics_msg_timestamp_ms=self.dispatcher.logics_msg_timestamp_ms or old.logics_msg_timestamp_ms,
            index_msg_timestamp_ms=index_ts if index_ts is not None else (
                (self.index_service.index_msg_timestamp_ms if self.index_service else 0)
                or old.index_msg_timestamp_ms),
            master_flushed_offset=old.master_flushed_offset,
            confirm_phy_offset=old.confirm_phy_offset)
        write_file_atomically(os.path.join(self.root, "checkpoint"), ck.encode(v5=self._v5))
        self._checkpoint = ck

    # -- shutdown ----------------------------------------------------------------------------
    def close(self) -> None:
        """Clean shutdown: flush everything, drop the unused pre-allocated segment, write the
        checkpoint, delete ``abort`` (only when all of that worked), release the lock.

        When a step fails (a full or failing disk) the rest of the clean shutdown is skipped,
        every file is still closed and the lock released, ``abort`` stays (the next open
        recovers), and the first error is raised."""
        if self._closed:
            return
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join()
        clean = False
        error: Optional[BaseException] = None
        self._flush_lock.acquire()
        try:
            with self._put_lock:
                failed_before = self._error is not None
                self._writable = False
                try:
                    for seg in self._segments:
                        if seg.fd >= 0 and seg.dirty:
                            files.ops.fsync(seg.fd)
                            seg.dirty = False
                    if self._last_store_ts:
                        self._physic_ts = self._last_store_ts
                    if self._prealloc is not None:
                        prealloc, self._prealloc = self._prealloc, None
                        files.ops.close(prealloc.fd)
                        files.ops.unlink(prealloc.path)
                    self._close_segment_fds()
                    for d in self.commitlog_dirs:
                        fsync_dir(d)
                    self.dispatcher.close()
                    self._write_checkpoint()
                    if not failed_before:
                        files.ops.unlink(os.path.join(self.root, "abort"))
                        fsync_dir(self.root)
                        clean = True
                        # What a broker started on this store needs to route its topics (broker_configs).
                        self._record_routes()
                except OSError as exc:
                    error = exc
                    self._error = exc
                    self._close_segment_fds()
                    try:
                        self.dispatcher.close()
                    except OSError:
                        pass
        finally:
            self._closed = True
            self._flush_lock.release()
            self._lock.release()
        self.clean_shutdown = clean
        if error is not None:
            raise error

    def abandon(self) -> None:
        """Let go of the store as if the process had died here: close every file without
        flushing or writing anything (``abort`` stays), release the lock.  The next open recovers."""
        if self._closed:
            return
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join()
        with self._put_lock:
            self._writable = False
            self._closed = True
            self._close_segment_fds()
            dispatcher = getattr(self, "dispatcher", None)
            if dispatcher is not None:
                dispatcher.release()
        self.clean_shutdown = False
        self._lock.release()

    def _close_segment_fds(self) -> None:
        segments = getattr(self, "_segments", [])
        prealloc = getattr(self, "_prealloc", None)
        for seg in [*segments, *([prealloc] if prealloc is not None else [])]:
            if seg.fd >= 0:
                try:
                    files.ops.close(seg.fd)
                except OSError:
                    pass
                seg.fd = -1
