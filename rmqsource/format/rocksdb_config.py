"""Configs the broker keeps in RocksDB: key/value codecs (pure, no I/O; Java twin: RocksDbConfig.java).

Two RocksDB config layouts exist beside the JSON files of ``ConsumerOffsetManager`` (``config/consumerOffset.json``,
``topic@group`` -> ``{queueId: nextOffset}``, and ``config/lmqConsumerOffset.json`` of the same shape for LMQ
topics).

**Config v2** (``configManagerVersion=v2``, RocketMQ 5.3.2+; ``broker/config/v2/ConfigStorage``,
``ConsumerOffsetManagerV2``, ``ConfigHelper``, ``TableId``, ``TablePrefix``, ``RecordPrefix``): one RocksDB under
``{storePathRootDir}/config/rdb/``, column family ``default`` only, typed keys ("tables" over one key space,
the TiDB key/value mapping). No ``topics.json``, ``subscriptionGroup.json`` or ``consumerOffset.json`` is written.
All integers big-endian, strings UTF-8::

    key prefix    [table-prefix u8 = 1 (TablePrefix.TABLE)][table-id u16][record-prefix u8]
    table ids     1 CONSUMER_OFFSET, 2 PULL_OFFSET, 3 TOPIC, 4 SUBSCRIPTION_GROUP
    record kinds  1 DATA_VERSION, 2 DATA

    data version  key   [prefix, record 1]["data_version" (12 bytes ASCII)]
                  value [state-machine-version i64][timestamp ms i64][counter i64]       (24 bytes)

    offset        key   [prefix, table 1 or 2, record 2][group-len u16][group][CTRL_1 = 0x01]
                        [topic-len u16][topic][CTRL_1 = 0x01][queue-id i32]
                  value [offset i64]                                                        (8 bytes)

    topic / group key   [prefix, table 3 or 4, record 2][name-len u16][name]
                  value [serialization u8 = 1 (JSON)][fastjson2 TopicConfig / SubscriptionGroupConfig]

A topic or group value is what ``JSON.toJSONBytes`` (fastjson2) makes of the bean: compact, fields sorted by
name, ``{"attributes":{},"order":false,"perm":6,"readQueueNums":4,...}``. Every write of a record comes with
its table's data-version record in the same batch, ``counter`` one up per record (``DataVersion.nextVersion``).

Table 1 holds the committed offsets (``commitOffset``: the next queue offset the group consumes), LMQ topics'
included (the broker keeps those only here, not in memory); table 2 the pull offsets (``commitPullOffset``, the
next offset a POP/pull request starts at), which are not consumer progress. Range deletes end a group's or a
topic's keys at ``CTRL_2 = 0x02`` (deleted keys are simply absent to a reader).

**Config v1 in RocksDB** (5.1-5.3 with ``storeType=defaultRocksDB``: ``broker/config/v1/RocksDBConfigManager``,
``RocksDBConsumerOffsetManager``, ``RocksDBOffsetSerializeWrapper``): ``config/consumerOffsets/`` (a RocksDB of its
own; with ``useSingleRocksDBForAllConfigs``: ``config/metadata/``, column families ``consumerOffset`` and
``consumerOffsetVersion``). Data column family ``default``: key ``topic@group`` (UTF-8), value the JSON
``{"offsetTable":{"<queueId>":<offset>,...}}``. Version column family ``kvDataVersion``: key
``kvDataVersionKey``, value the JSON ``DataVersion`` ``{"counter":..,"stateVersion":..,"timestamp":..}``.
On load the broker merges: when ``consumerOffset.json`` exists and its ``dataVersion.counter`` is larger than the
RocksDB one, the JSON file's table replaces the RocksDB one.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Optional

from ..errors import FormatError

__all__ = [
    "CTRL_1", "CTRL_2", "DATA_VERSION_KEY", "RecordPrefix", "SERIALIZATION_JSON", "TABLE_PREFIX", "TableId",
    "V1_DATA_VERSION_CF", "V1_DATA_VERSION_KEY", "V1_SINGLE_DB_OFFSET_CF", "V1_SINGLE_DB_VERSION_CF",
    "V2DataVersion", "V2OffsetKey", "decode_v1_data_version_counter", "decode_v1_offset_record",
    "decode_v2_config_value", "decode_v2_data_version", "decode_v2_name_key", "decode_v2_offset_key",
    "decode_v2_offset_value", "encode_v2_config_value", "encode_v2_data_version", "encode_v2_name_key",
    "encode_v2_offset_key", "encode_v2_offset_value", "next_v2_data_version", "v2_data_version_key",
    "v2_table_prefix",
]

TABLE_PREFIX = 1                       # TablePrefix.TABLE
CTRL_0, CTRL_1, CTRL_2 = 0, 1, 2       # AbstractRocksDBStorage.CTRL_*
DATA_VERSION_KEY = b"data_version"     # ConfigStorage.DATA_VERSION_KEY_BYTES
SERIALIZATION_JSON = 1                 # SerializationType.JSON
MAX_NAME_BYTES = 0x7FFF                # a Java short length

V1_DATA_VERSION_CF = "kvDataVersion"
V1_DATA_VERSION_KEY = b"kvDataVersionKey"
V1_SINGLE_DB_OFFSET_CF = "consumerOffset"
V1_SINGLE_DB_VERSION_CF = "consumerOffsetVersion"


class TableId(IntEnum):
    UNSPECIFIED = 0
    CONSUMER_OFFSET = 1
    PULL_OFFSET = 2
    TOPIC = 3
    SUBSCRIPTION_GROUP = 4


class RecordPrefix(IntEnum):
    UNSPECIFIED = 0
    DATA_VERSION = 1
    DATA = 2


_PREFIX = struct.Struct(">BhB")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_DATA_VERSION = struct.Struct(">qqq")


@dataclass(frozen=True)
class V2OffsetKey:
    table: TableId            # CONSUMER_OFFSET or PULL_OFFSET
    group: str
    topic: str
    queue_id: int


@dataclass(frozen=True)
class V2DataVersion:
    state_version: int
    timestamp_ms: int
    counter: int


def v2_table_prefix(table: TableId, record: RecordPrefix = RecordPrefix.DATA) -> bytes:
    """The 4-byte prefix all keys of ``table``'s ``record`` kind start with (a prefix scan's lower bound)."""
    return _PREFIX.pack(TABLE_PREFIX, int(table), int(record))


def v2_data_version_key(table: TableId) -> bytes:
    return v2_table_prefix(table, RecordPrefix.DATA_VERSION) + DATA_VERSION_KEY


def _name(key: bytes, pos: int, what: str, file: Optional[str]) -> tuple[str, int]:
    if pos + 2 > len(key):
        raise FormatError(f"offset key {key[:120].hex()}: {what} length past the key's end", file=file, offset=pos)
    (n,) = _U16.unpack_from(key, pos)
    pos += 2
    if n == 0 or n > MAX_NAME_BYTES or pos + n > len(key):
        raise FormatError(f"offset key {key[:120].hex()}: {what} length {n} does not fit the {len(key)}-byte key",
                          file=file, offset=pos - 2)
    try:
        text = key[pos:pos + n].decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError(f"offset key {key[:120].hex()}: {what} is not UTF-8", file=file, offset=pos) from None
    return text, pos + n


def _data_table(key: bytes, tables: tuple, what: str, file: Optional[str]) -> int:
    """The table id of a data record's key prefix, which must be one of ``tables``; FormatError otherwise."""
    tp, table, record = _PREFIX.unpack_from(key, 0)
    if tp != TABLE_PREFIX or table not in tables or record != RecordPrefix.DATA:
        raise FormatError(f"key {key[:120].hex()} is not a {what} record "
                          f"(prefix {tp}, table {table}, record {record})", file=file)
    return table


