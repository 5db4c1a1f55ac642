"""CommitLog append and roll: segments of the writer, one buffer per segment per batch.

``_put_locked`` (the per-message path of ``put_messages``) places each prepared
record at the write position, applies the END_OF_FILE rule (a blank record when
fewer than ``size + 8`` bytes are left; the record goes to the next segment),
assigns queue offsets per ``topic-queueId`` and writes each segment's chunk with
one ``pwrite``.  Only then are its messages acknowledged (``_written``) and
dispatched.  Segments are full-size files; the one after the current one is
pre-allocated (AllocateMappedFileService).
"""

from __future__ import annotations

import os
import struct
import zlib

from ..errors import StoreError, UnsupportedMessageError
from ..format.javahash import tags_code as tags_code_of
from ..format.record import BLANK_MAGIC, crc_property_digits
from ..io import files
from ..io.files import pwrite_all
from ..io.segments import list_segments, offset_to_file_name
from .dispatch import DispatchRequest, compute_tags_code
from .put_checks import Prepared
from .put_result import AppendMessageResult, AppendMessageStatus, PutMessageResult, PutMessageStatus, failed_result

__all__ = ["BLANK", "CommitLogAppend", "Segment", "pwrite_all"]

BLANK = struct.Struct(">ii")


class Segment:
    """One open CommitLog segment: start offset, fd, bytes written, whether an fsync is owed."""

    __slots__ = ("start", "path", "fd", "wrote", "dirty")

    def __init__(self, start: int, path: str, fd: int, wrote: int = 0):
        self.start = start
        self.path = path
        self.fd = fd
        self.wrote = wrote
        self.dirty = False


