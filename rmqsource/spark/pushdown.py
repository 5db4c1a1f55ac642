"""Filter pushdown: which Spark filters the rmq source enforces itself, and how.

Every filter accepted here is enforced EXACTLY on each decoded row (a final
numpy mask), so Spark does not need to re-check it; planning additionally uses
the filters to prune partitions and narrow offset ranges, and the tag filter
to skip ConsumeQueue units whose tagsCode cannot match (the record is then
never read).  Filters we cannot enforce exactly are returned to Spark.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, replace
from typing import Iterable, List, Optional

from pyspark.sql.datasource import (EqualTo, Filter, GreaterThan, GreaterThanOrEqual, In, LessThan,
                                    LessThanOrEqual)

INT_RANGE_COLUMNS = {"queueOffset": "queue_offset", "commitLogOffset": "phy_offset"}
_MIN = -(1 << 63)
_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class Pushed:
    tags: Optional[frozenset] = None
    topics: Optional[frozenset] = None
    queue_ids: Optional[frozenset] = None
    queue_offset: tuple = (_MIN, _MAX)          # [lo, hi); hi = _MAX: no upper bound (a field may hold _MAX)
    phy_offset: tuple = (_MIN, _MAX)            # [lo, hi)
    store_ts: tuple = (_MIN, _MAX)              # [lo, hi) in ms
    msg_ids: Optional[frozenset] = None
    uniq_keys: Optional[frozenset] = None
    descriptions: tuple = ()

    @property
    def empty(self) -> bool:
        return any(s is not None and not s for s in (self.tags, self.topics, self.queue_ids, self.msg_ids,
                                                     self.uniq_keys)) \
            or any(lo > hi or (lo == hi and hi != _MAX) for lo, hi in (self.queue_offset, self.phy_offset,
                                                                        self.store_ts))

    @property
    def any(self) -> bool:
        return bool(self.descriptions)


def _intersect(current: Optional[frozenset], values: Iterable) -> frozenset:
    new = frozenset(values)
    return new if current is None else current & new


def _to_us(value) -> Optional[int]:
    """Microseconds since the epoch of a timestamp literal (aware datetimes, or naive = UTC)."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        delta = value - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
        return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    return None


def _range(op, value) -> Optional[tuple]:
    """[lo, hi) for an integer comparison."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    if isinstance(op, EqualTo):
        return value, value + 1
    if isinstance(op, GreaterThan):
        return value + 1, _MAX
    if isinstance(op, GreaterThanOrEqual):
        return value, _MAX
    if isinstance(op, LessThan):
        return _MIN, value
    if isinstance(op, LessThanOrEqual):
        return _MIN, value + 1
    return None


def _ts_range(op, value) -> Optional[tuple]:
    """[lo, hi) in ms for a comparison of storeTimestamp (µs) with a literal."""
    us = _to_us(value)
    if us is None:
        return None
    fl = us // 1000
    ce = -(-us // 1000)
    if isinstance(op, EqualTo):
        return (fl, fl + 1) if us % 1000 == 0 else (0, 0)
    if isinstance(op, GreaterThan):
        return fl + 1, _MAX
    if isinstance(op, GreaterThanOrEqual):
        return ce, _MAX
    if isinstance(op, LessThan):
        return _MIN, ce
    if isinstance(op, LessThanOrEqual):
        return _MIN, fl + 1
    return None


def _strings(f) -> Optional[tuple]:
    if isinstance(f, EqualTo) and isinstance(f.value, str):
        return (f.value,)
    if isinstance(f, In) and all(isinstance(v, str) for v in f.value):
        return tuple(f.value)
    return None


def _ints(f) -> Optional[tuple]:
    vals = (f.value,) if isinstance(f, EqualTo) else (tuple(f.value) if isinstance(f, In) else None)
    if vals is None or not all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        return None
    return vals


def push_filters(filters: List[Filter], *, index_lookups: bool = True) -> tuple[Pushed, list]:
    """(what we enforce, filters returned to Spark)."""
    p = Pushed()
    rejected = []
    desc = []
    for f in filters:
        col = f.attribute[0] if getattr(f, "attribute", None) and len(f.attribute) == 1 else None
        ok = False
        if col == "tags" and (vals := _strings(f)) is not None:
            p = replace(p, tags=_intersect(p.tags, vals)); ok = True
        elif col == "topic" and (vals := _strings(f)) is not None:
            p = replace(p, topics=_intersect(p.topics, vals)); ok = True
        elif col == "queueId" and (vals := _ints(f)) is not None:
            p = replace(p, queue_ids=_intersect(p.queue_ids, vals)); ok = True
        elif col == "msgId" and (vals := _strings(f)) is not None:
            p = replace(p, msg_ids=_intersect(p.msg_ids, (v.strip().upper() for v in vals))); ok = True
        elif col == "uniqKey" and (vals := _strings(f)) is not None:
            p = replace(p, uniq_keys=_intersect(p.uniq_keys, vals)); ok = True
        elif col in INT_RANGE_COLUMNS and (r := _range(f, getattr(f, "value", None))) is not None:
            attr = INT_RANGE_COLUMNS[col]
            lo, hi = getattr(p, attr)
            p = replace(p, **{attr: (max(lo, r[0]), min(hi, r[1]))}); ok = True
        elif col == "storeTimestamp" and (r := _ts_range(f, getattr(f, "value", None))) is not None:
            lo, hi = p.store_ts
            p = replace(p, store_ts=(max(lo, r[0]), min(hi, r[1]))); ok = True
        if ok:
            desc.append(_describe(f))
        else:
            rejected.append(f)
    return replace(p, descriptions=tuple(desc)), rejected


def _describe(f) -> str:
    name = type(f).__name__
    return f"{name}({'.'.join(f.attribute)}, {f.value!r})"
