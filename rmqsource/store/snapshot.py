"""``rmq snapshot STORE DEST``: a consistent, incremental copy of a store, live or stopped (docs/snapshots.md).

The source is only read (files opened read-only, its lock never taken), in reverse dependency order:

1. config files (``config/*`` read whole, JSON parsed: one caught mid-write is read again, else its
   ``.bak``; RocksDB config folders copied file by file) and the checkpoint: what they count (consumer
   offsets, timestamps) was dispatched before the queues are read;
2. IndexFiles, header first, so only whole entries are taken;
3. the ConsumeQueues' last units: the furthest record end any of them references is the snapshot's
   ``validEnd``; every record below it was dispatched (dispatch runs in CommitLog order), so
4. the ConsumeQueue files, read after that, hold a unit for every record below ``validEnd`` of their queue;
   their units at or past it are cut (zeros, as the broker's recovery truncates them); a record found
   without its unit moves the end back to it (:mod:`snapshot_queues`);
5. the CommitLog up to ``validEnd`` (its segments listed only now; sealed segments whole), and the
   IndexFiles cut to it (:mod:`snapshot_index`).

Config files are read as :mod:`snapshot_configs` says.

DEST is written file by file, each replaced whole (:mod:`rmqsource.io.destinations`): ConsumeQueues, then
the CommitLog, then IndexFiles, configs, the checkpoint and the manifest last.  Queues go before the
CommitLog so that a run stopped half-way leaves DEST readable as the previous snapshot: units past the
CommitLog's end are ignored by every reader (and trimmed by the broker's recovery), whereas CommitLog
records past some queues' units would leave those queues with gaps (a reader, like the broker, dispatches
only from the furthest unit on).  Files a snapshot already holds and the source has not changed are not
copied again; a file that grew (the active CommitLog segment, a queue's last file) keeps its copied
prefix (locally cloned from DEST's own copy, ``copy_file_range``) and gets only the new bytes.

RocksDB ConsumeQueues (``storeType=defaultRocksDB``) take the place of steps 3-4: the database is copied
by files, then ``validEnd`` is where the CommitLog's records end past its dispatch checkpoint
(:mod:`snapshot_rocksdb`).  Not snapshotted (an :class:`UnsupportedLayoutError`): DLedger stores (their
CommitLog, index and checkpoint are a Raft log that would need trimming entry by entry).
"""

from __future__ import annotations

import datetime
import functools
import itertools
import os
import socket
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

from ..errors import FormatError, OptionError, StoreError, UnsupportedLayoutError
from ..format.checkpoint import CHECKPOINT_FILE_SIZE, Checkpoint
from ..format.record import Kind
from ..io.destination_uri import open_destination
from ..io.destinations import Destination, MemorySpan, SourceSpan, StagedFile
from .commitlog import CommitLog
from .config import StoreConfig
from .layout import StoreLayout
from .snapshot_configs import ConfigCopy, read_whole
from .snapshot_index import IndexRead, cut_index, read_index_file
from .snapshot_manifest import FORMAT, FORMAT_VERSION, MANIFEST_NAME, PENDING_NAME, manifest_bytes, parse_manifest
from .snapshot_queues import COPY_BLOCK, CopiedQueue, QueueCopy
from .snapshot_rocksdb import RocksDbQueueCopy

KINDS = ("commitlog", "consumequeue", "index", "config", "checkpoint")


@dataclass
class _Planned:
    """One destination file of this run: staged (to publish) or kept as the previous snapshot has it."""
    rel: str
    kind: str
    size: int
    valid_bytes: int
    crc32: Optional[int]                 # None until a SourceSpan is published
    sealed: bool
    staged: Optional[StagedFile | SourceSpan | MemorySpan] = None
    copied: int = 0                      # bytes read from the source into it
    extra: dict = field(default_factory=dict)

    def entry(self) -> dict:
        out = {"kind": self.kind, "size": self.size, "validBytes": self.valid_bytes, "crc32": self.crc32,
               "sealed": self.sealed}
        out.update(self.extra)
        return out


