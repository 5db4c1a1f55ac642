"""``rmq snapshot STORE DEST``: a consistent, incremental copy of a store, live or stopped (docs/snapshots.md).

The source is only read (files opened read-only, its lock never taken), in reverse dependency order:

1. config files (``config/*`` read whole, JSON parsed: one caught mid-write is read again, else its
   ``.bak``; RocksDB config folders copied file by file) and the checkpoint: what they count (consumer
   offsets, timestamps) was dispatched before the queues are read;
2. IndexFiles, header first, so only whole entries are taken;
3. the ConsumeQueues' last units: the furthest record end any of them references is the snapshot's
   ``validEnd``; every record below it was dispatched (dispatch runs in CommitLog order), so
4. the ConsumeQueue files, read after that, hold a unit for every record below ``validEnd`` of their queue;
   their units at or past it are cut (zeros, as the broker's recovery truncates them).  A queue read while a
   writer's batch was half-dispatched (its next unit, read again, is below the end) is read again;
5. the CommitLog up to ``validEnd`` (sealed segments whole), and the IndexFiles cut to it
   (:mod:`snapshot_index`).

DEST is written file by file, each replaced whole (:mod:`rmqsource.io.destinations`): ConsumeQueues, then
the CommitLog, then IndexFiles, configs, the checkpoint and the manifest last.  Queues go before the
CommitLog so that a run stopped half-way leaves DEST readable as the previous snapshot: units past the
CommitLog's end are ignored by every reader (and trimmed by the broker's recovery), whereas CommitLog
records past some queues' units would leave those queues with gaps (a reader, like the broker, dispatches
only from the furthest unit on).  Files a snapshot already holds and the source has not changed are not
copied again; a file that grew (the active CommitLog segment, a queue's last file) keeps its copied
prefix (locally cloned from DEST's own copy, ``copy_file_range``) and gets only the new bytes.

Not snapshotted (an :class:`UnsupportedLayoutError`): DLedger stores (their CommitLog, index and
checkpoint are a Raft log that would need trimming entry by entry) and RocksDB ConsumeQueues (a live
database has no consistent copy by files; a RocksDB checkpoint would need a writable open of the broker's
database).
"""

from __future__ import annotations

import datetime
import os
import socket
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

import numpy as np
from ..errors import FormatError, OptionError, StoreError, UnsupportedLayoutError
from ..format.checkpoint import CHECKPOINT_FILE_SIZE, Checkpoint
from ..format.configjson import loads_fastjson
from ..format.consumequeue import CQ_UNIT_SIZE, PRE_BLANK_SIZE, units_from_bytes, valid_unit_mask
from ..format.record import TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK, TRANSACTION_NOT_TYPE, Kind
from ..io.destinations import Destination, StagedFile, open_destination
from ..io.rocksdb import is_rocksdb
from ..io.segments import list_segments, offset_to_file_name
from .commitlog import CommitLog
from .config import StoreConfig
from .layout import StoreLayout
from .snapshot_index import IndexRead, cut_index, read_index_file
from .snapshot_manifest import FORMAT, FORMAT_VERSION, MANIFEST_NAME, PENDING_NAME, manifest_bytes, parse_manifest

COPY_BLOCK = 8 * 1024 * 1024
CONFIG_READ_TRIES = 5           # a config file caught mid-write (the broker writes it in place) is read again
QUEUE_READ_TRIES = 5            # a queue caught mid-dispatch is read again
ROCKSDB_SKIPPED = ("LOCK",)
KINDS = ("commitlog", "consumequeue", "index", "config", "checkpoint")


@dataclass
class _Planned:
    """One destination file of this run: staged (to publish) or kept as the previous snapshot has it."""
    rel: str
    kind: str
    size: int
    valid_bytes: int
    crc32: int
    sealed: bool
    staged: Optional[StagedFile] = None
    copied: int = 0                      # bytes read from the source into it
    extra: dict = field(default_factory=dict)

    def entry(self) -> dict:
        out = {"kind": self.kind, "size": self.size, "validBytes": self.valid_bytes, "crc32": self.crc32,
               "sealed": self.sealed}
        out.update(self.extra)
        return out


@dataclass
class _Queue:
    topic: str
    queue_id: int
    folder: str
    files: list = field(default_factory=list)       # _Planned, in file order
    max_offset: int = 0
    units_per_file: int = 0
    new_units: list = field(default_factory=list)   # (phy, size) arrays of the units copied this run


