"""Planning: from options and pushed filters to a list of picklable input partitions.

Three kinds of partition:

* :class:`CommitLogRange` - whole-store reads: a byte range of one CommitLog
  segment, starting at a record boundary.  Large segments are cut at record
  starts taken from the ConsumeQueues (binary search per queue for the last
  unit at or before each target offset), so no planner has to walk headers.
  The task that ends at a split point checks it lands on it exactly, and the
  task that starts there checks the record's own PHYSICALOFFSET field.
* :class:`QueueRange` - topic reads: ConsumeQueue offsets [start, end) of one
  queue, split by maxRecordsPerPartition / minPartitions.
* :class:`Lookup` - msgId / uniqKey / keys point reads: CommitLog offsets decoded
  from msgIds or found in the IndexFiles.  The CommitLog past what the IndexFiles
  cover (:func:`_index_coverage`) is read by ranges next to them (:func:`_with_index_tail`).
  Planned in lookup_planning.py (:func:`_plan_lookups`, :func:`_plan_key_lookups`), which
  does not import this module: :func:`plan` passes it what it needs.

The partition classes are in partitions.py (imported here under the same names).
Twin: rmqsource/jvm/io/rmqsource/spark/read/RmqPlanner.java (lookups: LookupPlanner.java).
"""

from __future__ import annotations

import logging
import os
import re
from typing import Optional

from ..errors import DataLossError, OptionError, RmqError
from ..format.consumequeue import PRE_BLANK_SIZE
from ..format.system_topics import is_internal_topic
from ..store.config import StoreConfig
from ..store.reader import MessageStoreReader
from . import lookup_planning
from .lookup_planning import QueuePlanning, _plan_key_lookups, _plan_lookups
from .options import EARLIEST, LATEST, ReadOptions, no_offset_for_timestamp
from .partitions import CommitLogRange, Lookup, QueueRange, QueueRanges, RmqPartition, StoreRef  # noqa: F401
from .pushdown import Pushed

log = logging.getLogger(__name__)

# Parallelism (the JVM planner, RmqPlanner.java, applies the same rules): whole queues of a store
# get a task each up to max(MIN_QUEUE_TASKS, 2 x the default parallelism, minPartitions) tasks
# (a topic of 8 queues is 8 partitions) and are packed beyond that, and ranges are split until
# there are as many partitions as the default parallelism when each piece keeps at least
# MIN_SPLIT_RECORDS records (queue ranges) / MIN_SPLIT_BYTES (CommitLog ranges).
MIN_QUEUE_TASKS = 8
MIN_SPLIT_RECORDS = 4096
MIN_SPLIT_BYTES = 1 << 20


def default_parallelism() -> int:
    """The Python planner runs in a Python worker, which cannot ask the session: cores of this machine."""
    return os.cpu_count() or 1


def open_store(root: str, config: StoreConfig) -> MessageStoreReader:
    try:
        return MessageStoreReader(root, config)
    except RmqError:
        raise
    except OSError as exc:
        raise OptionError(f"cannot open store {root}: {exc}") from exc


def _store_ref(i: int, root: str, broker: str, config: StoreConfig, reader: MessageStoreReader) -> StoreRef:
    return StoreRef(index=i, root=root, broker=broker, config=config,
                    commit_log_min=reader.commitlog.min_offset,
                    commit_log_max=reader.commit_log_max_offset,
                    cq_on_disk=reader.has_consume_queue_files)


def store_partitions(opts: ReadOptions, make) -> list:
    """One partition per store, ``make(store_ref)``: the views and tables read whole per store (timers,
    transactions, metadata)."""
    parts = []
    for i, (root, broker) in enumerate(zip(opts.paths, opts.brokers)):
        reader = open_store(root, opts.store_config)
        try:
            parts.append(make(_store_ref(i, root, broker, opts.store_config, reader)))
        finally:
            reader.close()
    return parts


