"""Trace message bodies: the events RocketMQ's client writes to ``RMQ_SYS_TRACE_TOPIC`` (the JVM twin:
format/TraceData.java).

The client's ``TraceDataEncoder`` ends each event with U+0002 and splits its fields with U+0001;
``decoderFromTraceDataString`` reads them back.  :func:`parse_trace_events` gives what that decoder gives,
field for field, for every field count it accepts (clients of 4.9 and 5.x wrote more fields over time), and
fails where it would throw, with a typed error instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from ..errors import CorruptRecordError

FIELD_SPLITOR = "\x02"      # TraceConstants.FIELD_SPLITOR: ends an event
CONTENT_SPLITOR = "\x01"    # TraceConstants.CONTENT_SPLITOR: between an event's fields

# org.apache.rocketmq.common.message.MessageType, in ordinal order (the client writes the ordinal)
MESSAGE_TYPES = ("Normal_Msg", "Trans_Msg_Half", "Trans_msg_Commit", "Delay_Msg", "Order_Msg")
# org.apache.rocketmq.client.producer.LocalTransactionState
TRANSACTION_STATES = ("COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW")
# the fewest fields each type's decoding reads
MIN_FIELDS = {"Pub": 12, "SubBefore": 8, "SubAfter": 6, "EndTransaction": 13, "Recall": 7}


@dataclass(frozen=True)
class TraceEvent:
    trace_type: str
    timestamp_ms: Optional[int] = None
    region_id: Optional[str] = None
    group: Optional[str] = None
    topic: Optional[str] = None
    msg_id: Optional[str] = None
    offset_msg_id: Optional[str] = None
    tags: Optional[str] = None
    keys: Optional[tuple] = None
    store_host: Optional[str] = None
    client_host: Optional[str] = None
    body_length: Optional[int] = None
    cost_time: Optional[int] = None
    msg_type: Optional[str] = None
    success: Optional[bool] = None
    request_id: Optional[str] = None
    retry_times: Optional[int] = None
    context_code: Optional[int] = None
    transaction_id: Optional[str] = None
    transaction_state: Optional[str] = None
    from_transaction_check: Optional[bool] = None


def java_split(text: str, sep: str) -> list[str]:
    """``String.split`` of one literal character: trailing empty strings are dropped."""
    parts = text.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    if parts == [""] and text:      # Java: a text of separators only splits to nothing
        return []
    return parts


def _text(v: str) -> Optional[str]:
    return None if v == "null" else v      # the encoder appends a Java null as "null"


def _keys(v: str) -> Optional[tuple]:
    v = _text(v)
    return None if v is None else tuple(k for k in v.split(" ") if k)


def _bool(v: str) -> bool:
    return v.lower() == "true"              # Boolean.parseBoolean


def parse_trace_events(body: str, *, file: Optional[str] = None, offset: Optional[int] = None) -> list[TraceEvent]:
    """The events of one trace message body; ``file`` and ``offset`` name the message in errors."""
    events = []
    for n, context in enumerate(java_split(body, FIELD_SPLITOR)):
        line = java_split(context, CONTENT_SPLITOR)
        if not line:            # the decoder reads line[0] of an event of separators only, and throws
            raise CorruptRecordError(f"trace event {n} of the message holds field separators only",
                                     file=file, offset=offset)
        kind = line[0]
        need = MIN_FIELDS.get(kind)
        if need is None:
            continue                        # the client's decoder skips a type it does not know
        if len(line) < need:
            raise CorruptRecordError(f"trace event {n} of the message: {kind} has {len(line)} fields, "
                                     f"the client's decoder needs at least {need}", file=file, offset=offset)
        try:
            events.append(_event(kind, line))
        except (ValueError, IndexError) as exc:
            raise CorruptRecordError(f"trace event {n} of the message: {kind}: {exc}",
                                     file=file, offset=offset) from None
    return events


_JAVA_INT = re.compile(r"[+-]?\d+")     # Character.digit takes every Unicode decimal digit, as \d does
_INT_BITS = {"timestamp": 64}           # Long.parseLong; every other number is an Integer.parseInt


def _int(v: str, name: str) -> int:
    """``Integer.parseInt`` / ``Long.parseLong``: decimal digits with an optional sign, within range."""
    bits = _INT_BITS.get(name, 32)
    if _JAVA_INT.fullmatch(v) and -(1 << (bits - 1)) <= int(v) < (1 << (bits - 1)):
        return int(v)
    raise ValueError(f"{name} {v!r} is not a {bits}-bit number")


def _event(kind: str, f: list[str]) -> TraceEvent:
    if kind == "Pub":
        t = _int(f[11], "msgType")
        if not 0 <= t < len(MESSAGE_TYPES):
            raise ValueError(f"msgType {t} is not a MessageType ordinal")
        extra = {}
        if len(f) == 13:
            extra["success"] = _bool(f[12])
        elif len(f) >= 14:
            extra.update(offset_msg_id=_text(f[12]), success=_bool(f[13]))
            if len(f) >= 15:
                extra["client_host"] = _text(f[14])
        return TraceEvent("Pub", _int(f[1], "timestamp"), _text(f[2]), _text(f[3]), topic=_text(f[4]),
                          msg_id=_text(f[5]), tags=_text(f[6]), keys=_keys(f[7]), store_host=_text(f[8]),
                          body_length=_int(f[9], "bodyLength"), cost_time=_int(f[10], "costTime"),
                          msg_type=MESSAGE_TYPES[t], **extra)
    if kind == "SubBefore":
        return TraceEvent("SubBefore", _int(f[1], "timestamp"), _text(f[2]), _text(f[3]), request_id=_text(f[4]),
                          msg_id=_text(f[5]), retry_times=_int(f[6], "retryTimes"), keys=_keys(f[7]))
    if kind == "SubAfter":
        extra = {}
        if len(f) >= 7:
            extra["context_code"] = _int(f[6], "contextCode")
        if len(f) >= 9:
            extra.update(timestamp_ms=_int(f[7], "timestamp"), group=_text(f[8]))
        return TraceEvent("SubAfter", request_id=_text(f[1]), msg_id=_text(f[2]), cost_time=_int(f[3], "costTime"),
                          success=_bool(f[4]), keys=_keys(f[5]), **extra)
    if kind == "EndTransaction":
        t = _int(f[9], "msgType")
        if not 0 <= t < len(MESSAGE_TYPES):
            raise ValueError(f"msgType {t} is not a MessageType ordinal")
        if f[11] not in TRANSACTION_STATES:
            raise ValueError(f"transactionState {f[11]!r} is not a LocalTransactionState")
        return TraceEvent("EndTransaction", _int(f[1], "timestamp"), _text(f[2]), _text(f[3]), topic=_text(f[4]),
                          msg_id=_text(f[5]), tags=_text(f[6]), keys=_keys(f[7]), store_host=_text(f[8]),
                          msg_type=MESSAGE_TYPES[t], transaction_id=_text(f[10]), transaction_state=f[11],
                          from_transaction_check=_bool(f[12]))
    return TraceEvent("Recall", _int(f[1], "timestamp"), _text(f[2]), _text(f[3]), topic=_text(f[4]),
                      msg_id=_text(f[5]), success=_bool(f[6]))
