"""What a broker needs in ``{root}/config/`` to serve a store it did not write.

A broker routes only the topics of its ``TopicConfigManager`` (``config/topics.json``) and, with
``autoCreateSubscriptionGroup=false``, serves only the groups of its ``SubscriptionGroupManager``
(``config/subscriptionGroup.json``). The writer keeps both the way the broker does:

``topics.json``::

    {"dataVersion": {"counter", "stateVersion", "timestamp"},
     "topicConfigTable": {name: {"attributes": {}, "order": false, "perm": 6, "readQueueNums": n,
                                 "topicFilterType": "SINGLE_TAG", "topicName": name, "topicSysFlag": 0,
                                 "writeQueueNums": n}}}

``subscriptionGroup.json``::

    {"dataVersion": {...}, "forbiddenTable": {},
     "subscriptionGroupTable": {group: {"groupName": group, "consumeEnable": true, ...}}}

(the 5.x shapes of ``TopicConfig`` / ``SubscriptionGroupConfig`` serialized by fastjson; a 4.9 store gets the
4.9 fields: no ``attributes``, ``stateVersion``, ``forbiddenTable``, ``groupSysFlag`` ...).

Merging never drops anything: entries of other topics and groups, unknown fields of an entry and unknown
top-level fields are kept; a topic's queue numbers only grow (to at least the highest queue id written + 1);
``dataVersion.counter`` is bumped and ``timestamp`` set only when something changed. Files are replaced
through :func:`rmqsource.io.durable.string2file` (``NAME.tmp``, ``NAME.bak``, rename, fsync), like the
consumer offsets. The broker's own topics (``SCHEDULE_TOPIC_XXXX``, the timer wheel topic) are left to the
broker, which creates them at start with their fixed queue numbers.

The Java twin is io/rmqsource/store/BrokerConfigs.java; tests/jvm/test_broker_configs_twin.py checks that
both write the same bytes for the same input.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Optional

from ..errors import FormatError
from ..format.configjson import dumps_fastjson, loads_fastjson
from ..io.durable import load_with_bak, string2file
from ..names import SCHEDULE_TOPIC

__all__ = [
    "BROKER_OWN_TOPICS",
    "SUBSCRIPTION_GROUP_FILE_NAME",
    "TOPICS_FILE_NAME",
    "as_count",
    "group_config_entry",
    "merge_subscription_group",
    "merge_topic_configs",
    "now_ms",
    "record_subscription_group",
    "record_topic_queues",
    "topic_config_entry",
    "topic_queue_nums",
]

TOPICS_FILE_NAME = "topics.json"
SUBSCRIPTION_GROUP_FILE_NAME = "subscriptionGroup.json"
TIMER_TOPIC = "rmq_sys_wheel_timer"
BROKER_OWN_TOPICS = frozenset({SCHEDULE_TOPIC, TIMER_TOPIC})
PERM_READ_WRITE = 6


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def topic_queue_nums(queues: Iterable[tuple[str, int]]) -> dict[str, int]:
    """{topic: highest queue id + 1} of (topic, queueId) pairs, less the broker's own topics."""
    out: dict[str, int] = {}
    for topic, qid in queues:
        if topic in BROKER_OWN_TOPICS:
            continue
        out[topic] = max(out.get(topic, 0), int(qid) + 1)
    return out


def topic_config_entry(name: str, queue_nums: int, v5: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"topicName": name, "readQueueNums": queue_nums, "writeQueueNums": queue_nums,
                             "perm": PERM_READ_WRITE, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
                             "order": False}
    if v5:
        entry["attributes"] = {}
    return entry


def group_config_entry(name: str, v5: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"groupName": name, "consumeEnable": True, "consumeFromMinEnable": True,
                             "consumeBroadcastEnable": True, "retryQueueNums": 1, "retryMaxTimes": 16,
                             "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1,
                             "notifyConsumerIdsChangedEnable": True}
    if v5:
        entry.update({"consumeMessageOrderly": False, "groupSysFlag": 0, "consumeTimeoutMinute": 15,
                      "groupRetryPolicy": {"type": "CUSTOMIZED"}, "attributes": {}})
    return entry


def _new_data_version(v5: bool, now_ms: int) -> dict[str, Any]:
    return {"counter": 1, "stateVersion": 0, "timestamp": now_ms} if v5 else {"counter": 1, "timestamp": now_ms}


