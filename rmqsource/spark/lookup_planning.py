"""Lookup planning: msgId / uniqKey / keys point reads to :class:`~rmqsource.spark.partitions.Lookup` partitions
(twin of rmqsource/jvm/io/rmqsource/spark/read/LookupPlanner.java, the same offsets, splits, tails).

CommitLog offsets are decoded from msgIds or found in the IndexFiles.  The CommitLog past what the IndexFiles
cover (:func:`_index_coverage`) is read by ranges next to them (:func:`_with_index_tail`).  :func:`plan` in
planning.py calls :func:`_plan_lookups` / :func:`_plan_key_lookups` with its open readers and store refs, and a
:class:`QueuePlanning` of its own functions (queue bounds, queue and CommitLog partitions for the index tail):
this module does not import planning.py.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Callable, Optional

from .. import limits
from ..errors import RmqError
from ..format.msgid import decode_offset_msg_id
from ..format.system_topics import is_internal_topic
from ..store.reader import MessageStoreReader
from .partitions import Lookup, RmqPartition, StoreRef

# Reads of the IndexFile for uniqKey lookups are not capped at maxMsgsNumBatch.
LOOKUP_MAX_HITS = 1 << 20
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueuePlanning:
    """What the lookups take from planning.py, passed in by its plan(): ``queue_bounds`` (a queue's planned
    [start, end)), ``plan_queues`` / ``plan_commitlog`` (the partitions of an index tail, with ``floors``) and
    ``default_parallelism``."""
    queue_bounds: Callable
    plan_queues: Callable
    plan_commitlog: Callable
    default_parallelism: Callable


def _lookup_queue_ranges(opts, pushed, reader, ref, selected, queue_bounds) -> Optional[dict]:
    """{(topic, queueId): [start, end)} of a topic read's planned queues (None: a whole-store read)."""
    if selected is None:
        return None
    queue_ranges = {}
    for topic, qid in selected:
        s, e = queue_bounds(opts, pushed, reader, topic, qid, ref.root)
        if s < e:
            queue_ranges[(topic, qid)] = (s, e)
    return queue_ranges


def _lookup_topics(opts, pushed, reader, queue_ranges) -> list[str]:
    """The topics an IndexFile lookup walks: those of the planned queues, else the store's (minus RocketMQ's
    own when the read leaves them out)."""
    topics = sorted({t for t, _ in queue_ranges}) if queue_ranges is not None else reader.topics()
    if pushed.topics is not None:
        topics = [t for t in topics if t in pushed.topics]
    if opts.internal_topics_excluded:
        topics = [t for t in topics if not is_internal_topic(t)]
    return topics


def _lookup_reader(reader, ref) -> MessageStoreReader:
    """A reader of the store whose IndexFile walks are not capped at maxMsgsNumBatch."""
    return MessageStoreReader(ref.root, replace(reader.config, max_msgs_num_batch=LOOKUP_MAX_HITS),
                              commit_log_end=ref.commit_log_max)


def _index_coverage(reader: MessageStoreReader, ref: StoreRef, lookup_reader: MessageStoreReader) -> tuple:
    """What the IndexFiles cover: ``(end, last)``.  Hits at offsets below ``end`` are answered by the IndexFiles;
    the CommitLog from ``end`` to the planned valid end is not indexed yet (a live broker's dispatch lags behind
    its CommitLog writes; a crashed broker rebuilds its index at recovery, which has not happened).

    The newest IndexFile's endPhyOffset is the start of the last message indexed (read before any hash walk, so
    every entry below it is seen); that message may have only some of its keys in the index (its keys are put one
    by one), so ``last`` is that offset, to be read as a point read with the hits, and ``end`` is the record after
    it.  No IndexFile entry, or an endPhyOffset that names no record: ``end`` is the CommitLog's min offset (all of
    it is read as the tail) and ``last`` None."""
    last_file = lookup_reader.index_service.last_file
    t = last_file.header.end_phy_offset if last_file is not None else 0
    lo, hi = ref.commit_log_min, ref.commit_log_max
    if t >= hi:
        return hi, None
    if t <= 0 or t < lo:
        return lo, None
    cl = reader.commitlog
    seg = cl.reader.find(t)
    head = cl.reader.pread(seg, t - seg.start_offset, 8) if seg is not None else b""
    if len(head) == 8:
        total = int.from_bytes(head[:4], "big", signed=True)
        magic = int.from_bytes(head[4:8], "big", signed=True)
        if magic in (-626843481, -626843477) and total >= limits.MIN_RECORD_BYTES and t + total <= hi:
            return t + total, t
    log.warning("rmq: the newest IndexFile of %s says endPhyOffset %d, where no record starts: its lookups read "
                "the whole CommitLog", ref.root, t)
    return lo, None


