"""RocksDB ConsumeQueues (``storeType=defaultRocksDB``, RocketMQ 5.2+): keys and values (spec §3, RocksDB).

With ``storeType=defaultRocksDB`` the broker keeps its ConsumeQueues in one RocksDB database at
``{storePathRootDir}/consumequeue/`` (``CURRENT``, ``IDENTITY``, ``MANIFEST-*``, ``OPTIONS-*``, ``*.sst``,
``*.log``) instead of one folder per topic and queue.  The CommitLog and IndexFiles are unchanged.  The
layout below is RocketMQ's ``RocksDBConsumeQueueTable``, ``RocksDBConsumeQueueOffsetTable`` and
``RocksDBConsumeQueueStore`` (5.2-5.5); every integer is big-endian, the topic is UTF-8, and the
separators are the control bytes ``CTRL_0 = 0x00``, ``CTRL_1 = 0x01``, ``CTRL_2 = 0x02``.

Column family ``default``: one entry per ConsumeQueue unit::

    key   = int32 topicLen | 0x01 | topic bytes | 0x01 | int32 queueId | 0x01 | int64 queueOffset
            (18 + topicLen bytes)
    value = int64 commitLogOffset | int32 size | int64 tagsCode | int64 storeTimestamp   (28 bytes)

The key sorts (bytewise, RocksDB's default comparator) by topic length, topic, queue id, then queue
offset, so one queue's units are a contiguous key range ordered by offset: a seek to
``key(topic, queueId, start)`` then ``next()`` reads units ``start, start + 1, ...``.  The first three
value fields are the 20-byte file unit's (spec §3: ``phyOffset, size, tagsCode``); the store time is
added (the broker's time lookup binary-searches it).  Deleting a topic deletes the range
``[prefix + 0x00, prefix + 0x02)`` where ``prefix`` ends after the queue id.  Units are never rewritten
in place; compaction may drop units below the CommitLog's min offset.

Column family ``offset``: per queue its max (and, once corrected, min) unit::

    key   = int32 topicLen | 0x01 | topic bytes | 0x01 | "max" or "min" | 0x01 | int32 queueId
            (14 + topicLen bytes)
    value = int64 commitLogOffset | int64 queueOffset      (16 bytes)

``max`` is written with every dispatched batch: the queue offset (and CommitLog offset) of the queue's
last unit, so the queue's max offset (the next offset to write) is ``queueOffset + 1``; a queue with
no ``max`` entry has no unit.  ``min`` is written lazily when the broker corrects a queue's min offset
against the CommitLog's min offset (often ``(0, 0)``, and for queues that never held a unit), so it is
a hint, not the truth: the min offset is found from the units, as for file queues (spec §3.4).  One
entry is not a queue: topic ``CHECKPOINT_TOPIC`` (``RMQ_SYS_ROCKSDB_OFFSET_TOPIC``), ``max``, queue 0,
whose 8-byte value is the CommitLog offset dispatch has reached (``maxPhyOffset``).

Pure codecs: no I/O (``rmqsource/io/rocksdb.py`` opens the database; twin: RocksDbQueue.java).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .consumequeue import CQ_UNIT_DTYPE

DEFAULT_CF = "default"
OFFSET_CF = "offset"
CTRL_0 = 0x00
CTRL_1 = 0x01
CTRL_2 = 0x02
MAX_TAG = b"max"
MIN_TAG = b"min"
CHECKPOINT_TOPIC = "CHECKPOINT_TOPIC"          # TopicValidator.RMQ_SYS_ROCKSDB_OFFSET_TOPIC
MAX_KEY_LEN = 300                              # RocksDBConsumeQueueStore.MAX_KEY_LEN

CQ_VALUE_SIZE = 28
CQ_VALUE_DTYPE = np.dtype([("phy_offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8"),
                           ("store_timestamp", ">i8")])
assert CQ_VALUE_DTYPE.itemsize == CQ_VALUE_SIZE
CQ_KEY_FIXED_BYTES = 4 + 1 + 1 + 4 + 1 + 8     # the key less the topic's bytes
OFFSET_KEY_FIXED_BYTES = 4 + 1 + 1 + 3 + 1 + 4
OFFSET_VALUE_SIZE = 16

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_CQ_VALUE = struct.Struct(">qiqq")
_OFFSET_VALUE = struct.Struct(">qq")


def _topic_head(topic: str) -> bytes:
    t = topic.encode("utf-8")
    return _INT.pack(len(t)) + bytes([CTRL_1]) + t + bytes([CTRL_1])


def cq_queue_prefix(topic: str, queue_id: int) -> bytes:
    """The bytes every unit key of (topic, queueId) starts with (up to the separator before the offset)."""
    return _topic_head(topic) + _INT.pack(queue_id) + bytes([CTRL_1])


def encode_cq_key(topic: str, queue_id: int, queue_offset: int) -> bytes:
    return cq_queue_prefix(topic, queue_id) + _LONG.pack(queue_offset)


@dataclass(frozen=True)
class CqKey:
    topic: str
    queue_id: int
    queue_offset: int


def decode_cq_key(key: bytes) -> Optional[CqKey]:
    """The (topic, queueId, queueOffset) of a ``default`` key; None when the bytes are not one."""
    if len(key) < CQ_KEY_FIXED_BYTES:
        return None
    n = _INT.unpack_from(key, 0)[0]
    if n < 0 or len(key) != CQ_KEY_FIXED_BYTES + n or key[4] != CTRL_1 or key[5 + n] != CTRL_1 \
            or key[10 + n] != CTRL_1:
        return None
    try:
        topic = key[5:5 + n].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return CqKey(topic, _INT.unpack_from(key, 6 + n)[0], _LONG.unpack_from(key, 11 + n)[0])


def queue_offset_of_cq_key(key: bytes) -> int:
    """The queue offset (the last 8 bytes) of a ``default`` key."""
    return _LONG.unpack_from(key, len(key) - 8)[0]


def encode_cq_value(phy_offset: int, size: int, tags_code: int, store_timestamp_ms: int) -> bytes:
    return _CQ_VALUE.pack(phy_offset, size, tags_code, store_timestamp_ms)


def decode_cq_value(value: bytes) -> tuple[int, int, int, int]:
    """(commitLogOffset, size, tagsCode, storeTimestamp) of a 28-byte ``default`` value."""
    return _CQ_VALUE.unpack_from(value, 0)


def values_to_units(values: bytes) -> np.ndarray:
    """Concatenated 28-byte values as ConsumeQueue units (the file unit's dtype: the store time dropped)."""
    raw = np.frombuffer(values, dtype=CQ_VALUE_DTYPE, count=len(values) // CQ_VALUE_SIZE)
    out = np.empty(len(raw), dtype=CQ_UNIT_DTYPE)
    out["phy_offset"] = raw["phy_offset"]
    out["size"] = raw["size"]
    out["tags_code"] = raw["tags_code"]
    return out


def encode_offset_key(topic: str, queue_id: int, *, max_entry: bool) -> bytes:
    return _topic_head(topic) + (MAX_TAG if max_entry else MIN_TAG) + bytes([CTRL_1]) + _INT.pack(queue_id)


@dataclass(frozen=True)
class OffsetKey:
    topic: str
    queue_id: int
    is_max: bool


def decode_offset_key(key: bytes) -> Optional[OffsetKey]:
    """(topic, queueId, max or min) of an ``offset`` key; None when the bytes are not one."""
    if len(key) < OFFSET_KEY_FIXED_BYTES:
        return None
    n = _INT.unpack_from(key, 0)[0]
    if n < 0 or len(key) != OFFSET_KEY_FIXED_BYTES + n or key[4] != CTRL_1 or key[5 + n] != CTRL_1 \
            or key[9 + n] != CTRL_1:
        return None
    tag = key[6 + n:9 + n]
    if tag not in (MAX_TAG, MIN_TAG):
        return None
    try:
        topic = key[5:5 + n].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return OffsetKey(topic, _INT.unpack_from(key, 10 + n)[0], tag == MAX_TAG)


def encode_offset_value(phy_offset: int, queue_offset: int) -> bytes:
    return _OFFSET_VALUE.pack(phy_offset, queue_offset)


def decode_offset_value(value: bytes) -> Optional[tuple[int, int]]:
    """(commitLogOffset, queueOffset) of a 16-byte ``offset`` value; None for another length."""
    if len(value) != OFFSET_VALUE_SIZE:
        return None
    return _OFFSET_VALUE.unpack(value)


def decode_dispatch_checkpoint(value: bytes) -> Optional[int]:
    """The CommitLog offset dispatch reached (the ``CHECKPOINT_TOPIC`` entry's 8-byte value)."""
    return _LONG.unpack(value)[0] if len(value) == 8 else None
