"""``rmq verify``: check every byte structure of a store, read-only (an fsck).

One pass over the CommitLog, window by window (``verify_walk.CHUNK_BYTES`` of one segment):

* records: the totalSize chain from each segment start (blank record at the
  segment end, zeros after the last segment's valid end), every length inside
  the record (the decoder's checks), PHYSICALOFFSET = where the record is,
  body CRC, and the ``__CRC32#`` whole-record CRC property where present;
* ConsumeQueue units pointing into the window: a record starts there with
  that size, topic, queueId, queueOffset and tagsCode; and every record a
  unit should point at (NOT/COMMIT transaction types) has one;
* IndexFile entries pointing into the window: a record starts there
  (structure and chains: :mod:`rmqsource.store.verify_index`);

then the checkpoint and the config JSON files.  DLedger data files are walked by their
entry headers (DLedger recovery's checks, component ``dledger``), the record inside each
valid entry checked as above; then the DLedger index and checkpoint (verify_dledger.py).  Record starts come from the
ConsumeQueue units where they tile the CommitLog (a vectorized check of
totalSize and contiguity), so the per-record Python walk runs only over gaps
(records without units); the chain is proven either way.  Units expired by
retention (below the CommitLog's first segment) are counted, not reported.

ConsumeQueues kept in RocksDB (``storeType=defaultRocksDB``): the units checked are the database's own
(:class:`~rmqsource.store.verify_cursors.RocksDbQueueCursor`), never those the readers dispatch from the
CommitLog past its dispatch checkpoint; the records past the checkpoint have no unit on disk by design (the
broker holds them in memory until its next flush) and are one ``cq-undispatched`` warning per queue.

The verifier here drives the run; the CommitLog walk (:mod:`rmqsource.store.verify_walk`) and the
matching of ConsumeQueue units and IndexFile entries against each window's records
(:mod:`rmqsource.store.verify_units`) are its mixins.

The walk has a JVM twin (``io.rmqsource.verify``: Verifier, CommitLogWalk, UnitMatching; run by
:mod:`rmqsource.commands.verify_jvm`) with the same windows, order and messages:
a change here goes there too (tests compare the two reports problem for problem).
"""

from __future__ import annotations

import heapq
import os
from typing import Callable, Optional

import numpy as np

from ..errors import FormatError, RmqError
from ..format.checkpoint import CHECKPOINT_FILE_SIZE, Checkpoint
from ..format.configjson import loads_fastjson
from ..io.lock import is_store_locked
from .commitlog import CommitLog
from .config import StoreConfig
from .layout import StoreLayout
from .rocksdb_queue import RocksDbQueueStore
from .verify_cursors import IndexCursor, QueueCursor, RocksDbQueueCursor, note
from .verify_dledger import check_dledger_files
from .verify_index import check_index_file, index_files, index_geometry
from .verify_report import ERROR, WARNING, Problem, VerifyReport
from .verify_units import UnitMatching
from .verify_walk import CommitLogWalk

PER_CHECK_DETAIL = 200            # problems of one kind listed per window (all are counted)

Progress = Callable[[int], None]         # called with the number of CommitLog bytes just checked


def verify_store(root: str | os.PathLike, config: Optional[StoreConfig] = None, *,
                 progress: Optional[Progress] = None) -> VerifyReport:
    """Check the store at ``root`` (never written) and return what was found."""
    config = config or StoreConfig()
    root = os.fspath(root)
    layout = StoreLayout.for_config(root, config)
    layout.check_is_store()
    report = VerifyReport(os.path.abspath(root))
    _Verifier(layout, config, report, progress).run()
    return report


def commit_log_bytes(root: str | os.PathLike, config: Optional[StoreConfig] = None) -> int:
    """Bytes :func:`verify_store` reports through ``progress`` (for a progress bar's total)."""
    config = config or StoreConfig()
    layout = StoreLayout.for_config(os.fspath(root), config)
    cl = CommitLog(layout)
    try:
        return sum(max(s.size_bytes, cl.segment_size) for s in cl.segments)
    finally:
        cl.close()