def _with_index_tail(opts, pushed, readers, refs, selected, lookups: list, coverage: list,
                     base: QueuePlanning) -> list[RmqPartition]:
    """An IndexFile lookup's partitions ``lookups`` (hits below each store's ``coverage[i][0]`` only) and the
    partitions reading each store's CommitLog past what its IndexFiles cover: the ranges a whole-store read cuts
    there, or for a topic read the planned queue ranges' units there (so the rows keep to them as the lookup's
    do).  Every row of those gets the read's exact checks (uniqKey, keys, the other pushed filters).  ``base``
    plans those (planning.py's _plan_queues / _plan_commitlog)."""
    floors = [end for end, _ in coverage]
    if all(end >= ref.commit_log_max for end, ref in zip(floors, refs)):
        return lookups
    if selected is not None:
        tail_keys = [keys if end < ref.commit_log_max else [] for keys, end, ref in zip(selected, floors, refs)]
        return lookups + base.plan_queues(opts, pushed, readers, refs, tail_keys, floors)
    return lookups + base.plan_commitlog(opts, pushed, readers, refs, floors)


def _plan_lookups(opts, pushed, readers, refs, selected, base: QueuePlanning) -> list[RmqPartition]:
    out = []
    coverage = []
    for i, (reader, ref) in enumerate(zip(readers, refs)):
        queue_ranges = _lookup_queue_ranges(opts, pushed, reader, ref, selected[i] if selected is not None else None,
                                            base.queue_bounds)
        offsets = set()
        if pushed.msg_ids is not None:
            for mid in pushed.msg_ids:
                try:
                    phy = decode_offset_msg_id(mid).phy_offset
                except RmqError:
                    continue          # not an offset msgId: matches nothing
                if ref.commit_log_min <= phy < ref.commit_log_max:
                    offsets.add(phy)
        else:
            lookup_reader = _lookup_reader(reader, ref)
            try:
                end, last = _index_coverage(reader, ref, lookup_reader)
                coverage.append((end, last))
                topics = _lookup_topics(opts, pushed, reader, queue_ranges)
                for topic in topics:
                    for key in pushed.uniq_keys:
                        found, _, _ = lookup_reader.query_offsets(topic, key, LOOKUP_MAX_HITS, 0, (1 << 63) - 1)
                        offsets.update(p for p in found if ref.commit_log_min <= p < end)
                if last is not None:
                    offsets.add(last)
            finally:
                lookup_reader.close()
        if offsets:
            out.append(Lookup(ref, tuple(offsets), queue_ranges))
    if pushed.msg_ids is not None:
        return out
    return _with_index_tail(opts, pushed, readers, refs, selected, out, coverage, base)


# A key lookup with more hits than this is read by several tasks (pieces of its sorted offsets).
MIN_LOOKUP_SPLIT_OFFSETS = 4096


def _plan_key_lookups(opts, pushed, readers, refs, selected, base: QueuePlanning) -> Optional[list[RmqPartition]]:
    """Options keys / keysFile: the IndexFile hits of ``topic#key`` for every key in every topic of the read,
    all keys walked together (``query_offsets_many``); the pushed storeTimestamp range prunes the IndexFiles.
    None when some key reaches LOOKUP_MAX_HITS in a topic (the caller scans instead of truncating)."""
    lo, hi = pushed.store_ts
    begin_ms = max(0, lo)
    end_ms = hi - 1 if hi < (1 << 63) - 1 else hi
    keys = sorted(opts.keys)
    out: list[RmqPartition] = []
    coverage = []
    for i, (reader, ref) in enumerate(zip(readers, refs)):
        queue_ranges = _lookup_queue_ranges(opts, pushed, reader, ref, selected[i] if selected is not None else None,
                                            base.queue_bounds)
        topics = _lookup_topics(opts, pushed, reader, queue_ranges)
        lookup_reader = _lookup_reader(reader, ref)
        try:
            end, last = _index_coverage(reader, ref, lookup_reader)
            coverage.append((end, last))
            found = []
            if topics:
                found, _, _ = lookup_reader.query_offsets_many([(t, k) for t in topics for k in keys],
                                                               LOOKUP_MAX_HITS, begin_ms, end_ms, covering=True)
        finally:
            lookup_reader.close()
        if any(len(f) >= LOOKUP_MAX_HITS for f in found):
            return None
        offsets = {p for f in found for p in f if ref.commit_log_min <= p < end}
        if last is not None:
            offsets.add(last)
        offsets = sorted(offsets)
        if not offsets:
            continue
        pieces = max(1, min(base.default_parallelism(), len(offsets) // MIN_LOOKUP_SPLIT_OFFSETS))
        step = -(-len(offsets) // pieces)
        out.extend(Lookup(ref, tuple(offsets[a:a + step]), queue_ranges) for a in range(0, len(offsets), step))
    return _with_index_tail(opts, pushed, readers, refs, selected, out, coverage, base)