def _bump(doc: dict[str, Any], now_ms: int) -> None:
    dv = doc.get("dataVersion")
    if isinstance(dv, dict):
        dv = dict(dv)
        counter = dv.get("counter")
        dv["counter"] = counter + 1 if isinstance(counter, int) and not isinstance(counter, bool) else 1
        dv["timestamp"] = now_ms
        doc["dataVersion"] = dv


def _table(doc: dict[str, Any], key: str, file: str) -> dict[str, Any]:
    table = doc.get(key)
    if table is None:
        table = {}
    if not isinstance(table, dict):
        raise FormatError(f"{key} is a {type(table).__name__}, expected an object", file=file)
    return dict(table)


def as_count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def merge_topic_configs(doc: Optional[dict[str, Any]], queue_nums: Mapping[str, int], *, v5: bool,
                        now_ms: int, file: str = TOPICS_FILE_NAME) -> Optional[dict[str, Any]]:
    """``doc`` (a decoded topics.json or None) with every topic of ``queue_nums`` routed; None if unchanged."""
    new = doc is None
    out: dict[str, Any] = dict(doc) if doc is not None else {"dataVersion": _new_data_version(v5, now_ms)}
    table = _table(out, "topicConfigTable", file)
    changed = new
    for topic in sorted(queue_nums):
        nums = int(queue_nums[topic])
        entry = table.get(topic)
        if not isinstance(entry, dict):
            table[topic] = topic_config_entry(topic, nums, v5)
            changed = True
            continue
        entry = dict(entry)
        for key in ("readQueueNums", "writeQueueNums"):
            if as_count(entry.get(key)) < nums:
                entry[key] = nums
                changed = True
        table[topic] = entry
    if not changed:
        return None
    out["topicConfigTable"] = table
    if not new:
        _bump(out, now_ms)
    return out


def merge_subscription_group(doc: Optional[dict[str, Any]], group: str, *, v5: bool, now_ms: int,
                             file: str = SUBSCRIPTION_GROUP_FILE_NAME) -> Optional[dict[str, Any]]:
    """``doc`` (a decoded subscriptionGroup.json or None) with ``group`` in it; None if it was there."""
    new = doc is None
    out: dict[str, Any] = dict(doc) if doc is not None else {"dataVersion": _new_data_version(v5, now_ms)}
    if new and v5:
        out["forbiddenTable"] = {}
    table = _table(out, "subscriptionGroupTable", file)
    if isinstance(table.get(group), dict):
        return None
    table[group] = group_config_entry(group, v5)
    out["subscriptionGroupTable"] = table
    if not new:
        _bump(out, now_ms)
    return out


def _decode(text: str, file: str) -> dict[str, Any]:
    doc = loads_fastjson(text, file=file)
    if not isinstance(doc, dict):
        raise FormatError(f"expected a JSON object, got {type(doc).__name__}", file=file)
    return doc


def _replace(path: str, doc: dict[str, Any]) -> None:
    def previous_is_valid(old: bytes) -> bool:
        try:
            _decode(old.decode("utf-8"), path)
            return True
        except (FormatError, UnicodeDecodeError):
            return False
    string2file(path, dumps_fastjson(doc), validate_previous=previous_is_valid)


def record_topic_queues(store_root: str | os.PathLike, queues: Iterable[tuple[str, int]], *, v5: bool,
                        clock_ms: Callable[[], int] = now_ms) -> bool:
    """Route every topic of ``queues`` in ``config/topics.json``; True when the file was written.

    The caller holds the store's writer lock (the store writer as its messages become durable, and at its
    clean shutdown)."""
    nums = topic_queue_nums(queues)
    path = os.path.join(os.fspath(store_root), "config", TOPICS_FILE_NAME)
    current = load_with_bak(path, _decode)
    if not nums:
        return False
    merged = merge_topic_configs(current, nums, v5=v5, now_ms=clock_ms(), file=path)
    if merged is None:
        return False
    _replace(path, merged)
    return True


def record_subscription_group(store_root: str | os.PathLike, group: str, *, v5: bool,
                              clock_ms: Callable[[], int] = now_ms) -> bool:
    """Add ``group`` to ``config/subscriptionGroup.json``; True when the file was written.

    The caller serializes writers (the consumer-offset lock of :class:`ConsumerOffsets`)."""
    path = os.path.join(os.fspath(store_root), "config", SUBSCRIPTION_GROUP_FILE_NAME)
    merged = merge_subscription_group(load_with_bak(path, _decode), group, v5=v5, now_ms=clock_ms(), file=path)
    if merged is None:
        return False
    _replace(path, merged)
    return True
