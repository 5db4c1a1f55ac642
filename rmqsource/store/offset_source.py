"""Where the broker keeps committed consumer offsets, and what they are (Java twin: ConsumerOffsetSource.java).

One reader over every place a RocketMQ broker persists ``ConsumerOffsetManager``'s table, chosen from what the
store holds, the way the broker chooses at start-up (codecs and byte layouts:
:mod:`rmqsource.format.rocksdb_config`):

=================  ==========================================  ============================================
source             files                                       written by
=================  ==========================================  ============================================
``rocksdb-v2``     ``config/rdb/`` (RocksDB, typed keys)       ``configManagerVersion=v2`` (5.3.2+)
``rocksdb-v1``     ``config/consumerOffsets/`` or              ``storeType=defaultRocksDB`` with config v1
                   ``config/metadata/`` (RocksDB, JSON values)  (5.1-5.3); merged with consumerOffset.json
                                                               when the JSON file's dataVersion is newer
``json``           ``config/consumerOffset.json`` (+ ``.bak``)  every other broker (4.x, 5.x defaults)
``none``           none of them                                a store no group ever committed into
=================  ==========================================  ============================================

``config/lmqConsumerOffset.json`` (``LmqConsumerOffsetManager``, same shape as consumerOffset.json) is merged
into the ``json`` and ``rocksdb-v1`` sources (entries of the main source win); a v2 broker keeps LMQ offsets in
``config/rdb`` and ignores the file.

RocksDB is never opened in the broker's folder: :class:`~rmqsource.io.rocksdb.ReadOnlyRocksDb` (the io layer's
one read-only opener, which the RocksDB ConsumeQueues use too) opens a temporary shadow of it, because even a
read-only open by ``rocksdict`` writes a file into the database folder. Nothing under the store changes.

Errors: a RocksDB config that cannot be read (``rocksdict`` not installed, a damaged database) raises
:class:`~rmqsource.errors.StoreError` naming the folder; it is never reported as "no consumer groups".
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Optional

from ..errors import FormatError, OptionError, StoreError
from ..format import rocksdb_config as rc
from ..io.durable import load_with_bak
from ..io.rocksdb import DEFAULT_CF, ReadOnlyRocksDb, RocksDbOpenError, is_rocksdb, rocksdict_available
from .consumer_offsets import CONSUMER_OFFSET_FILE_NAME, OffsetEntry, decode_consumer_offsets

__all__ = [
    "CommittedOffsets", "LMQ_OFFSET_FILE_NAME", "MESSAGE_REQUEST_MODE_FILE_NAME", "OffsetSource",
    "load_committed_offsets", "locate_offset_source", "pop_pairs", "refuse_group_commit", "request_mode",
]

LMQ_OFFSET_FILE_NAME = "lmqConsumerOffset.json"
MESSAGE_REQUEST_MODE_FILE_NAME = "messageRequestMode.json"
V2_DIR = "rdb"
V1_DIR = "consumerOffsets"
V1_SINGLE_DIR = "metadata"
ROCKSDB_EXTRA_HINT = "pip install 'rmqsource[rocksdb]' (rocksdict)"
MAX_ROCKSDB_ENTRIES = 50_000_000          # bound of a table scan (LMQ offsets can be millions)


@dataclass(frozen=True)
class OffsetSource:
    """Which store of consumer offsets a broker uses for this store root."""
    kind: str                 # rocksdb-v2 | rocksdb-v1 | json | none
    path: str                 # the RocksDB folder or the JSON file (the one that would be read)
    writable: bool            # rmqsource commits into consumerOffset.json and config/rdb

    @property
    def description(self) -> str:
        rel = os.path.join("config", os.path.basename(self.path))
        return {
            "rocksdb-v2": f"RocksDB {rel}/ (configManagerVersion=v2)",
            "rocksdb-v1": f"RocksDB {rel}/ (storeType=defaultRocksDB, config v1)",
            "json": f"{rel}",
            "none": "no config/consumerOffset.json and no RocksDB config",
        }[self.kind]


@dataclass(frozen=True)
class CommittedOffsets:
    """The committed offsets of every group, and where they came from."""
    source: OffsetSource
    entries: tuple[OffsetEntry, ...] = ()
    files: tuple[str, ...] = ()          # what was read (a .bak, the LMQ file ...)
    notes: tuple[str, ...] = field(default=())

    def offsets_for_group(self, group: str) -> dict[str, dict[int, int]]:
        out: dict[str, dict[int, int]] = {}
        for e in self.entries:
            if e.group == group:
                out.setdefault(e.topic, {})[e.queue_id] = e.offset
        return {t: dict(sorted(q.items())) for t, q in sorted(out.items())}


def locate_offset_source(root: str | os.PathLike) -> OffsetSource:
    """The source the broker would load offsets from (no file is opened but for existence checks)."""
    config = os.path.join(os.fspath(root), "config")
    v2 = os.path.join(config, V2_DIR)
    if is_rocksdb(v2):
        return OffsetSource("rocksdb-v2", v2, True)
    for name in (V1_SINGLE_DIR, V1_DIR):
        folder = os.path.join(config, name)
        if is_rocksdb(folder):
            return OffsetSource("rocksdb-v1", folder, False)
    path = os.path.join(config, CONSUMER_OFFSET_FILE_NAME)
    if os.path.exists(path) or os.path.exists(path + ".bak"):
        return OffsetSource("json", path, True)
    return OffsetSource("none", path, True)


def refuse_group_commit(root: str | os.PathLike) -> None:
    """OptionError (one line) when the broker keeps this store's offsets where rmqsource does not write (the
    5.2 RocksDB config; config/rdb of config v2 is written, :mod:`rmqsource.store.config_rdb`)."""
    src = locate_offset_source(root)
    if not src.writable:
        raise OptionError(
            f"option consumerGroup: {os.fspath(root)} keeps consumer offsets in {src.description}, not in "
            f"config/{CONSUMER_OFFSET_FILE_NAME} or config/rdb/; rmqsource does not write into that RocksDB, so "
            f"it does not commit there (set commitOffsets=false to start from the group's offsets without "
            f"committing)")


# ------------------------------------------------------------------------------------------------ RocksDB

@contextmanager
def _open_read_only(folder: str, kind: str) -> Iterator[ReadOnlyRocksDb]:
    """The database opened read-only through the io layer's shadow folder (never in the broker's folder)."""
    if not rocksdict_available():
        raise StoreError(f"{folder}: the broker keeps consumer offsets in RocksDB ({kind}), and reading them needs "
                         f"rocksdict: {ROCKSDB_EXTRA_HINT}")
    try:
        db = ReadOnlyRocksDb(folder, what=f"config ({kind})")
    except RocksDbOpenError as exc:
        raise StoreError(f"{folder}: cannot open the RocksDB config read-only ({kind}): {exc.status}") from None
    with db:
        yield db


def _bounded(items, folder: str):
    for n, item in enumerate(items):
        if n >= MAX_ROCKSDB_ENTRIES:
            raise StoreError(f"{folder}: more than {MAX_ROCKSDB_ENTRIES} records in a consumer offset table")
        yield item


def _read_v2(folder: str) -> list[OffsetEntry]:
    prefix = rc.v2_table_prefix(rc.TableId.CONSUMER_OFFSET)
    out = []
    with _open_read_only(folder, "configManagerVersion=v2") as db:
        for key, value in _bounded(db.items(DEFAULT_CF, from_key=prefix), folder):
            key = bytes(key)
            if not key.startswith(prefix):
                break
            k = rc.decode_v2_offset_key(key, file=folder)
            out.append(OffsetEntry(k.topic, k.group, k.queue_id, rc.decode_v2_offset_value(value, file=folder)))
    return out


def _read_v1(folder: str) -> tuple[dict[str, dict[int, int]], int]:
    """(``topic@group`` -> offsets, the kvDataVersion counter) of a 5.2-layout RocksDB."""
    single = os.path.basename(folder) == V1_SINGLE_DIR
    table: dict[str, dict[int, int]] = {}
    with _open_read_only(folder, "storeType=defaultRocksDB, config v1") as db:
        data_cf = rc.V1_SINGLE_DB_OFFSET_CF if single else DEFAULT_CF
        version_cf = rc.V1_SINGLE_DB_VERSION_CF if single else rc.V1_DATA_VERSION_CF
        # no version column family: a new DataVersion (counter 0)
        counter = rc.decode_v1_data_version_counter(db.get(version_cf, rc.V1_DATA_VERSION_KEY)) \
            if db.has_column_family(version_cf) else 0
        for key, value in _bounded(db.items(data_cf) if db.has_column_family(data_cf) else (), folder):
            name, offsets = rc.decode_v1_offset_record(key, value, file=folder)
            table[name] = offsets
    return table, counter


# ------------------------------------------------------------------------------------------------ JSON

def _json_table(path: str) -> tuple[dict[str, dict[int, int]], Optional[str], int]:
    """(offsetTable, the file read, dataVersion.counter) of a consumerOffset.json-shaped file (empty if absent)."""
    table = load_with_bak(path, decode_consumer_offsets)
    if table is None:
        return {}, None, 0
    dv = table.other_fields.get("dataVersion")
    counter = dv.get("counter", 0) if isinstance(dv, dict) else 0
    return dict(table.offset_table), table.source_file, counter if isinstance(counter, int) else 0


def _entries(table: dict[str, dict[int, int]]) -> list[OffsetEntry]:
    out = []
    for key, queues in table.items():
        parts = key.split("@")
        if len(parts) != 2:              # topic@group@broadcast and the like: not a group's progress
            continue
        for qid, off in queues.items():
            out.append(OffsetEntry(parts[0], parts[1], qid, off))
    return out


def load_committed_offsets(root: str | os.PathLike) -> CommittedOffsets:
    """Every committed ``(group, topic, queue) -> next offset`` of the store, sorted, and its source."""
    root = os.fspath(root)
    src = locate_offset_source(root)
    config = os.path.join(root, "config")
    files: list[str] = []
    notes: list[str] = []
    if src.kind == "rocksdb-v2":
        entries = _read_v2(src.path)
        files.append(src.path)
        for name in (CONSUMER_OFFSET_FILE_NAME, LMQ_OFFSET_FILE_NAME):
            if os.path.exists(os.path.join(config, name)):
                notes.append(f"config/{name} ignored: a configManagerVersion=v2 broker reads config/rdb only")
    else:
        table: dict[str, dict[int, int]] = {}
        if src.kind == "rocksdb-v1":
            table, kv_counter = _read_v1(src.path)
            files.append(src.path)
            json_table, json_file, json_counter = _json_table(os.path.join(config, CONSUMER_OFFSET_FILE_NAME))
            if json_file is not None and json_counter > kv_counter:      # RocksDBConsumerOffsetManager.merge
                table = json_table
                files.append(json_file)
                notes.append(f"{json_file} is newer (dataVersion {json_counter} > {kv_counter}): used, as the "
                             f"broker does on load")
        elif src.kind == "json":
            table, json_file, _ = _json_table(src.path)
            if json_file is not None:
                files.append(json_file)
        lmq_table, lmq_file, _ = _json_table(os.path.join(config, LMQ_OFFSET_FILE_NAME))
        if lmq_file is not None:
            files.append(lmq_file)
            for key, queues in lmq_table.items():
                table.setdefault(key, queues)
        entries = _entries(table)
    entries.sort(key=lambda e: (e.group, e.topic, e.queue_id))
    return CommittedOffsets(src, tuple(entries), tuple(files), tuple(notes))


# ------------------------------------------------------------------------------------------------ POP

def pop_pairs(root: str | os.PathLike) -> set[tuple[str, str]]:
    """(topic, group) pairs ``config/messageRequestMode.json`` names with mode POP (empty when absent)."""
    path = os.path.join(os.fspath(root), "config", MESSAGE_REQUEST_MODE_FILE_NAME)

    def parse(text: str, file: str) -> dict:
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise FormatError(f"not JSON: {exc}", file=file) from None
        if not isinstance(doc, dict):
            raise FormatError("not a JSON object", file=file)
        return doc
    doc = load_with_bak(path, parse) or {}
    out: set[tuple[str, str]] = set()
    table = doc.get("messageRequestModeMap")
    if not isinstance(table, dict):
        return out
    for topic, groups in table.items():
        if not isinstance(groups, dict):
            continue
        for group, setting in groups.items():
            if isinstance(setting, dict) and str(setting.get("mode", "")).upper() == "POP":
                out.add((topic, group))
    return out


def request_mode(topic: str, group: str, pops: set[tuple[str, str]]) -> str:
    """``POP`` for a (topic, group) pair consumed by POP, and for that pair's POP retry topic
    (``%RETRY%group_topic``, 5.x ``%RETRY%group+topic``); ``PULL`` otherwise."""
    if (topic, group) in pops:
        return "POP"
    retry = "%RETRY%" + group
    for t, g in pops:
        if g == group and topic in (f"{retry}_{t}", f"{retry}+{t}"):
            return "POP"
    return "PULL"
