"""What a config-v2 broker needs in ``{root}/config/rdb/`` to serve a store it did not write.

A broker started with ``configManagerVersion=v2`` (5.3.2+) keeps topics, subscription groups and consumer
offsets in one RocksDB (``TopicConfigManagerV2``, ``SubscriptionGroupManagerV2``, ``ConsumerOffsetManagerV2``)
and never reads ``topics.json`` or ``subscriptionGroup.json``. So the writer records there, when the store
has ``config/rdb/`` (a v2 broker served it) or its settings say ``configManagerVersion=v2``, what
:mod:`rmqsource.store.broker_configs` records in the JSON files for a v1 broker:

* a route for every topic written (table TOPIC), queue numbers only growing, the record as the broker
  writes it (:func:`~rmqsource.store.broker_configs.topic_config_entry`, fastjson2's compact JSON);
* with a ``consumerGroup`` commit, the group (table SUBSCRIPTION_GROUP) and its committed offsets
  (table CONSUMER_OFFSET, never moved back unless asked).

Records of other topics and groups are kept as they are; each table's data-version record goes up by one
per record written, in the same batch (codecs: :mod:`rmqsource.format.rocksdb_config`; the open:
:class:`rmqsource.io.rocksdb.WritableRocksDb`). The caller holds the store's writer lock, or the
consumer-offset lock after checking that no broker holds the store: a running broker also holds the
database's own LOCK, so a write into its folder fails rather than races it.

The Java twin is io/rmqsource/store/ConfigRdb.java.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Callable

from ..errors import FormatError, OptionError, StoreError
from ..format import rocksdb_config as rc
from ..io.rocksdb import ROCKSDB_EXTRA, RocksDbOpenError, WritableRocksDb, is_rocksdb, rocksdict_available
from .broker_configs import as_count, now_ms, group_config_entry, topic_config_entry, topic_queue_nums
from .config import StoreConfig

__all__ = ["CONFIG_V2", "RDB_DIR", "commit_group_offsets", "rdb_path", "record_topic_queues",
           "require_rocksdict_for_configs", "uses_config_rdb"]

CONFIG_V2 = "v2"
RDB_DIR = "rdb"
MAX_RECORDS = 10_000_000          # bound of a table read (LMQ offsets can be millions)


def rdb_path(store_root: str | os.PathLike) -> str:
    return os.path.join(os.fspath(store_root), "config", RDB_DIR)


def uses_config_rdb(store_root: str | os.PathLike, config: StoreConfig) -> bool:
    """True when the broker of this store reads its configs from config/rdb/: the settings say
    ``configManagerVersion=v2``, or they do not say and a v2 broker left the database there.

    ``configManagerVersion=v1`` on a store that has config/rdb/ is refused (OptionError, one line): the writer
    would record topics, groups and offsets in the JSON files a v1 broker reads, while the readers (``rmq lag``,
    ``startingOffsets=group``) go by what the store holds and read config/rdb/; the store alone decides, so
    readers and writers agree."""
    folder = rdb_path(store_root)
    if config.config_manager_version is None:
        return is_rocksdb(folder)
    if config.config_manager_version != CONFIG_V2 and is_rocksdb(folder):
        raise OptionError(f"configManagerVersion={config.config_manager_version}, but {folder} holds the topics, "
                          f"groups and offsets of a config-v2 broker, and readers of this store read them there; "
                          f"leave the setting out (or say v2) to write there too, or move config/rdb/ away first "
                          f"if the next broker runs with configManagerVersion=v1 (it reads only the JSON files)")
    return config.config_manager_version == CONFIG_V2


def require_rocksdict_for_configs() -> None:
    """OptionError (one line) when the RocksDB binding is missing: checked before anything is written."""
    if not rocksdict_available():
        raise OptionError(f"this store's broker keeps topics and groups in RocksDB config/rdb/ "
                          f"(configManagerVersion=v2), and writing them needs the rocksdict package: "
                          f"pip install 'rmqsource[{ROCKSDB_EXTRA}]'")


def _open(store_root: str | os.PathLike) -> WritableRocksDb:
    folder = rdb_path(store_root)
    try:
        return WritableRocksDb(folder, create=True, what="config (configManagerVersion=v2)")
    except RocksDbOpenError as exc:
        raise StoreError(f"{folder}: cannot open the broker's RocksDB config to record topics and groups: "
                         f"{exc.status}") from None


def _stamp(db: WritableRocksDb, table: rc.TableId, records: int, now_ms: int) -> tuple[bytes, bytes]:
    """The table's data-version record after ``records`` writes (a malformed one restarts, as the broker's
    ``onDataVersionLoad`` ignores it)."""
    key = rc.v2_data_version_key(table)
    raw = db.get(key)
    try:
        current = rc.decode_v2_data_version(raw) if raw is not None else None
    except FormatError:
        current = None
    return key, rc.encode_v2_data_version(rc.next_v2_data_version(current, records, now_ms))


def _topic_puts(db: WritableRocksDb, nums: Mapping[str, int]) -> list[tuple[bytes, bytes]]:
    puts = []
    for topic in sorted(nums):
        key = rc.encode_v2_name_key(rc.TableId.TOPIC, topic)
        raw = db.get(key)
        if raw is None:
            puts.append((key, rc.encode_v2_config_value(topic_config_entry(topic, nums[topic], True))))
            continue
        entry = rc.decode_v2_config_value(raw, file=db.folder)
        grown = {k: nums[topic] for k in ("readQueueNums", "writeQueueNums") if as_count(entry.get(k)) < nums[topic]}
        if grown:
            puts.append((key, rc.encode_v2_config_value({**entry, **grown})))
    return puts


def record_topic_queues(store_root: str | os.PathLike, queues: Iterable[tuple[str, int]], *,
                        clock_ms: Callable[[], int] = now_ms) -> bool:
    """Route every topic of ``queues`` in config/rdb/; True when something was written."""
    nums = topic_queue_nums(queues)
    if not nums:
        return False
    with _open(store_root) as db:
        puts = _topic_puts(db, nums)
        if not puts:
            return False
        db.write([*puts, _stamp(db, rc.TableId.TOPIC, len(puts), clock_ms())])
    return True


def _group_offsets(db: WritableRocksDb, group: str) -> dict[tuple[str, int], int]:
    out = {}
    for key, value in db.prefixed(rc.v2_offset_group_prefix(group), MAX_RECORDS):
        k = rc.decode_v2_offset_key(key, file=db.folder)
        out[(k.topic, k.queue_id)] = rc.decode_v2_offset_value(value, file=db.folder)
    return out


def commit_group_offsets(store_root: str | os.PathLike, group: str, offsets: Mapping[str, Mapping[int, int]], *,
                         allow_rewind: bool = False,
                         clock_ms: Callable[[], int] = now_ms) -> dict[str, dict[int, int]]:
    """Commit ``{topic: {queueId: nextOffset}}`` of ``group`` into config/rdb/ (and the group itself when it is
    new); returns the offsets in effect for the queues given, as ``ConsumerOffsets.commit`` does."""
    with _open(store_root) as db:
        stored = _group_offsets(db, group)
        effective: dict[str, dict[int, int]] = {}
        offset_puts = []
        for topic in sorted(offsets):
            for qid in sorted(offsets[topic]):
                offset, old = offsets[topic][qid], stored.get((topic, qid))
                if old is None or offset > old or (allow_rewind and offset != old):
                    offset_puts.append((rc.encode_v2_offset_key(group, topic, qid),
                                        rc.encode_v2_offset_value(offset)))
                    old = offset
                effective.setdefault(topic, {})[qid] = old
        now = clock_ms()
        puts = list(offset_puts)
        if offset_puts:
            puts.append(_stamp(db, rc.TableId.CONSUMER_OFFSET, len(offset_puts), now))
        group_key = rc.encode_v2_name_key(rc.TableId.SUBSCRIPTION_GROUP, group)
        if db.get(group_key) is None:
            puts.append((group_key, rc.encode_v2_config_value(group_config_entry(group, True))))
            puts.append(_stamp(db, rc.TableId.SUBSCRIPTION_GROUP, 1, now))
        if puts:
            db.write(puts)
    return effective