class Snapshot(ConfigCopy, QueueCopy, RocksDbQueueCopy):
    """One run of ``rmq snapshot`` (use :func:`snapshot_store`)."""

    def __init__(self, store: str | os.PathLike, dest: Destination, config: StoreConfig,
                 progress: Optional[Callable[[str], None]] = None):
        self.root = os.path.abspath(os.fspath(store))
        self.dest = dest
        self.config = config
        self.progress = progress or (lambda stage: None)
        self.layout = snapshottable_layout(self.root, config)
        self.previous = self._previous_manifest()
        self.prev_files: dict = self.previous["files"] if self.previous else {}
        self.planned: dict[str, _Planned] = {}
        self.queues: dict[tuple[str, int], CopiedQueue] = {}

    # ------------------------------------------------------------------ previous snapshot
    def _previous_manifest(self) -> Optional[dict]:
        data = self.dest.read_bytes(MANIFEST_NAME)
        if data is None:
            if self.dest.holds_store_files():
                raise OptionError(f"DEST {self.dest.uri} holds a store but no snapshot manifest ({MANIFEST_NAME}): "
                                  f"rmq snapshot writes only into an empty folder or an earlier snapshot")
            return None
        doc = parse_manifest(data, f"{self.dest.uri}/{MANIFEST_NAME}")
        if doc["source"]["path"] != self.root:
            raise OptionError(f"DEST {self.dest.uri} holds a snapshot of {doc['source']['path']}, not of {self.root}")
        return doc

    def _prev(self, rel: str, size: int) -> Optional[dict]:
        entry = self.prev_files.get(rel)
        return entry if entry is not None and entry["size"] == size else None

    # ------------------------------------------------------------------ run
    def run(self) -> dict:
        started = time.monotonic()
        self.progress("configs")
        self._read_configs()
        self._read_checkpoint()
        self.progress("index")
        index_reads = self._read_index_files()
        self.progress("queues")
        rocksdb = self.layout.rocksdb_queues
        if rocksdb:
            last_phy = self._copy_rocksdb_queues()
        else:
            listed_before = CommitLog(self.layout)
            listed_before.close()
            self.valid_end, last_phy = self._find_valid_end(listed_before.min_offset)
            self._copy_queues()
        # Segments listed now, after the queues: the ones holding what they point at exist by now.
        cl = CommitLog(self.layout)
        try:
            self.segment_bytes = cl.segment_size
            missing = None if rocksdb else self._first_record_without_unit(cl)
            if missing is not None:
                # A writer stopped between two queues of a batch: the snapshot ends before that record.
                self.valid_end = missing
                self._discard_queues()
                self._copy_queues()
                last_phy = self._last_unit_phy()
            self.progress("commitlog")
            self._copy_commitlog(cl)
            self._cut_index_files(index_reads, cl)
            self._finish_checkpoint(cl, last_phy)
        finally:
            cl.close()
        self.progress("publish")
        return self._publish(time.monotonic() - started)

    # ------------------------------------------------------------------ checkpoint
    def _read_checkpoint(self) -> None:
        self.checkpoint = read_whole(str(self.layout.checkpoint_path))

    def _finish_checkpoint(self, cl: CommitLog, last_phy: Optional[int]) -> None:
        """The source's checkpoint, no later than the snapshot's last record (timestamps) and end (offsets)."""
        if self.checkpoint is None or len(self.checkpoint) != CHECKPOINT_FILE_SIZE:
            return
        cp = Checkpoint.decode(self.checkpoint)
        last_ts = self._store_time(cl, last_phy) if last_phy is not None else None
        ts_cap = last_ts if last_ts is not None else 0
        end = self.valid_end
        clamped = Checkpoint(min(cp.physic_msg_timestamp_ms, ts_cap), min(cp.logics_msg_timestamp_ms, ts_cap),
                             min(cp.index_msg_timestamp_ms, ts_cap), min(cp.master_flushed_offset, end),
                             min(cp.confirm_phy_offset, end))
        self._stage_bytes("checkpoint", "checkpoint", clamped.encode(v5=True) if self.config.is_v5
                          else clamped.encode(v5=False))

    @staticmethod
    def _store_time(cl: CommitLog, phy: int) -> Optional[int]:
        decoded, _ = cl.decode_at(phy)
        return decoded.record.store_timestamp_ms if decoded.kind is Kind.MESSAGE else None

    # ------------------------------------------------------------------ IndexFiles
    def _index_file_paths(self) -> list[str]:
        d = self.layout.index_dir
        if not d.is_dir():
            return []
        return [str(d / n) for n in sorted(os.listdir(d)) if n.isdigit() and len(n) == 17]

    def _index_geometry(self, path: str) -> tuple[int, int]:
        """(maxHashSlotNum, maxIndexNum): configured, or from the file's size when N = 4H (as the reader)."""
        h, n = self.config.max_hash_slot_num, self.config.max_index_num
        size = os.path.getsize(path)
        if size != 40 + h * 4 + n * 20 and (size - 40) % 84 == 0:
            h = (size - 40) // 84
            n = 4 * h
        return h, n

    def _read_index_files(self) -> list[IndexRead]:
        """The IndexFiles not sealed in the previous snapshot, read now (before the queues)."""
        paths = self._index_file_paths()
        reads = []
        for path in paths:
            h, n = self._index_geometry(path)
            rel = f"index/{os.path.basename(path)}"
            prev = self._prev(rel, os.path.getsize(path))
            if prev is not None and prev["sealed"] and path != paths[-1]:
                self._keep(rel, prev)
                continue
            reads.append(read_index_file(path, h, n))
        self.newest_index = paths[-1] if paths else None
        return reads

    def _cut_index_files(self, reads: list[IndexRead], cl: CommitLog) -> None:
        for read in reads:
            rel = f"index/{os.path.basename(read.path)}"
            cut = cut_index(read, self.valid_end, lambda phy: self._store_time(cl, phy))
            valid = len(cut.entries)
            crc = zlib.crc32(cut.entries)
            prev = self._prev(rel, cut.file_size)
            if prev is not None and prev["validBytes"] == valid and prev["crc32"] == crc \
                    and prev.get("indexCount") == cut.count:
                self._keep(rel, prev)
                continue
            sealed = read.path != self.newest_index and not cut.dropped
            p = _Planned(rel, "index", cut.file_size, valid, crc, sealed,
                         extra={"hashSlotNum": read.hash_slot_num, "indexCount": cut.count})
            self.planned[rel] = p
            base = len(cut.header) + len(cut.slots)
            p.staged = self.dest.stage_memory(rel, [cut.header, cut.slots, cut.entries], cut.file_size)
            if p.staged is not None:         # a remote DEST sends it as it is (it cannot clone a prefix)
                p.copied = base + valid
                continue
            p.staged = self.dest.stage(rel)
            # Entries are only ever appended: those the previous snapshot holds are taken from its copy.
            kept = prev["validBytes"] if prev is not None and prev["validBytes"] <= valid else 0
            if not (kept and zlib.crc32(cut.entries[:kept]) == prev["crc32"]
                    and self.dest.clone_prefix(rel, p.staged, base + kept)):
                kept = 0
            p.staged.write_at(cut.header, 0)
            p.staged.write_at(cut.slots, len(cut.header))
            p.staged.write_at(cut.entries[kept:], base + kept)
            p.staged.pad_to(cut.file_size)
            p.staged.finish()
            p.copied = base + valid - kept

    # ------------------------------------------------------------------ CommitLog
    def _copy_commitlog(self, cl: CommitLog) -> None:
        end = self.valid_end
        z = self.segment_bytes
        covered = cl.min_offset
        for seg in cl.segments:
            if seg.start_offset != covered and seg.start_offset < end:
                raise StoreError(f"CommitLog segment {seg.path} starts at {seg.start_offset}, not {covered}: a "
                                 f"segment below the end {end} is missing")
            if seg.start_offset >= end:
                break
            covered = seg.start_offset + z
            rel = f"commitlog/{os.path.basename(seg.path)}"
            valid = min(end - seg.start_offset, z)
            prev = self._prev(rel, z)
            if prev is not None and (prev["sealed"] or prev["validBytes"] == valid):
                self._keep(rel, prev)
                continue
            kept = prev["validBytes"] if prev is not None and prev["validBytes"] < valid else 0
            self.planned[rel] = self._stage_copy(rel, "commitlog", seg.path, z, prev, kept, valid)
        if end > cl.min_offset and covered < end:
            raise StoreError(f"the CommitLog has no segment holding offset {covered} (below the end {end} the "
                             f"ConsumeQueues point at)")

    # ------------------------------------------------------------------ staging
    def _keep(self, rel: str, prev: dict) -> _Planned:
        extra = {k: v for k, v in prev.items() if k not in ("kind", "size", "validBytes", "crc32", "sealed")}
        p = _Planned(rel, prev["kind"], prev["size"], prev["validBytes"], prev["crc32"], prev["sealed"], extra=extra)
        self.planned[rel] = p
        return p

    def _start_staged(self, rel: str, src_path: str, prev: Optional[dict], kept: int) -> tuple[StagedFile, int, int]:
        """A staged file holding the first ``kept`` bytes: DEST's own copy where it can, else the source's.
        Returns (staged, crc32 of those bytes, how many were read from the source)."""
        staged = self.dest.stage(rel)
        if kept == 0:
            return staged, 0, 0
        if self.dest.clone_prefix(rel, staged, kept):
            return staged, prev["crc32"], 0
        crc = _copy_from(src_path, staged, 0, kept, 0)
        return staged, crc, kept

    def _stage_copy(self, rel: str, kind: str, src_path: str, size: int, prev: Optional[dict], kept: int,
                    valid: int) -> _Planned:
        span = self.dest.stage_source(rel, src_path, valid, size)
        if span is not None:            # sent from the source at publish, its CRC-32 taken then
            return _Planned(rel, kind, size, valid, None, valid == size, span, valid)
        staged, crc, copied = self._start_staged(rel, src_path, prev, kept)
        crc = _copy_from(src_path, staged, kept, valid, crc)
        staged.pad_to(size)
        staged.finish()
        return _Planned(rel, kind, size, valid, crc, valid == size, staged, copied + valid - kept)

    def _stage_grown(self, rel: str, kind: str, src_path: str, size: int, prev: Optional[dict], kept: int,
                     new: bytes) -> _Planned:
        staged, crc, copied = self._start_staged(rel, src_path, prev, kept)
        staged.write(new)
        staged.pad_to(size)
        staged.finish()
        valid = kept + len(new)
        p = _Planned(rel, kind, size, valid, zlib.crc32(new, crc), valid == size, staged, copied + len(new))
        self.planned[rel] = p
        return p

    def _stage_bytes(self, rel: str, kind: str, data: bytes) -> None:
        crc = zlib.crc32(data)
        prev = self._prev(rel, len(data))
        if prev is not None and prev["crc32"] == crc:
            self._keep(rel, prev)
            return
        p = _Planned(rel, kind, len(data), len(data), crc, True, self.dest.stage(rel), len(data))
        p.staged.write(data)
        p.staged.finish()
        self.planned[rel] = p

    # ------------------------------------------------------------------ publish
    def _publish(self, seconds_reading: float) -> dict:
        started = time.monotonic()
        order = {"consumequeue": 0, "commitlog": 1, "index": 2, "config": 3, "checkpoint": 4}

        def step(p: _Planned) -> tuple[int, bool]:
            # A RocksDB folder's CURRENT goes after the files it names (its MANIFEST, that one's table files).
            return order[p.kind], p.rel.endswith("/CURRENT")
        to_publish = sorted((p for p in self.planned.values() if p.staged is not None),
                            key=lambda p: (step(p), p.rel))
        if to_publish:
            self.dest.put_bytes(PENDING_NAME, manifest_bytes({"format": FORMAT, "startedAt": _now_iso(),
                                                             "validEnd": self.valid_end}))
        for _, group in itertools.groupby(to_publish, key=step):
            # CommitLog segments become visible oldest first, each durably (a later one alone would be walked
            # past a gap); the files of the other kinds in any order (side by side where the destination
            # uploads several at once), their directories synced once per kind.
            group = list(group)
            kind = group[0].kind
            workers = 1 if kind == "commitlog" else min(self.dest.parallel_publish, len(group))
            publish = functools.partial(self._publish_one, sync_dir=kind == "commitlog")
            if workers > 1:
                with ThreadPoolExecutor(workers, thread_name_prefix="rmq-snapshot-publish") as pool:
                    list(pool.map(publish, group))
            else:
                for p in group:
                    publish(p)
            self.dest.sync_dirs()
        counts = {k: {"files": 0, "copied": 0, "bytes": 0} for k in KINDS}
        for p in self.planned.values():
            c = counts[p.kind]
            c["files"] += 1
        for p in to_publish:
            counts[p.kind]["copied"] += 1
            counts[p.kind]["bytes"] += p.copied
        doc = {
            "format": FORMAT, "formatVersion": FORMAT_VERSION, "createdAt": _now_iso(),
            "validEnd": self.valid_end, "commitLogMinOffset": min(
                (int(rel.rsplit("/", 1)[1]) for rel in self.planned if rel.startswith("commitlog/")),
                default=self.valid_end),
            "segmentBytes": self.segment_bytes,
            "source": self._identity(),
            "queues": [{"topic": t, "queueId": qid, "maxOffset": m} for (t, qid), m in self._max_offsets()],
            "files": {rel: p.entry() for rel, p in sorted(self.planned.items())},
            "counts": counts,
            "bytesCopied": sum(c["bytes"] for c in counts.values()),
            "seconds": round(seconds_reading + time.monotonic() - started, 3),
        }
        self.dest.put_bytes(MANIFEST_NAME, manifest_bytes(doc))
        for rel in sorted(set(self.prev_files) - set(self.planned)):
            self.dest.delete(rel)           # gone from the source (retention) since the previous snapshot
        if to_publish:
            self.dest.delete(PENDING_NAME)
        return doc

    def _max_offsets(self) -> list[tuple[tuple[str, int], int]]:
        """Each queue's max offset as the snapshot serves it."""
        if self.rocksdb_max_offsets is not None:
            return sorted(self.rocksdb_max_offsets.items())
        return [(key, q.max_offset) for key, q in sorted(self.queues.items()) if q.files]

    def _publish_one(self, p: _Planned, *, sync_dir: bool) -> None:
        self.dest.publish(p.staged, sync_dir=sync_dir)
        if p.crc32 is None:
            p.crc32 = p.staged.crc32
        p.staged = None

    def _identity(self) -> dict:
        extra = self.config.extra
        out = {"path": self.root, "host": socket.gethostname(),
               "storeType": "defaultRocksDB" if self.layout.rocksdb_queues else "file",
               "engineVersion": self.config.engine_version, "live": _lock_held(self.root)}
        for key in ("brokerName", "brokerClusterName", "brokerId"):
            if key in extra:
                out[key] = extra[key]
        return out


