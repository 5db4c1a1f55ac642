"""Put checks: RocketMQ's validation of one message before it is appended, and its
position-independent encoding (``DefaultMessageStore.checkMessage`` / ``checkStoreStatus``
plus ``CommitLog.DefaultAppendMessageCallback``'s size checks).

:meth:`PutChecks.prepare` returns a :class:`Prepared` message (head struct, body,
topic+properties tail) or the refused message's :class:`PutMessageResult`.
"""

from __future__ import annotations

import functools
import re
import struct
import zlib
from typing import Any, Mapping, Optional

from .. import limits
from ..errors import OptionError, UnsupportedMessageError
from ..format.javahash import tags_code as tags_code_of
from ..format.message import MessageExtBrokerInner
from ..format.msgid import parse_host
from ..format.properties import (CRC32, DELAY, KEYS, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, REAL_QID,
                                 REAL_TOPIC, TAGS, TIMER_DELAY_SEC, TIMER_DELIVER_MS, TIMER_OUT_MS,
                                 TIMER_PROPERTIES, UNIQ_KEY, parse_properties)
from ..format.record import (BORNHOST_V6_FLAG, MAGIC_V1, MAGIC_V2, STOREHOST_V6_FLAG, TRANSACTION_COMMIT_TYPE,
                             TRANSACTION_MASK, TRANSACTION_NOT_TYPE)
from ..format.tagscode import java_parse_int
from ..names import RETRY_GROUP_TOPIC_PREFIX, SCHEDULE_TOPIC
from .config import StoreConfig
from .put_result import AppendMessageStatus, PutMessageResult, PutMessageStatus, failed_result

__all__ = ["CRC_PLACEHOLDER", "PROPS_MAX", "Prepared", "PutChecks", "delete_property", "head_struct", "host_of",
           "input_view", "serialize_map"]

_TOPIC_CHARS = re.compile(r"^[%|a-zA-Z0-9_-]+$")
CRC_PLACEHOLDER = CRC32.encode() + b"\x01" + b"0" * 10 + b"\x02"
PROPS_MAX = limits.PROPERTIES_MAX_BYTES


@functools.lru_cache(maxsize=1 << 14)
def host_of(host: Any) -> tuple[bytes, int, bool]:
    """(address bytes, port, is_v6) of a host given as text or (bytes, port)."""
    if isinstance(host, str):
        addr, port = parse_host(host)
    else:
        addr, port = bytes(host[0]), int(host[1])
        if len(addr) not in (4, 16):
            raise OptionError(f"host address must be 4 or 16 bytes, got {len(addr)}")
    if not 0 <= port <= MAX_PORT:
        raise OptionError(f"port {port} of host {host!r} is outside [0, {MAX_PORT}]")
    return addr, port, len(addr) == 16


@functools.lru_cache(maxsize=4)
def head_struct(born_v6: bool, store_v6: bool) -> struct.Struct:
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


def serialize_map(d: Mapping[str, Optional[str]], trailing: bool) -> str:
    parts = [f"{k}\x01{v}" for k, v in d.items() if v is not None]
    if not parts:
        return ""
    s = "\x02".join(parts)
    return s + "\x02" if trailing else s


class Prepared:
    """A validated message, everything but its position encoded (position-independent parts)."""

    __slots__ = ("topic", "queue_id", "sys_flag", "size", "head", "body", "tail", "crc_prop",
                 "flag", "body_crc", "born_ts", "born_addr", "born_port", "store_addr", "store_port",
                 "reconsume", "prepared_tx", "store_ts", "magic", "tags", "keys", "uniq_key", "delay",
                 "enters_cq")


MAX_PORT = 65535
_I32 = (-(1 << 31), (1 << 31) - 1)
_I64 = (-(1 << 63), (1 << 63) - 1)
# (attribute, RocketMQ field name, range): the record's fixed-width fields.
_INT_FIELDS = (("flag", "flag", _I32), ("sys_flag", "sysFlag", _I32), ("reconsume_times", "reconsumeTimes", _I32),
               ("born_timestamp_ms", "bornTimestamp", _I64),
               ("prepared_transaction_offset", "preparedTransactionOffset", _I64))


