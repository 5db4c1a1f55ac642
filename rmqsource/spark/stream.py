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
  committed offsets of ``consumerGroup`` in ``config/consumerOffset.json``;
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
  ``config/consumerOffset.json`` (RocketMQ format, never backwards).
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

import os
import re
import time
from dataclasses import dataclass, replace
from typing import Iterator, Mapping, Optional, Sequence

import numpy as np

from .compat import require_python_data_source

require_python_data_source()     # pyspark 3.5: one line saying the jar is required there

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition  # noqa: E402

from ..errors import CorruptRecordError, DataLossError, OptionError
from ..format.consumequeue import CQ_UNIT_SIZE, PRE_BLANK_SIZE, count_valid_prefix, units_from_bytes
from ..format.record import Kind
from ..io.segments import common_segment_size, list_segments
from ..store.commitlog import CommitLog
from ..store.consumequeue import ConsumeQueue
from ..store.consumer_offsets import ConsumerOffsets
from ..store.layout import StoreLayout
from .compat import (ReadAllAvailable, ReadLimit, ReadMaxBytes, ReadMaxRows, ReadMinRows,
                     SupportsTriggerAvailableNow)
from .options import (EARLIEST, LATEST, STREAM, STREAM_OPTIONS, ReadOptions, apply_kafka_names, parse_bool,
                      parse_int, parse_offsets, parse_options)
from .planning import split_range

GROUP = "group"
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
# Bytes of ConsumeQueue read per pread while following a queue's tail.
TAIL_CHUNK_BYTES = 1 << 20
MIN_RECORD_BYTES = 91

# Options handled here (STREAM_OPTIONS); everything else goes to the batch option parser.
_BATCH_ONLY = ("endingoffsets", "endingtimestamp")

Key = tuple[str, int]


# --------------------------------------------------------------------------- options

@dataclass(frozen=True)
class StreamOptions:
    read: ReadOptions
    starting: object = LATEST                 # "latest" | "earliest" | "group" | {topic: {qid: off}}
    starting_fallback: Optional[str] = None   # earliest | latest | none; None: fail if the group has no commit
    starting_timestamp: Optional[int] = None
    max_messages: Optional[int] = None
    max_bytes: Optional[int] = None
    min_messages: Optional[int] = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    sub_tags: Optional[frozenset] = None      # None = "*"
    sub_expression: str = "*"
    consumer_group: Optional[str] = None
    report_latest: bool = True

    @property
    def root(self) -> str:
        return self.read.paths[0]

    @property
    def broker(self) -> str:
        return self.read.brokers[0]


def parse_duration_ms(name: str, value: str) -> int:
    """``500ms``, ``10s``, ``2m``, ``1h``, ``1d`` or a plain number of milliseconds."""
    text = str(value).strip().lower()
    m = re.fullmatch(r"([0-9]{1,15})\s*(ms|s|m|min|h|d)?", text)
    if not m:
        raise OptionError(f"option {name} must be a duration like 500ms, 10s, 2m, 1h (or milliseconds), "
                          f"got {value!r}")
    unit = {"ms": 1, None: 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}[m.group(2)]
    return int(m.group(1)) * unit


def parse_sub_expression(text: str) -> Optional[frozenset]:
    """RocketMQ ``FilterAPI.buildSubscriptionData``: ``*`` or empty = all, else tags split on ``||``."""
    expr = (text or "").strip()
    if not expr or expr == "*":
        return None
    tags = frozenset(t.strip() for t in expr.split("||") if t.strip())
    if not tags:
        raise OptionError(f"option subExpression {text!r} names no tag; use e.g. 'TagA || TagB' or '*'")
    return tags


def _positive_int(name: str, value: str) -> int:
    return parse_int(name, value, 1)