class _Verifier(CommitLogWalk, UnitMatching):
    """One ``rmq verify`` run: the driver here, the CommitLog walk (verify_walk.py) and the unit matching
    (verify_units.py) as mixins sharing this state."""
    def __init__(self, layout: StoreLayout, config: StoreConfig, report: VerifyReport,
                 progress: Optional[Progress]):
        self.layout = layout
        self.config = config
        self.report = report
        self.progress = progress or (lambda n: None)
        self.delays = config.message_delay_levels_ms
        self.topic_ids: dict[str, int] = {}
        self.records = 0
        self.max_store_ts = 0
        self.unmatched: dict[tuple[int, int], list] = {}     # (topic id, queueId) -> [count, first phy]
        # RocksDB ConsumeQueues: the database (None for queue files), and the CommitLog offset its units reach;
        # records from there on have no unit in it by design (the broker holds theirs in memory).
        self.rocksdb: Optional[RocksDbQueueStore] = None
        self.dispatch_end: Optional[int] = None
        self.past_dispatch_end: dict[tuple[int, int], list] = {}   # as unmatched, for records from dispatch_end
        self.last_dispatched = -1      # CommitLog offset of the last record a ConsumeQueue unit points at
        self.invalid_at = 1 << 62       # first record recovery would stop at (fields that do not add up)
        self.dledger_entries: list[tuple[int, int, int, int, int]] = []   # (index, pos, size, term, magic)
        self.dledger_ended = False      # DLedger recovery stopped: later data files are past the end

    # ------------------------------------------------------------------ driver
    def run(self) -> None:
        note_unclean_shutdown(self.layout, self.report)
        cl = CommitLog(self.layout)
        try:
            self.cl = cl
            self.cl_min = cl.min_offset
            self._check_segment_files(cl)
            self._open_cursors()
            end = self._walk_commitlog(cl)
            if cl.divided_offset is None:
                end = min(end, self.invalid_at)   # DLedger recovery checks entry headers only
            self._drain_cursors(end)
        finally:
            cl.close()
        if self.layout.dledger_dir is not None:
            check_dledger_files(self.layout, self.report, self.dledger_entries)
        self._report_unmatched_records()
        check_checkpoint(self.layout, self.config, self.report, end, self.records, self.max_store_ts)
        check_config(self.layout, self.config, self.report, self._queue_max_offsets())
        self.report.stats.update({"records": self.records, "commitLogMinOffset": self.cl_min, "commitLogEnd": end,
                                  "segments": len(cl.segments), "queues": len(self.queues),
                                  "cqUnits": sum(q.units for q in self.queues),
                                  "cqUnitsExpired": sum(q.expired for q in self.queues),
                                  "indexFiles": len(self.index_paths)})

    def _check_segment_files(self, cl: CommitLog) -> None:
        rep = self.report
        z = cl.segment_size
        for prev, seg in zip(cl.segments, cl.segments[1:]):
            if seg.start_offset != prev.start_offset + z:
                rep.add(Problem("commitlog", "segment-missing", rep.rel(seg.path), None,
                                "CommitLog segments are not consecutive (a segment in between is missing)",
                                f"{prev.start_offset + z:020d}", os.path.basename(seg.path)))
        for seg in cl.segments:
            if seg.size_bytes != z:
                rep.add(Problem("commitlog", "segment-size", rep.rel(seg.path), 0,
                                "CommitLog segments differ in size", str(z), str(seg.size_bytes)))
            if z and seg.start_offset % z:
                rep.add(Problem("commitlog", "segment-name", rep.rel(seg.path), None,
                                "segment start offset is not a multiple of the segment size",
                                f"a multiple of {z}", str(seg.start_offset)))

    def _open_cursors(self) -> None:
        self.queues = [q for q in self._queue_cursors() if q.has_units]
        for q in self.queues:
            q.topic_id = self._topic_id(q.topic)
        self.heap = []
        self.pending = None
        for i, q in enumerate(self.queues):
            p = q.next_phy()
            if p is not None:
                self.heap.append((p, i))
        heapq.heapify(self.heap)
        self.queue_key_index = {(q.topic_id, q.queue_id): i for i, q in enumerate(self.queues)}
        files = index_files(str(self.layout.index_dir))
        h, n = index_geometry(files, self.config.max_hash_slot_num, self.config.max_index_num)
        self.index_paths = files
        usable = [x for x in (check_index_file(f, h, n, self.report) for f in files) if x is not None]
        self.index = IndexCursor(usable, h, self.report, self.cl_min)

    def _queue_cursors(self) -> list:
        """A cursor per ConsumeQueue: its files, or its units in the RocksDB database (only the database's:
        verify checks what is on disk, never the units the readers dispatch from the CommitLog past it)."""
        if not self.layout.rocksdb_queues:
            return [QueueCursor(str(self.layout.queue_dir(topic, qid)), topic, qid, self.report, self.cl_min)
                    for topic, qid in self.layout.list_queues()]
        self.rocksdb = RocksDbQueueStore(self.layout, delay_levels_ms=self.delays)
        self.dispatch_end = self.rocksdb.dispatch_end
        return [RocksDbQueueCursor(self.rocksdb, topic, qid, self.report, self.cl_min)
                for topic, qid in sorted(self.rocksdb.max_entries)]

    def _queue_max_offsets(self) -> dict[tuple[str, int], int]:
        """Each queue's max offset, for the committed offsets: its files' end, or for RocksDB queues the
        readers' (the database's units, then those the broker's recovery dispatches from the CommitLog)."""
        if self.rocksdb is not None:
            return dict(self.rocksdb.max_offsets)
        return {(q.topic, q.queue_id): q.max_offset for q in self.queues}

    def _listed(self, bad: np.ndarray, check: str) -> list[int]:
        """Indexes of the first PER_CHECK_DETAIL true entries; the others are only counted (as ``check``)."""
        idx = np.flatnonzero(bad)
        if len(idx) > PER_CHECK_DETAIL:
            self.report.counts[(ERROR, check)] += len(idx) - PER_CHECK_DETAIL
        return idx[:PER_CHECK_DETAIL].tolist()

    def _topic_id(self, topic: str) -> int:
        i = self.topic_ids.get(topic)
        if i is None:
            i = self.topic_ids[topic] = len(self.topic_ids)
        return i

