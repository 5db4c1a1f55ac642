"""Timer and delay messages: what is parked, when it is due, and where the broker delivered it (the JVM twin:
store/Timers.java).

A broker parks a message sent with a delivery time (``setDeliverTimeMs`` / ``setDelayTimeSec`` ...) as a copy
in ``rmq_sys_wheel_timer`` (real topic and queue in the properties ``REAL_TOPIC`` / ``REAL_QID``, due time in
``TIMER_OUT_MS``), and one sent with a delay level (and every retry the broker schedules after a consumer
failure, ``REAL_TOPIC=%RETRY%<group>``) as a copy in ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1`` (property
``DELAY``; the ConsumeQueue unit's tagsCode is the delivery time). When due, the broker writes a copy into the
real topic and queue: a timer's copy carries ``TIMER_DEQUEUE_MS``, a delay's keeps ``DELAY``; both keep the
UNIQ_KEY and reconsumeTimes. The wheel re-parks long timers (several wheel records of one message).

A timer is recalled (``DefaultMQProducer.recallMessage``, 5.3.2+, with ``recallMessageEnable=true``) by a
marker the broker parks in the wheel beside it: a wheel record with ``TIMER_DEL_UNIQKEY`` (the target's
UNIQ_KEY, or ``<topic>+<UNIQ_KEY>`` with ``appendTopicForTimerDeleteKey``), the target's real topic, its
UNIQ_KEY and the same ``TIMER_OUT_MS``. When the slot is due, the wheel reads its markers first and drops
every message of that slot whose key a marker names; the marker itself is never delivered.

:func:`timer_entries` gives one :class:`TimerEntry` per parked message:

* the two parked topics are read through their ConsumeQueues (every queue of each);
* re-parked wheel copies are one message: the identity is (real topic and queue, UNIQ_KEY, reconsumeTimes).
  reconsumeTimes is part of it because the broker schedules each retry of one message (same UNIQ_KEY, same
  ``%RETRY%`` topic) separately, and delivers each. The schedule service never re-parks, so every
  ``SCHEDULE_TOPIC_XXXX`` copy is a message of its own (two copies of one transactional message, both failed
  by a consumer, are scheduled twice with the same UNIQ_KEY and reconsumeTimes); parked copies sharing a key
  take the delivered copies in order;
* delivered copies are found by one pass over only the real queues named by parked copies, each from the first
  unit stored at or after the earliest parked copy of that queue (binary search on store time): a delivered
  copy is a record of that queue (so topic == REAL_TOPIC and queueId == REAL_QID: the POP retry copies that
  carry a timer's properties into ``%RETRY%<group>_<topic>`` are not) with the parked message's UNIQ_KEY and
  reconsumeTimes and the broker's mark (``TIMER_DEQUEUE_MS`` for the wheel, ``DELAY`` for a schedule).
  The IndexFile could find them by UNIQ_KEY instead, but it may be disabled (messageIndexEnable=false), behind
  after a crash or deleted before the CommitLog, and a miss would then turn a delivered message into a
  pending one; the queue pass does not depend on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from ..format.consumequeue import PRE_BLANK_SIZE
from ..format.properties import DELAY, REAL_QID, REAL_TOPIC, UNIQ_KEY
from ..format.record import Kind, MessageRecord
from ..format.system_topics import is_internal_topic
from ..format.tagscode import SCHEDULE_TOPIC, consume_queue_tags_code, java_parse_int
from .reader import MessageStoreReader

TIMER_TOPIC = "rmq_sys_wheel_timer"
PARKED_TOPICS = (TIMER_TOPIC, SCHEDULE_TOPIC)
TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
PENDING, DELIVERED, RECALLED = "pending", "delivered", "recalled"
MAX_PARKED_UNITS = 1 << 31      # bound of one queue walk


@dataclass(frozen=True)
class TimerEntry:
    """One message sent with a delivery time or delay level.

    ``phy_offset`` / ``size``: the record the row shows (the delivered copy, else the newest parked copy);
    ``queue_offset`` its offset in the real queue (None while pending); ``tags_code`` the real queue's unit's
    (None while pending); ``parked_offset``: CommitLog offset of the newest parked copy.
    """
    real_topic: str
    real_queue_id: int
    uniq_key: Optional[str]
    reconsume_times: int
    deliver_time_ms: Optional[int]
    delay_level: Optional[int]
    state: str
    phy_offset: int
    size: int
    queue_offset: Optional[int]
    tags_code: Optional[int]
    parked_offset: int
    parked_store_timestamp_ms: int


@dataclass
class _Parked:
    record: MessageRecord
    size: int
    deliver_time_ms: Optional[int]
    delay_level: Optional[int]
    wheel: bool


def _queue_units(reader: MessageStoreReader, topic: str, queue_id: int, start: Optional[int] = None):
    """(queue offset, phy, size, tagsCode) of the live units of a queue from ``start`` (its min when None)."""
    q = reader.consume_queue(topic, queue_id)
    if q is None:
        return
    hi = reader.queue_max_offset(q)
    lo = reader.queue_min_offset(q, hi)
    off = lo if start is None else max(lo, start)
    hi = min(hi, off + MAX_PARKED_UNITS)
    while off < hi:
        units = q.read_units(off, min(4096, hi - off))
        if len(units) == 0:
            return
        for i, u in enumerate(units.tolist()):
            phy, size, code = int(u[0]), int(u[1]), int(u[2])
            if size > 0 and size != PRE_BLANK_SIZE and phy >= reader.commitlog.min_offset:
                yield off + i, phy, size, code
        off += len(units)


def _record(reader: MessageStoreReader, phy: int, size: int) -> Optional[MessageRecord]:
    decoded, _ = reader.commitlog.decode_at(phy, size_hint=size)
    if decoded.kind is not Kind.MESSAGE or decoded.record.phy_offset != phy:
        return None
    return decoded.record


def _first_at_or_after(reader: MessageStoreReader, topic: str, queue_id: int, ts: int) -> int:
    """First queue offset whose record was stored at or after ``ts`` (store times ascend along a queue)."""
    q = reader.consume_queue(topic, queue_id)
    hi = reader.queue_max_offset(q)
    a, b = reader.queue_min_offset(q, hi), hi
    while a < b:
        mid = (a + b) // 2
        u = q.unit_at(mid)
        r = _record(reader, u[0], u[1]) if u and u[1] > 0 and u[0] >= reader.commitlog.min_offset else None
        if r is not None and r.store_timestamp_ms >= ts:
            b = mid
        else:
            a = mid + 1
    return a


def _parked(reader: MessageStoreReader, real_topics: Optional[frozenset], exclude_internal: bool) -> tuple[dict, set]:
    """(parked messages by identity, recall markers as (TIMER_OUT_MS, TIMER_DEL_UNIQKEY))."""
    delays = reader.config.message_delay_levels_ms
    by_key: dict = {}
    recalls: set = set()
    for topic in PARKED_TOPICS:
        for t, qid in reader.queue_keys():
            if t != topic:
                continue
            for _, phy, size, code in _queue_units(reader, t, qid):
                r = _record(reader, phy, size)
                if r is None or r.topic != topic:
                    continue
                p = r.properties
                if topic == TIMER_TOPIC and TIMER_DEL_UNIQKEY in p:
                    recalls.add((java_parse_int_long(p.get(TIMER_OUT_MS)), p[TIMER_DEL_UNIQKEY]))
                    continue
                real = p.get(REAL_TOPIC)
                real_qid = java_parse_int(p.get(REAL_QID))
                if real is None or real_qid is None or (real_topics is not None and real not in real_topics):
                    continue
                if exclude_internal and is_internal_topic(real):
                    continue
                level = java_parse_int(p.get(DELAY))
                level = level if level is not None and level > 0 else None
                if topic == TIMER_TOPIC:
                    due = java_parse_int_long(p.get(TIMER_OUT_MS))
                elif code > 0 and not reader.config.enable_consume_queue_ext:
                    due = code            # the unit's tagsCode: the delivery time the schedule service uses
                else:
                    due = consume_queue_tags_code(topic, p, r.store_timestamp_ms, delays)
                uniq = p.get(UNIQ_KEY)
                wheel = topic == TIMER_TOPIC
                # wheel copies of one message (re-parked) share the key; every schedule copy is its own message
                key = (real, real_qid, uniq, r.reconsume_times, None if wheel and uniq is not None else phy)
                prev = by_key.get(key)
                if prev is None or prev.record.phy_offset < phy:
                    by_key[key] = _Parked(r, size, due, level, wheel)
    return by_key, recalls


def _recalled(pk: _Parked, real_topic: str, uniq: Optional[str], recalls: set) -> bool:
    """Whether a recall marker of ``pk``'s wheel slot names it: the broker's ``TimerMessageStore.buildDeleteKey``
    is the UNIQ_KEY, or ``<real topic>+<UNIQ_KEY>`` with ``appendTopicForTimerDeleteKey``."""
    if not pk.wheel or uniq is None:
        return False
    due = pk.deliver_time_ms
    return (due, uniq) in recalls or (due, f"{real_topic}+{uniq}") in recalls


def java_parse_int_long(text: Optional[str]) -> Optional[int]:
    """``Long.parseLong``, or None where Java would throw."""
    if text is None:
        return None
    t = text.strip()
    if not t or t != text or not (t.lstrip("+-").isdigit()) or len(t.lstrip("+-")) > 19:
        return None
    v = int(t)
    return v if -(1 << 63) <= v < (1 << 63) else None


def timer_entries(reader: MessageStoreReader, real_topics: Optional[Iterable[str]] = None, *,
                  exclude_internal: bool = False) -> list[TimerEntry]:
    """Every parked message (restricted to ``real_topics`` when given; ``exclude_internal``: none whose real
    topic is RocketMQ's own, format/system_topics.py), pending, delivered or recalled, in the order (real
    topic, real queue, parked CommitLog offset)."""
    wanted = frozenset(real_topics) if real_topics is not None else None
    parked, recalls = _parked(reader, wanted, exclude_internal)
    # Per real queue: the parked messages waiting for a delivered copy, by (UNIQ_KEY, reconsumeTimes), oldest first.
    per_queue: dict = {}
    for key in sorted(parked, key=lambda k: parked[k].record.phy_offset):
        if key[2] is not None:
            per_queue.setdefault((key[0], key[1]), {}).setdefault((key[2], key[3]), []).append(key)
    delivered: dict = {}
    queues_on_disk = set(reader.queue_keys())
    for (topic, qid), waiting in sorted(per_queue.items()):
        if (topic, qid) not in queues_on_disk:
            continue
        total = sum(len(v) for v in waiting.values())
        since = min(parked[k].record.store_timestamp_ms for v in waiting.values() for k in v)
        start = _first_at_or_after(reader, topic, qid, since)
        found = 0
        for qoff, phy, size, code in _queue_units(reader, topic, qid, start):
            r = _record(reader, phy, size)
            if r is None or r.topic != topic or r.queue_id != qid:
                continue
            p = r.properties
            keys = waiting.get((p.get(UNIQ_KEY), r.reconsume_times))
            if not keys:
                continue
            hit = next((k for k in keys if k not in delivered and (TIMER_DEQUEUE_MS if parked[k].wheel else DELAY) in p
                        and parked[k].record.store_timestamp_ms <= r.store_timestamp_ms), None)
            if hit is None:
                continue
            delivered[hit] = (r, qoff, code, size)
            found += 1
            if found == total:
                break
    out = []
    for hit, pk in parked.items():
        r = pk.record
        d = delivered.get(hit)
        common = dict(real_topic=hit[0], real_queue_id=hit[1], uniq_key=hit[2], reconsume_times=r.reconsume_times,
                      deliver_time_ms=pk.deliver_time_ms, delay_level=pk.delay_level, parked_offset=r.phy_offset,
                      parked_store_timestamp_ms=r.store_timestamp_ms)
        if d is None:
            state = RECALLED if _recalled(pk, hit[0], hit[2], recalls) else PENDING
            out.append(TimerEntry(state=state, phy_offset=r.phy_offset, size=pk.size, queue_offset=None,
                                  tags_code=None, **common))
        else:
            dr, qoff, code, size = d
            out.append(TimerEntry(state=DELIVERED, phy_offset=dr.phy_offset, size=size, queue_offset=qoff,
                                  tags_code=code, **common))
    out.sort(key=lambda e: (e.real_topic, e.real_queue_id, e.parked_offset))
    return out