# --------------------------------------------------------------------------- helpers over a queue

def _unit(q, i: int):
    u = q.read_units(i, 1)
    if len(u) == 0:
        return None
    return int(u[0]["phy_offset"]), int(u[0]["size"]), int(u[0]["tags_code"])


def last_unit_at_or_before(q, lo: int, hi: int, phy: int) -> Optional[int]:
    """Largest CQ unit phyOffset <= ``phy`` among units [lo, hi) (pre-blank units skipped)."""
    a, b = lo, hi
    while a < b:                          # first index whose unit is live and > phy
        mid = (a + b) // 2
        u = _unit(q, mid)
        if u is None:
            b = mid
            continue
        if u[1] == PRE_BLANK_SIZE or u[0] <= phy:
            a = mid + 1
        else:
            b = mid
    if a - 1 < lo:
        return None
    u = _unit(q, a - 1)
    if u is None or u[1] == PRE_BLANK_SIZE:
        return None
    return u[0]


def first_index_with_phy_at_least(q, lo: int, hi: int, phy: int) -> int:
    a, b = lo, hi
    while a < b:
        mid = (a + b) // 2
        u = _unit(q, mid)
        if u is not None and u[1] != PRE_BLANK_SIZE and u[0] >= phy:
            b = mid
        else:
            a = mid + 1
    return a


def store_timestamp_at(reader: MessageStoreReader, q, i: int) -> Optional[int]:
    u = _unit(q, i)
    if u is None or u[1] == PRE_BLANK_SIZE:
        return None
    if u[0] < reader.commitlog.min_offset:
        return None
    decoded, _ = reader.commitlog.decode_at(u[0], size_hint=u[1])
    if decoded.record is None:
        return None
    return decoded.record.store_timestamp_ms


def offset_by_time(reader: MessageStoreReader, q, lo: int, hi: int, ts: int) -> int:
    """First queue offset in [lo, hi) whose storeTimestamp >= ts (hi when none).

    RocketMQ's getOffsetInQueueByTime (5.x BoundaryType.LOWER); assumes store
    timestamps do not decrease along a queue, as the broker writes them.
    Units whose record is gone count as older than any timestamp.
    """
    a, b = lo, hi
    while a < b:
        mid = (a + b) // 2
        t = store_timestamp_at(reader, q, mid)
        if t is not None and t >= ts:
            b = mid
        else:
            a = mid + 1
    return a