def decode_v2_offset_key(key: bytes, file: Optional[str] = None) -> V2OffsetKey:
    """A consumer-offset or pull-offset key of table 1 or 2; FormatError for anything else."""
    key = bytes(key)
    if len(key) < 4 + 2 + 1 + 1 + 2 + 1 + 1 + 4:
        raise FormatError(f"offset key {key[:120].hex()} is {len(key)} bytes, shorter than any offset key",
                          file=file)
    table = _data_table(key, (TableId.CONSUMER_OFFSET, TableId.PULL_OFFSET), "consumer/pull offset", file)
    group, pos = _name(key, 4, "group", file)
    if key[pos:pos + 1] != bytes([CTRL_1]):
        raise FormatError(f"offset key {key[:120].hex()}: no CTRL_1 after the group", file=file, offset=pos)
    topic, pos = _name(key, pos + 1, "topic", file)
    if key[pos:pos + 1] != bytes([CTRL_1]):
        raise FormatError(f"offset key {key[:120].hex()}: no CTRL_1 after the topic", file=file, offset=pos)
    pos += 1
    if len(key) != pos + 4:
        raise FormatError(f"offset key {key[:120].hex()}: {len(key) - pos} bytes after the topic, expected a "
                          f"4-byte queue id", file=file, offset=pos)
    (qid,) = _I32.unpack_from(key, pos)
    if qid < 0:
        raise FormatError(f"offset key {key[:120].hex()}: queue id {qid} < 0", file=file, offset=pos)
    return V2OffsetKey(TableId(table), group, topic, qid)