def _field_problem(m) -> Optional[str]:
    """Why a fixed-width field of ``m`` cannot be stored (type or range), or None."""
    for attr, name, (lo, hi) in _INT_FIELDS:
        v = getattr(m, attr)
        if not isinstance(v, int):
            return f"{name} {v!r} is not an integer"
        if not lo <= v <= hi:
            return f"{name} {v} is outside [{lo}, {hi}]"
    st = m.store_timestamp_ms
    if st is not None and (not isinstance(st, int) or not _I64[0] <= st <= _I64[1]):
        return f"storeTimestamp {st!r} is not a 64-bit integer"
    return None


_SEPARATORS = re.compile("[\x01\x02]")


def _strings_problem(pmap: Mapping) -> Optional[str]:
    """Why TAGS/KEYS/property names and values cannot be stored, or None: each must be a string
    without RocketMQ's separators \x01/\x02 (a value holding them would read back as other
    properties, e.g. keys "k\x02TAGS\x01B" as TAGS=B).  Lone surrogates are caught at encoding."""
    for k, v in pmap.items():
        if not isinstance(k, str):
            return f"property name {k!r} is not a string"
        if v is not None and not isinstance(v, str):
            return f"{_what(k)} {v!r} is not a string"
        if _SEPARATORS.search(k):
            return f"property name {k!r} holds a property separator (\\x01 or \\x02)"
        if v is not None and _SEPARATORS.search(v):
            return f"{_what(k)} {v!r} holds a property separator (\\x01 or \\x02)"
    return None


def _what(name: str) -> str:
    return {TAGS: "tags", KEYS: "keys"}.get(name, f"property {name!r}")


