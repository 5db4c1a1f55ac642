"""CommitLog message record: encode and decode one record (spec §2).

Layout (big-endian; B/S = born/store host field, 8 bytes IPv4 or 20 IPv6;
T = topic-length field, 1 byte for magic v1, 2 bytes for v2)::

    0  TOTALSIZE int32        28 PHYSICALOFFSET int64     48+B  STORETIMESTAMP int64
    4  MAGICCODE int32        36 SYSFLAG int32            56+B  STOREHOST S
    8  BODYCRC int32          40 BORNTIMESTAMP int64      56+B+S RECONSUMETIMES int32
    12 QUEUEID int32          48 BORNHOST B               60+B+S PREPAREDTRANSACTIONOFFSET int64
    16 FLAG int32                                         68+B+S BODYLENGTH int32, BODY
    20 QUEUEOFFSET int64      then TOPICLENGTH (T), TOPIC, PROPERTIESLENGTH int16, PROPERTIES

    totalSize = 74 + B + S + T + bodyLen + topicLen + propLen

A blank end-of-segment record is ``int32 remaining, int32 BLANK_MAGIC``.

Decoding never guesses: :func:`decode_record` returns a :class:`Decoded` whose
``kind`` says MESSAGE, BLANK, END (no record starts here: zeros or an unknown
magic) or CORRUPT (a record header whose lengths or CRC do not hold).  Only the
caller knows whether that is an expected torn tail or an error.
"""

from __future__ import annotations

import enum
import re
import struct
import zlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Optional

from .. import limits
from .msgid import create_offset_msg_id, host_bytes_to_str
from .properties import CRC32, KEYS, TAGS, UNIQ_KEY, parse_properties

MAGIC_V1 = -626843481            # 0xDAA320A7
MAGIC_V2 = -626843477            # 0xDAA320AB, 5.x: 2-byte topic length
BLANK_MAGIC = -875286124         # 0xCBD43194
PHY_OFFSET_POS = 28              # where PHYSICALOFFSET sits in a record (both magics)

# sysFlag bits (MessageSysFlag)
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_MASK = 0xC
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOST_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_TYPE_MASK = 0x700

TRANSACTION_TYPE_NAMES = {
    TRANSACTION_NOT_TYPE: "NOT_TYPE",
    TRANSACTION_PREPARED_TYPE: "PREPARED_TYPE",
    TRANSACTION_COMMIT_TYPE: "COMMIT_TYPE",
    TRANSACTION_ROLLBACK_TYPE: "ROLLBACK_TYPE",
}

_HEAD = struct.Struct(">iiiiiqqiq")          # totalSize .. bornTimestamp: 48 bytes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_SIZE_MAGIC = struct.Struct(">ii")
_TAIL = struct.Struct(">iqi")                # reconsumeTimes, preparedTxOffset, bodyLen

CRC_PROPERTY_BYTES = 20                      # "__CRC32#" 0x01 + 10 digits + 0x02

# Bytes no broker-written topic holds (TopicValidator refuses them, and a topic names a ConsumeQueue
# directory): control bytes, DEL and path separators.
_BAD_TOPIC_BYTE = re.compile(rb"[\x00-\x1f\x7f/\\]")


def topic_bytes_problem(raw: bytes) -> Optional[str]:
    """Why stored topic bytes cannot come from a broker (then the record is corrupt), or None.

    Empty, a control byte, DEL, ``/`` or ``\\``, ``.``/``..``, or invalid UTF-8 (Java encodes a
    String's UTF-16 into valid UTF-8).  Stricter TopicValidator rules are not applied: brokers create
    some topics (broker and cluster names) without them.
    """
    if not raw:
        return "empty topic"
    m = _BAD_TOPIC_BYTE.search(raw)
    if m is not None:
        return f"topic byte 0x{raw[m.start()]:02X} at topic position {m.start()}"
    if raw in (b".", b".."):
        return f"topic {raw.decode()!r}"
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"topic bytes are not UTF-8 at topic position {exc.start}"
    return None


def host_field_bytes(v6: bool) -> int:
    return 20 if v6 else 8


def record_size(*, body_len: int, topic_len: int, props_len: int,
                born_v6: bool = False, store_v6: bool = False, magic_v2: bool = False) -> int:
    """totalSize from the variable lengths (spec §2.3)."""
    return (74 + host_field_bytes(born_v6) + host_field_bytes(store_v6) + (2 if magic_v2 else 1)
            + body_len + topic_len + props_len)


def body_crc(body: bytes) -> int:
    """BODYCRC: CRC-32 of the stored body with the top bit cleared."""
    return zlib.crc32(body) & 0x7FFFFFFF