def snapshottable_layout(store: str | os.PathLike, config: StoreConfig) -> StoreLayout:
    """The store's layout; NotAStoreError / UnsupportedLayoutError (naming the folder) for what is not
    snapshotted."""
    layout = StoreLayout.for_config(store, config)
    layout.check_is_store()
    if layout.dledger_dir is not None:
        raise UnsupportedLayoutError("a DLedger store is not snapshotted: its CommitLog, DLedger index and "
                                     "checkpoint would need trimming entry by entry", file=os.fspath(store))
    return layout


def snapshot_store(store: str | os.PathLike, dest: str, config: Optional[StoreConfig] = None, *,
                   dest_options: Optional[Mapping[str, str]] = None,
                   progress: Optional[Callable[[str], None]] = None) -> dict:
    """Copy ``store`` into ``dest`` (a path or a pyarrow.fs URI) consistently; returns the manifest written."""
    if "://" not in dest:
        a, b = os.path.realpath(dest), os.path.realpath(store)
        if a == b or a.startswith(b + os.sep) or b.startswith(a + os.sep):
            raise OptionError(f"DEST {dest} and STORE {os.fspath(store)} overlap: the snapshot goes elsewhere "
                              f"(nothing is ever written into the store)")
    config = config or StoreConfig()
    snapshottable_layout(store, config)          # refused before DEST is made
    destination = open_destination(dest, dest_options)
    try:
        return Snapshot(store, destination, config, progress).run()
    finally:
        destination.close()


# ---------------------------------------------------------------------- helpers

def _copy_from(src_path: str, staged: StagedFile, start: int, end: int, crc: int) -> int:
    """Append the source file's bytes [start, end) to ``staged``; returns the CRC-32 continued over them.
    One buffer is read into again and again (a fresh 8 MiB each time costs its page faults)."""
    buf = bytearray(min(COPY_BLOCK, max(0, end - start)))
    view = memoryview(buf)
    fd = os.open(src_path, os.O_RDONLY)
    try:
        pos = start
        for _ in range((end - start) // COPY_BLOCK + 2):
            if pos >= end:
                break
            n = os.preadv(fd, [view[:min(len(buf), end - pos)]], pos)
            if n <= 0:
                raise FormatError(f"file ends at {pos}, before the {end} bytes the snapshot copies",
                                  file=src_path, offset=pos)
            crc = zlib.crc32(view[:n], crc)
            staged.write(view[:n])
            pos += n
        return crc
    finally:
        os.close(fd)


def _lock_held(root: str) -> bool:
    from ..io.lock import store_lock_state
    try:
        return bool(store_lock_state(root).held)
    except OSError:
        return False


def _now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