def parse_stream_options(options: Mapping[str, str]) -> StreamOptions:
    opts = {str(k).lower(): ("" if v is None else str(v)) for k, v in dict(options).items()}
    opts = apply_kafka_names(opts, STREAM)
    for key in _BATCH_ONLY:
        if key in opts:
            raise OptionError(f"option {key} is for batch reads; a stream has no end")
    ours = {k: opts.pop(k) for k in list(opts) if k in STREAM_OPTIONS}
    read = parse_options(opts, mode=STREAM)
    if len(read.paths) != 1:
        raise OptionError(f"a stream reads one store; got {len(read.paths)} paths ({', '.join(read.paths)})")
    if not read.topic_mode:
        raise OptionError("a stream needs one of the options topics, topicPattern or queues")
    kw: dict = {}
    if "startingoffsets" in ours:
        text = ours["startingoffsets"].strip()
        low = text.lower()
        kw["starting"] = low if low in (EARLIEST, LATEST, GROUP) else parse_offsets("startingOffsets", text)
    if "startingoffsetsfallback" in ours:
        fb = ours["startingoffsetsfallback"].strip().lower()
        if fb not in (EARLIEST, LATEST, "none"):
            raise OptionError(f"option startingOffsetsFallback must be earliest, latest or none, got {fb!r}")
        kw["starting_fallback"] = fb
    if "startingtimestamp" in ours:
        if "startingoffsets" in ours:
            raise OptionError("use either startingOffsets or startingTimestamp, not both")
        try:
            ts = int(ours["startingtimestamp"].strip())
        except ValueError:
            raise OptionError(f"option startingTimestamp must be epoch milliseconds, "
                              f"got {ours['startingtimestamp']!r}") from None
        if ts < 0:
            raise OptionError(f"option startingTimestamp must be >= 0, got {ts}")
        kw["starting_timestamp"] = ts
    if "maxmessagespertrigger" in ours:
        kw["max_messages"] = _positive_int("maxMessagesPerTrigger", ours["maxmessagespertrigger"])
    if "maxbytespertrigger" in ours:
        kw["max_bytes"] = _positive_int("maxBytesPerTrigger", ours["maxbytespertrigger"])
    if "minmessagespertrigger" in ours:
        kw["min_messages"] = _positive_int("minMessagesPerTrigger", ours["minmessagespertrigger"])
    if "maxtriggerdelay" in ours:
        if "minmessagespertrigger" not in ours:
            raise OptionError("option maxTriggerDelay needs minMessagesPerTrigger")
        kw["max_trigger_delay_ms"] = parse_duration_ms("maxTriggerDelay", ours["maxtriggerdelay"])
    if kw.get("min_messages") and kw.get("max_messages") and kw["min_messages"] > kw["max_messages"]:
        raise OptionError(f"minMessagesPerTrigger ({kw['min_messages']}) is larger than maxMessagesPerTrigger "
                          f"({kw['max_messages']})")
    if "subexpression" in ours:
        kw["sub_tags"] = parse_sub_expression(ours["subexpression"])
        kw["sub_expression"] = ours["subexpression"].strip() or "*"
    if "consumergroup" in ours:
        group = ours["consumergroup"].strip()
        if not group or "@" in group:
            raise OptionError(f"option consumerGroup must be a non-empty name without '@', got {group!r}")
        kw["consumer_group"] = group
    if kw.get("starting") == GROUP and not kw.get("consumer_group"):
        raise OptionError("startingOffsets=group needs the option consumerGroup")
    if "reportlatestoffset" in ours:
        kw["report_latest"] = parse_bool("reportLatestOffset", ours["reportlatestoffset"])
    return StreamOptions(read=read, **kw)


# --------------------------------------------------------------------------- offsets

def offsets_to_json(offsets: Mapping[Key, int]) -> dict:
    """``{(topic, qid): off}`` -> ``{topic: {"qid": off}}`` in a stable key order."""
    out: dict = {}
    for (topic, qid) in sorted(offsets):
        out.setdefault(topic, {})[str(qid)] = int(offsets[(topic, qid)])
    return out


def offsets_from_json(doc: Optional[Mapping]) -> dict[Key, int]:
    out: dict[Key, int] = {}
    for topic, per_queue in (doc or {}).items():
        for qid, off in per_queue.items():
            out[(topic, int(qid))] = int(off)
    return out