# ---------------------------------------------------------------------- outside the walk (both engines)

def note_unclean_shutdown(layout: StoreLayout, rep: VerifyReport) -> None:
    if layout.abort_exists():
        live = is_store_locked(layout.root)
        note(rep, "layout", "unclean-shutdown", "abort",
             "a process holds the store's lock: the tail is moving, problems at the end may be transient"
             if live else "abort file present: the last run did not shut down cleanly (rmq recover repairs)")


def check_checkpoint(layout: StoreLayout, config: StoreConfig, rep: VerifyReport, end: int, records: int,
                     max_store_ts: int) -> None:
    """The checkpoint against the walk's figures: the CommitLog's valid ``end``, the latest store time."""
    path = layout.checkpoint_path
    if not path.exists():
        note(rep, "checkpoint", "checkpoint-missing", "checkpoint", "no checkpoint file (a store never shut down)")
        return
    data = path.read_bytes()
    if len(data) != CHECKPOINT_FILE_SIZE:
        rep.add(Problem("checkpoint", "checkpoint-size", "checkpoint", 0, "checkpoint file has the wrong size",
                        str(CHECKPOINT_FILE_SIZE), str(len(data))))
        return
    cp = Checkpoint.decode(data)
    for name, off, value in (("physicMsgTimestamp", 0, cp.physic_msg_timestamp_ms),
                             ("logicsMsgTimestamp", 8, cp.logics_msg_timestamp_ms),
                             ("indexMsgTimestamp", 16, cp.index_msg_timestamp_ms)):
        if value < 0:
            rep.add(Problem("checkpoint", "checkpoint-value", "checkpoint", off, f"{name} is negative",
                            ">= 0", str(value)))
        elif records and value > max_store_ts:
            rep.add(Problem("checkpoint", "checkpoint-ahead", "checkpoint", off,
                            f"{name} is later than every record's store time (data the checkpoint "
                            f"counted as flushed is missing)", f"<= {max_store_ts}", str(value),
                            severity=WARNING))
    if cp.confirm_phy_offset > end and config.is_v5:
        rep.add(Problem("checkpoint", "checkpoint-ahead", "checkpoint", 32,
                        "confirmPhyOffset is past the CommitLog's valid end", f"<= {end}",
                        str(cp.confirm_phy_offset), severity=WARNING))


def check_config(layout: StoreLayout, config: StoreConfig, rep: VerifyReport,
                 max_offsets: dict[tuple[str, int], int]) -> None:
    """Every config JSON file parses as the broker's JSON; committed offsets lie within their queues."""
    d = layout.config_dir
    if not d.is_dir():
        return
    for name in sorted(os.listdir(d)):
        if not (name.endswith(".json") or name.endswith(".json.bak")):
            continue
        path = d / name
        try:
            text = path.read_bytes().decode("utf-8")
            if text.strip():
                loads_fastjson(text, file=str(path))
        except (UnicodeDecodeError, FormatError) as e:
            rep.add(Problem("config", "config-json", rep.rel(path), getattr(e, "offset", None),
                            f"not readable as the broker's JSON: {' '.join(str(e).split())}",
                            "fastjson text", "unparseable"))
    _check_consumer_offsets(layout, config, rep, max_offsets)


def _check_consumer_offsets(layout: StoreLayout, config: StoreConfig, rep: VerifyReport,
                            max_offsets: dict[tuple[str, int], int]) -> None:
    """Committed offsets within their queues, wherever the broker keeps them (the offset source: the JSON file
    with the LMQ file, the RocksDB config v2 ``config/rdb/``, or the 5.2 layout); both engines run this."""
    from .offset_source import load_committed_offsets, locate_offset_source
    source = locate_offset_source(layout.root)
    try:
        committed = load_committed_offsets(layout.root)
    except RmqError as e:
        if source.kind.startswith("rocksdb"):     # a JSON file that does not parse is reported above
            rep.add(Problem("config", "consumer-offsets-unreadable", rep.rel(source.path), None,
                            f"the committed offsets in {source.description} cannot be read: "
                            f"{' '.join(str(e).split())}", "readable", "unreadable", severity=WARNING))
        return
    for e in committed.entries:
        mx = max_offsets.get((e.topic, e.queue_id))
        if e.offset < 0 or (mx is not None and e.offset > mx):
            rep.add(Problem("config", "consumer-offset", rep.rel(committed.source.path), None,
                            f"group {e.group} commits offset {e.offset} for {e.topic}/{e.queue_id}",
                            f"0..{mx}" if mx is not None else ">= 0", str(e.offset), severity=WARNING))