class CommitLogAppend:
    """Mixin of :class:`~rmqsource.store.writer.MessageStoreWriter`: its CommitLog segments and the
    per-message append path (state lives on the writer)."""

    def _open_segments(self, end: int) -> None:
        """Reopen the CommitLog segments for appending after recovery (``end`` = valid end)."""
        z = self.segment_size
        segs = []
        for d in self.commitlog_dirs:
            segs.extend(list_segments(d))
        segs.sort(key=lambda s: s.start_offset)
        if not segs:
            self._next_start = 0
            return
        for s in segs:
            fd = files.ops.open(s.path, os.O_RDWR)
            wrote = min(max(end - s.start_offset, 0), z)
            self._segments.append(Segment(s.start_offset, s.path, fd, wrote))
        last = self._segments[-1]
        if last.start <= end < last.start + z:
            self._current = last
        self._next_start = last.start + z

    # -- segments -----------------------------------------------------------------
    def _dir_for(self, start: int) -> str:
        dirs = sorted(self.commitlog_dirs)
        return dirs[(start // self.segment_size) % len(dirs)]

    def _create_segment(self, start: int) -> Segment:
        path = os.path.join(self._dir_for(start), offset_to_file_name(start))
        fd = files.ops.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        size = -1
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                # Full size, sparse: the CommitLog is written with pwrite, so a full disk is an
                # ENOSPC from that write (never a SIGBUS), and an unused segment costs no space.
                files.ops.ftruncate(fd, self.segment_size)
            elif size != self.segment_size:
                raise StoreError(f"CommitLog segment {path} exists with {size} bytes")
        except BaseException:
            files.ops.close(fd)
            if size == 0:
                _unlink_quietly(path)
            raise
        return Segment(start, path, fd, 0)

    def _roll(self) -> Segment:
        """Next segment (the pre-allocated one when present) and pre-allocate the one after."""
        start = self._next_start
        seg = self._prealloc if self._prealloc is not None and self._prealloc.start == start else None
        if seg is None:
            seg = self._create_segment(start)
        self._prealloc = None
        self._segments.append(seg)
        self._current = seg
        self._next_start = start + self.segment_size
        try:  # AllocateMappedFileService's next-next file; a failure only delays it to the next roll
            self._prealloc = self._create_segment(self._next_start)
        except OSError:
            self._prealloc = None
        self._retire_old_segments()
        return seg

    def _retire_old_segments(self) -> None:
        """Close fds of older segments once fsynced (keep the current and the previous one)."""
        if len(self._segments) <= 2:
            return
        for seg in self._segments[:-2]:
            if seg.fd >= 0 and not seg.dirty:
                files.ops.close(seg.fd)
                seg.fd = -1


    def _put_locked(self, msgs, results) -> None:
        z = self.segment_size
        seg = self._current
        buf = bytearray()
        buf_pos = seg.wrote if seg is not None else 0
        items: list = []                 # (index, prepared, queue_offset, phy, store_ts)
        pending_qo: dict = {}
        qo_table = self._queue_offsets
        clock = self._clock_ms
        n = len(msgs)
        i = 0
        for i in range(n):
            m = msgs[i]
            try:
                p = self._checks.prepare(m)
            except UnsupportedMessageError:
                raise
            except Exception as exc:     # malformed input object: refuse it, never half-write
                results[i] = failed_result(m, PutMessageStatus.MESSAGE_ILLEGAL, reason=f"{type(exc).__name__}: {exc}")
                continue
            if isinstance(p, PutMessageResult):
                results[i] = p
                continue
            if seg is None:
                try:
                    seg = self._roll()
                except OSError as exc:
                    self._fail_rest(msgs, results, i, PutMessageStatus.CREATE_MAPPED_FILE_FAILED, str(exc))
                    return
                buf_pos = 0
            pos = buf_pos + len(buf)
            size = p.size
            if size + 8 > z - pos:
                # END_OF_FILE: blank record, write this segment's chunk, continue in the next one.
                # (pos == z: the blank is there already -- an earlier roll failed after writing it.)
                if pos < z:
                    buf += BLANK.pack(z - pos, BLANK_MAGIC)
                if buf and not self._commit_chunk(seg, buf, buf_pos, items, pending_qo, results, ends_segment=True):
                    self._fail_rest(msgs, results, i, self._stop_status(), files.describe(self._error))
                    return
                items, pending_qo, buf = [], {}, bytearray()
                try:
                    seg = self._roll()
                except OSError as exc:
                    self._fail_rest(msgs, results, i, PutMessageStatus.CREATE_MAPPED_FILE_FAILED, str(exc))
                    return
                buf_pos, pos = 0, 0
            key = (p.topic, p.queue_id)
            if p.enters_cq:
                qo = pending_qo.get(key)
                if qo is None:
                    qo = qo_table.get(key, 0)
                pending_qo[key] = qo + 1
            else:
                qo = 0
            phy = seg.start + pos
            store_ts = p.store_ts if p.store_ts is not None else clock()
            head = p.head.pack(size, p.magic, p.body_crc, p.queue_id, p.flag, qo, phy, p.sys_flag, p.born_ts,
                               p.born_addr, p.born_port, store_ts, p.store_addr, p.store_port,
                               p.reconsume, p.prepared_tx, len(p.body))
            if p.crc_prop:
                tail = p.tail
                crc = zlib.crc32(memoryview(tail)[:-20], zlib.crc32(p.body, zlib.crc32(head))) & 0x7FFFFFFF
                buf += head
                buf += p.body
                buf += memoryview(tail)[:-11]
                buf += crc_property_digits(crc)
                buf += b"\x02"
            else:
                buf += head
                buf += p.body
                buf += p.tail
            items.append((i, p, qo, phy, store_ts))
        if items or buf:
            if not self._commit_chunk(seg, buf, buf_pos, items, pending_qo, results):
                self._fail_rest(msgs, results, n, self._stop_status(), files.describe(self._error))

    def _stop_status(self) -> PutMessageStatus:
        """Status of the messages a batch did not reach: the write failed (UNKNOWN_ERROR) or the
        writer stopped taking puts (SERVICE_NOT_AVAILABLE)."""
        return PutMessageStatus.UNKNOWN_ERROR if self._writable else PutMessageStatus.SERVICE_NOT_AVAILABLE

    def _fail_rest(self, msgs, results, start: int, status: PutMessageStatus, reason: str) -> None:
        """Messages from ``start`` on that have no result yet were not written."""
        for j in range(start, len(msgs)):
            if results[j] is None:
                results[j] = failed_result(msgs[j], status, reason=reason)

    def _write_chunk(self, seg: Segment, chunk, pos: int) -> None:
        """Write one segment's chunk of records so that a failure leaves nothing recovery accepts.

        The first 4 bytes (the first record's TOTALSIZE) go last: until they are
        on disk the chunk starts with zeros, where recovery and readers see the
        end of the CommitLog.  On an error the bytes that did reach the file are
        zeroed again (their blocks exist, so that needs no new space) and the
        OSError is raised; if even that fails the writer stops taking puts."""
        view = memoryview(chunk)
        k = min(4, len(view))
        written = []                           # (position, bytes) that reached the file
        try:
            try:
                pwrite_all(seg.fd, view[k:], pos + k)
            except OSError as exc:
                written.append((pos + k, getattr(exc, "bytes_written", len(view) - k)))
                raise
            written.append((pos + k, len(view) - k))
            try:
                pwrite_all(seg.fd, view[:k], pos)
            except OSError as exc:
                written.append((pos, getattr(exc, "bytes_written", k)))
                raise
        except OSError as exc:
            self._error = exc
            try:
                for at, n in written:
                    if n:
                        pwrite_all(seg.fd, bytes(n), at)
            except OSError:
                self._writable = False
            raise

    def _commit_chunk(self, seg: Segment, buf: bytearray, buf_pos: int, items, pending_qo, results,
                      ends_segment: bool = False) -> bool:
        """Write one segment's chunk; only then are its messages acknowledged and dispatched.

        ``ends_segment``: the chunk ends with the END_OF_FILE blank, the segment is full (the
        blank's padding is not written, but nothing may go there even if the next roll fails).
        False when the batch must stop here (the write failed, or the writer stopped taking puts)."""
        try:
            self._write_chunk(seg, buf, buf_pos)
        except OSError as exc:
            for (i, p, qo, phy, ts) in items:
                results[i] = PutMessageResult(PutMessageStatus.UNKNOWN_ERROR,
                                              AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR),
                                              p.topic, p.queue_id, p.sys_flag, str(exc))
            return False
        status = self._written(seg, self.segment_size if ends_segment else buf_pos + len(buf))
        self._queue_offsets.update(pending_qo)
        if items:
            self._last_store_ts = items[-1][4]
            if status is PutMessageStatus.PUT_OK and self._sync_flush:
                self._physic_ts = self._last_store_ts
        # Results first: the bytes are in the CommitLog whatever dispatch does next.
        levels = self._delay_levels
        reqs = []
        for (i, p, qo, phy, ts) in items:
            results[i] = PutMessageResult(
                status, AppendMessageResult(AppendMessageStatus.PUT_OK, phy, p.size, p.store_addr, ts, qo,
                                            p.store_port),
                p.topic, p.queue_id, p.sys_flag)
            if p.delay is not None:
                tags_code = compute_tags_code(p.topic, {"TAGS": p.tags, "DELAY": p.delay}
                                              if p.tags is not None else {"DELAY": p.delay}, ts, levels)
            else:
                tags_code = tags_code_of(p.tags)
            reqs.append(DispatchRequest(p.topic, p.queue_id, phy, p.size, tags_code, ts, qo,
                                        p.keys, p.uniq_key, p.sys_flag))
        try:
            self.dispatcher.dispatch(reqs)
        except Exception as exc:  # the CommitLog holds the data; a reopen re-dispatches it
            self._error = exc
            self._writable = False
        # After a failed fsync nothing more may be acknowledged: a crash could lose this chunk,
        # and recovery ends the CommitLog there, taking any later (fsynced) chunk with it.
        return self._writable


    def _encode_one(self, p: Prepared, qo: int, phy: int, store_ts: int) -> bytes:
        """One prepared record at its position (the per-message encoder of ``_put_locked``)."""
        head = p.head.pack(p.size, p.magic, p.body_crc, p.queue_id, p.flag, qo, phy, p.sys_flag, p.born_ts,
                           p.born_addr, p.born_port, store_ts, p.store_addr, p.store_port,
                           p.reconsume, p.prepared_tx, len(p.body))
        if p.crc_prop:
            tail = p.tail
            crc = zlib.crc32(memoryview(tail)[:-20], zlib.crc32(p.body, zlib.crc32(head))) & 0x7FFFFFFF
            return b"".join((head, p.body, bytes(memoryview(tail)[:-11]), crc_property_digits(crc), b"\x02"))
        return b"".join((head, p.body, p.tail))


def _unlink_quietly(path: str) -> None:
    try:
        files.ops.unlink(path)
    except OSError:
        pass