def v2_offset_group_prefix(group: str, table: TableId = TableId.CONSUMER_OFFSET) -> bytes:
    """The start every offset key of ``group`` shares (a prefix scan reads the group's offsets)."""
    g = group.encode("utf-8")
    return v2_table_prefix(table) + _U16.pack(len(g)) + g + bytes([CTRL_1])


def encode_v2_offset_key(group: str, topic: str, queue_id: int,
                         table: TableId = TableId.CONSUMER_OFFSET) -> bytes:
    """``ConsumerOffsetManagerV2.keyOfConsumerOffset`` / ``keyOfPullOffset``."""
    t = topic.encode("utf-8")
    return v2_offset_group_prefix(group, table) + _U16.pack(len(t)) + t + bytes([CTRL_1]) + _I32.pack(queue_id)


def decode_v2_offset_value(value: bytes, file: Optional[str] = None) -> int:
    if len(value) != 8:
        raise FormatError(f"offset value is {len(value)} bytes, expected an 8-byte big-endian long", file=file)
    return _I64.unpack(bytes(value))[0]


def encode_v2_offset_value(offset: int) -> bytes:
    return _I64.pack(offset)


def decode_v2_data_version(value: bytes, file: Optional[str] = None) -> V2DataVersion:
    if len(value) != _DATA_VERSION.size:
        raise FormatError(f"data version value is {len(value)} bytes, expected 24", file=file)
    return V2DataVersion(*_DATA_VERSION.unpack(bytes(value)))


def encode_v2_data_version(dv: V2DataVersion) -> bytes:
    return _DATA_VERSION.pack(dv.state_version, dv.timestamp_ms, dv.counter)


def next_v2_data_version(current: Optional[V2DataVersion], records: int, now_ms: int) -> V2DataVersion:
    """The data version after ``records`` writes, each stamped as ``ConfigHelper.stampDataVersion`` does
    (counter one up, timestamp now; the state version of a store without DLedger stays 0)."""
    if current is None:
        return V2DataVersion(0, now_ms, records)
    return V2DataVersion(current.state_version, now_ms, current.counter + records)


