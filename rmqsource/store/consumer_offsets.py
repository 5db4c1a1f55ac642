"""Consumer-group offsets in ``{root}/config/consumerOffset.json`` (spec §8.2).

RocketMQ's ``ConsumerOffsetManager`` persists ``offsetTable``: key
``"topic@group"`` -> ``{queueId: offset}`` where offset is the **next**
ConsumeQueue logical offset the group will consume.  4.9.x writes only
``offsetTable``; 5.x adds ``dataVersion`` ``{counter, stateVersion, timestamp}``
and the derived ``groupTopicMap`` (group -> set of topics, ignored on load).
Other top-level fields (``lmqOffsetTable`` ...) and keys that are not exactly
``topic@group`` (5.x ``topic@group@broadcast``) are kept as they are.

Writes go through the crash-safe ``MixAll.string2File`` protocol
(:func:`rmqsource.io.durable.string2file`), reads through the ``.bak``
fallback of ``ConfigManager.load``.  Read-modify-write cycles of different
processes are serialized by a POSIX record lock (``lockf``, what Java's
``FileChannel.lock`` takes: the JVM stream's commits join in) on the side file
``consumerOffset.json.lock``, so concurrent commits never lose each other's
updates.  A running broker does not take that lock and overwrites the file
from memory every 5 s, so commits into the store of a live broker (its
``lock`` held by a process that is not an rmqsource writer) are refused.

A store whose broker keeps its configs in RocksDB (``configManagerVersion=v2``: ``config/rdb/`` there, or the
setting given) gets its commits there instead, under the same lock (:mod:`rmqsource.store.config_rdb`).
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import threading
import time
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

from ..errors import FormatError, OptionError, StoreLockedError
from ..format.configjson import dumps_fastjson, loads_fastjson
from ..io.durable import load_with_bak, string2file
from ..io.lock import describe_holder, store_lock_state
from . import config_rdb
from .broker_configs import record_subscription_group
from .config import StoreConfig

__all__ = [
    "CONSUMER_OFFSET_FILE_NAME",
    "ConsumerOffsetTable",
    "ConsumerOffsets",
    "OffsetEntry",
    "TOPIC_GROUP_SEPARATOR",
    "decode_consumer_offsets",
    "encode_consumer_offsets",
]

CONSUMER_OFFSET_FILE_NAME = "consumerOffset.json"
TOPIC_GROUP_SEPARATOR = "@"
LOCK_SUFFIX = ".lock"
JAVA_INT_MAX = 2**31 - 1
JAVA_LONG_MIN = -(2**63)
JAVA_LONG_MAX = 2**63 - 1
DEFAULT_LOCK_TIMEOUT_MS = 30_000
_IN_PROCESS_GUARD = threading.Lock()
_IN_PROCESS: dict[str, threading.Lock] = {}


@dataclass(frozen=True)
class OffsetEntry:
    """One committed offset: next queue offset ``group`` consumes in ``topic``/``queue_id``."""
    topic: str
    group: str
    queue_id: int
    offset: int


@dataclass(frozen=True)
class ConsumerOffsetTable:
    """A decoded consumerOffset.json: ``offsetTable`` plus every other top-level field."""
    offset_table: dict[str, dict[int, int]] = field(default_factory=dict)
    other_fields: dict[str, Any] = field(default_factory=dict)
    source_file: Optional[str] = None    # NAME or NAME.bak it was read from; None if new

    def entries(self) -> list[OffsetEntry]:
        """All ``topic@group`` entries, sorted by group, topic, queue id."""
        out = []
        for key, queues in self.offset_table.items():
            parts = key.split(TOPIC_GROUP_SEPARATOR)
            if len(parts) != 2:
                continue
            topic, group = parts
            for qid, offset in queues.items():
                out.append(OffsetEntry(topic, group, qid, offset))
        out.sort(key=lambda e: (e.group, e.topic, e.queue_id))
        return out

    def offsets_for_group(self, group: str) -> dict[str, dict[int, int]]:
        _check_name("group", group)
        out: dict[str, dict[int, int]] = {}
        for key, queues in self.offset_table.items():
            parts = key.split(TOPIC_GROUP_SEPARATOR)
            if len(parts) == 2 and parts[1] == group:
                out[parts[0]] = dict(sorted(queues.items()))
        return dict(sorted(out.items()))


def _check_name(kind: str, name: Any) -> None:
    if not isinstance(name, str) or not name:
        raise OptionError(f"{kind} must be a non-empty string, got {name!r}")
    if TOPIC_GROUP_SEPARATOR in name:
        raise OptionError(f"{kind} {name!r} contains '@', the topic@group separator of consumerOffset.json")


_DECIMAL_TEXT = re.compile(r"[+-]?[0-9]{1,19}")      # ASCII digits only: "--5", "²", "١" are not numbers here


def _as_int(value: Any) -> Optional[int]:
    """fastjson reads a JSON int or a numeric string into Integer/Long; anything else is None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        if _DECIMAL_TEXT.fullmatch(text):
            return int(text)
    return None


