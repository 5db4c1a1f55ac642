"""Streaming read side of the ``rmq`` source: ``spark.readStream.format("rmq")``.

Offsets are ``{topic: {queueId: nextQueueOffset}}`` (JSON object keys are
strings; topics sorted, queue ids in numeric order, so equal offsets always
serialize to the same text).  A micro-batch is one ConsumeQueue range
``[start, end)`` per queue; a task reads its range with the batch source's
range reader (:func:`rmqsource.spark.batch.read_partition`), so rows and
schema are exactly those of ``spark.read.format("rmq")``.

The driver never computes the CommitLog's recovered end (that scans whole
segments while a writer has ``abort`` present).  It follows each queue's
ConsumeQueue tail instead, incrementally: the writer dispatches a unit only
after the record's bytes are written, and the last unit found is checked
against the record it points at (size, queueId, queueOffset) before it is
admitted, so a unit caught half-written is never read; when it fails, only the
units before the first one its record does not confirm are admitted (after a
crash, every unit past the valid CommitLog end fails, as the batch read caps them).

Options (besides the batch ones: path, topics / topicPattern / queues,
failOnDataLoss, decompress, batchSize, maxRecordsPerPartition, store config
keys):

* ``startingOffsets``: ``latest`` (default), ``earliest``, ``group`` (the
  committed offsets of ``consumerGroup`` wherever the broker keeps them:
  ``config/consumerOffset.json``, ``lmqConsumerOffset.json``, RocksDB
  ``config/rdb`` (config v2) or the 5.2 RocksDB config, see
  :mod:`rmqsource.store.offset_source`;
  a group with no commit fails unless ``startingOffsetsFallback`` =
  ``earliest``/``latest`` says where to start, like Kafka's
  ``auto.offset.reset``; queues of a group that has commits elsewhere start
  at the fallback, default ``earliest``; ``none`` requires a commit for every
  queue), or JSON ``{"T": {"0": 12}}`` (-2 = earliest, -1 = latest;
  queues not listed start at latest).  Used only when the query starts
  without a checkpoint.
* ``startingTimestamp`` (ms): first message stored at or after it, per queue.
* ``maxMessagesPerTrigger``, ``maxBytesPerTrigger``: admission control; the
  budget is split across queues in proportion to their backlog.
* ``minMessagesPerTrigger`` with ``maxTriggerDelay`` (default ``15m``;
  ``500ms``, ``10s``, ``2m``, ``1h`` or plain milliseconds): wait for at
  least that many messages, but not longer than the delay.
* ``subExpression``: RocketMQ tag expression ``TagA || TagB`` (``*`` = all);
  ConsumeQueue tagsCode hashes skip units first, then the exact TAGS string
  is checked on each record.
* ``consumerGroup``: ``commit(end)`` merges the offsets into the store's
  ``config/consumerOffset.json`` (RocketMQ format, never backwards), or into
  ``config/rdb/`` of a config-v2 store (:mod:`rmqsource.store.config_rdb`).
  Refused before anything is read when the broker keeps the offsets in the
  5.2 RocksDB config, or when ``configManagerVersion=v1`` is given for a store
  that has ``config/rdb/``.
* ``commitOffsets`` (default true): ``false`` reads the group's offsets
  (``startingOffsets=group``) but commits nothing.
* ``reportLatestOffset`` (default true): report the queues' max offsets to
  the query progress.

Queues (new topics matching the selection, new queue ids) found between
batches are read from their beginning.  ``Trigger.AvailableNow`` stops at the
max offsets present when the query starts.

pyspark 4.0 and 4.1 call ``latestOffset()`` without arguments (no admission
control, :mod:`rmqsource.spark.compat`): the reader then takes the start of
the next batch from its own record (the initial offset, or the end of the
last batch Spark planned, also after a restart) and bounds the offsets it
returns by the options' limits itself.  There ``Trigger.AvailableNow`` is
Spark's wrapper, which asks once and runs one batch: with
maxMessagesPerTrigger / maxBytesPerTrigger that batch is bounded and the
query ends after it; and the group commit of the last batch happens when
the query next runs (Spark does not report a finished last batch).

``failOnDataLoss=true`` (default) fails with a
:class:`~rmqsource.errors.DataLossError` naming topic, queue and offsets when
retention removed messages not yet read; ``false`` skips them.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Iterator, Mapping, Optional, Sequence

from .compat import require_python_data_source

require_python_data_source()     # pyspark 3.5: one line saying the jar is required there

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition  # noqa: E402

from ..errors import DataLossError, OptionError
from ..store.consumequeue import ConsumeQueue
from ..store.config_rdb import uses_config_rdb
from ..store.consumer_offsets import ConsumerOffsets
from ..store.layout import StoreLayout
from ..store.queues import open_queue
from ..store.offset_source import load_committed_offsets, locate_offset_source, refuse_group_commit
from .compat import (ReadAllAvailable, ReadLimit, ReadMaxBytes, ReadMaxRows, ReadMinRows,
                     SupportsTriggerAvailableNow)
from .options import EARLIEST, LATEST, no_offset_for_timestamp
from .planning import split_range
from .store_watcher import StoreWatcher, commitlog_segments
from .stream_admission import apply_bytes, split_budget
from .stream_offsets import Key, offsets_from_json, offsets_to_json
from .stream_options import GROUP, StreamOptions, parse_stream_options


class StreamRange(InputPartition):
    """ConsumeQueue offsets [start, end) of one queue in one micro-batch."""

    def __init__(self, topic: str, queue_id: int, start: int, end: int, new_queue: bool = False):
        super().__init__(None)
        self.topic, self.queue_id, self.start, self.end = topic, queue_id, start, end
        self.new_queue = new_queue

    def __repr__(self):
        return f"StreamRange({self.topic}:{self.queue_id}, [{self.start}, {self.end}))"


def read_stream_range(opts: StreamOptions, columns: Sequence[str], part: StreamRange) -> Iterator:
    """Arrow batches of one StreamRange, through the batch source's queue-range reader."""
    from .batch import ReadSpec, read_partition
    from .planning import QueueRange, StoreRef
    from .pushdown import Pushed

    config = opts.read.store_config
    layout = StoreLayout.for_config(opts.root, config)
    segs = commitlog_segments(layout)
    cl_min = segs[0].start_offset if segs else 0
    cl_end = (segs[-1].start_offset + segs[-1].size_bytes) if segs else 0
    start = part.start
    if layout.rocksdb_queues:
        rq = open_queue(layout, part.topic, part.queue_id)
        first = rq.first_file_start_offset if rq is not None and rq.max_offset > 0 else part.end
    else:
        q = ConsumeQueue(layout.queue_dir(part.topic, part.queue_id), part.topic, part.queue_id)
        try:
            first = q.first_file_start_offset if q.segments else part.end
        finally:
            q.close()
    if start < first:
        # ConsumeQueue files below ``first`` were deleted by retention.
        if opts.read.fail_on_data_loss and not part.new_queue:
            raise DataLossError(
                f"topic {part.topic} queue {part.queue_id} in {opts.root}: messages at queue offsets "
                f"{start}..{min(first, part.end) - 1} were removed (the ConsumeQueue now starts at offset "
                f"{first}); set failOnDataLoss=false to skip them")
        start = min(first, part.end)
    if start >= part.end:
        return
    store = StoreRef(index=0, root=opts.root, broker=opts.broker, config=config, commit_log_min=cl_min,
                     commit_log_max=cl_end, cq_on_disk=True)
    pushed = Pushed(tags=opts.sub_tags) if opts.sub_tags is not None else Pushed()
    read_opts = opts.read
    if part.new_queue and read_opts.fail_on_data_loss:
        read_opts = replace(read_opts, fail_on_data_loss=False)
    body = read_opts.body
    if body is not None:
        from .bodies.decode import decode_batches, message_columns
        spec = ReadSpec(read_opts, pushed, message_columns(columns, body))
    else:
        spec = ReadSpec(read_opts, pushed, tuple(columns))
    try:
        batches = read_partition(spec, QueueRange(store, part.topic, part.queue_id, start, part.end))
        yield from batches if body is None else decode_batches(body, columns, batches)
    except DataLossError as exc:
        raise DataLossError(f"topic {part.topic} queue {part.queue_id}, offsets [{part.start}, {part.end}): "
                            f"{exc}") from None


