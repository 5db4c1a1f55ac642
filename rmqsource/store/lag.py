"""Consumer-group lag per queue: committed offset vs the queue's max offset.

Like RocketMQ's ``mqadmin consumerProgress``: for every committed ``(group, topic)``
wherever the broker keeps them (:mod:`rmqsource.store.offset_source`: consumerOffset.json,
lmqConsumerOffset.json, RocksDB ``config/rdb`` of config v2, the 5.2 RocksDB config;
optionally only one group), one row per queue of that topic present in the store or in
the offsets:

``{"group", "topic", "queueId", "brokerOffset", "consumerOffset", "minOffset", "diff", "requestMode"}``

``requestMode`` is ``POP`` for the (topic, group) pairs ``config/messageRequestMode.json``
names with mode POP (and their POP retry topics), else ``PULL``.  A POP group's committed
offset moves when messages are popped, so messages popped and not yet acked (in flight,
kept as checkpoints in the revive log) are not lag: exactly what the broker's
``consumeStats`` reports for such a group.

``brokerOffset`` is the queue's max offset (next offset to be written),
``consumerOffset`` the committed next offset to consume (None when the group
has no entry for that queue), ``diff = brokerOffset - max(consumerOffset,
minOffset)`` (never negative; messages removed by retention are not lag).

By default the max offsets come straight from the ConsumeQueue files (cheap,
safe while a writer runs); ``exact=True`` applies the reader's recovery rules
(units past the CommitLog's valid end are ignored), which scans CommitLog
data when the store was not shut down cleanly.
"""

from __future__ import annotations

import os
from typing import Optional

from ..errors import OptionError
from .config import StoreConfig
from .consumequeue import ConsumeQueue
from .layout import StoreLayout
from .queues import list_queues, open_queue
from .offset_source import CommittedOffsets, load_committed_offsets, pop_pairs, request_mode

__all__ = ["group_lag", "group_lag_with_source", "lag_rows_text"]


def _queue_bounds(layout: StoreLayout, config: StoreConfig, topic: str, queue_id: int,
                  cl_min: int) -> tuple[int, int]:
    if layout.rocksdb_queues:
        q = open_queue(layout, topic, queue_id)
        if q is None:
            return 0, 0
    else:
        qdir = layout.queue_dir(topic, queue_id)
        if not os.path.isdir(qdir):
            return 0, 0
        q = ConsumeQueue(qdir, topic, queue_id)
    try:
        mx = q.max_offset
        mn = q.min_offset(cl_min, engine_v5=config.is_v5, max_offset=mx)
        return min(mn, mx), mx
    finally:
        q.close()


def group_lag(root: str | os.PathLike, config: Optional[StoreConfig] = None, group: Optional[str] = None,
              *, exact: bool = False, problems: Optional[list] = None) -> list[dict]:
    """Lag rows sorted by group, topic, queueId (see the module docstring).

    An entry whose topic cannot be a queue of this store (``"../../etc@g1"``) gets no rows; a line
    saying why goes to ``problems`` when given, and the other entries are reported as usual.
    """
    return group_lag_with_source(root, config, group, exact=exact, problems=problems)[0]


def group_lag_with_source(root: str | os.PathLike, config: Optional[StoreConfig] = None,
                          group: Optional[str] = None, *, exact: bool = False,
                          problems: Optional[list] = None) -> tuple[list[dict], CommittedOffsets]:
    """:func:`group_lag` and the committed offsets it used (their source: which file or database)."""
    config = config or StoreConfig()
    root = os.fspath(root)
    layout = StoreLayout.for_config(root, config)
    if group is not None and (not group or "@" in group):
        raise OptionError(f"group must be a non-empty name without '@', got {group!r}")
    committed_offsets = load_committed_offsets(root)     # before the queues: an unreadable source says so first
    layout.check_is_store()
    pops = pop_pairs(root)
    entries = list(committed_offsets.entries)
    if group is not None:
        entries = [e for e in entries if e.group == group]
    committed: dict[tuple[str, str], dict[int, int]] = {}
    for e in entries:
        committed.setdefault((e.group, e.topic), {})[e.queue_id] = e.offset
    bounds: dict[tuple[str, int], tuple[int, int]] = {}
    reader = None
    if exact:
        from .reader import MessageStoreReader
        reader = MessageStoreReader(root, config)
    try:
        on_disk: dict[str, set[int]] = {}
        # exact: the reader's queues (a stopped store's records past its ConsumeQueues included)
        for t, q in (reader.queue_keys() if reader is not None else list_queues(layout)):
            on_disk.setdefault(t, set()).add(q)
        cl_min = reader.commitlog.min_offset if reader else _commit_log_min_offset(layout)

        def queue_bounds(topic: str, qid: int) -> tuple[int, int]:
            key = (topic, qid)
            if key not in bounds:
                if reader is not None:
                    q = reader.consume_queue(topic, qid)
                    if q is None:
                        bounds[key] = (0, 0)
                    else:
                        mx = reader.queue_max_offset(q)
                        bounds[key] = (reader.queue_min_offset(q, mx), mx)
                else:
                    bounds[key] = _queue_bounds(layout, config, topic, qid, cl_min)
            return bounds[key]

        rows = []
        for (grp, topic), offsets in sorted(committed.items()):
            try:
                qids = sorted(set(offsets) | on_disk.get(topic, set()))
                bounds_of = {qid: queue_bounds(topic, qid) for qid in qids}
            except OptionError as exc:        # not a topic name this store can hold
                if problems is not None:
                    problems.append(f"{committed_offsets.source.path}: entry "
                                    f"{(topic + '@' + grp)[:200]!r} skipped: {exc}")
                continue
            for qid, (mn, mx) in bounds_of.items():
                off = offsets.get(qid)
                base = mn if off is None else max(off, mn)
                rows.append({"group": grp, "topic": topic, "queueId": qid, "brokerOffset": mx,
                             "consumerOffset": off, "minOffset": mn, "diff": max(0, mx - base),
                             "requestMode": request_mode(topic, grp, pops)})
        return rows, committed_offsets
    finally:
        if reader is not None:
            reader.close()


def lag_rows_text(rows: list[dict]) -> str:
    """A plain table like ``mqadmin consumerProgress`` (for the CLI)."""
    header = f"{'#Group':<32} {'#Topic':<32} {'#QID':>5} {'#Broker Offset':>15} {'#Consumer Offset':>17} {'#Diff':>12}"
    lines = [header]
    total = 0
    for r in rows:
        co = "-" if r["consumerOffset"] is None else str(r["consumerOffset"])
        lines.append(f"{r['group']:<32} {r['topic']:<32} {r['queueId']:>5} {r['brokerOffset']:>15} {co:>17} "
                     f"{r['diff']:>12}")
        total += r["diff"]
    lines.append(f"Diff Total: {total}")
    return "\n".join(lines)


def _commit_log_min_offset(layout) -> int:
    """The CommitLog's first offset from the file names (DLedger data files included), 0 when there is none."""
    from .commitlog import CommitLog
    cl = CommitLog(layout)
    cl.close()
    return cl.min_offset
