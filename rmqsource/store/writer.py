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

from .. import limits
from ..errors import OptionError, StoreError
from ..format.checkpoint import Checkpoint
from ..format.javahash import tags_code as _tags_code
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
        seg.wrote = buf_pos + len(buf)
        seg.dirty = True
        status = PutMessageStatus.PUT_OK
        if self._sync_flush:
            try:
                os.fsync(seg.fd)
                seg.dirty = False
            except OSError as exc:
                self._error = exc
                status = PutMessageStatus.FLUSH_DISK_TIMEOUT
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
    def put_arrow_batch(self, batch) -> list[PutMessageResult]:
        """Put the rows of a pyarrow Table/RecordBatch (columns named like the message fields,
        snake_case or the corpus camelCase)."""
        cols = {name: batch.column(i).to_pylist() for i, name in enumerate(batch.schema.names)}
        n = batch.num_rows
        aliases = {"queueId": "queue_id", "bornTimestamp": "born_timestamp_ms", "bornHost": "born_host",
                   "storeHost": "store_host", "sysFlag": "sys_flag", "reconsumeTimes": "reconsume_times",
                   "preparedTransactionOffset": "prepared_transaction_offset",
                   "storeTimestamp": "store_timestamp_ms", "propertiesString": "properties",
                   "born_timestamp": "born_timestamp_ms", "store_timestamp": "store_timestamp_ms"}
        fields = {aliases.get(k, k): v for k, v in cols.items()}
        allowed = set(MessageExtBrokerInner.__dataclass_fields__)
        unknown = set(fields) - allowed
        if unknown:
            raise OptionError(f"unknown columns for put_arrow_batch: {sorted(unknown)}")
        msgs = []
        for r in range(n):
            kw = {k: v[r] for k, v in fields.items() if v[r] is not None}
            if isinstance(kw.get("properties"), list):   # map<string,string> column
                kw["properties"] = dict(kw["properties"])
            msgs.append(MessageExtBrokerInner(**kw))
        return self.put_messages(msgs)

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
        """fsync CommitLog segments, ConsumeQueues and the IndexFile written so far."""
        with self._put_lock:
            if self._closed:
                return
            for seg in self._segments:
                if seg.dirty and seg.fd >= 0:
                    os.fsync(seg.fd)
                    seg.dirty = False
            if self._last_store_ts:
                self._physic_ts = self._last_store_ts
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

