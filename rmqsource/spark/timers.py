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
from .planning import Lookup, RmqPartition, StoreRef, open_store
from .pushdown import _intersect, _strings, _ts_range, _MAX, _MIN
from .read_spec import ReadSpec
from .schema import ARROW_SCHEMA, COLUMNS, TIMERS_ARROW_SCHEMA, TIMESTAMP_TYPE, ddl

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
    from .planning import _store_ref
    parts = []
    for i, (root, broker) in enumerate(zip(opts.paths, opts.brokers)):
        reader = open_store(root, opts.store_config)
        try:
            parts.append(TimersPartition(_store_ref(i, root, broker, opts.store_config, reader),
                                         None if (t := _real_topics(opts, pushed)) is None else tuple(sorted(t))))
        finally:
            reader.close()
    return parts


def timer_rows(spec: ReadSpec, reader, part: TimersPartition) -> Iterator[pa.RecordBatch]:
    """The timers view of one store as record batches of ``spec.columns`` (each row: a message, see the module)."""
    import re
    from .pushdown import Pushed
    from .queue_range import read_lookup
    opts, columns, store = spec.options, spec.columns, part.store
    pushed = spec.pushed if isinstance(spec.pushed, TimersPushed) else TimersPushed()
    # RocketMQ's own real topics (retries the broker schedules, POP checkpoints) follow the whole-store rule
    entries = timer_entries(reader, part.topics, exclude_internal=opts.internal_topics_excluded)
    if opts.topic_pattern is not None:
        pat = re.compile(opts.topic_pattern)
        entries = [e for e in entries if pat.fullmatch(e.real_topic)]
    entries = [e for e in entries if pushed.keeps(e)]
    if not entries:
        return
    # the rows are chosen here: the lookup keeps every record asked for (parked copies live in internal topics)
    lookup_spec = replace(spec, options=replace(opts, include_transactional=True, exclude_internal_topics=False),
                          pushed=Pushed(), columns=COLUMNS)
    got = list(read_lookup(lookup_spec, reader, Lookup(store, tuple(e.phy_offset for e in entries), None)))
    table = pa.Table.from_batches(got, schema=ARROW_SCHEMA) if got else ARROW_SCHEMA.empty_table()
    row_of = {o: i for i, o in enumerate(table.column("commitLogOffset").to_pylist())}
    entries = [e for e in entries if e.phy_offset in row_of]
    take = pa.array([row_of[e.phy_offset] for e in entries], type=pa.int64())
    t = table.take(take)
    out = {}
    for name in COLUMNS:
        out[name] = t.column(name).combine_chunks() if t.num_rows else pa.array([], type=ARROW_SCHEMA.field(name).type)
    out["topic"] = pa.array([e.real_topic for e in entries], type=pa.string())
    out["queueId"] = pa.array([e.real_queue_id for e in entries], type=pa.int32())
    out["queueOffset"] = pa.array([e.queue_offset for e in entries], type=pa.int64())
    out["tagsCode"] = pa.array([e.tags_code for e in entries], type=pa.int64())
    out["deliverTime"] = pa.array([None if e.deliver_time_ms is None else e.deliver_time_ms * 1000
                                   for e in entries], type=pa.int64()).cast(TIMESTAMP_TYPE)
    out["delayLevel"] = pa.array([e.delay_level for e in entries], type=pa.int32())
    out["state"] = pa.array([e.state for e in entries], type=pa.string())
    schema = pa.schema([TIMERS_ARROW_SCHEMA.field(c) for c in columns])
    step = max(1, opts.batch_size)
    n = len(entries)
    for a in range(0, n, step):
        yield pa.RecordBatch.from_arrays([out[c].slice(a, step) for c in columns], schema=schema)


read_timers = timer_rows