class PutChecks:
    """The checks of one store configuration (engine generation, sizes, topic rules)."""

    def __init__(self, config: StoreConfig, segment_size: int, strict_broker_topic_check: bool = False):
        c = config
        self.segment_size = segment_size
        self.strict_broker_topic_check = strict_broker_topic_check
        self.v5 = c.is_v5
        self.trailing = c.trailing_property_separator
        self.append_crc = c.append_prop_crc
        self.v2_ok = c.supports_message_version_v2 and c.auto_message_version_on_topic_len
        self.delay_levels = tuple(c.message_delay_levels_ms)
        # The schedule hook runs for a 4.9 store (its CommitLog rewrites DELAY) and, with brokerPutHooks,
        # for a 5.x one (the broker's HookUtils.handleScheduleMessage, before the store).
        self.schedule_hook = (not self.v5) or c.broker_put_hooks
        # (real topic, real queue id) of every message parked in SCHEDULE_TOPIC_XXXX: routed in topics.json.
        self.parked_queues: set[tuple[str, int]] = set()
        self.max_body = c.max_message_size_bytes
        self.max_record = c.max_message_size_bytes + limits.RECORD_HEADROOM_BYTES

    def topic_problem(self, topic: Any) -> Optional[str]:
        if not isinstance(topic, str) or not topic:
            return "topic is empty"
        if not _TOPIC_CHARS.match(topic):
            return f"topic {topic!r} has characters outside [%|a-zA-Z0-9_-]"
        n = len(topic)  # ASCII only after the charset check
        if n <= limits.TOPIC_MAX_BYTES_V1:
            return None
        if not self.v2_ok:
            return f"topic is {n} bytes, more than {limits.TOPIC_MAX_BYTES_V1}"
        if self.strict_broker_topic_check and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return f"topic is {n} bytes; only {RETRY_GROUP_TOPIC_PREFIX} topics may exceed 127"
        if n > limits.TOPIC_MAX_BYTES_V2:
            return f"topic is {n} bytes, more than {limits.TOPIC_MAX_BYTES_V2}"
        return None

    def prepare(self, m: MessageExtBrokerInner):
        """Validate and pre-encode one message; a PutMessageResult when it is refused."""
        problem = self.topic_problem(m.topic)
        if problem:
            return failed_result(m, PutMessageStatus.MESSAGE_ILLEGAL, reason=problem)
        qid = m.queue_id
        if not isinstance(qid, int) or not 0 <= qid <= 0x7FFFFFFF:
            return failed_result(m, PutMessageStatus.MESSAGE_ILLEGAL, reason=f"queueId {qid!r} out of range")
        body = m.body if m.body is not None else b""
        if not isinstance(body, bytes):
            body = bytes(body)
        if len(body) > self.max_body:
            return failed_result(m, PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageStatus.MESSAGE_SIZE_EXCEEDED,
                              f"body is {len(body)} bytes, more than maxMessageSize {self.max_body}")
        try:
            born_addr, born_port, born_v6 = host_of(m.born_host)
            store_addr, store_port, store_v6 = host_of(m.store_host)
        except (OptionError, TypeError, ValueError, IndexError) as exc:
            return failed_result(m, PutMessageStatus.MESSAGE_ILLEGAL, reason=str(exc))
        problem = _field_problem(m)
        if problem:
            return failed_result(m, PutMessageStatus.MESSAGE_ILLEGAL, reason=problem)
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
            problem = _strings_problem(pmap)
            if problem:
                return failed_result(m, PutMessageStatus.MESSAGE_ILLEGAL, reason=problem)
        # Delay level rewrite into SCHEDULE_TOPIC_XXXX: the 4.9 store's CommitLog.asyncPutMessage, the 5.x
        # broker's HookUtils.transformDelayLevelMessage (brokerPutHooks).
        if self.schedule_hook and (tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE):
            source = pmap if pmap is not None else parse_properties(pstr)
            raw_delay = source.get(DELAY)
            level = None
            if raw_delay is not None:
                level = java_parse_int(raw_delay)
                if level is None:
                    return failed_result(m, PutMessageStatus.MESSAGE_ILLEGAL, reason=f"DELAY {raw_delay!r} is not an int")
            if self.v5 and (level is None or level <= 0):
                self.refuse_timer(topic, source)
            if level is not None and level > 0:
                    max_level = len(self.delay_levels)
                    if level > max_level:
                        level = max_level
                    pmap = dict(source)
                    if self.v5:       # HookUtils.checkIfTimerMessage: a delay level wins over timer properties
                        pmap.pop(TIMER_DELIVER_MS, None)
                        pmap.pop(TIMER_DELAY_SEC, None)
                    pmap[DELAY] = str(level)
                    pmap[REAL_TOPIC] = topic
                    pmap[REAL_QID] = str(qid)
                    self.parked_queues.add((topic, qid))
                    topic = SCHEDULE_TOPIC
                    qid = level - 1
                    pstr = None
        if pmap is not None:
            if self.append_crc and CRC32 in pmap:
                pmap = {k: v for k, v in pmap.items() if k != CRC32}
            pstr = serialize_map(pmap, self.trailing)
        elif self.append_crc:
            pstr = delete_property(pstr, CRC32)
        if len(pstr) > PROPS_MAX:
            return failed_result(m, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                              reason=f"properties are {len(pstr)} chars, more than {PROPS_MAX}")
        try:
            pbytes = pstr.encode("utf-8")
        except UnicodeEncodeError as exc:        # a lone surrogate: not text any encoder would store
            return failed_result(m, PutMessageStatus.MESSAGE_ILLEGAL,
                                 reason=f"properties are not valid Unicode: {exc.object[exc.start]!r} "
                                        f"(a lone surrogate) at char {exc.start}")
        if self.append_crc:
            if pbytes and not pbytes.endswith(b"\x02"):
                pbytes += b"\x02"
            pbytes += CRC_PLACEHOLDER
        if len(pbytes) > PROPS_MAX:
            return failed_result(m, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                              AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                              f"properties are {len(pbytes)} bytes, more than {PROPS_MAX}")
        tbytes = topic.encode("ascii")
        v2 = self.v2_ok and len(topic) > limits.TOPIC_MAX_BYTES_V1
        tail = (struct.pack(">h", len(tbytes)) if v2 else bytes((len(tbytes),))) + tbytes \
            + struct.pack(">h", len(pbytes)) + pbytes
        size = 60 + (20 if born_v6 else 8) + (20 if store_v6 else 8) + 12 + len(body) + len(tail)
        if size > self.max_record:
            return failed_result(m, PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageStatus.MESSAGE_SIZE_EXCEEDED,
                              f"record is {size} bytes, more than {self.max_record}")
        if size + limits.END_FILE_MIN_BLANK_BYTES > self.segment_size:
            return failed_result(m, PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageStatus.MESSAGE_SIZE_EXCEEDED,
                              f"record of {size} bytes cannot fit a {self.segment_size}-byte segment")
        p = Prepared()
        p.topic, p.queue_id, p.sys_flag, p.size = topic, qid, sys_flag, size
        p.head = head_struct(born_v6, store_v6)
        p.body, p.tail, p.crc_prop = body, tail, self.append_crc
        p.flag, p.body_crc = m.flag, zlib.crc32(body) & 0x7FFFFFFF
        p.born_ts, p.born_addr, p.born_port = m.born_timestamp_ms, born_addr, born_port
        p.store_addr, p.store_port = store_addr, store_port
        p.reconsume, p.prepared_tx = m.reconsume_times, m.prepared_transaction_offset
        p.store_ts = m.store_timestamp_ms
        p.magic = MAGIC_V2 if v2 else MAGIC_V1
        p.enters_cq = tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE
        # What dispatch needs, as the engine's parser would see the stored string.
        parsed = self.parsed_view(pmap, pstr)
        p.tags = parsed.get(TAGS)
        p.keys = parsed.get(KEYS)
        p.uniq_key = parsed.get(UNIQ_KEY)
        p.delay = parsed.get(DELAY) if topic == SCHEDULE_TOPIC else None
        return p

    def refuse_timer(self, topic: str, props: Mapping[str, Any]) -> None:
        """UnsupportedMessageError for a timer message (TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS).

        A 5.x broker parks it in its timer wheel (``rmq_sys_wheel_timer`` plus the ``timerlog`` / ``timerwheel``
        files and ``timercheck``/``timermetrics``), state the writer does not keep; stored in its topic it would
        be delivered at once. Copies the wheel already holds (``TIMER_OUT_MS``) are not timer puts."""
        if topic == "rmq_sys_wheel_timer" or props.get(TIMER_OUT_MS) is not None:
            return
        for name in TIMER_PROPERTIES:
            value = props.get(name)
            if value is not None:
                raise UnsupportedMessageError(
                    f"property {name}={value!r} (topic {topic!r}): timer messages are not written (a broker parks "
                    f"them in its timer wheel, which rmqsource does not keep); drop {name}, or use a delay level "
                    f"(property DELAY), which is parked as the broker parks it")

    def refuse_unsupported(self, m: MessageExtBrokerInner) -> None:
        """The batch-level pre-check of :meth:`refuse_timer` (before anything of the batch is written)."""
        if not (self.v5 and self.schedule_hook):
            return
        if (m.sys_flag & TRANSACTION_MASK) not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            return
        props = m.properties
        if isinstance(props, str):
            if "TIMER_" not in props:
                return
            props = parse_properties(props)
        elif not props:
            return
        raw = props.get(DELAY)
        level = java_parse_int(raw) if raw is not None else None
        if level is None or level <= 0:
            self.refuse_timer(m.topic, props)

    def parsed_view(self, pmap: Optional[dict], pstr: str) -> dict:
        """parse_properties(pstr), taken from the map directly when no separator hides inside it."""
        if pmap is not None:
            n = sum(1 for v in pmap.values() if v is not None)
            if pstr.count("\x01") == n and pstr.count("\x02") == (n if self.trailing else max(n - 1, 0)):
                return {k: v for k, v in pmap.items() if k and v}
        return parse_properties(pstr)


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
    return tags_code_of(parse_properties(text).get(TAGS)), text