def split_range(start: int, end: int, max_records: int) -> list[tuple[int, int]]:
    n = end - start
    if n <= 0:
        return []
    pieces = -(-n // max_records)
    step = -(-n // pieces)
    return [(s, min(end, s + step)) for s in range(start, end, step)]


def _ensure_min_partitions(ranges: list, min_partitions: int, size_of, split_one, min_piece: int = 1) -> list:
    """Split the largest ranges in two until there are at least ``min_partitions`` (pieces >= ``min_piece``)."""
    ranges = list(ranges)
    while min_partitions and len(ranges) < min_partitions:
        i = max(range(len(ranges)), key=lambda k: size_of(ranges[k]), default=None)
        if i is None or size_of(ranges[i]) < max(2, 2 * min_piece):
            break
        a, b = split_one(ranges[i])
        if a is None:
            break
        ranges[i:i + 1] = [a, b]
    return ranges


# --------------------------------------------------------------------------- queue selection

def select_queues(opts: ReadOptions, pushed: Pushed, readers: list[MessageStoreReader]) -> list[list[tuple[str, int]]]:
    """Per store: the (topic, queueId) to read; unknown names fail with OptionError.  RocketMQ's own
    topics are dropped here unless named (``ReadOptions.internal_topics_excluded``)."""
    per_store = [r.queue_keys() for r in readers]
    excluded = opts.internal_topics_excluded
    all_keys = set(k for ks in per_store for k in ks)
    all_topics = sorted({t for t, _ in all_keys})
    stores = ", ".join(opts.paths)

    if opts.topics_by_view:        # a store without dead letters (retries, traces) has no rows in the view
        rx = re.compile(opts.topic_pattern) if opts.topic_pattern is not None else None
        return [[k for k in ks if (rx.fullmatch(k[0]) if rx else k[0] in opts.topics)] for ks in per_store]
    if opts.topics is not None:
        for t in opts.topics:
            if t not in all_topics:
                raise OptionError(f"topic {t!r} does not exist in {stores} (topics: {', '.join(all_topics) or 'none'})")
        wanted = lambda k: k[0] in opts.topics  # noqa: E731
    elif opts.topic_pattern is not None:
        rx = re.compile(opts.topic_pattern)
        matched = [t for t in all_topics if rx.fullmatch(t)]
        if not matched:
            raise OptionError(f"topicPattern {opts.topic_pattern!r} matches no topic in {stores} "
                              f"(topics: {', '.join(all_topics) or 'none'})")
        if excluded and all(is_internal_topic(t) for t in matched):
            raise OptionError(f"topicPattern {opts.topic_pattern!r} matches only RocketMQ's own topics in {stores} "
                              f"({', '.join(matched)}), left out by excludeInternalTopics=true; set it to false "
                              f"or name them in topics")
        wanted = lambda k: rx.fullmatch(k[0]) is not None  # noqa: E731
    elif opts.queues is not None:
        for t, q in opts.queues:
            if (t, q) not in all_keys:
                if t not in all_topics:
                    raise OptionError(f"option queues: topic {t!r} does not exist in {stores} "
                                      f"(topics: {', '.join(all_topics) or 'none'})")
                ids = sorted(q2 for t2, q2 in all_keys if t2 == t)
                raise OptionError(f"option queues: queue {t}:{q} does not exist (queues of {t}: {ids})")
        chosen = set(opts.queues)
        wanted = lambda k: k in chosen  # noqa: E731
    else:
        wanted = lambda k: True  # noqa: E731
    for spec_name, name in (("starting_offsets", "startingOffsets"), ("ending_offsets", "endingOffsets"),
                            ("starting_by_timestamp", "startingOffsetsByTimestamp"),
                            ("ending_by_timestamp", "endingOffsetsByTimestamp")):
        spec = getattr(opts, spec_name)
        if isinstance(spec, dict):
            for t, qs in spec.items():
                for qid in qs:
                    if (t, qid) not in all_keys:
                        raise OptionError(f"{name}: queue {t}:{qid} does not exist in {stores}")
    out = []
    for keys in per_store:
        sel = [k for k in keys if wanted(k) and not (excluded and is_internal_topic(k[0]))]
        if pushed.topics is not None:
            sel = [k for k in sel if k[0] in pushed.topics]
        if pushed.queue_ids is not None:
            sel = [k for k in sel if k[1] in pushed.queue_ids]
        out.append(sel)
    return out


def _offset_from_spec(spec, topic: str, qid: int, default: str):
    if isinstance(spec, dict):
        v = spec.get(topic, {}).get(qid)
        if v is None:
            return default
        if v == -2:
            return EARLIEST
        if v == -1:
            return LATEST
        return v
    return spec


def _timestamp_for(spec: Optional[dict], topic: str, qid: int) -> Optional[int]:
    return None if spec is None else spec.get(topic, {}).get(qid)


def queue_bounds(opts: ReadOptions, pushed: Pushed, reader: MessageStoreReader, topic: str, qid: int,
                 store_root: str) -> tuple[int, int]:
    """[start, end) of a queue after options and pushed filters (may be empty)."""
    q = reader.consume_queue(topic, qid)
    q.require_contiguous()              # a read across a gap would split ~1e17 units (spec: corruption)
    mx = reader.queue_max_offset(q)
    mn = reader.queue_min_offset(q, mx)
    where = f"{topic}:{qid} in {store_root}"
    s = _offset_from_spec(opts.starting_offsets, topic, qid, EARLIEST)
    e = _offset_from_spec(opts.ending_offsets, topic, qid, LATEST)
    start = mn if s == EARLIEST else (mx if s == LATEST else int(s))
    end = mx if e == LATEST else (mn if e == EARLIEST else int(e))
    if start < mn:
        if opts.fail_on_data_loss:
            raise DataLossError(f"{where}: startingOffsets {start} is below the queue's min offset {mn} "
                                f"(messages {start}..{mn - 1} were removed); set failOnDataLoss=false to start at {mn}")
        start = mn
    if start > mx:
        raise OptionError(f"{where}: startingOffsets {start} is past the queue's max offset {mx}")
    if end > mx:
        raise OptionError(f"{where}: endingOffsets {end} is past the queue's max offset {mx}")
    if end < start:
        if isinstance(opts.ending_offsets, dict) and end < mn and not opts.fail_on_data_loss:
            end = start
        elif end < mn and opts.fail_on_data_loss:
            raise DataLossError(f"{where}: endingOffsets {end} is below the queue's min offset {mn}")
        else:
            raise OptionError(f"{where}: endingOffsets {end} is before startingOffsets {start}")
    if opts.starting_timestamp is not None:
        start = offset_by_time(reader, q, start, end, opts.starting_timestamp)
    if (ts := _timestamp_for(opts.starting_by_timestamp, topic, qid)) is not None:
        # Kafka: the earliest offset whose timestamp >= ts, over the whole queue (startingOffsets does not apply)
        start = offset_by_time(reader, q, mn, mx, ts)
        if start == mx and opts.by_timestamp_strategy == "error":
            raise no_offset_for_timestamp(where, ts)
        end = max(start, end)
    if opts.ending_timestamp is not None:
        end = max(start, offset_by_time(reader, q, start, end, opts.ending_timestamp))
    if (ts := _timestamp_for(opts.ending_by_timestamp, topic, qid)) is not None:
        end = max(start, offset_by_time(reader, q, start, mx, ts))      # none: the queue's end (Kafka: latest)
    # pushed filters
    lo, hi = pushed.queue_offset
    start, end = max(start, lo), min(end, hi)
    if start >= end:
        return start, start
    plo, phi = pushed.phy_offset
    if plo > -(1 << 63):
        start = first_index_with_phy_at_least(q, start, end, plo)
    if phi < (1 << 63) - 1 and start < end:
        end = first_index_with_phy_at_least(q, start, end, phi)
    tlo, thi = pushed.store_ts
    if tlo > -(1 << 63) and start < end:
        start = offset_by_time(reader, q, start, end, tlo)
    if thi < (1 << 63) - 1 and start < end:
        end = offset_by_time(reader, q, start, end, thi)
    return start, max(start, end)


# --------------------------------------------------------------------------- plans

def plan(opts: ReadOptions, pushed: Pushed) -> list[RmqPartition]:
    readers = [open_store(p, opts.store_config) for p in opts.paths]
    try:
        for note in filter(None, (r.broker_note() for r in readers)):
            log.warning("rmq: %s", note)
        refs = [_store_ref(i, p, b, opts.store_config, r)
                for i, (p, b, r) in enumerate(zip(opts.paths, opts.brokers, readers))]
        indexed = opts.index_lookups and all(r.config.message_index_enable for r in readers)
        # keys: an IndexFile lookup, unless a whole-store read keeps transactional records (the IndexFile
        # leaves out rolled-back ones)
        by_keys = opts.keys is not None and indexed and (opts.topic_mode or not opts.include_transactional)
        queue_mode = opts.topic_mode or (
            not opts.include_transactional
            and (pushed.tags is not None or pushed.topics is not None or pushed.queue_ids is not None)
            and not (pushed.msg_ids is not None or (pushed.uniq_keys is not None and opts.index_lookups) or by_keys))
        selected = select_queues(opts, pushed, readers) if (queue_mode or opts.topic_mode) else None
        if pushed.empty or (opts.keys is not None and not opts.keys):
            return []
        # the lookups (lookup_planning.py) get this module's queue bounds and queue / CommitLog partitions
        base = QueuePlanning(queue_bounds, _plan_queues, _plan_commitlog, default_parallelism)
        if pushed.msg_ids is not None or (pushed.uniq_keys is not None and indexed):
            return _plan_lookups(opts, pushed, readers, refs, selected, base)
        if by_keys:
            parts = _plan_key_lookups(opts, pushed, readers, refs, selected, base)
            if parts is not None:
                return parts
            log.warning("rmq: a key of the lookup has %d or more IndexFile hits in a topic: reading the store "
                        "with the keys checked on every record instead", lookup_planning.LOOKUP_MAX_HITS)
        if queue_mode:
            return _plan_queues(opts, pushed, readers, refs, selected)
        return _plan_commitlog(opts, pushed, readers, refs)
    finally:
        for r in readers:
            r.close()


def _plan_queues(opts, pushed, readers, refs, selected, floors: Optional[list] = None) -> list[RmqPartition]:
    """``floors``: per store, the CommitLog offset below which units are left out (an IndexFile lookup's tail)."""
    ranges = []
    for reader, ref, keys in zip(readers, refs, selected):
        for topic, qid in keys:
            s, e = queue_bounds(opts, pushed, reader, topic, qid, ref.root)
            if floors is not None and s < e:
                q = reader.consume_queue(topic, qid)
                s = e if q is None else max(s, first_index_with_phy_at_least(q, s, e, floors[ref.index]))
            for a, b in split_range(s, e, opts.max_records_per_partition):
                ranges.append((ref, topic, qid, a, b))

    def split_one(r):
        ref, t, q, a, b = r
        m = (a + b) // 2
        return (ref, t, q, a, m), (ref, t, q, m, b)

    ranges = _ensure_min_partitions(ranges, opts.min_partitions, lambda r: r[4] - r[3], split_one)
    ranges = _ensure_min_partitions(ranges, default_parallelism(), lambda r: r[4] - r[3], split_one,
                                    MIN_SPLIT_RECORDS)
    return _pack_queue_ranges(ranges, opts)


def _pack_queue_ranges(ranges: list, opts) -> list[RmqPartition]:
    """Whole (unsplit) queue ranges of one store are packed into tasks of up to
    maxRecordsPerPartition units when there are more of them than tasks to fill (see
    MIN_QUEUE_TASKS): one task per queue then costs more than it reads.  Split queues keep one
    partition per piece."""
    counts: dict = {}
    for ref, t, q, a, b in ranges:
        counts[(ref.index, t, q)] = counts.get((ref.index, t, q), 0) + 1
    out: list[RmqPartition] = []
    whole: dict = {}
    for r in ranges:
        ref, t, q, a, b = r
        if counts[(ref.index, t, q)] == 1 and b > a:
            whole.setdefault(ref.index, (ref, []))[1].append(r)
        else:
            out.append(QueueRange(*r))
    cap = opts.max_records_per_partition
    for ref, rs in whole.values():
        total = sum(b - a for _, _, _, a, b in rs)
        bins_n = max(1, -(-total // cap),
                     min(len(rs), max(opts.min_partitions, 2 * default_parallelism(), MIN_QUEUE_TASKS)))
        if bins_n >= len(rs):
            out.extend(QueueRange(*r) for r in rs)
            continue
        bins = [[0, []] for _ in range(bins_n)]
        for r in sorted(rs, key=lambda r: r[4] - r[3], reverse=True):     # largest first, least loaded bin
            bmin = min(bins, key=lambda x: x[0])
            bmin[0] += r[4] - r[3]
            bmin[1].append(r)
        for _, members in bins:
            if len(members) == 1:
                out.append(QueueRange(*members[0]))
            elif members:
                members.sort(key=lambda r: (r[1], r[2]))
                out.append(QueueRanges(ref, tuple((t, q, a, b) for _, t, q, a, b in members)))
    return out


def _plan_commitlog(opts, pushed, readers, refs, floors: Optional[list] = None) -> list[RmqPartition]:
    """``floors``: per store, a record start below which nothing is read (an IndexFile lookup's tail)."""
    spans = []                                   # (ref, start, end, segment start, segment end, boundary finder)
    for reader, ref in zip(readers, refs):
        queues = [reader.consume_queue(*k) for k in reader.queue_keys()]
        bounds = [(q, q.first_file_start_offset, q.max_offset) for q in queues if q is not None]

        def boundary_at_or_before(target: int, seg_start: int, bounds=bounds) -> int:
            best = seg_start
            for q, lo, hi in bounds:
                p = last_unit_at_or_before(q, lo, hi, target)
                if p is not None and seg_start <= p <= target and p > best:
                    best = p
            return best

        def boundary_at_or_after(target: int, limit: int, bounds=bounds) -> int:
            """The first record start known from any ConsumeQueue in [target, limit), else ``limit``."""
            best = limit
            for q, lo, hi in bounds:
                i = first_index_with_phy_at_least(q, lo, hi, target)
                u = _unit(q, i) if i < hi else None
                if u is not None and u[1] != PRE_BLANK_SIZE and target <= u[0] < best:
                    best = u[0]
            return best

        plo, phi = pushed.phy_offset
        segments = reader.commitlog.segments
        for i, seg in enumerate(segments):
            seg_end = seg.start_offset + max(seg.size_bytes, reader.commitlog.segment_size)
            if i + 1 < len(segments):
                # A file longer than its segment must not overlap the next one: its records would be
                # read twice, once from each file.
                seg_end = min(seg_end, segments[i + 1].start_offset)
            a = max(seg.start_offset, ref.commit_log_min)
            b = min(seg_end, ref.commit_log_max)
            if phi <= a:
                continue
            if phi < b:
                # A bound inside a record must not cut it: end at a record start (rows past the
                # bound are dropped by the row filter).
                b = boundary_at_or_after(phi, b)
            if a >= b:
                continue
            if plo > a:
                if plo >= b:
                    continue
                a = boundary_at_or_before(plo, seg.start_offset)
            if floors is not None and floors[ref.index] > a:
                a = floors[ref.index]
                if a >= b:
                    continue
            spans.append((ref, a, b, seg.start_offset, seg_end, boundary_at_or_before))
    step = opts.commit_log_bytes_per_partition(sum(b - a for _, a, b, *_ in spans), default_parallelism())
    out = []
    for ref, a, b, seg_start, seg_end, boundary_at_or_before in spans:
        cuts = [a]
        t = a + step
        while t < b:
            c = boundary_at_or_before(t, seg_start)
            if c > cuts[-1]:
                cuts.append(c)
            t += step
        cuts.append(b)
        for x, y in zip(cuts, cuts[1:]):
            out.append([ref, x, y, seg_start, seg_end])

    def size_of(r):
        return r[2] - r[1]

    def split_one(r):
        ref, x, y, s0, s1 = r
        reader = readers[ref.index]
        queues = [reader.consume_queue(*k) for k in reader.queue_keys()]
        mid = (x + y) // 2
        best = x
        for q in queues:
            p = last_unit_at_or_before(q, q.first_file_start_offset, q.max_offset, mid)
            if p is not None and x < p < y and p > best:
                best = p
        if best <= x:
            return None, None
        return [ref, x, best, s0, s1], [ref, best, y, s0, s1]

    out = _ensure_min_partitions(out, opts.min_partitions, size_of, split_one)
    out = _ensure_min_partitions(out, default_parallelism(), size_of, split_one, MIN_SPLIT_BYTES)
    return [CommitLogRange(*r) for r in out]