def encode_v2_name_key(table: TableId, name: str) -> bytes:
    """A topic (table 3) or subscription-group (table 4) key: ``ConfigHelper.keyBufOf``."""
    raw = name.encode("utf-8")
    if not 0 < len(raw) <= MAX_NAME_BYTES:
        raise FormatError(f"name {name[:120]!r} is {len(raw)} bytes, not 1..{MAX_NAME_BYTES}")
    return v2_table_prefix(table) + _U16.pack(len(raw)) + raw


def decode_v2_name_key(key: bytes, file: Optional[str] = None) -> tuple[TableId, str]:
    """(table, name) of a topic or subscription-group key; FormatError for anything else."""
    key = bytes(key)
    if len(key) < 4:
        raise FormatError(f"key {key[:120].hex()} is shorter than a table prefix", file=file)
    table = _data_table(key, (TableId.TOPIC, TableId.SUBSCRIPTION_GROUP), "topic/group", file)
    name, pos = _name(key, 4, "name", file)
    if pos != len(key):
        raise FormatError(f"key {key[:120].hex()}: {len(key) - pos} bytes after the name", file=file, offset=pos)
    return TableId(table), name


def encode_v2_config_value(config: dict) -> bytes:
    """``ConfigHelper.valueBufOf(config, JSON)``: the serialization byte, then fastjson2's compact JSON of the
    bean (fields by name; the names rmqsource writes are ASCII, other text goes as UTF-8 as fastjson2 does)."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return bytes([SERIALIZATION_JSON]) + text.encode("utf-8")


def decode_v2_config_value(value: bytes, file: Optional[str] = None) -> dict:
    """The JSON object of a topic or group value; FormatError when it is not one (or not JSON-serialized)."""
    value = bytes(value)
    if not value or value[0] != SERIALIZATION_JSON:
        raise FormatError(f"config value starts with {value[:1].hex() or 'nothing'}, not the JSON "
                          f"serialization byte {SERIALIZATION_JSON}", file=file)
    try:
        doc = json.loads(value[1:].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"config value is not JSON: {exc}", file=file) from None
    if not isinstance(doc, dict):
        raise FormatError(f"config value is a JSON {type(doc).__name__}, expected an object", file=file)
    return doc


def decode_v1_offset_record(key: bytes, value: bytes, file: Optional[str] = None) -> tuple[str, dict[int, int]]:
    """One 5.2-layout record: (``topic@group``, ``{queueId: offset}``) from the key and the wrapper JSON."""
    try:
        topic_at_group = bytes(key).decode("utf-8")
        doc = json.loads(bytes(value).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"consumer offset record {bytes(key)[:120]!r}: {exc}", file=file) from None
    table = doc.get("offsetTable") if isinstance(doc, dict) else None
    if not isinstance(table, dict):
        raise FormatError(f"consumer offset record {topic_at_group[:120]!r}: value has no offsetTable object",
                          file=file)
    out: dict[int, int] = {}
    for qid, off in table.items():
        try:
            q, o = int(qid), int(off)
        except (TypeError, ValueError):
            raise FormatError(f"consumer offset record {topic_at_group[:120]!r}: {qid!r}: {off!r} is not "
                              f"queueId: offset", file=file) from None
        if isinstance(off, bool) or q < 0:
            raise FormatError(f"consumer offset record {topic_at_group[:120]!r}: {qid!r}: {off!r} is not "
                              f"queueId: offset", file=file)
        out[q] = o
    return topic_at_group, out


def decode_v1_data_version_counter(value: Optional[bytes]) -> int:
    """``kvDataVersion`` JSON's counter (0 when absent or unreadable, as the broker's ``new DataVersion()``)."""
    if not value:
        return 0
    try:
        doc = json.loads(bytes(value).decode("utf-8"))
        counter = doc.get("counter", 0) if isinstance(doc, dict) else 0
        return int(counter) if not isinstance(counter, bool) else 0
    except (UnicodeDecodeError, ValueError, TypeError):
        return 0