def _check_group_start(o: StreamOptions, keys: set, committed: dict) -> None:
    """startingOffsets=group: a group without commits fails unless startingOffsetsFallback says where to start
    (Kafka's auto.offset.reset); with ``none`` every queue needs a committed offset."""
    have = keys & set(committed)
    if not have and o.starting_fallback is None:
        topics = ", ".join(sorted({t for t, _ in keys})) or "(no queues)"
        raise OptionError(f"startingOffsets=group: consumer group {o.consumer_group!r} has no committed offsets for "
                          f"{topics} in {o.root} ({locate_offset_source(o.root).description}); set startingOffsetsFallback=earliest "
                          f"or latest to start anyway (like Kafka's auto.offset.reset)")
    if o.starting_fallback == "none":
        missing = sorted(keys - set(committed))
        if missing:
            shown = ", ".join(f"{t}:{q}" for t, q in missing[:10]) + (" ..." if len(missing) > 10 else "")
            raise OptionError(f"startingOffsets=group with startingOffsetsFallback=none: consumer group "
                              f"{o.consumer_group!r} has no committed offset for {shown}")


# --------------------------------------------------------------------------- the reader

class RmqStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``DataSourceStreamReader`` over ConsumeQueue offsets (see the module docstring)."""

    def __init__(self, options: Mapping[str, str], schema=None, columns: Optional[Sequence[str]] = None):
        from .schema import COLUMNS, requested_columns
        self.opts = options if isinstance(options, StreamOptions) else parse_stream_options(options)
        if columns is None:
            body = self.opts.read.body
            if schema is not None and body is not None:
                from .bodies.decode import arrow_schema
                columns = requested_columns(schema, extra=arrow_schema(body))
            elif schema is not None:
                columns = requested_columns(schema)
            else:
                columns = COLUMNS + (tuple(body.columns.names) if body is not None else ())
        self.columns = tuple(columns)
        StoreLayout.for_config(self.opts.root, self.opts.read.store_config) \
            .check_is_store()
        self._watcher: Optional[StoreWatcher] = None
        self._target: Optional[dict[Key, int]] = None          # Trigger.AvailableNow
        self._last_trigger_ms = time.monotonic() * 1000.0
        self._committed: dict[Key, int] = {}
        self._initial: Optional[dict] = None      # initialOffset(), computed once
        # For latestOffset() without arguments: where the next batch starts, and the end of the last batch
        # Spark planned (also the empty one it plans on a restart to say where the query stands): done by the
        # time Spark asks for the next latest offset, so the group's progress.
        self._next_start: Optional[dict] = None
        self._planned_end: Optional[dict] = None

    # The reader is pickled to executors for read(); the watcher (fds, caches) stays on the driver.
    def __getstate__(self):
        state = dict(self.__dict__)
        state["_watcher"] = None
        return state

    @property
    def watcher(self) -> StoreWatcher:
        if self._watcher is None:
            self._watcher = StoreWatcher(self.opts)
        return self._watcher

    # -- offsets -----------------------------------------------------------------
    def initialOffset(self) -> dict:
        if self._initial is None:
            self._initial = self._initial_offset()
        if self._next_start is None:
            self._next_start = self._initial
        return self._initial

    def _initial_offset(self) -> dict:
        w = self.watcher
        o = self.opts
        if o.commits:          # fail before reading anything
            refuse_group_commit(o.root)
            uses_config_rdb(o.root, o.read.store_config)     # configManagerVersion=v1 beside config/rdb/
            ConsumerOffsets(o.root, config=o.read.store_config).check_writable()
        cl_min = w.commit_log_min()
        committed: dict[Key, int] = {}
        if o.starting == GROUP:
            table = load_committed_offsets(o.root).offsets_for_group(o.consumer_group)
            committed = {(t, int(q)): int(v) for t, qs in table.items() for q, v in qs.items()}
        keys = set(w.keys())
        if o.starting == GROUP:
            _check_group_start(o, keys, committed)
        by_time = o.read.starting_by_timestamp or {}
        for name, spec in (("startingOffsets", o.starting), ("startingOffsetsByTimestamp", by_time)):
            if isinstance(spec, dict):
                for t, qs in spec.items():
                    for qid in qs:
                        if (t, qid) not in keys:
                            raise OptionError(f"{name} names queue {t}:{qid}, which does not exist in {o.root}")
        out: dict[Key, int] = {}
        for key in sorted(keys):
            mx = w.max_offset(key)
            mn = w.min_offset(key, mx, cl_min)
            where = f"topic {key[0]} queue {key[1]}"
            if o.starting_timestamp is not None:
                out[key] = w.offset_by_time(key, mn, mx, o.starting_timestamp)
                continue
            if (ts := by_time.get(key[0], {}).get(key[1])) is not None:
                out[key] = w.offset_by_time(key, mn, mx, ts)
                if out[key] == mx and o.read.by_timestamp_strategy == "error":
                    raise no_offset_for_timestamp(f"{where} in {o.root}", ts)
                continue
            spec = o.starting
            if spec == GROUP:
                spec = committed.get(key, o.starting_fallback or EARLIEST)
            elif isinstance(spec, dict):
                spec = spec.get(key[0], {}).get(key[1], LATEST)
                spec = {-2: EARLIEST, -1: LATEST}.get(spec, spec)
            if spec == EARLIEST:
                off = mn
            elif spec == LATEST:
                off = mx
            else:
                off = int(spec)
                if off > mx:
                    if o.starting == GROUP:
                        off = mx       # committed past what the store now holds: resume at the end
                    else:
                        raise OptionError(f"startingOffsets: {where}: offset {off} is past the queue's max "
                                          f"offset {mx}")
                if off < mn:
                    if o.read.fail_on_data_loss:
                        raise DataLossError(f"{where} in {o.root}: starting offset {off} is below the queue's "
                                            f"min offset {mn} (messages {off}..{mn - 1} were removed); set "
                                            f"failOnDataLoss=false to start at {mn}")
                    off = mn
            out[key] = off
        return offsets_to_json(out)

    def getDefaultReadLimit(self) -> ReadLimit:
        o = self.opts
        if o.max_messages is not None:
            return ReadMaxRows(o.max_messages)
        if o.max_bytes is not None:
            return ReadMaxBytes(o.max_bytes)
        if o.min_messages is not None:
            return ReadMinRows(o.min_messages)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        w = self.watcher
        self._target = {k: w.max_offset(k) for k in w.keys()}

    def reportLatestOffset(self) -> Optional[dict]:
        if not self.opts.report_latest:
            return None
        w = self.watcher
        return offsets_to_json({k: w.max_offset(k) for k in w.keys()})

    def latestOffset(self, start: Optional[dict] = None, limit: Optional[ReadLimit] = None) -> dict:
        o = self.opts
        w = self.watcher
        if start is None:
            # pyspark without admission control asks without arguments (see the module docstring).
            start = self._next_start if self._next_start is not None else self.initialOffset()
            limit = self.getDefaultReadLimit()
            self._commit_group(offsets_from_json(self._planned_end))
        else:
            # ``start`` is the end of the last batch, processed and committed to the checkpoint
            # before the next batch is planned (also after a restart): the group's progress.
            self._commit_group(offsets_from_json(start))
        begin = offsets_from_json(start)
        keys = set(begin) | set(w.keys())
        if self._target is not None:
            keys = {k for k in keys if k in begin or k in self._target}
        cl_min = w.commit_log_min()
        eff: dict[Key, int] = {}
        avail: dict[Key, int] = {}
        for key in sorted(keys):
            mx = w.max_offset(key)
            if self._target is not None and key in self._target:
                mx = min(mx, max(self._target[key], begin.get(key, 0)))
            s = begin.get(key)
            if s is None:
                s0 = 0
                mn = w.min_offset(key, mx, cl_min) if mx > 0 else 0
                s = max(s0, mn)
            else:
                if s > mx:
                    # The queue shrank (ConsumeQueue rebuilt / truncated): nothing to read until it grows back.
                    eff[key], avail[key] = s, 0
                    continue
                mn = w.min_offset(key, mx, cl_min) if (cl_min > 0 or s < mx) else 0
                if s < mn:
                    if o.read.fail_on_data_loss:
                        raise DataLossError(
                            f"topic {key[0]} queue {key[1]} in {o.root}: messages at queue offsets {s}..{mn - 1} "
                            f"were removed before they were read (the queue now starts at {mn}, ends at {mx}); "
                            f"set failOnDataLoss=false to skip ahead")
                    s = mn
            eff[key] = s
            avail[key] = max(0, mx - s)
        limited = not isinstance(limit, ReadAllAvailable)
        max_rows = max_bytes = min_rows = None
        if limited:
            max_rows = o.max_messages
            max_bytes = o.max_bytes
            min_rows = o.min_messages
            if isinstance(limit, ReadMaxRows):
                max_rows = limit.max_rows if max_rows is None else min(max_rows, limit.max_rows)
            elif isinstance(limit, ReadMaxBytes):
                max_bytes = limit.max_bytes if max_bytes is None else min(max_bytes, limit.max_bytes)
            elif isinstance(limit, ReadMinRows):
                min_rows = limit.min_rows if min_rows is None else max(min_rows, limit.min_rows)
        total = sum(avail.values())
        now_ms = time.monotonic() * 1000.0
        if min_rows and self._target is None and total < min_rows \
                and now_ms - self._last_trigger_ms < o.max_trigger_delay_ms:
            return start
        take = dict(avail)
        if max_rows is not None:
            take = split_budget(take, max_rows)
        if max_bytes is not None:
            take = apply_bytes(self.watcher, eff, take, max_bytes)
        end = dict(begin)
        for key in eff:
            end[key] = eff[key] + take.get(key, 0)
        if all(end.get(k) == begin.get(k) for k in end) and set(end) == set(begin):
            return start
        self._last_trigger_ms = now_ms
        return offsets_to_json(end)

    # -- planning / reading ---------------------------------------------------------
    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        self._next_start = self._planned_end = end
        begin = offsets_from_json(start)
        stop = offsets_from_json(end)
        max_records = self.opts.read.max_records_per_partition
        parts = []
        for key in sorted(stop):
            new_queue = key not in begin
            s = begin.get(key, 0)
            e = stop[key]
            for a, b in split_range(s, e, max_records):
                parts.append(StreamRange(key[0], key[1], a, b, new_queue=new_queue))
        return parts

    def read(self, partition: StreamRange) -> Iterator:
        return read_stream_range(self.opts, self.columns, partition)

    # -- lifecycle -------------------------------------------------------------------------
    def commit(self, end: dict) -> None:
        self._commit_group(offsets_from_json(end))

    def _commit_group(self, offsets: dict[Key, int]) -> None:
        """Merge offsets into config/consumerOffset.json for ``consumerGroup`` (never backwards)."""
        o = self.opts
        if not o.commits or not offsets:
            return
        last = getattr(self, "_committed", None) or {}
        if all(last.get(k, -1) >= v for k, v in offsets.items()):
            return
        per_topic: dict[str, dict[int, int]] = {}
        for (topic, qid), off in sorted(offsets.items()):
            per_topic.setdefault(topic, {})[qid] = off
        effective = ConsumerOffsets(o.root, config=o.read.store_config).commit(o.consumer_group, per_topic)
        merged = dict(last)
        for topic, qs in effective.items():
            for qid, off in qs.items():
                merged[(topic, qid)] = max(off, merged.get((topic, qid), -1))
        self._committed = merged

    def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None