class Kind(enum.Enum):
    MESSAGE = "MESSAGE"
    BLANK = "BLANK"        # end-of-segment padding; next data is in the next segment
    END = "END"            # no record starts here (zeros, unknown magic)
    CORRUPT = "CORRUPT"    # a record header whose contents do not hold together


@dataclass(frozen=True)
class MessageRecord:
    """One decoded CommitLog record, with stored values exactly as on disk."""

    store_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    phy_offset: int
    sys_flag: int
    born_timestamp_ms: int
    born_addr: bytes
    born_port: int
    store_timestamp_ms: int
    store_addr: bytes
    store_port: int
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties_raw: bytes
    raw: bytes = field(default=b"", repr=False, compare=False)

    @cached_property
    def properties(self) -> dict[str, str]:
        return parse_properties(self.properties_raw)

    @property
    def tags(self) -> Optional[str]:
        return self.properties.get(TAGS)

    @property
    def keys(self) -> Optional[str]:
        return self.properties.get(KEYS)

    @property
    def uniq_key(self) -> Optional[str]:
        return self.properties.get(UNIQ_KEY)

    @property
    def born_host(self) -> str:
        return host_bytes_to_str(self.born_addr, self.born_port)

    @property
    def store_host(self) -> str:
        return host_bytes_to_str(self.store_addr, self.store_port)

    @property
    def msg_id(self) -> str:
        """Offset msgId: store address + port + this record's physical offset."""
        return create_offset_msg_id(self.store_addr, self.store_port, self.phy_offset)

    @property
    def transaction_type(self) -> int:
        return self.sys_flag & TRANSACTION_MASK

    @property
    def enters_consume_queue(self) -> bool:
        """NOT and COMMIT records get a ConsumeQueue unit; PREPARED/ROLLBACK do not."""
        return self.transaction_type in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)


@dataclass(frozen=True)
class Decoded:
    kind: Kind
    size: int = 0                      # bytes this entry spans (MESSAGE/BLANK/CORRUPT with known size)
    record: Optional[MessageRecord] = None
    reason: str = ""


_END_ZERO = Decoded(Kind.END, 0, None, "no record (zero bytes)")


def decode_record(buf, pos: int, limit: int, *, check_crc: bool = False,
                  keep_raw: bool = False, max_record_bytes: int = limits.MAX_RECORD_BYTES_READ) -> Decoded:
    """Decode the record at ``buf[pos:]``; ``limit`` is the end of its segment in ``buf``.

    Mirrors ``CommitLog.checkMessageAndReturnSize`` (spec §2.13): CORRUPT when the
    stored totalSize disagrees with the lengths inside, when a length points
    outside the segment, or (``check_crc``) when the body CRC is wrong.
    """
    remaining = limit - pos
    if remaining < 8:
        return Decoded(Kind.END, 0, None, f"only {remaining} bytes left in the segment")
    total_size, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    if magic == BLANK_MAGIC:
        return Decoded(Kind.BLANK, remaining, None, "end-of-segment blank record")
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        if total_size == 0 and magic == 0:
            return _END_ZERO
        return Decoded(Kind.END, 0, None, f"unknown magic code 0x{magic & 0xFFFFFFFF:08X}")
    if total_size < limits.MIN_RECORD_BYTES or total_size > remaining or total_size > max_record_bytes:
        return Decoded(Kind.CORRUPT, 0, None,
                       f"totalSize {total_size} outside [{limits.MIN_RECORD_BYTES}, {min(remaining, max_record_bytes)}]")
    end = pos + total_size
    try:
        (_, _, crc, queue_id, flag, queue_offset, phy_offset, sys_flag,
         born_ts) = _HEAD.unpack_from(buf, pos)
        p = pos + 48
        born_len = 16 if sys_flag & BORNHOST_V6_FLAG else 4
        born_addr = bytes(buf[p:p + born_len])
        born_port = _I32.unpack_from(buf, p + born_len)[0]
        p += born_len + 4
        store_ts = _I64.unpack_from(buf, p)[0]
        p += 8
        store_len = 16 if sys_flag & STOREHOST_V6_FLAG else 4
        store_addr = bytes(buf[p:p + store_len])
        store_port = _I32.unpack_from(buf, p + store_len)[0]
        p += store_len + 4
        reconsume, prepared, body_len = _TAIL.unpack_from(buf, p)
        p += 16
        if body_len < 0 or p + body_len > end:
            return Decoded(Kind.CORRUPT, total_size, None, f"body length {body_len} runs past the record end")
        body = bytes(buf[p:p + body_len])
        p += body_len
        if magic == MAGIC_V2:
            if p + 2 > end:
                return Decoded(Kind.CORRUPT, total_size, None, "record ends inside the topic length")
            topic_len = _I16.unpack_from(buf, p)[0]
            p += 2
        else:
            if p + 1 > end:
                return Decoded(Kind.CORRUPT, total_size, None, "record ends inside the topic length")
            topic_len = struct.unpack_from(">b", buf, p)[0]
            p += 1
        if topic_len < 0 or p + topic_len > end:
            return Decoded(Kind.CORRUPT, total_size, None, f"topic length {topic_len} runs past the record end")
        topic_bytes = bytes(buf[p:p + topic_len])
        p += topic_len
        if p + 2 > end:
            return Decoded(Kind.CORRUPT, total_size, None, "record ends inside the properties length")
        props_len = _I16.unpack_from(buf, p)[0]
        p += 2
        if props_len < 0 or p + props_len > end:
            return Decoded(Kind.CORRUPT, total_size, None, f"properties length {props_len} runs past the record end")
        props = bytes(buf[p:p + props_len])
        p += props_len
    except struct.error:  # fixed fields past the end of buf (IPv6 host flags on a short record)
        return Decoded(Kind.CORRUPT, total_size, None, "truncated record")
    if p != end:
        return Decoded(Kind.CORRUPT, total_size, None,
                       f"totalSize {total_size} but fields add up to {p - pos}")
    if check_crc and body_crc(body) != crc:
        return Decoded(Kind.CORRUPT, total_size, None,
                       f"body CRC 0x{body_crc(body):08X} does not match stored 0x{crc & 0xFFFFFFFF:08X}")
    problem = topic_bytes_problem(topic_bytes)
    if problem is not None:
        return Decoded(Kind.CORRUPT, total_size, None, problem)
    topic = topic_bytes.decode("utf-8")
    record = MessageRecord(
        store_size=total_size, magic=magic, body_crc=crc, queue_id=queue_id, flag=flag,
        queue_offset=queue_offset, phy_offset=phy_offset, sys_flag=sys_flag,
        born_timestamp_ms=born_ts, born_addr=born_addr, born_port=born_port,
        store_timestamp_ms=store_ts, store_addr=store_addr, store_port=store_port,
        reconsume_times=reconsume, prepared_transaction_offset=prepared,
        body=body, topic=topic, properties_raw=props,
        raw=bytes(buf[pos:end]) if keep_raw else b"",
    )
    return Decoded(Kind.MESSAGE, total_size, record)


