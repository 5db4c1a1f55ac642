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
"""

from __future__ import annotations

import enum
import functools
import os
import re
import struct
import threading
import time
import zlib
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from .. import limits
from ..errors import OptionError, RmqError, StoreError
from ..format.checkpoint import Checkpoint
from ..format.javahash import java_string_hash, tags_code as _tags_code
from ..format.msgid import create_offset_msg_id, parse_host
from ..format.properties import (CRC32, DELAY, KEYS, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, REAL_QID,
                                 REAL_TOPIC, TAGS, UNIQ_KEY, parse_properties)
from ..format.record import (BLANK_MAGIC, BORNHOST_V6_FLAG, MAGIC_V1, MAGIC_V2, STOREHOST_V6_FLAG,
                             TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK, TRANSACTION_NOT_TYPE,
                             crc_property_digits)
from ..io.durable import fsync_dir, write_file_atomically
from ..io.lock import StoreLock
from ..io.segments import list_segments, offset_to_file_name
from ..names import RETRY_GROUP_TOPIC_PREFIX, SCHEDULE_TOPIC
from .config import FlushDiskType, StoreConfig
from ..format.tagscode import java_parse_int
from .dispatch import Dispatcher, DispatchRequest, compute_tags_code
from .index_service import IndexService
from .layout import StoreLayout
from .recovery import recover_store

__all__ = [
    "AppendMessageResult", "AppendMessageStatus", "Message", "MessageExtBrokerInner",
    "MessageStoreWriter", "PutMessageResult", "PutMessageStatus", "delete_property",
]


class PutMessageStatus(str, enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class AppendMessageStatus(str, enum.Enum):
    PUT_OK = "PUT_OK"
    END_OF_FILE = "END_OF_FILE"
    MESSAGE_SIZE_EXCEEDED = "MESSAGE_SIZE_EXCEEDED"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


# ---------------------------------------------------------------- input / results

@dataclass(frozen=True, slots=True)
class MessageExtBrokerInner:
    """One message handed to the store (RocketMQ's MessageExtBrokerInner).

    ``properties`` is either a mapping (serialized after TAGS and KEYS, in its
    own order, like the corpora's harness) or a verbatim properties string
    (``k\\x01v\\x02...``, stored as given; then ``tags``/``keys`` must be None).
    Hosts are ``"a.b.c.d:port"`` / ``"[v6]:port"`` or ``(address_bytes, port)``.
    ``store_timestamp_ms`` pins the store clock (else the wall clock is used).
    """

    topic: str
    queue_id: int
    body: bytes = b""
    flag: int = 0
    properties: Optional[Mapping[str, Optional[str]] | str] = None
    tags: Optional[str] = None
    keys: Optional[str] = None
    born_timestamp_ms: int = 0
    born_host: Any = "127.0.0.1:0"
    store_host: Any = "127.0.0.1:10911"
    sys_flag: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    store_timestamp_ms: Optional[int] = None

    def __post_init__(self):
        if isinstance(self.properties, str) and (self.tags is not None or self.keys is not None):
            raise OptionError("a verbatim properties string cannot be combined with tags/keys")

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any]) -> "MessageExtBrokerInner":
        """From one line of a corpus ``inputs.jsonl`` (camelCase harness fields, base64 body)."""
        import base64
        props: Any = d.get("properties")
        if "propertiesString" in d:
            props = d["propertiesString"]
        return cls(
            topic=d["topic"], queue_id=int(d.get("queueId", 0)),
            body=base64.b64decode(d.get("body") or ""), flag=int(d.get("flag", 0)),
            properties=props, tags=d.get("tags"), keys=d.get("keys"),
            born_timestamp_ms=int(d.get("bornTimestamp", 0)),
            born_host=d.get("bornHost", "127.0.0.1:0"), store_host=d.get("storeHost", "127.0.0.1:10911"),
            sys_flag=int(d.get("sysFlag", 0)), reconsume_times=int(d.get("reconsumeTimes", 0)),
            prepared_transaction_offset=int(d.get("preparedTransactionOffset", 0)),
            store_timestamp_ms=d.get("storeTimestamp"))


Message = MessageExtBrokerInner


@dataclass(frozen=True, slots=True)
class AppendMessageResult:
    """Where a record went.  ``msg_id`` (offset msgId) is derived on access, not per put."""

    status: AppendMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    store_addr: bytes = b""
    store_timestamp_ms: int = 0
    logics_offset: int = 0
    store_port: int = 0

    @property
    def msg_id(self) -> str:
        if self.status is not AppendMessageStatus.PUT_OK:
            return ""
        return create_offset_msg_id(self.store_addr, self.store_port, self.wrote_offset)


@dataclass(frozen=True, slots=True)
class PutMessageResult:
    """Outcome of one put: status, where the record went, the record's final topic/queue/sysFlag."""

    status: PutMessageStatus
    append_result: Optional[AppendMessageResult]
    topic: str
    queue_id: int
    sys_flag: int
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK

    @property
    def append_status(self) -> Optional[AppendMessageStatus]:
        return self.append_result.status if self.append_result else None

    @property
    def msg_id(self) -> Optional[str]:
        return self.append_result.msg_id if self.append_result else None

    @property
    def commit_log_offset(self) -> int:
        return self.append_result.wrote_offset if self.append_result else -1

    @property
    def queue_offset(self) -> int:
        return self.append_result.logics_offset if self.append_result else -1

    @property
    def size(self) -> int:
        return self.append_result.wrote_bytes if self.append_result else 0

    @property
    def store_timestamp_ms(self) -> int:
        return self.append_result.store_timestamp_ms if self.append_result else 0

    def to_json_dict(self) -> dict:
        """The fields of a corpus ``put.jsonl`` line."""
        a = self.append_result
        return {"status": self.status.value, "appendStatus": a.status.value if a else None,
                "msgId": a.msg_id if a else None, "commitLogOffset": a.wrote_offset if a else None,
                "queueOffset": a.logics_offset if a else None, "size": a.wrote_bytes if a else None,
                "storeTimestamp": a.store_timestamp_ms if a else None, "topic": self.topic,
                "queueId": self.queue_id, "sysFlag": self.sys_flag}


# ---------------------------------------------------------------- helpers

_TOPIC_CHARS = re.compile(r"^[%|a-zA-Z0-9_-]+$")
_CRC_PLACEHOLDER = CRC32.encode() + b"\x01" + b"0" * 10 + b"\x02"
_BLANK = struct.Struct(">ii")
_PROPS_MAX = limits.PROPERTIES_MAX_BYTES


@functools.lru_cache(maxsize=1 << 14)
def _host(host: Any) -> tuple[bytes, int, bool]:
    """(address bytes, port, is_v6) of a host given as text or (bytes, port)."""
    if isinstance(host, str):
        addr, port = parse_host(host)
    else:
        addr, port = bytes(host[0]), int(host[1])
        if len(addr) not in (4, 16):
            raise OptionError(f"host address must be 4 or 16 bytes, got {len(addr)}")
    return addr, port, len(addr) == 16


@functools.lru_cache(maxsize=4)
def _head_struct(born_v6: bool, store_v6: bool) -> struct.Struct:
    """TOTALSIZE .. BODYLENGTH for one host-family combination."""
    return struct.Struct(">iiiiiqqiq" + ("16si" if born_v6 else "4si") + "q"
                         + ("16si" if store_v6 else "4si") + "iqi")


def delete_property(properties: str, name: str) -> str:
    """``MessageUtils.deleteProperty``: drop every ``name\\x01value\\x02`` entry."""
    if properties.find(name) < 0:
        return properties
    out = []
    idx0 = 0
    n = len(properties)
    for _ in range(n + 1):                       # each round consumes at least one entry
        idx1 = -1
        start = idx0
        for _ in range(n + 1):
            idx1 = properties.find(name, start)
            if idx1 == -1:
                break
            start = idx1 + len(name)
            if (idx1 == 0 or properties[idx1 - 1] == PROPERTY_SEPARATOR) and \
                    n > idx1 + len(name) and properties[idx1 + len(name)] == NAME_VALUE_SEPARATOR:
                break
        if idx1 == -1:
            out.append(properties[idx0:])
            break
        out.append(properties[idx0:idx1])
        idx2 = properties.find(PROPERTY_SEPARATOR, idx1 + len(name) + 1)
        if idx2 == -1:
            break
        idx0 = idx2 + 1
    return "".join(out)


def _serialize(d: Mapping[str, Optional[str]], trailing: bool) -> str:
    parts = [f"{k}\x01{v}" for k, v in d.items() if v is not None]
    if not parts:
        return ""
    s = "\x02".join(parts)
    return s + "\x02" if trailing else s


class _Prepared:
    """A validated message, everything but its position encoded (position-independent parts)."""

    __slots__ = ("topic", "queue_id", "sys_flag", "size", "head", "body", "tail", "crc_prop",
                 "flag", "body_crc", "born_ts", "born_addr", "born_port", "store_addr", "store_port",
                 "reconsume", "prepared_tx", "store_ts", "magic", "tags", "keys", "uniq_key", "delay",
                 "enters_cq")


class _Segment:
    __slots__ = ("start", "path", "fd", "wrote", "dirty")

    def __init__(self, start: int, path: str, fd: int, wrote: int = 0):
        self.start = start
        self.path = path
        self.fd = fd
        self.wrote = wrote
        self.dirty = False


def _pwrite_all(fd: int, data, position: int) -> None:
    view = memoryview(data)
    done = 0
    for _ in range(len(view) + 1):               # each pwrite makes progress or raises
        if done >= len(view):
            return
        done += os.pwrite(fd, view[done:], position + done)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# ---------------------------------------------------------------- writer

class MessageStoreWriter:
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
        self._v2_ok = c.supports_message_version_v2 and c.auto_message_version_on_topic_len
        self._delay_levels = tuple(c.message_delay_levels_ms)
        self._max_body = c.max_message_size_bytes
        self._max_record = c.max_message_size_bytes + limits.RECORD_HEADROOM_BYTES
        self._sync_flush = c.flush_disk_type == FlushDiskType.SYNC_FLUSH
        self._put_lock = threading.RLock()
        self._flush_lock = threading.Lock()         # one flush at a time; close() waits for it
        self._writable = False
        self._closed = False
        self._error: Optional[BaseException] = None
        os.makedirs(self.root, exist_ok=True)
        self._lock = StoreLock(self.root, timeout_s=lock_timeout_s).acquire()
        try:
            self._open()
        except BaseException:
            self._lock.release()
            raise
        self._flusher: Optional[threading.Thread] = None
        self._stop = threading.Event()
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
        self._segments: list[_Segment] = []
        self._prealloc: Optional[_Segment] = None
        self._current: Optional[_Segment] = None
        self._physic_ts = self._checkpoint.physic_msg_timestamp_ms
        self._last_store_ts = 0
        self._recover()
        self._queue_offsets: dict[tuple[str, int], int] = self.dispatcher.max_offsets()
        # The store runs: abort marks it not cleanly shut down until close().
        fd = os.open(abort_path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.close(fd)
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
        end = report.commit_log_max_offset
        segs = []
        for d in self.commitlog_dirs:
            segs.extend(list_segments(d))
        segs.sort(key=lambda s: s.start_offset)
        if not segs:
            self._next_start = 0
            return
        for s in segs:
            fd = os.open(s.path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
            wrote = min(max(end - s.start_offset, 0), z)
            self._segments.append(_Segment(s.start_offset, s.path, fd, wrote))
        last = self._segments[-1]
        if last.start <= end < last.start + z:
            self._current = last
        self._next_start = last.start + z

    # -- segments -----------------------------------------------------------------
    def _dir_for(self, start: int) -> str:
        dirs = sorted(self.commitlog_dirs)
        return dirs[(start // self.segment_size) % len(dirs)]

    def _create_segment(self, start: int) -> _Segment:
        path = os.path.join(self._dir_for(start), offset_to_file_name(start))
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                os.ftruncate(fd, self.segment_size)
            elif size != self.segment_size:
                raise StoreError(f"CommitLog segment {path} exists with {size} bytes")
        except BaseException:
            os.close(fd)
            raise
        return _Segment(start, path, fd, 0)

    def _roll(self) -> _Segment:
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
                os.close(seg.fd)
                seg.fd = -1

    # -- validation / encoding ----------------------------------------------------------
    def _fail(self, m, status: PutMessageStatus, append: Optional[AppendMessageStatus] = None,
              reason: str = "") -> PutMessageResult:
        topic = m.topic if isinstance(getattr(m, "topic", None), str) else ""
        qid = m.queue_id if isinstance(getattr(m, "queue_id", None), int) else -1
        return PutMessageResult(status, AppendMessageResult(append, -1, 0, b"", 0, -1) if append else None, topic, qid,
                                getattr(m, "sys_flag", 0) if isinstance(getattr(m, "sys_flag", 0), int) else 0,
                                reason)

    def _topic_problem(self, topic: Any) -> Optional[str]:
        if not isinstance(topic, str) or not topic:
            return "topic is empty"
        if not _TOPIC_CHARS.match(topic):
            return f"topic {topic!r} has characters outside [%|a-zA-Z0-9_-]"
        n = len(topic)  # ASCII only after the charset check
        if n <= limits.TOPIC_MAX_BYTES_V1:
            return None
        if not self._v2_ok:
            return f"topic is {n} bytes, more than {limits.TOPIC_MAX_BYTES_V1}"
        if self.strict_broker_topic_check and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return f"topic is {n} bytes; only {RETRY_GROUP_TOPIC_PREFIX} topics may exceed 127"
        if n > limits.TOPIC_MAX_BYTES_V2:
            return f"topic is {n} bytes, more than {limits.TOPIC_MAX_BYTES_V2}"
        return None

    def _prepare(self, m: MessageExtBrokerInner):
        """Validate and pre-encode one message; a PutMessageResult when it is refused."""
        problem = self._topic_problem(m.topic)
        if problem:
            return self._fail(m, PutMessageStatus.MESSAGE_ILLEGAL, reason=problem)
        qid = m.queue_id
        if not isinstance(qid, int) or not 0 <= qid <= 0x7FFFFFFF:
            return self._fail(m, PutMessageStatus.MESSAGE_ILLEGAL, reason=f"queueId {qid!r} out of range")
        body = m.body if m.body is not None else b""
        if not isinstance(body, bytes):
            body = bytes(body)
        if len(body) > self._max_body:
            return self._fail(m, PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageStatus.MESSAGE_SIZE_EXCEEDED,
                              f"body is {len(body)} bytes, more than maxMessageSize {self._max_body}")
        try:
            born_addr, born_port, born_v6 = _host(m.born_host)
            store_addr, store_port, store_v6 = _host(m.store_host)
        except (OptionError, TypeError, ValueError, IndexError) as exc:
            return self._fail(m, PutMessageStatus.MESSAGE_ILLEGAL, reason=str(exc))
        sys_flag = (m.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)) \
            | (BORNHOST_V6_FLAG if born_v6 else 0) | (STOREHOST_V6_FLAG if store_v6 else 0)
        tran = sys_flag & TRANSACTION_MASK
        topic = m.topic

        # Properties: ordered map (TAGS, KEYS, then the caller's) or a verbatim string.
        props = m.properties
        pmap: Optional[dict] = None
        if isinstance(props, str):
            pstr = props
        else:
            pmap = {}
            if m.tags is not None:
                pmap[TAGS] = m.tags
            if m.keys is not None:
                pmap[KEYS] = m.keys
            if props:
                pmap.update(props)
            pstr = None
        # 4.9 store: delay level rewrite into SCHEDULE_TOPIC_XXXX (CommitLog.asyncPutMessage).
        if not self._v5 and (tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE):
            source = pmap if pmap is not None else parse_properties(pstr)
            raw_delay = source.get(DELAY)
            if raw_delay is not None:
                level = java_parse_int(raw_delay)
                if level is None:
                    return self._fail(m, PutMessageStatus.MESSAGE_ILLEGAL, reason=f"DELAY {raw_delay!r} is not an int")
                if level > 0:
                    max_level = len(self._delay_levels)
                    if level > max_level:
                        level = max_level
                    pmap = dict(source)
                    pmap[DELAY] = str(level)
                    pmap[REAL_TOPIC] = topic
                    pmap[REAL_QID] = str(qid)
                    topic = SCHEDULE_TOPIC
                    qid = level - 1
                    pstr = None
        if pmap is not None:
            if self._append_crc and CRC32 in pmap:
                pmap = {k: v for k, v in pmap.items() if k != CRC32}
            pstr = _serialize(pmap, self._trailing)
        elif self._append_crc:
            pstr = delete_property(pstr, CRC32)
        if len(pstr) > _PROPS_MAX:
            return self._fail(m, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                              reason=f"properties are {len(pstr)} chars, more than {_PROPS_MAX}")
        pbytes = pstr.encode("utf-8", "surrogatepass")
        if self._append_crc:
            if pbytes and not pbytes.endswith(b"\x02"):
                pbytes += b"\x02"
            pbytes += _CRC_PLACEHOLDER
        if len(pbytes) > _PROPS_MAX:
            return self._fail(m, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                              AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                              f"properties are {len(pbytes)} bytes, more than {_PROPS_MAX}")
        tbytes = topic.encode("ascii")
        v2 = self._v2_ok and len(topic) > limits.TOPIC_MAX_BYTES_V1
        tail = (struct.pack(">h", len(tbytes)) if v2 else bytes((len(tbytes),))) + tbytes \
            + struct.pack(">h", len(pbytes)) + pbytes
        size = 60 + (20 if born_v6 else 8) + (20 if store_v6 else 8) + 12 + len(body) + len(tail)
        if size > self._max_record:
            return self._fail(m, PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageStatus.MESSAGE_SIZE_EXCEEDED,
                              f"record is {size} bytes, more than {self._max_record}")
        if size + limits.END_FILE_MIN_BLANK_BYTES > self.segment_size:
            return self._fail(m, PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageStatus.MESSAGE_SIZE_EXCEEDED,
                              f"record of {size} bytes cannot fit a {self.segment_size}-byte segment")
        p = _Prepared()
        p.topic, p.queue_id, p.sys_flag, p.size = topic, qid, sys_flag, size
        p.head = _head_struct(born_v6, store_v6)
        p.body, p.tail, p.crc_prop = body, tail, self._append_crc
        p.flag, p.body_crc = m.flag, zlib.crc32(body) & 0x7FFFFFFF
        p.born_ts, p.born_addr, p.born_port = m.born_timestamp_ms, born_addr, born_port
        p.store_addr, p.store_port = store_addr, store_port
        p.reconsume, p.prepared_tx = m.reconsume_times, m.prepared_transaction_offset
        p.store_ts = m.store_timestamp_ms
        p.magic = MAGIC_V2 if v2 else MAGIC_V1
        p.enters_cq = tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE
        # What dispatch needs, as the engine's parser would see the stored string.
        parsed = self._parsed_view(pmap, pstr)
        p.tags = parsed.get(TAGS)
        p.keys = parsed.get(KEYS)
        p.uniq_key = parsed.get(UNIQ_KEY)
        p.delay = parsed.get(DELAY) if topic == SCHEDULE_TOPIC else None
        return p

    def _parsed_view(self, pmap: Optional[dict], pstr: str) -> dict:
        """parse_properties(pstr), taken from the map directly when no separator hides inside it."""
        if pmap is not None:
            n = sum(1 for v in pmap.values() if v is not None)
            if pstr.count("\x01") == n and pstr.count("\x02") == (n if self._trailing else max(n - 1, 0)):
                return {k: v for k, v in pmap.items() if k and v}
        return parse_properties(pstr)

    # -- puts -----------------------------------------------------------------------
    def _written(self, seg: "_Segment", wrote: int) -> PutMessageStatus:
        """Record bytes written up to ``wrote``; under SYNC_FLUSH they are acknowledged only once fsynced."""
        seg.wrote = wrote
        seg.dirty = True
        if not self._sync_flush:
            return PutMessageStatus.PUT_OK
        try:
            os.fsync(seg.fd)
            seg.dirty = False
            return PutMessageStatus.PUT_OK
        except OSError as exc:
            self._error = exc
            return PutMessageStatus.FLUSH_DISK_TIMEOUT

    def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        return self.put_messages([msg])[0]

    def put_messages(self, msgs: Sequence[MessageExtBrokerInner]) -> list[PutMessageResult]:
        """Append messages in order; one result per message (RocketMQ statuses).

        Each message is an independent put (not a RocketMQ batch): a refused
        message does not stop the others.
        """
        msgs = list(msgs)
        results: list[Optional[PutMessageResult]] = [None] * len(msgs)
        with self._put_lock:
            if not self._writable:
                why = "store is closed" if self._closed else f"store is not writable: {self._error!r}"
                return [self._fail(m, PutMessageStatus.SERVICE_NOT_AVAILABLE, reason=why) for m in msgs]
            self._put_locked(msgs, results)
        return results  # type: ignore[return-value]

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
                p = self._prepare(m)
            except Exception as exc:     # malformed input object: refuse it, never half-write
                results[i] = self._fail(m, PutMessageStatus.MESSAGE_ILLEGAL, reason=f"{type(exc).__name__}: {exc}")
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
                buf += _BLANK.pack(z - pos, BLANK_MAGIC)
                if not self._commit_chunk(seg, buf, buf_pos, items, pending_qo, results):
                    self._fail_rest(msgs, results, i, PutMessageStatus.UNKNOWN_ERROR, repr(self._error))
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
                self._fail_rest(msgs, results, n, PutMessageStatus.UNKNOWN_ERROR, repr(self._error))

    def _fail_rest(self, msgs, results, start: int, status: PutMessageStatus, reason: str) -> None:
        """Messages from ``start`` on that have no result yet were not written."""
        for j in range(start, len(msgs)):
            if results[j] is None:
                results[j] = self._fail(msgs[j], status, reason=reason)

    def _commit_chunk(self, seg: _Segment, buf: bytearray, buf_pos: int, items, pending_qo, results) -> bool:
        """Write one segment's chunk; only then are its messages acknowledged and dispatched."""
        try:
            _pwrite_all(seg.fd, buf, buf_pos)
        except OSError as exc:
            self._error = exc
            try:  # never leave half-acknowledged bytes that a recovery would accept
                _pwrite_all(seg.fd, bytes(len(buf)), buf_pos)
            except OSError:
                self._writable = False
            for (i, p, qo, phy, ts) in items:
                results[i] = PutMessageResult(PutMessageStatus.UNKNOWN_ERROR,
                                              AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR),
                                              p.topic, p.queue_id, p.sys_flag, str(exc))
            return False
        status = self._written(seg, buf_pos + len(buf))
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
                tags_code = _tags_code(p.tags)
            reqs.append(DispatchRequest(p.topic, p.queue_id, phy, p.size, tags_code, ts, qo,
                                        p.keys, p.uniq_key, p.sys_flag))
        try:
            self.dispatcher.dispatch(reqs)
        except Exception as exc:  # the CommitLog holds the data; a reopen re-dispatches it
            self._error = exc
            self._writable = False
        return True

    # -- columnar input -----------------------------------------------------------------
    _ARROW_CHUNK_ROWS = 1 << 18

    def put_arrow_batch(self, batch) -> "BatchPutResults":
        """Put the rows of a pyarrow Table/RecordBatch (columns named like the message fields,
        snake_case or the corpus camelCase: topic, queueId, body (binary or UTF-8 string), tags,
        keys, properties (map<string,string>, struct of strings, or a verbatim string),
        propertiesString, flag, sysFlag, bornTimestamp, bornHost, storeHost, storeTimestamp,
        reconsumeTimes, preparedTransactionOffset).  Nulls take the field defaults.

        Columnar fast path (see ``put_columns``); returns a :class:`BatchPutResults`
        (a sequence of PutMessageResult, plus numpy columns and ``to_put_jsonl``).
        """
        from ..format.batch_encode import columns_from_arrow
        parts = []
        for piece in self._arrow_pieces(batch):
            parts.append(self.put_columns(columns_from_arrow(piece)))
        return parts[0] if len(parts) == 1 else BatchPutResults.concat(parts)

    def _arrow_pieces(self, batch) -> list:
        """Slices of at most _ARROW_CHUNK_ROWS rows.  A Table is cut at its chunk boundaries, runs of
        chunks grouped up to that size: big chunks need no copy to become contiguous, small ones are
        combined (fewer, bigger batches are cheaper than copies saved)."""
        import pyarrow as pa
        n = batch.num_rows
        step = self._ARROW_CHUNK_ROWS
        if not isinstance(batch, pa.Table) or n == 0:
            return [batch.slice(lo, min(step, n - lo)) for lo in range(0, max(n, 1), step)]
        pieces, group, rows = [], [], 0
        for rb in batch.to_batches(max_chunksize=step):
            if group and rows + rb.num_rows > step:
                pieces.append(group[0] if len(group) == 1 else pa.Table.from_batches(group))
                group, rows = [], 0
            group.append(rb)
            rows += rb.num_rows
        if group:
            pieces.append(group[0] if len(group) == 1 else pa.Table.from_batches(group))
        return pieces

    def put_json_lines(self, data: bytes, *, what: str = "input", first_line: int = 1) -> "BatchPutResults":
        """Put a block of JSON lines (``inputs.jsonl`` shape: camelCase fields, base64 body) -- the
        bulk entry point for ``rmq put --json``.

        ``data`` is whole lines (``b"\\n"``-separated, blank lines ignored).  The
        block is parsed by pyarrow's multithreaded C++ JSON reader into columns
        and written by ``put_columns``; a block pyarrow cannot type like
        ``from_json_dict`` would (or with invalid base64, a bad line, ...) is
        parsed line by line instead, and a bad line raises OptionError
        ``"{what} line {n}: ..."`` (``first_line`` = number of the first line)
        before anything of the block is written.  Returns a
        :class:`BatchPutResults`; ``results.to_put_jsonl(first_i)`` renders the
        put.jsonl lines.  Bigger blocks are faster (64 MiB is a good size).
        """
        from ..format.batch_encode import columns_from_json_lines
        cols = columns_from_json_lines(data)
        if cols is None:
            msgs = _messages_from_json_block(data, what, first_line)
            return self.put_columns(_columns_of_messages(msgs))
        return self.put_columns(cols)

    def put_columns(self, cols) -> "BatchPutResults":
        """Put a :class:`~rmqsource.format.batch_encode.MessageColumns` batch (columnar fast path)."""
        res = BatchPutResults(cols.n)
        with self._put_lock:
            if not self._writable:
                why = "store is closed" if self._closed else f"store is not writable: {self._error!r}"
                for i in range(cols.n):
                    m = cols.message(i)
                    res.objects[i] = self._fail(m, PutMessageStatus.SERVICE_NOT_AVAILABLE, reason=why)
                    res.input_objects[i] = input_view(m, self._trailing)
                return res
            if cols.n:
                self._put_columns_locked(cols, res)
        return res

    def _hosts_of(self, col, n: int, default: str):
        """(codes, address uint32 per distinct host, port per distinct host, bad row mask) of a host
        string column (fast path: IPv4 only; others are flagged for the per-message path)."""
        import pyarrow.compute as pc
        from ..format.batch_encode import parse_ipv4_hosts
        col = col.fill_null(default) if col.null_count else col
        if n and pc.all(pc.equal(col, col[0])).as_py():      # one host for the whole batch
            d = col.slice(0, 1)
            codes = np.zeros(n, np.int64)
        else:
            enc = pc.dictionary_encode(col)
            d = enc.dictionary
            codes = np.asarray(enc.indices).astype(np.int64)
        if not len(d):
            return codes, np.zeros(0, np.uint32), np.zeros(0, np.int64), np.zeros(n, bool)
        addr, port, ok = parse_ipv4_hosts(d)
        ok &= port < (1 << 31)
        return codes, addr, port, (~ok)[codes]

    def _put_columns_locked(self, c, res: "BatchPutResults") -> None:
        import pyarrow as pa
        import pyarrow.compute as pc
        from ..format import batch_encode as be
        n = c.n
        z = self.segment_size
        trailing = self._trailing
        slow = c.slow.copy()
        if self._append_crc and not trailing:
            slow[:] = True
        # -- per-distinct-value checks: topics, hosts
        tenc = pc.dictionary_encode(c.topic)
        tnames = tenc.dictionary.to_pylist()
        tcode = np.asarray(tenc.indices).astype(np.int64)
        tbad = np.array([self._topic_problem(t) is not None or len(t) > limits.TOPIC_MAX_BYTES_V1
                         for t in tnames] or [True])
        slow |= tbad[tcode]
        tlen = np.array([len(t) for t in tnames] or [0], np.int64)
        bcode, baddr, bport, bbad = self._hosts_of(c.born_host, n, "127.0.0.1:0")
        scode, saddr, sport, sbad = self._hosts_of(c.store_host, n, "127.0.0.1:10911")
        shosts = [(int(x).to_bytes(4, "big"), int(y)) for x, y in zip(saddr.tolist(), sport.tolist())]
        slow |= bbad | sbad
        boff, _ = be.binary_offsets(c.body)
        blen = np.diff(boff)
        slow |= blen > self._max_body
        # -- properties (fast rows: TAGS, KEYS, then the map; no separators inside values)
        props = be.serialize_properties(c.tags, c.keys, c.map_part, trailing)
        if getattr(c, "map_checked", False):
            # map keys/values were checked by the column builder; tags/keys here
            slow[be.rows_with_separators(c.tags)] = True
            slow[be.rows_with_separators(c.keys)] = True
        else:
            n_ent = c.map_count + np.asarray(c.tags.is_valid()) + np.asarray(c.keys.is_valid())
            cnt1 = np.asarray(pc.count_substring(props, "\x01"))
            cnt2 = np.asarray(pc.count_substring(props, "\x02"))
            slow |= (cnt1 != n_ent) | (cnt2 != (n_ent if trailing else np.maximum(n_ent - 1, 0)))
        plen = np.asarray(pc.binary_length(props)).astype(np.int64)
        if self._append_crc:
            plen = plen + len(_CRC_PLACEHOLDER)
        slow |= plen > _PROPS_MAX
        size = be.FIXED_V4_V1 + blen + tlen[tcode] + plen
        slow |= (size > self._max_record) | (size + limits.END_FILE_MIN_BLANK_BYTES > z)
        fast = ~slow
        sys_flag = c.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
        # -- per-message path for the other rows
        topics = list(tnames)
        topic_index = {t: i for i, t in enumerate(topics)}
        shost_index = {h: i for i, h in enumerate(shosts)}
        final_tcode = tcode.copy()
        qid = c.queue_id.copy()
        host_code = scode.copy()
        ok = fast.copy()
        prepared: dict[int, _Prepared] = {}
        now = self._clock_ms()
        store_ts = np.where(c.store_ts_valid, c.store_ts, now)
        res.input_objects = {}
        for i in np.flatnonzero(slow).tolist():
            m = c.message(i)
            res.input_objects[i] = input_view(m, trailing) if isinstance(m, MessageExtBrokerInner) else (0, "")
            try:
                p = self._prepare(m)
            except Exception as exc:     # malformed input object: refuse it, never half-write
                res.objects[i] = self._fail(m, PutMessageStatus.MESSAGE_ILLEGAL, reason=f"{type(exc).__name__}: {exc}")
                continue
            if isinstance(p, PutMessageResult):
                res.objects[i] = p
                continue
            prepared[i] = p
            ok[i] = True
            size[i] = p.size
            final_tcode[i] = topic_index.setdefault(p.topic, len(topics))
            if final_tcode[i] == len(topics):
                topics.append(p.topic)
            qid[i] = p.queue_id
            sys_flag[i] = p.sys_flag
            hk = (p.store_addr, p.store_port)
            host_code[i] = shost_index.setdefault(hk, len(shosts))
            if host_code[i] == len(shosts):
                shosts.append(hk)
            if p.store_ts is not None:
                store_ts[i] = p.store_ts
        res.topics, res.hosts = topics, shosts
        res.topic_code[:] = final_tcode
        res.queue_ids[:] = qid
        res.sys_flags[:] = sys_flag
        res.host_code[:] = host_code
        rows = np.flatnonzero(ok)                     # rows to write, in order
        if rows.size == 0:
            self._input_view_fast(res, c, fast, props, None)
            return
        # -- positions: segments with the blank rule, then queue offsets
        seg = self._current
        first_open = seg is not None
        seg_of, in_seg, plan = be.segment_positions(size[rows], seg.wrote if seg else 0, z, first_open)
        base0 = seg.start if first_open else self._next_start
        phy = base0 + seg_of * z + in_seg
        tran = sys_flag[rows] & TRANSACTION_MASK
        enters = (tran == TRANSACTION_NOT_TYPE) | (tran == TRANSACTION_COMMIT_TYPE)
        qo = np.zeros(len(rows), np.int64)
        cq = np.flatnonzero(enters)
        if cq.size:
            ug, inv, order, counts = be.group_rows(final_tcode[rows[cq]], qid[rows[cq]])
            starts = np.zeros(len(ug), np.int64)
            np.cumsum(counts[:-1], out=starts[1:])
            rank = np.empty(len(cq), np.int64)
            rank[order] = np.arange(len(cq)) - np.repeat(starts, counts)
            bases = np.array([self._queue_offsets.get((topics[int(g >> 32)], int(g & 0xFFFFFFFF)), 0)
                              for g in ug.tolist()], np.int64)
            qo[cq] = bases[inv] + rank
        ts = store_ts[rows]
        # -- tags codes (ConsumeQueue) and index keys
        tags_code = np.zeros(n, np.int64)
        fast_tags = be.tags_codes(c.tags) if fast.any() else None
        if fast_tags is not None:
            tags_code[fast] = fast_tags[fast]
        levels = self._delay_levels
        rowpos = np.full(n, -1, np.int64)
        rowpos[rows] = np.arange(len(rows))
        for i, p in prepared.items():
            if p.delay is not None:
                tags_code[i] = compute_tags_code(p.topic, {"TAGS": p.tags, "DELAY": p.delay}
                                                 if p.tags is not None else {"DELAY": p.delay}, int(store_ts[i]),
                                                 levels)
            else:
                tags_code[i] = _tags_code(p.tags)
        entries = self._index_entries(c, fast, rowpos, tcode, tnames, prepared) \
            if self.index_service is not None else None
        # -- encode: fast rows at once, the others one by one
        frows = np.flatnonzero(fast)
        recs = None
        if frows.size:
            recs = self._encode_fast(c, frows, rowpos, size, phy, qo, ts, tcode, tnames, bcode, baddr, bport,
                                     scode, saddr, sport, sys_flag, props, plen)
        if prepared:
            slow_recs = []
            srows = np.array(sorted(prepared), np.int64)
            for i in srows.tolist():
                j = int(rowpos[i])
                slow_recs.append(self._encode_one(prepared[i], int(qo[j]), int(phy[j]), int(ts[j])))
            sarr = pa.array(slow_recs, pa.binary())
            if recs is None:
                recs = sarr
            else:
                perm = np.empty(len(rows), np.int64)
                perm[rowpos[frows]] = np.arange(len(frows))
                perm[rowpos[srows]] = len(frows) + np.arange(len(srows))
                recs = pa.concat_arrays([recs, sarr]).take(pa.array(perm))
        roff, rdata = be.binary_offsets(recs)
        # -- write segment by segment; acknowledge and dispatch what was written
        status_ok = _STATUS_CODE[PutMessageStatus.PUT_OK]
        for s_idx, (a, b, blank, pos) in enumerate(plan):
            if s_idx > 0 or not first_open:
                try:
                    seg = self._roll()
                except OSError as exc:
                    self._fail_rows(c, res, rows[a:], PutMessageStatus.CREATE_MAPPED_FILE_FAILED, str(exc))
                    break
            chunk = memoryview(rdata)[int(roff[a]):int(roff[b])]
            if blank:
                chunk = bytes(chunk) + _BLANK.pack(blank, BLANK_MAGIC)
            try:
                _pwrite_all(seg.fd, chunk, pos)
            except OSError as exc:
                self._error = exc
                try:
                    _pwrite_all(seg.fd, bytes(len(chunk)), pos)
                except OSError:
                    self._writable = False
                self._fail_rows(c, res, rows[a:], PutMessageStatus.UNKNOWN_ERROR, str(exc))
                break
            status = self._written(seg, pos + len(chunk))
            if b == a:
                continue
            r = rows[a:b]
            res.status[r] = _STATUS_CODE[status] if status is not PutMessageStatus.PUT_OK else status_ok
            res.commit_log_offsets[r] = phy[a:b]
            res.queue_offsets[r] = qo[a:b]
            res.sizes[r] = size[r]
            res.store_timestamps[r] = ts[a:b]
            cqa = np.flatnonzero(enters[a:b])
            if cqa.size:
                for g, last in zip(*self._last_per_group(final_tcode[r[cqa]], qid[r[cqa]], qo[a:b][cqa])):
                    self._queue_offsets[(topics[g[0]], g[1])] = last + 1
            self._last_store_ts = int(ts[b - 1])
            if status is PutMessageStatus.PUT_OK and self._sync_flush:
                self._physic_ts = self._last_store_ts
            try:
                ent = None
                if entries is not None:
                    e_rec, e_hash = entries
                    lo, hi = np.searchsorted(e_rec, [a, b])
                    ent = (e_rec[lo:hi] - a, e_hash[lo:hi])
                self.dispatcher.dispatch_columns(topics, final_tcode[r], qid[r], phy[a:b], size[r],
                                                 tags_code[r], ts[a:b], qo[a:b], sys_flag[r], ent)
            except Exception as exc:  # the CommitLog holds the data; a reopen re-dispatches it
                self._error = exc
                self._writable = False
        self._input_view_fast(res, c, fast, props, fast_tags)

    @staticmethod
    def _last_per_group(tc: np.ndarray, q: np.ndarray, qo: np.ndarray):
        from ..format import batch_encode as be
        ug, _, order, counts = be.group_rows(tc, q)
        last = qo[order[np.cumsum(counts) - 1]]
        return [(int(g >> 32), int(g & 0xFFFFFFFF)) for g in ug.tolist()], last.tolist()

    def _input_view_fast(self, res, c, fast, props, fast_tags=None) -> None:
        import pyarrow as pa
        from ..format import batch_encode as be
        frows = np.flatnonzero(fast)
        res.input_rows = frows
        res.input_props = props.take(pa.array(frows)) if frows.size != c.n else props
        if frows.size:
            codes = fast_tags if fast_tags is not None else be.tags_codes(c.tags)
            res.input_tags_code[frows] = codes[frows]
        for i, v in res.input_objects.items():
            res.input_tags_code[i] = v[0]

    def _fail_rows(self, c, res, rows: np.ndarray, status: PutMessageStatus, reason: str) -> None:
        for i in rows.tolist():
            res.status[i] = _OBJ
            res.objects[i] = PutMessageResult(status, AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR)
                                              if status is PutMessageStatus.UNKNOWN_ERROR else None,
                                              res.topics[int(res.topic_code[i])], int(res.queue_ids[i]),
                                              int(res.sys_flags[i]), reason)

    def _encode_one(self, p: _Prepared, qo: int, phy: int, store_ts: int) -> bytes:
        """One prepared record at its position (the per-message encoder of ``_put_locked``)."""
        head = p.head.pack(p.size, p.magic, p.body_crc, p.queue_id, p.flag, qo, phy, p.sys_flag, p.born_ts,
                           p.born_addr, p.born_port, store_ts, p.store_addr, p.store_port,
                           p.reconsume, p.prepared_tx, len(p.body))
        if p.crc_prop:
            tail = p.tail
            crc = zlib.crc32(memoryview(tail)[:-20], zlib.crc32(p.body, zlib.crc32(head))) & 0x7FFFFFFF
            return b"".join((head, p.body, bytes(memoryview(tail)[:-11]), crc_property_digits(crc), b"\x02"))
        return b"".join((head, p.body, p.tail))

    def _encode_fast(self, c, frows, rowpos, size, phy, qo, ts, tcode, tnames, bcode, baddr, bport, scode, saddr,
                     sport, sys_flag, props, plen):
        """Records of the fast rows (IPv4 hosts, magic v1), back to back in one Arrow buffer."""
        import pyarrow as pa
        from ..format import batch_encode as be
        k = len(frows)
        allrows = k == c.n
        take = None if allrows else pa.array(frows)
        body = c.body if allrows else c.body.take(take)
        pr = props if allrows else props.take(take)
        j = rowpos[frows]
        hd = be.head_array(k)
        hd["total"] = size[frows]
        hd["magic"] = MAGIC_V1
        hd["body_crc"] = be.body_crcs(body)
        hd["queue_id"] = c.queue_id[frows]
        hd["flag"] = c.flag[frows]
        hd["queue_offset"] = qo[j]
        hd["phy"] = phy[j]
        hd["sys_flag"] = sys_flag[frows]
        hd["born_ts"] = c.born_ts[frows]
        hd["born_addr"] = baddr[bcode[frows]]
        hd["born_port"] = bport[bcode[frows]]
        hd["store_ts"] = ts[j]
        hd["store_addr"] = saddr[scode[frows]]
        hd["store_port"] = sport[scode[frows]]
        hd["reconsume"] = c.reconsume[frows]
        hd["prepared_tx"] = c.prepared_tx[frows]
        hd["body_len"] = np.diff(be.binary_offsets(body)[0])
        heads = be.fixed_binary(hd.view(np.uint8), k, be.HEAD_V4_SIZE)
        tfield = pa.array([bytes((len(t),)) + t.encode("ascii") for t in tnames], pa.binary())
        topics = tfield.take(pa.array(tcode[frows]))
        pl = np.asarray(plen[frows], dtype=">i2")
        plens = be.fixed_binary(pl.view(np.uint8), k, 2)
        parts = [heads, body, topics, plens, pr.view(pa.binary())]
        recs = be.join_records(parts)
        if self._append_crc:
            recs = be.join_records([recs, be.crc_digit_tails(recs)])
        return recs

    def _index_entries(self, c, fast, rowpos, tcode, tnames, prepared):
        """(record number in write order, keyHash) of every index key, in buildIndex order."""
        import pyarrow as pa
        import pyarrow.compute as pc
        from ..format import batch_encode as be
        from ..format.javahash import index_key_hash
        from ..format.properties import split_keys
        n = c.n
        u_rec = k_rec = np.zeros(0, np.int64)
        u_hash = k_hash = np.zeros(0, np.int64)
        k_rank = np.zeros(0, np.int64)
        frows = np.flatnonzero(fast)
        if frows.size:
            pref = np.array([java_string_hash(t + "#") & 0xFFFFFFFF for t in tnames] or [0], np.uint32)
            u = c.uniq
            uvalid = np.asarray(u.is_valid()) & fast if u.null_count else fast
            ur = np.flatnonzero(uvalid)
            if ur.size:
                h, ln = be.java_hashes(u if ur.size == n else u.take(pa.array(ur)))
                u_rec = rowpos[ur]
                u_hash = be.index_hash(be.combine_hash(pref[tcode[ur]], h, ln))
            kv = np.asarray(c.keys.is_valid()) & fast if c.keys.null_count else fast
            kr = np.flatnonzero(kv)
            if kr.size:
                karr = c.keys if kr.size == n else c.keys.take(pa.array(kr))
                koff, kdata = be.binary_offsets(karr.view(pa.binary()))
                if not bool(np.any(kdata[int(koff[0]):int(koff[-1])] == 32)):
                    # no space anywhere: each non-empty KEYS value is one piece
                    keep = np.diff(koff) > 0
                    flat = karr if bool(keep.all()) else karr.filter(pa.array(keep))
                    parent = kr[keep]
                    piece_rank = np.ones(len(parent), np.int64)
                else:
                    lists = pc.split_pattern(karr, " ")
                    flat = pc.list_flatten(lists)
                    parent = kr[np.asarray(pc.list_parent_indices(lists))]
                    loff = np.asarray(lists.offsets)
                    piece_rank = np.arange(len(flat)) - np.repeat(loff[:-1], np.diff(loff)) + 1
                    keep = np.asarray(pc.greater(pc.binary_length(flat), 0))
                    flat = flat.filter(pa.array(keep))
                    parent, piece_rank = parent[keep], piece_rank[keep]
                if len(flat):
                    h, ln = be.java_hashes(flat)
                    k_rec = rowpos[parent]
                    k_rank = piece_rank
                    k_hash = be.index_hash(be.combine_hash(pref[tcode[parent]], h, ln))
        if not prepared:
            return be.merge_index_entries(u_rec, u_hash, k_rec, k_hash)
        r2, k2, h2 = [], [], []
        for i, p in prepared.items():
            j = int(rowpos[i])
            rank = 0
            if p.uniq_key is not None:
                r2.append(j), k2.append(0), h2.append(index_key_hash(f"{p.topic}#{p.uniq_key}"))
            for piece in split_keys(p.keys):
                rank += 1
                r2.append(j), k2.append(rank), h2.append(index_key_hash(f"{p.topic}#{piece}"))
        rec = np.concatenate([u_rec, k_rec, np.array(r2, np.int64)])
        rank = np.concatenate([np.zeros(len(u_rec), np.int64), k_rank, np.array(k2, np.int64)])
        hsh = np.concatenate([u_hash, k_hash, np.array(h2, np.int64)])
        order = np.lexsort((rank, rec))
        return rec[order], hsh[order]


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
                        todo.append((seg, os.dup(seg.fd)))
                        seg.dirty = False
            except OSError:
                for seg, fd in todo:
                    seg.dirty = True
                    os.close(fd)
                raise
            ts = self._last_store_ts
        try:
            for _, fd in todo:
                os.fsync(fd)
        except BaseException:
            with self._put_lock:
                for seg, _ in todo:
                    seg.dirty = True
            raise
        finally:
            for _, fd in todo:
                os.close(fd)
        with self._put_lock:
            if self._closed:
                return
            if ts:
                self._physic_ts = ts
            self._retire_old_segments()
            self.dispatcher.sync()

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

    @property
    def commit_log_max_offset(self) -> int:
        seg = self._current
        return seg.start + seg.wrote if seg is not None else (self._segments[-1].start if self._segments else 0)

    def queue_offset(self, topic: str, queue_id: int) -> int:
        """Next queue offset the writer will assign in ``topic``/``queue_id``."""
        return self._queue_offsets.get((topic, queue_id), 0)

    # -- shutdown ----------------------------------------------------------------------------
    def close(self) -> None:
        """Clean shutdown: flush everything, drop the unused pre-allocated segment, write the
        checkpoint, delete ``abort`` (only when all of that worked), release the lock."""
        if self._closed:
            return
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join()
        clean = False
        self._flush_lock.acquire()
        try:
            with self._put_lock:
                failed_before = self._error is not None
                self._writable = False
                for seg in self._segments:
                    if seg.fd >= 0:
                        if seg.dirty:
                            os.fsync(seg.fd)
                            seg.dirty = False
                if self._last_store_ts:
                    self._physic_ts = self._last_store_ts
                if self._prealloc is not None:
                    os.close(self._prealloc.fd)
                    os.unlink(self._prealloc.path)
                    self._prealloc = None
                for seg in self._segments:
                    if seg.fd >= 0:
                        os.close(seg.fd)
                        seg.fd = -1
                for d in self.commitlog_dirs:
                    fsync_dir(d)
                self.dispatcher.close()
                self._write_checkpoint()
                if not failed_before:
                    os.unlink(os.path.join(self.root, "abort"))
                    fsync_dir(self.root)
                    clean = True
        finally:
            self._closed = True
            self._flush_lock.release()
            self._lock.release()
        self.clean_shutdown = clean

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



# ---------------------------------------------------------------- columnar fast path
#
# MessageStoreWriter.put_columns (used by put_arrow_batch and put_json_lines) encodes a
# whole batch with numpy/pyarrow (rmqsource.format.batch_encode).  It produces exactly
# the bytes of put_messages: rows it cannot prove equivalent for (IPv6 hosts, magic v2
# topics, the 4.9 delay rewrite, __CRC32# in the input, verbatim properties strings,
# separators hidden in values, refused messages, ...) are prepared by the per-message
# _prepare and encoded one by one, then merged back in order.  Offsets, queue offsets,
# segment rolls, writes, ConsumeQueue units, IndexFile entries and results are columnar
# for all rows.  tests/test_writer_batch.py checks both golden corpora and randomized
# mixed batches against put_messages, byte for byte.

_STATUSES = list(PutMessageStatus)
_STATUS_CODE = {s: i for i, s in enumerate(_STATUSES)}
_OBJ = -1                                     # result held as an object (refused / failed rows)


class BatchPutResults(Sequence):
    """Results of one columnar put: numpy columns, with a lazy per-row :class:`PutMessageResult` view.

    ``results[i]`` builds the PutMessageResult of row i; ``ok_mask``/``ok_count``,
    ``commit_log_offsets``, ``queue_offsets``, ``sizes``, ``store_timestamps`` are
    arrays; :meth:`to_put_jsonl` renders the CLI's put.jsonl lines in bulk.
    """

    def __init__(self, n: int):
        self.n = n
        self.status = np.full(n, _OBJ, np.int8)
        self.commit_log_offsets = np.full(n, -1, np.int64)
        self.queue_offsets = np.full(n, -1, np.int64)
        self.sizes = np.zeros(n, np.int64)
        self.store_timestamps = np.zeros(n, np.int64)
        self.topic_code = np.zeros(n, np.int64)
        self.queue_ids = np.zeros(n, np.int64)
        self.sys_flags = np.zeros(n, np.int64)
        self.host_code = np.zeros(n, np.int64)
        self.topics: list[str] = []
        self.hosts: list[tuple[bytes, int]] = []
        self.objects: dict[int, PutMessageResult] = {}
        # put.jsonl input view: (tagsCode, propertiesString) per row
        self.input_rows = np.zeros(0, np.int64)        # rows covered by input_props (vectorized)
        self.input_props = None                        # pyarrow string array aligned with input_rows
        self.input_tags_code = np.zeros(n, np.int64)
        self.input_objects: dict[int, tuple[int, str]] = {}

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        code = int(self.status[i])
        if code == _OBJ:
            return self.objects[i]
        addr, port = self.hosts[int(self.host_code[i])]
        return PutMessageResult(
            _STATUSES[code],
            AppendMessageResult(AppendMessageStatus.PUT_OK, int(self.commit_log_offsets[i]), int(self.sizes[i]),
                                addr, int(self.store_timestamps[i]), int(self.queue_offsets[i]), port),
            self.topics[int(self.topic_code[i])], int(self.queue_ids[i]), int(self.sys_flags[i]))

    def __iter__(self):
        for i in range(self.n):
            yield self[i]

    @property
    def ok_mask(self) -> np.ndarray:
        return self.status == _STATUS_CODE[PutMessageStatus.PUT_OK]

    @property
    def ok_count(self) -> int:
        return int(np.count_nonzero(self.ok_mask))

    def input_view(self, i: int) -> tuple[int, str]:
        """(tagsCode, propertiesString) of row i's input, as the corpora's put.jsonl holds them."""
        if i in self.input_objects:
            return self.input_objects[i]
        j = int(np.searchsorted(self.input_rows, i))
        return int(self.input_tags_code[i]), self.input_props[j].as_py()

    def to_put_jsonl(self, first_i: int = 0) -> bytes:
        """The put.jsonl lines of these results (``{"i": first_i + row, ...}`` + tagsCode and
        propertiesString of the input, "reason" when refused), UTF-8, each ending in a newline.

        PUT_OK rows are rendered element-wise in Arrow; others one by one with the
        same encoder as the CLI (``ensure_ascii=False``, compact separators)."""
        import json
        import pyarrow as pa
        import pyarrow.compute as pc
        from ..format import batch_encode as be
        dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
        n = self.n
        if n == 0:
            return b""
        vec = np.zeros(n, bool)
        if self.input_props is not None and len(self.input_rows):
            vec[self.input_rows] = True
        vec &= self.ok_mask
        props_all = None
        if vec.any():
            sel = np.flatnonzero(vec[self.input_rows])
            props_all = self.input_props if len(sel) == len(self.input_props) else \
                self.input_props.take(pa.array(sel))
            esc, bad = be.json_escape_props(props_all)
            topic_bad = np.array([dumps(t)[1:-1] != t for t in self.topics] or [False])
            rows = self.input_rows[sel]
            bad |= topic_bad[self.topic_code[rows]]
            if bad.any():
                vec[rows[bad]] = False
                keep = np.flatnonzero(~bad)
                rows, esc = rows[keep], esc.take(pa.array(keep))
        vec_rows = np.flatnonzero(vec)
        other = np.flatnonzero(~vec)
        parts = []
        if vec_rows.size:
            host_hex = [(addr + struct.pack(">i", port)).hex().upper() for addr, port in self.hosts]
            phy = self.commit_log_offsets[vec_rows]
            ids = be.hex_fixed(phy, 16)
            prefix = pc.take(pa.array(host_hex), pa.array(self.host_code[vec_rows]))
            msg_ids = pc.binary_join_element_wise(prefix, be.fixed_binary(ids.reshape(-1), len(vec_rows), 16)
                                                  .cast(pa.string()), "")
            topics = pc.take(pa.array(self.topics, pa.string()), pa.array(self.topic_code[vec_rows]))
            parts.append(be.render_put_jsonl(first_i, vec_rows, msg_ids, phy, self.queue_offsets[vec_rows],
                                             self.sizes[vec_rows], self.store_timestamps[vec_rows], topics,
                                             self.queue_ids[vec_rows], self.sys_flags[vec_rows],
                                             self.input_tags_code[vec_rows], esc, newline=True))
        if other.size:
            lines = []
            for i in other.tolist():
                r = self[i]
                doc = {"i": first_i + i}
                doc.update(r.to_json_dict())
                doc["tagsCode"], doc["propertiesString"] = self.input_view(i)
                if r.reason:
                    doc["reason"] = r.reason
                lines.append(dumps(doc) + "\n")
            parts.append(pa.array(lines, pa.string()))
        allv = pa.concat_arrays(parts) if len(parts) > 1 else parts[0]
        if len(parts) > 1:
            perm = np.empty(n, np.int64)
            perm[vec_rows] = np.arange(len(vec_rows))
            perm[other] = len(vec_rows) + np.arange(len(other))
            allv = allv.take(pa.array(perm))
        off, data = be.binary_offsets(allv)
        return data[off[0]:off[-1]].tobytes()

    @staticmethod
    def concat(parts: Sequence["BatchPutResults"]) -> "BatchPutResults":
        """One result object for consecutive batches (topic/host tables merged).

        Lazy: counts, rows and put.jsonl come from the parts; the merged numpy
        columns are built on first access of one of them."""
        return _ConcatResults(list(parts))

    @staticmethod
    def _concat_into(out: "BatchPutResults", parts: Sequence["BatchPutResults"]) -> None:
        n = out.n
        BatchPutResults.__init__(out, n)
        tmap: dict[str, int] = {}
        hmap: dict[tuple, int] = {}
        rows_all, props_all = [], []
        base = 0
        for p in parts:
            sl = slice(base, base + p.n)
            for name in ("status", "commit_log_offsets", "queue_offsets", "sizes", "store_timestamps",
                         "queue_ids", "sys_flags", "input_tags_code"):
                getattr(out, name)[sl] = getattr(p, name)
            tc = np.array([tmap.setdefault(t, len(tmap)) for t in p.topics] or [0], np.int64)
            hc = np.array([hmap.setdefault(h, len(hmap)) for h in p.hosts] or [0], np.int64)
            out.topic_code[sl] = tc[p.topic_code]
            out.host_code[sl] = hc[p.host_code]
            out.objects.update({base + k: v for k, v in p.objects.items()})
            out.input_objects.update({base + k: v for k, v in p.input_objects.items()})
            if p.input_props is not None and len(p.input_rows):
                rows_all.append(p.input_rows + base)
                props_all.append(p.input_props)
            base += p.n
        out.topics = list(tmap)
        out.hosts = list(hmap)
        if rows_all:
            import pyarrow as pa
            out.input_rows = np.concatenate(rows_all)
            out.input_props = pa.concat_arrays(props_all)


class _ConcatResults(BatchPutResults):
    """:meth:`BatchPutResults.concat` of several parts, merged only when a column is asked for."""

    def __init__(self, parts: list):
        self._parts = parts
        self.n = sum(p.n for p in parts)
        self._bases = np.cumsum([0] + [p.n for p in parts])

    def __getattr__(self, name):            # a column not merged yet (instance attributes win)
        if name.startswith("__") or name in ("_parts", "_bases", "n", "_merged"):
            raise AttributeError(name)
        if "_merged" not in self.__dict__:
            self._merged = True
            BatchPutResults._concat_into(self, self._parts)
            return getattr(self, name)
        raise AttributeError(name)

    def __getitem__(self, i):
        if isinstance(i, slice) or "_merged" in self.__dict__:
            return BatchPutResults.__getitem__(self, i)
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        k = int(np.searchsorted(self._bases, i, side="right")) - 1
        return self._parts[k][i - int(self._bases[k])]

    @property
    def ok_count(self) -> int:
        return sum(p.ok_count for p in self._parts)

    def input_view(self, i: int) -> tuple[int, str]:
        k = int(np.searchsorted(self._bases, i, side="right")) - 1
        return self._parts[k].input_view(i - int(self._bases[k]))

    def to_put_jsonl(self, first_i: int = 0) -> bytes:
        return b"".join(p.to_put_jsonl(first_i + int(b)) for p, b in zip(self._parts, self._bases.tolist()))


def input_view(m: MessageExtBrokerInner, trailing: bool) -> tuple[int, str]:
    """(tagsCode, propertiesString) of a message before the put, as in the corpora's put.jsonl."""
    from ..format.properties import serialize_properties
    props = m.properties
    if isinstance(props, str):
        text = props
    else:
        items = []
        if m.tags is not None:
            items.append((TAGS, m.tags))
        if m.keys is not None:
            items.append((KEYS, m.keys))
        if props:
            items.extend(props.items())
        text = serialize_properties(items, trailing_separator=trailing)
    return _tags_code(parse_properties(text).get(TAGS)), text


def _messages_from_json_block(data: bytes, what: str, first_line: int) -> list:
    """Per-line parse of a JSON-lines block (the fallback of ``put_json_lines``), with the CLI's
    error messages (``{what} line {n}: ...``)."""
    import binascii
    import json
    msgs = []
    for n, line in enumerate(data.split(b"\n"), first_line):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, UnicodeDecodeError) as e:
            raise OptionError(f"{what} line {n}: not valid JSON: {e}") from None
        try:
            if not isinstance(obj, dict):
                raise TypeError(f"expected a JSON object, got {type(obj).__name__}")
            if "topic" not in obj:
                raise KeyError("topic")
            body = obj.get("body")
            if body:
                if not isinstance(body, str):
                    raise TypeError(f"body must be a base64 string, got {type(body).__name__}")
                binascii.a2b_base64(body, strict_mode=True)
            msgs.append(MessageExtBrokerInner.from_json_dict(obj))
        except KeyError as e:
            raise OptionError(f"{what} line {n}: missing field {e.args[0]!r}") from None
        except binascii.Error as e:
            raise OptionError(f"{what} line {n}: body is not base64: {e}") from None
        except (TypeError, ValueError, AttributeError) as e:
            raise OptionError(f"{what} line {n}: {' '.join(str(e).split())}") from None
        except RmqError as e:
            raise OptionError(f"{what} line {n}: {' '.join(str(e).split())}") from None
    return msgs


def _columns_of_messages(msgs: Sequence[MessageExtBrokerInner]):
    """MessageColumns whose rows all take the per-message path (fallback of the bulk entry points)."""
    import pyarrow as pa
    from ..format.batch_encode import MessageColumns
    n = len(msgs)
    zeros = np.zeros(n, np.int64)
    empty = pa.array([""] * n, pa.string())
    nulls = pa.nulls(n, pa.string())
    return MessageColumns(
        n=n, topic=empty, queue_id=zeros, body=pa.array([b""] * n, pa.binary()), flag=zeros, sys_flag=zeros,
        born_ts=zeros, reconsume=zeros, prepared_tx=zeros, store_ts=zeros, store_ts_valid=np.zeros(n, bool),
        born_host=nulls, store_host=nulls, tags=nulls, keys=nulls, map_part=empty, map_count=zeros,
        uniq=nulls, slow=np.ones(n, bool), row_message=msgs.__getitem__)