def split_budget(avail: Mapping[Key, int], budget: int) -> dict[Key, int]:
    """Split ``budget`` messages across queues in proportion to their backlog ``avail``.

    The shares add up to ``min(budget, sum(avail))`` exactly; no queue gets
    more than its backlog; remainders go to the largest fractional shares
    (ties: key order), so the result is deterministic.
    """
    total = sum(avail.values())
    if total <= budget:
        return dict(avail)
    alloc = {k: budget * a // total for k, a in avail.items()}
    rest = budget - sum(alloc.values())
    for k in sorted(avail, key=lambda k: (-(budget * avail[k] % total), k)):
        if rest <= 0:
            break
        if alloc[k] < avail[k]:
            alloc[k] += 1
            rest -= 1
    return alloc


# --------------------------------------------------------------------------- following the store

class StoreWatcher:
    """Driver-side view of the queues of one store, cheap to refresh between batches."""

    def __init__(self, opts: StreamOptions):
        self.opts = opts
        self.config = opts.read.store_config
        self.layout = StoreLayout.for_config(opts.root, self.config)
        self._tails: dict[Key, int] = {}
        rd = opts.read
        self._topics = set(rd.topics) if rd.topics is not None else None
        self._pattern = re.compile(rd.topic_pattern) if rd.topic_pattern is not None else None
        self._queues = set(rd.queues) if rd.queues is not None else None
        self._commitlog: Optional[CommitLog] = None
        self._dledger_end: Optional[tuple[CommitLog, int]] = None     # (the listing, its DLedger valid end)

    # -- selection --------------------------------------------------------------
    def wanted(self, key: Key) -> bool:
        topic, _ = key
        if self._queues is not None:
            return key in self._queues
        if self._topics is not None:
            return topic in self._topics
        return self._pattern.fullmatch(topic) is not None

    def keys(self) -> list[Key]:
        # Every trigger: the store may have gained a folder of a layout not read, or (a broker restarted in
        # DLedger mode) DLedger data files that continue the CommitLog.
        fresh = StoreLayout(self.layout.root, self.layout.commitlog_dirs, self.layout.keys)
        fresh.check_supported()
        if fresh.dledger_dir != self.layout.dledger_dir:
            self.close()
            self.layout = fresh
        return [k for k in self.layout.list_queues() if self.wanted(k)]

    # -- CommitLog --------------------------------------------------------------
    def commitlog(self, refresh: bool = False) -> CommitLog:
        if self._commitlog is None or refresh:
            if self._commitlog is not None:
                self._commitlog.close()
            self._commitlog = CommitLog(self.layout)
        return self._commitlog

    def dledger_end(self, cl: CommitLog) -> int:
        """DLedger recovery's end of the data, once per CommitLog listing (as the JVM stream): a unit's own
        entry header may pass while an earlier one fails, and the engine serves nothing past that."""
        if self._dledger_end is None or self._dledger_end[0] is not cl:
            self._dledger_end = (cl, cl.dledger_valid_end())
        return self._dledger_end[1]

    def commit_log_min(self) -> int:
        segs = commitlog_segments(self.layout)
        return segs[0].start_offset if segs else 0

    def close(self) -> None:
        if self._commitlog is not None:
            self._commitlog.close()
            self._commitlog = None
        self._dledger_end = None

    # -- ConsumeQueue tail --------------------------------------------------------
    def max_offset(self, key: Key) -> int:
        """Queue offset after the last unit that is written and verified (cached, forward-only)."""
        known = self._tails.get(key, 0)
        qdir = self.layout.queue_dir(*key)
        segs = list_segments(qdir)
        if not segs:
            return known
        file_size = common_segment_size(segs)          # as the batch read: a first file cut short misleads
        if file_size % CQ_UNIT_SIZE:
            return known
        upf = file_size // CQ_UNIT_SIZE
        by_start = {s.start_offset: s for s in segs}
        off = max(known, segs[0].start_offset // CQ_UNIT_SIZE)
        last_unit = None
        for _ in range(1 + len(segs) * (file_size // TAIL_CHUNK_BYTES + 2)):
            file_start = (off // upf) * upf
            seg = by_start.get(file_start * CQ_UNIT_SIZE)
            if seg is None:
                if segs[-1].start_offset > file_start * CQ_UNIT_SIZE:
                    self._refuse_gap(key)
                break
            pos = (off - file_start) * CQ_UNIT_SIZE
            want = min(TAIL_CHUNK_BYTES - TAIL_CHUNK_BYTES % CQ_UNIT_SIZE, seg.size_bytes - pos)
            if want <= 0:
                if seg.size_bytes < file_size and seg is not segs[-1]:
                    raise CorruptRecordError(
                        f"ConsumeQueue {key[0]}:{key[1]} ends at unit {off}, {seg.size_bytes} of its file's "
                        f"{file_size} bytes, and later files follow: the units between are missing", file=seg.path,
                        offset=seg.size_bytes)
                off = file_start + upf
                continue
            try:
                fd = os.open(seg.path, os.O_RDONLY)
            except FileNotFoundError:
                break
            try:
                data = os.pread(fd, want, pos)
            finally:
                os.close(fd)
            units = units_from_bytes(data)
            n = count_valid_prefix(units)
            if n:
                last_unit = units[n - 1]
            off += n
            if n < len(units) or len(data) < want:
                break
        if off > known and last_unit is not None and not self._verify(key, off - 1, last_unit):
            off = self._first_unverified(key, known, off - 1)
        if off > known:
            self._tails[key] = off
        return max(off, known)

    def _refuse_gap(self, key: Key) -> None:
        """A file missing between the queue's files (local files are never written out of order): the batch
        read's error naming the missing file, rather than a stream that stops there without a word."""
        q = self.consume_queue(key)
        try:
            q.require_contiguous()
        finally:
            q.close()

    def _first_unverified(self, key: Key, lo: int, bad: int) -> int:
        """The first unit in [lo, bad] its record does not confirm, given that unit ``bad`` fails.

        A unit caught half-written is only the last one (admitted next time), but after a crash every
        unit past the valid CommitLog end fails (a suffix of the queue, as units follow the
        CommitLog) and none may be admitted: a binary search, as the batch read caps such units.
        """
        q = self.consume_queue(key)
        try:
            a, b = lo, bad
            while a < b:
                mid = (a + b) // 2
                u = q.read_units(mid, 1)
                ok = len(u) == 1 and int(u[0]["phy_offset"]) >= 0 and int(u[0]["size"]) > 0 \
                    and self._verify(key, mid, u[0])
                if ok:
                    a = mid + 1
                else:
                    b = mid
            return a
        finally:
            q.close()

    def _verify(self, key: Key, offset: int, unit) -> bool:
        size = int(unit["size"])
        if size == PRE_BLANK_SIZE:
            return True
        phy = int(unit["phy_offset"])
        for refresh in (False, True):
            cl = self.commitlog(refresh)
            seg = cl.reader.find(phy)
            if seg is None or (seg.dledger and phy >= self.dledger_end(cl)):
                continue                                   # not there yet: look again in a fresh listing
            decoded, _ = cl.decode_at(phy, size_hint=size)
            if not cl.entry_holds_record(phy, size):
                return False
            if decoded.kind is Kind.CORRUPT and decoded.size == size and seg.dledger:
                # A whole DLedger entry whose record is damaged stays below DLedger's end: admitted, and
                # reading it fails with the typed error a batch read gives (never skipped in silence).
                return True
            if decoded.kind is not Kind.MESSAGE or decoded.size != size:
                return False
            r = decoded.record
            if key[0].startswith("%LMQ%"):
                return True
            return r.queue_id == key[1] and r.queue_offset == offset and r.topic == key[0]
        return False

    def consume_queue(self, key: Key) -> ConsumeQueue:
        return ConsumeQueue(self.layout.queue_dir(*key), key[0], key[1])

    def min_offset(self, key: Key, max_offset: int, cl_min: int) -> int:
        q = self.consume_queue(key)
        try:
            if not q.segments:
                return max_offset
            if cl_min == 0 and q.first_file_start_offset == 0:
                u = q._read(0, 1)
                if len(u) and int(u[0]["size"]) != PRE_BLANK_SIZE:
                    return 0
            return min(max_offset, q.min_offset(cl_min, engine_v5=self.config.is_v5, max_offset=max_offset))
        finally:
            q.close()

    def unit_sizes(self, key: Key, start: int, count: int) -> np.ndarray:
        q = self.consume_queue(key)
        try:
            units = q.read_units(start, count)
            sizes = units["size"].astype(np.int64)
            sizes[sizes == PRE_BLANK_SIZE] = 0
            return sizes
        finally:
            q.close()

    def offset_by_time(self, key: Key, lo: int, hi: int, ts: int) -> int:
        """First offset in [lo, hi) whose record's storeTimestamp >= ts (hi if none)."""
        q = self.consume_queue(key)
        cl = self.commitlog(refresh=True)
        try:
            a, b = lo, hi
            while a < b:
                mid = (a + b) // 2
                u = q.read_units(mid, 1)
                t = None
                if len(u) and int(u[0]["size"]) != PRE_BLANK_SIZE and cl.reader.find(int(u[0]["phy_offset"])):
                    decoded, _ = cl.decode_at(int(u[0]["phy_offset"]), size_hint=int(u[0]["size"]))
                    if decoded.kind is Kind.MESSAGE:
                        t = decoded.record.store_timestamp_ms
                if t is not None and t >= ts:
                    b = mid
                else:
                    a = mid + 1
            return a
        finally:
            q.close()


# --------------------------------------------------------------------------- partitions

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
    spec = ReadSpec(read_opts, pushed, tuple(columns))
    try:
        yield from read_partition(spec, QueueRange(store, part.topic, part.queue_id, start, part.end))
    except DataLossError as exc:
        raise DataLossError(f"topic {part.topic} queue {part.queue_id}, offsets [{part.start}, {part.end}): "
                            f"{exc}") from None


def commitlog_segments(layout: StoreLayout) -> list:
    """CommitLog segments of the store in offset order (DLedger data files included)."""
    cl = CommitLog(layout)
    cl.close()
    return cl.segments


def _check_group_start(o: StreamOptions, keys: set, committed: dict) -> None:
    """startingOffsets=group: a group without commits fails unless startingOffsetsFallback says where to start
    (Kafka's auto.offset.reset); with ``none`` every queue needs a committed offset."""
    have = keys & set(committed)
    if not have and o.starting_fallback is None:
        topics = ", ".join(sorted({t for t, _ in keys})) or "(no queues)"
        raise OptionError(f"startingOffsets=group: consumer group {o.consumer_group!r} has no committed offsets for "
                          f"{topics} in {o.root} (config/consumerOffset.json); set startingOffsetsFallback=earliest "
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
            columns = requested_columns(schema) if schema is not None else COLUMNS
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
        if o.consumer_group:
            ConsumerOffsets(o.root, config=o.read.store_config).check_writable()   # fail before reading anything
        cl_min = w.commit_log_min()
        committed: dict[Key, int] = {}
        if o.starting == GROUP:
            table = ConsumerOffsets(o.root, config=o.read.store_config).offsets_for_group(o.consumer_group)
            committed = {(t, int(q)): int(v) for t, qs in table.items() for q, v in qs.items()}
        keys = set(w.keys())
        if o.starting == GROUP:
            _check_group_start(o, keys, committed)
        if isinstance(o.starting, dict):
            for t, qs in o.starting.items():
                for qid in qs:
                    if (t, qid) not in keys:
                        raise OptionError(f"startingOffsets names queue {t}:{qid}, which does not exist in {o.root}")
        out: dict[Key, int] = {}
        for key in sorted(keys):
            mx = w.max_offset(key)
            mn = w.min_offset(key, mx, cl_min)
            where = f"topic {key[0]} queue {key[1]}"
            if o.starting_timestamp is not None:
                out[key] = w.offset_by_time(key, mn, mx, o.starting_timestamp)
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
            take = self._apply_bytes(eff, take, max_bytes)
        end = dict(begin)
        for key in eff:
            end[key] = eff[key] + take.get(key, 0)
        if all(end.get(k) == begin.get(k) for k in end) and set(end) == set(begin):
            return start
        self._last_trigger_ms = now_ms
        return offsets_to_json(end)

    def _apply_bytes(self, eff: dict, take: dict, max_bytes: int) -> dict:
        total_units = sum(take.values())
        out = {}
        for key, n in take.items():
            if n <= 0:
                out[key] = 0
                continue
            # Bytes budget in proportion to this queue's share of the backlog.
            share = max_bytes * n // total_units
            cap = min(n, share // MIN_RECORD_BYTES + 1)
            sizes = self.watcher.unit_sizes(key, eff[key], cap)
            fits = int(np.searchsorted(np.cumsum(sizes), share, side="right"))
            out[key] = min(fits, len(sizes))
        if sum(out.values()) == 0 and total_units:
            # Never stall: one message from the queue with the largest backlog.
            key = max(take, key=lambda k: (take[k], k))
            out[key] = 1
        return out

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
        if not o.consumer_group or not offsets:
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