def encode_blank(remaining: int) -> bytes:
    """The 8 bytes of an end-of-segment blank record covering ``remaining`` bytes."""
    return _SIZE_MAGIC.pack(remaining, BLANK_MAGIC)


def crc_property_digits(crc: int) -> bytes:
    """10 ASCII digits, least significant first (spec §2.12)."""
    return bytes(48 + (crc // 10 ** k) % 10 for k in range(10))


def encode_record(*, topic: bytes, queue_id: int, flag: int, queue_offset: int, phy_offset: int,
                  sys_flag: int, born_timestamp_ms: int, born_addr: bytes, born_port: int,
                  store_timestamp_ms: int, store_addr: bytes, store_port: int,
                  reconsume_times: int, prepared_transaction_offset: int, body: bytes,
                  properties: bytes, magic_v2: bool = False, append_crc_property: bool = False) -> bytes:
    """Build one record.  ``sys_flag`` must already carry the host v6 bits.

    With ``append_crc_property`` the last 20 bytes of PROPERTIES are the
    ``__CRC32#`` entry over the final record (5.2+ ``enabledAppendPropCRC``);
    a 0x02 is inserted first when the properties do not end with one.
    """
    if append_crc_property:
        if properties and not properties.endswith(b"\x02"):
            properties += b"\x02"
        properties += CRC32.encode() + b"\x01" + b"0" * 10 + b"\x02"
    topic_len_field = struct.pack(">h", len(topic)) if magic_v2 else struct.pack(">b", len(topic))
    parts = [
        b"",  # placeholder for head
        born_addr, _I32.pack(born_port), _I64.pack(store_timestamp_ms),
        store_addr, _I32.pack(store_port),
        _TAIL.pack(reconsume_times, prepared_transaction_offset, len(body)), body,
        topic_len_field, topic, _I16.pack(len(properties)), properties,
    ]
    total = 48 + sum(len(p) for p in parts)
    parts[0] = _HEAD.pack(total, MAGIC_V2 if magic_v2 else MAGIC_V1, body_crc(body), queue_id, flag,
                          queue_offset, phy_offset, sys_flag, born_timestamp_ms)
    data = b"".join(parts)
    if append_crc_property:
        crc = zlib.crc32(data[:total - CRC_PROPERTY_BYTES]) & 0x7FFFFFFF
        data = data[:total - 11] + crc_property_digits(crc) + b"\x02"
    return data