class Snapshot:
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
        self.queues: dict[tuple[str, int], _Queue] = {}

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
        listed_before = CommitLog(self.layout)
        listed_before.close()
        self.valid_end, last_phy = self._find_valid_end(listed_before.min_offset)
        self._copy_queues()
        # Segments listed now, after the queues: the ones holding what they point at exist by now.
        cl = CommitLog(self.layout)
        try:
            self.segment_bytes = cl.segment_size
            missing = self._first_record_without_unit(cl)
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

    # ------------------------------------------------------------------ configs and checkpoint
    def _read_configs(self) -> None:
        folder = self.layout.config_dir
        if not folder.is_dir():
            return
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if os.path.isdir(path):
                if is_rocksdb(path):
                    self._copy_rocksdb_folder(path, f"config/{name}")
                continue
            if name.endswith((".tmp", ".bak")) or not os.path.isfile(path):
                continue
            data = self._read_config_file(path) if name.endswith(".json") else _read_whole(path)
            if data is not None:
                self._stage_bytes(f"config/{name}", "config", data)

    def _read_config_file(self, path: str) -> Optional[bytes]:
        """The file's bytes once they parse (the broker rewrites it in place: read again), else its .bak."""
        error: Optional[FormatError] = None
        for attempt in range(CONFIG_READ_TRIES):
            data = _read_whole(path)
            if data is None:
                break
            try:
                if data.strip():
                    loads_fastjson(data, file=path)
                return data
            except FormatError as e:
                error = e
                time.sleep(0.02 * (attempt + 1))
        bak = _read_whole(path + ".bak")
        if bak is not None and bak.strip():
            loads_fastjson(bak, file=path + ".bak")        # a bad .bak raises, naming itself
            return bak
        if error is not None:
            raise error
        return None

    def _copy_rocksdb_folder(self, folder: str, rel: str) -> None:
        """A RocksDB database's files: CURRENT first, then the rest (table files never change once written);
        a file gone meanwhile (a compaction) makes the whole folder read again."""
        for attempt in range(CONFIG_READ_TRIES):
            try:
                current = _read_whole(os.path.join(folder, "CURRENT"), missing_ok=False)
                contents = {"CURRENT": current}
                for name in sorted(os.listdir(folder)):
                    if name in contents or name in ROCKSDB_SKIPPED or name.startswith("LOG"):
                        continue
                    if os.path.isfile(os.path.join(folder, name)):
                        contents[name] = _read_whole(os.path.join(folder, name), missing_ok=False)
                manifest = current.decode("ascii", "replace").strip()
                if manifest and manifest not in contents:
                    raise FileNotFoundError(manifest)
            except FileNotFoundError:
                time.sleep(0.05 * (attempt + 1))
                continue
            for name, data in contents.items():
                self._stage_bytes(f"{rel}/{name}", "config", data)
            return
        raise StoreError(f"{folder}: the RocksDB database kept changing while it was copied "
                         f"({CONFIG_READ_TRIES} tries)")

    def _read_checkpoint(self) -> None:
        self.checkpoint = _read_whole(str(self.layout.checkpoint_path))

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
            p.staged = self.dest.stage(rel)
            base = len(cut.header) + len(cut.slots)
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
            self.planned[rel] = p

    # ------------------------------------------------------------------ ConsumeQueues
    def _queue_folders(self) -> dict[tuple[str, int], str]:
        return {key: str(self.layout.queue_dir(*key)) for key in self.layout.list_queues()}

    def _find_valid_end(self, min_offset: int) -> tuple[int, Optional[int]]:
        """The furthest end of a record a queue's last unit points at (and that record's offset)."""
        end, last_phy = min_offset, None
        for key, folder in self._queue_folders().items():
            for seg in reversed(list_segments(folder)):
                written = _units_written(seg.path, 0, seg.size_bytes // CQ_UNIT_SIZE)
                units = units_from_bytes(_pread(seg.path, max(0, written - 8) * CQ_UNIT_SIZE, 8 * CQ_UNIT_SIZE))
                units = units[:written - max(0, written - 8)]
                ok = valid_unit_mask(units) & (units["size"] != PRE_BLANK_SIZE)
                if ok.any():
                    u = units[int(ok.nonzero()[0][-1])]
                    if int(u["phy_offset"]) + int(u["size"]) > end:
                        end, last_phy = int(u["phy_offset"]) + int(u["size"]), int(u["phy_offset"])
                    break
                if written:
                    break                 # only pre-blank units: a queue with no message yet
        if self.previous and end < self.previous["validEnd"]:
            raise StoreError(f"the store's ConsumeQueues end at CommitLog offset {end}, before the snapshot in "
                             f"{self.dest.uri} (validEnd {self.previous['validEnd']}): not the store it was taken of, "
                             f"or it was truncated")
        return end, last_phy

    def _copy_queues(self) -> None:
        for key, folder in self._queue_folders().items():
            self.queues[key] = self._copy_queue(key, folder)
        # A writer dispatches a batch queue by queue: one read before the batch reached it lacks units below
        # the end.  Its next unit, read now, tells (a queue first seen now is copied too).
        for attempt in range(QUEUE_READ_TRIES):
            stale = [(key, folder) for key, folder in self._queue_folders().items()
                     if key not in self.queues or self._next_unit_below_end(self.queues[key])]
            if not stale:
                return
            for key, folder in stale:
                old = self.queues.get(key)
                for p in old.files if old else []:
                    if p.staged is not None:
                        p.staged.discard()
                self.queues[key] = self._copy_queue(key, folder)
            time.sleep(0.01 * (attempt + 1))
        raise StoreError(f"ConsumeQueues kept missing units below CommitLog offset {self.valid_end} after "
                         f"{QUEUE_READ_TRIES} reads: {', '.join(f'{t}/{q}' for (t, q), _ in stale[:5])}")

    def _discard_queues(self) -> None:
        for q in self.queues.values():
            for p in q.files:
                if p.staged is not None:
                    p.staged.discard()
                self.planned.pop(p.rel, None)
        self.queues = {}

    def _new_units(self) -> tuple[np.ndarray, np.ndarray]:
        """(phy, size) of every unit copied this run, by phy, one per record (an LMQ copy shares its phy)."""
        parts = [u for q in self.queues.values() for u in q.new_units]
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        phy = np.concatenate([p for p, _ in parts])
        size = np.concatenate([s for _, s in parts])
        order = np.argsort(phy, kind="stable")
        phy, size = phy[order], size[order]
        first = np.ones(len(phy), dtype=bool)
        first[1:] = phy[1:] != phy[:-1]
        return phy[first], size[first]

    def _last_unit_phy(self) -> Optional[int]:
        phy, _ = self._new_units()
        return int(phy[-1]) if len(phy) else None

    def _first_record_without_unit(self, cl: CommitLog) -> Optional[int]:
        """The first record below the end, and past the previous snapshot, that should have a ConsumeQueue unit
        and has none (None: every one has).  The units copied this run tile the CommitLog from the previous
        end; only the gaps between them (segment-end blanks, transaction records without units, or a batch
        a writer left half-dispatched) are walked record by record."""
        start = self.previous["validEnd"] if self.previous else cl.min_offset
        phy, size = self._new_units()
        ends = phy + size
        gap_from = np.concatenate(([start], ends))
        gap_to = np.concatenate((phy, [self.valid_end]))
        for a, b in zip(gap_from[gap_from < gap_to].tolist(), gap_to[gap_from < gap_to].tolist()):
            for step in cl.walk(a, stop_offset=b):
                kind = step.decoded.kind
                if kind is Kind.MESSAGE:
                    if step.decoded.record.sys_flag & TRANSACTION_MASK in (TRANSACTION_NOT_TYPE,
                                                                           TRANSACTION_COMMIT_TYPE):
                        return step.phy_offset
                elif kind is not Kind.BLANK:
                    raise FormatError(f"no valid record at CommitLog offset {step.phy_offset}, below the end "
                                      f"{self.valid_end} the ConsumeQueues point at: {step.decoded.reason}",
                                      file=step.segment.path, offset=step.phy_offset - step.segment.start_offset)
        return None

    def _next_unit_below_end(self, q: _Queue) -> bool:
        if not q.units_per_file:
            return False
        m = q.max_offset
        first = m - m % q.units_per_file
        path = os.path.join(q.folder, offset_to_file_name(first * CQ_UNIT_SIZE))
        try:
            with open(path, "rb") as f:
                f.seek((m - first) * CQ_UNIT_SIZE)
                units = units_from_bytes(f.read(CQ_UNIT_SIZE))
        except FileNotFoundError:
            return False
        return bool(len(units) and valid_unit_mask(units)[0] and units["phy_offset"][0] < self.valid_end)

    def _copy_queue(self, key: tuple[str, int], folder: str) -> _Queue:
        q = _Queue(key[0], key[1], folder)
        segments = list_segments(folder)
        if not segments:
            return q
        file_size = max(s.size_bytes for s in segments)     # files are created at full size
        if file_size % CQ_UNIT_SIZE:
            raise FormatError(f"ConsumeQueue file size {file_size} is not a multiple of {CQ_UNIT_SIZE}",
                              file=segments[0].path, offset=0)
        q.units_per_file = file_size // CQ_UNIT_SIZE
        for seg in segments:
            rel = f"consumequeue/{key[0]}/{key[1]}/{os.path.basename(seg.path)}"
            prev = self._prev(rel, file_size)
            if prev is not None and prev["sealed"]:
                q.files.append(self._keep(rel, prev))
                q.max_offset = (seg.start_offset + file_size) // CQ_UNIT_SIZE
                continue
            kept = prev["validBytes"] if prev is not None else 0
            written = _units_written(seg.path, kept // CQ_UNIT_SIZE, file_size // CQ_UNIT_SIZE)
            tail = _pread(seg.path, kept, written * CQ_UNIT_SIZE - kept)
            units = units_from_bytes(tail)
            bad = ~valid_unit_mask(units) | (units["phy_offset"] >= self.valid_end)
            n = int(bad.nonzero()[0][0]) if bad.any() else len(units)
            valid = kept + n * CQ_UNIT_SIZE
            if valid == 0:
                break                     # no unit below the end: neither here nor in later files
            q.max_offset = seg.start_offset // CQ_UNIT_SIZE + valid // CQ_UNIT_SIZE
            new = tail[:n * CQ_UNIT_SIZE]
            messages = units[:n][units["size"][:n] != PRE_BLANK_SIZE]
            q.new_units.append((messages["phy_offset"].astype(np.int64), messages["size"].astype(np.int64)))
            if n == 0:
                q.files.append(self._keep(rel, prev))
            else:
                q.files.append(self._stage_grown(rel, "consumequeue", seg.path, file_size, prev, kept, new))
            if valid < file_size:
                break
        return q

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
        to_publish = sorted((p for p in self.planned.values() if p.staged is not None),
                            key=lambda p: (order[p.kind], p.rel))
        if to_publish:
            self.dest.put_bytes(PENDING_NAME, manifest_bytes({"format": FORMAT, "startedAt": _now_iso(),
                                                             "validEnd": self.valid_end}))
        for i, p in enumerate(to_publish):
            # CommitLog segments become visible oldest first, each durably (a later one alone would be walked
            # past a gap); the files of the other kinds in any order, their directories synced once per kind.
            last_of_kind = i + 1 == len(to_publish) or to_publish[i + 1].kind != p.kind
            self.dest.publish(p.staged, sync_dir=p.kind == "commitlog" or last_of_kind)
            p.staged = None
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
            "queues": [{"topic": t, "queueId": qid, "maxOffset": q.max_offset}
                       for (t, qid), q in sorted(self.queues.items()) if q.files],
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

    def _identity(self) -> dict:
        extra = self.config.extra
        out = {"path": self.root, "host": socket.gethostname(), "storeType": "file",
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
    if layout.rocksdb_queues:
        raise UnsupportedLayoutError("RocksDB ConsumeQueues (storeType=defaultRocksDB) are not snapshotted: a "
                                     "live database has no consistent copy by files",
                                     file=str(layout.consumequeue_dir))
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

def _read_whole(path: str, missing_ok: bool = True) -> Optional[bytes]:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        if missing_ok:
            return None
        raise


def _pread(path: str, position: int, length: int) -> bytearray:
    """Up to ``length`` bytes at ``position`` (fewer at the end of the file), read straight into one buffer."""
    buf = bytearray(max(0, length))
    view = memoryview(buf)
    fd = os.open(path, os.O_RDONLY)
    try:
        done = 0
        for _ in range(length // COPY_BLOCK + 2):
            if done >= length:
                break
            n = os.preadv(fd, [view[done:done + COPY_BLOCK]], position + done)
            if n <= 0:
                break
            done += n
    finally:
        os.close(fd)
    del view
    if done < len(buf):
        del buf[done:]
    return buf


def _units_written(path: str, first: int, limit: int) -> int:
    """How many units of the ConsumeQueue file precede its first invalid one, searching [first, limit) (units
    are written in order: the valid ones are a prefix; a binary search reads ~20 of them, not the file)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        lo, hi = first, min(limit, os.fstat(fd).st_size // CQ_UNIT_SIZE)
        for _ in range(64):
            if lo >= hi:
                break
            mid = (lo + hi) // 2
            unit = units_from_bytes(os.pread(fd, CQ_UNIT_SIZE, mid * CQ_UNIT_SIZE))
            if len(unit) and valid_unit_mask(unit)[0]:
                lo = mid + 1
            else:
                hi = mid
        return lo
    finally:
        os.close(fd)


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
