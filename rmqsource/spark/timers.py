"""``option("view", "timers")``: one row per timer / delay message (the JVM twin: spark/read/RmqTimersScan.java).

The rows come from :func:`rmqsource.store.timers.timer_entries`; the message columns are decoded by the read
path's own lookup reader (:func:`~rmqsource.spark.queue_range.read_lookup`) at each row's CommitLog offset and
then put under the real topic and queue. Extra columns: ``deliverTime``, ``delayLevel``, ``state``.

Pushdown: ``topic`` (= / IN) restricts the real topics before any parked copy's real queue is read, ``state``
(= / IN) and ``deliverTime`` (comparisons) drop entries before their records are read; all three are exact.
Every other filter is left to Spark. One partition per store (the view is small: parked and delivered copies
only).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator, Optional

import pyarrow as pa

from ..store.timers import timer_entries
from .planning import RmqPartition, StoreRef, store_partitions
from .pushdown import _intersect, _strings, _ts_range, _MAX, _MIN
from .entry_rows import entry_batches
from .read_spec import ReadSpec
from .schema import TIMERS_ARROW_SCHEMA, ddl

TIMERS_DDL = ddl(TIMERS_ARROW_SCHEMA)


@dataclass(frozen=True)
class TimersPushed:
    topics: Optional[frozenset] = None
    states: Optional[frozenset] = None
    deliver_ms: tuple = (_MIN, _MAX)         # [lo, hi) in ms
    descriptions: tuple = ()

    def keeps(self, entry) -> bool:
        if self.states is not None and entry.state not in self.states:
            return False
        lo, hi = self.deliver_ms
        if (lo, hi) != (_MIN, _MAX):
            t = entry.deliver_time_ms
            if t is None or t < lo or (hi != _MAX and t >= hi):
                return False
        return True


def push_timer_filters(filters) -> tuple[TimersPushed, list]:
    p = TimersPushed()
    rejected, desc = [], []
    for f in filters:
        col = f.attribute[0] if getattr(f, "attribute", None) and len(f.attribute) == 1 else None
        ok = False
        if col == "topic" and (vals := _strings(f)) is not None:
            p = replace(p, topics=_intersect(p.topics, vals)); ok = True
        elif col == "state" and (vals := _strings(f)) is not None:
            p = replace(p, states=_intersect(p.states, vals)); ok = True
        elif col == "deliverTime" and (r := _ts_range(f, getattr(f, "value", None))) is not None:
            lo, hi = p.deliver_ms
            p = replace(p, deliver_ms=(max(lo, r[0]), min(hi, r[1]))); ok = True
        if ok:
            desc.append(f"{type(f).__name__}({f.attribute[0]}, {f.value!r})")
        else:
            rejected.append(f)
    return replace(p, descriptions=tuple(desc)), rejected


class TimersPartition(RmqPartition):
    """All timers of one store (topics: the real topics to keep, None for all)."""

    def __init__(self, store: StoreRef, topics: Optional[tuple]):
        super().__init__(store)
        self.topics = topics

    def __repr__(self):
        return f"Timers({self.store.broker})"


def _real_topics(opts, pushed: TimersPushed) -> Optional[frozenset]:
    topics = frozenset(opts.topics) if opts.topics is not None else None
    if pushed.topics is not None:
        topics = pushed.topics if topics is None else topics & pushed.topics
    return topics


def plan_timers(opts, pushed: TimersPushed) -> list[TimersPartition]:
    topics = _real_topics(opts, pushed)
    return store_partitions(opts, lambda store: TimersPartition(store, None if topics is None else tuple(sorted(topics))))


def timer_rows(spec: ReadSpec, reader, part: TimersPartition) -> Iterator[pa.RecordBatch]:
    """The timers view of one store as record batches of ``spec.columns`` (each row: a message, see the module)."""
    import re
    opts = spec.options
    pushed = spec.pushed if isinstance(spec.pushed, TimersPushed) else TimersPushed()
    # RocketMQ's own real topics (retries the broker schedules, POP checkpoints) follow the whole-store rule
    entries = timer_entries(reader, part.topics, exclude_internal=opts.internal_topics_excluded)
    if opts.topic_pattern is not None:
        pat = re.compile(opts.topic_pattern)
        entries = [e for e in entries if pat.fullmatch(e.real_topic)]
    entries = [e for e in entries if pushed.keeps(e)]
    if not entries:
        return
    yield from entry_batches(spec, reader, part.store, entries, {
        "deliverTime": lambda e: e.deliver_time_ms, "delayLevel": lambda e: e.delay_level,
        "state": lambda e: e.state}, TIMERS_ARROW_SCHEMA)


read_timers = timer_rows