def _short(value: Any, limit: int = 120) -> str:
    """repr of a value from the file, cut so a hostile file cannot blow up an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def decode_consumer_offsets(text: str, file: str = "<consumerOffset.json>") -> ConsumerOffsetTable:
    """Parse and validate a consumerOffset.json document; FormatError names ``file``."""
    doc = loads_fastjson(text, file=file)
    raw_table = doc.get("offsetTable")
    table: dict[str, dict[int, int]] = {}
    if raw_table is not None:
        if not isinstance(raw_table, dict):
            raise FormatError(f"offsetTable is a {type(raw_table).__name__}, expected an object", file=file)
        for key, queues in raw_table.items():
            if queues is None:
                continue
            if not isinstance(key, str) or not isinstance(queues, dict):
                raise FormatError(f"offsetTable entry {_short(key)} is not \"topic@group\":{{queueId:offset}}",
                                  file=file)
            parsed: dict[int, int] = {}
            for qid_raw, offset_raw in queues.items():
                qid = _as_int(qid_raw)
                offset = _as_int(offset_raw)
                if qid is None or not 0 <= qid <= JAVA_INT_MAX:
                    raise FormatError(f"offsetTable[{_short(key)}]: queue id {_short(qid_raw)} is not a Java int >= 0",
                                      file=file)
                if offset is None or not JAVA_LONG_MIN <= offset <= JAVA_LONG_MAX:
                    raise FormatError(f"offsetTable[{_short(key)}][{qid}]: offset {_short(offset_raw)} is not a Java "
                                      f"long", file=file)
                parsed[qid] = offset
            table[key] = parsed
    others = {k: v for k, v in doc.items() if k != "offsetTable"}
    return ConsumerOffsetTable(table, others, file)


def encode_consumer_offsets(table: ConsumerOffsetTable) -> str:
    """fastjson pretty form, fields sorted (``dataVersion``, ``groupTopicMap``, ``offsetTable``)."""
    doc: dict[str, Any] = dict(table.other_fields)
    doc["offsetTable"] = table.offset_table
    return dumps_fastjson(doc)


def _group_topic_map(offset_table: Mapping[str, Any]) -> dict[str, set[str]]:
    """5.x ``ConsumerOffsetManager.getGroupTopicMap``: group -> topics (a Java Set)."""
    out: dict[str, set[str]] = {}
    for key in offset_table:
        parts = key.split(TOPIC_GROUP_SEPARATOR)
        if len(parts) == 2:
            out.setdefault(parts[1], set()).add(parts[0])
    return out


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ConsumerOffsets:
    """Read and commit consumer-group offsets of one store root.

    Every call re-reads the file (no cache), so several processes and
    ``ConsumerOffsets`` objects see each other's commits.  Reads never
    create or modify anything.
    """

    def __init__(self, store_root: str | os.PathLike, *, config: Optional[StoreConfig] = None,
                 lock_timeout_ms: int = DEFAULT_LOCK_TIMEOUT_MS,
                 clock_ms: Callable[[], int] = _now_ms):
        self.store_root = os.fspath(store_root)
        self.config = config if config is not None else StoreConfig()
        if lock_timeout_ms < 0:
            raise OptionError("lock_timeout_ms must be >= 0")
        self.lock_timeout_ms = lock_timeout_ms
        self._clock_ms = clock_ms

    @property
    def path(self) -> str:
        return os.path.join(self.store_root, "config", CONSUMER_OFFSET_FILE_NAME)

    @property
    def lock_path(self) -> str:
        return self.path + LOCK_SUFFIX

    # ---------------------------------------------------------------- reads

    def load(self) -> ConsumerOffsetTable:
        """The current table (``NAME``, else ``NAME.bak``); empty when neither exists."""
        table = load_with_bak(self.path, decode_consumer_offsets)
        return table if table is not None else ConsumerOffsetTable()

    def offsets_for_group(self, group: str) -> dict[str, dict[int, int]]:
        """``{topic: {queueId: offset}}`` committed by ``group`` (keys ``topic@group``)."""
        return self.load().offsets_for_group(group)

    def all_entries(self) -> list[OffsetEntry]:
        return self.load().entries()

    # ---------------------------------------------------------------- writes

    def check_writable(self) -> None:
        """StoreLockedError when a running broker holds the store: its config/ is not ours to write."""
        state = store_lock_state(self.store_root)
        if state.by_broker:
            raise StoreLockedError(
                f"{self.store_root} is in use by a running broker ({describe_holder(state)}): the broker keeps "
                f"consumer offsets in memory and rewrites config/{CONSUMER_OFFSET_FILE_NAME} every few seconds, "
                f"so rmqsource does not commit there. Commit through the broker instead (a RocketMQ consumer of "
                f"the group, or mqadmin resetOffsetByTime), or read without consumerGroup (a Spark checkpoint "
                f"keeps the stream's offsets)")

    @contextmanager
    def _locked(self) -> Iterator[None]:
        # A POSIX record lock (lockf), the kind Java's FileChannel.lock takes, so the JVM stream's
        # commits (ConsumerOffsetsFile.java) and these exclude each other.  Record locks belong to
        # the process, so threads of this process first take a lock of their own.
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        deadline = time.monotonic() + self.lock_timeout_ms / 1000.0
        with _IN_PROCESS_GUARD:
            in_process = _IN_PROCESS.setdefault(os.path.realpath(self.lock_path), threading.Lock())
        if not in_process.acquire(timeout=self.lock_timeout_ms / 1000.0):
            raise StoreLockedError(f"{self.lock_path}: another thread held the consumer-offset lock "
                                   f"for more than {self.lock_timeout_ms} ms")
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                delay_s = 0.001
                # Bounded by the deadline: one attempt per sleep, sleeps grow to 50 ms.
                for _ in range(max(1, self.lock_timeout_ms) * 2 + 2):
                    try:
                        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except OSError as exc:
                        if exc.errno not in (errno.EACCES, errno.EAGAIN):
                            raise
                        if time.monotonic() >= deadline:
                            raise StoreLockedError(
                                f"{self.lock_path}: another process held the consumer-offset lock "
                                f"for more than {self.lock_timeout_ms} ms") from None
                        time.sleep(delay_s)
                        delay_s = min(delay_s * 2, 0.05)
                else:
                    raise StoreLockedError(f"{self.lock_path}: could not take the consumer-offset lock")
                yield
            finally:
                os.close(fd)    # releases the record lock
        finally:
            in_process.release()

    def commit(self, group: str, offsets: Mapping[str, Mapping[int, int]], *,
               allow_rewind: bool = False) -> dict[str, dict[int, int]]:
        """Merge ``{topic: {queueId: nextOffset}}`` of ``group`` into the file.

        Other groups' entries, other queue ids and unknown fields are kept.
        An offset lower than the stored one is ignored unless
        ``allow_rewind=True`` (a retried, older batch must not move a group
        back).  Returns the offsets in effect after the commit for the
        topics/queues given.  Bumps ``dataVersion`` and rebuilds
        ``groupTopicMap`` when the file has them; a new file gets the 5.x
        shape when ``config.engineVersion`` is 5.x.
        """
        _check_name("group", group)
        if not isinstance(offsets, Mapping):
            raise OptionError("offsets must be a mapping {topic: {queueId: offset}}")
        wanted: dict[str, dict[int, int]] = {}
        for topic, queues in offsets.items():
            _check_name("topic", topic)
            if not isinstance(queues, Mapping):
                raise OptionError(f"offsets[{topic!r}] must be a mapping {{queueId: offset}}")
            for qid, offset in queues.items():
                if isinstance(qid, bool) or not isinstance(qid, int) or not 0 <= qid <= JAVA_INT_MAX:
                    raise OptionError(f"topic {topic!r}: queue id {qid!r} is not an int in [0, 2^31-1]")
                if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= JAVA_LONG_MAX:
                    raise OptionError(f"topic {topic!r} queue {qid}: offset {offset!r} is not an int in "
                                      f"[0, 2^63-1]")
                wanted.setdefault(topic, {})[qid] = offset

        self.check_writable()
        with self._locked():
            if config_rdb.uses_config_rdb(self.store_root, self.config):
                return config_rdb.commit_group_offsets(self.store_root, group, wanted, allow_rewind=allow_rewind,
                                                       clock_ms=self._clock_ms)
            current = self.load()
            table = {k: dict(v) for k, v in current.offset_table.items()}
            changed = False
            effective: dict[str, dict[int, int]] = {}
            for topic, queues in wanted.items():
                key = topic + TOPIC_GROUP_SEPARATOR + group
                stored = table.setdefault(key, {})
                for qid, offset in queues.items():
                    old = stored.get(qid)
                    if old is None or offset > old or (allow_rewind and offset != old):
                        stored[qid] = offset
                        changed = True
                    effective.setdefault(topic, {})[qid] = stored[qid]
            if current.source_file is None and not current.other_fields and self.config.is_v5:
                others: dict[str, Any] = {
                    "dataVersion": {"counter": 0, "stateVersion": 0, "timestamp": self._clock_ms()},
                    "groupTopicMap": {},
                }
            else:
                others = dict(current.other_fields)
            restore = current.source_file is not None and current.source_file != self.path
            if changed or restore:      # restore: NAME was missing/corrupt, .bak was used
                self._write(table, others)
            # The group a broker started on this store would serve (broker_configs; a no-op once it is there).
            record_subscription_group(self.store_root, group, v5=self.config.is_v5, clock_ms=self._clock_ms)
        return effective

    def _write(self, table: dict[str, dict[int, int]], others: dict[str, Any]) -> None:
        dv = others.get("dataVersion")
        if isinstance(dv, dict):
            bumped = dict(dv)
            counter = bumped.get("counter")
            bumped["counter"] = (counter + 1) if isinstance(counter, int) and not isinstance(counter, bool) else 1
            bumped["timestamp"] = self._clock_ms()
            others["dataVersion"] = bumped
        if "groupTopicMap" in others:
            others["groupTopicMap"] = _group_topic_map(table)
        text = encode_consumer_offsets(ConsumerOffsetTable(table, others, None))

        def previous_is_valid(old: bytes) -> bool:
            try:
                decode_consumer_offsets(old.decode("utf-8"), self.path)
                return True
            except (FormatError, UnicodeDecodeError):
                return False

        string2file(self.path, text, validate_previous=previous_is_valid)
