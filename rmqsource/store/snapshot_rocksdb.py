"""RocksDB ConsumeQueues (``storeType=defaultRocksDB``) in ``rmq snapshot`` (:mod:`rmqsource.store.snapshot`).

The broker writes its ConsumeQueue units without a WAL into memtables that flush (atomically, every column
family with the dispatch checkpoint) into immutable table files.  So the database on disk, at any moment,
holds exactly the units of the records before its checkpoint; the readers serve the rest by dispatching
the CommitLog from there (:mod:`rmqsource.store.rocksdb_tail`), as the broker's recovery does.  A snapshot:

1. the database, file by file: ``CURRENT``, the ``MANIFEST`` it names, then the table files (immutable:
   linked into a local copy, which keeps one a compaction deletes meanwhile), ``OPTIONS``, ``IDENTITY``
   and logs.  The copy is taken when ``CURRENT`` and the MANIFEST's length did not change while it was
   read (else read again: a MANIFEST copied while RocksDB appends to it opens, but without its last
   edits, measured: every unit of the last flush gone), and it must open read-only;
2. then the CommitLog's valid end: the copied database's tail walked from its checkpoint (CRC-checked,
   whole records only) is ``validEnd``.  Every unit in the copy points at a record written before it was
   copied, so below that end; the snapshot's readers serve the copy's units plus the same tail.
"""

from __future__ import annotations

import os
import tempfile
from typing import Optional

from ..errors import StoreError
from ..format.record import Kind
from ..io.rocksdb import NEEDS_ROCKSDICT, ReadOnlyRocksDb, RocksDbOpenError, rocksdict_available
from .commitlog import CommitLog
from .rocksdb_queue import RocksDbQueueStore
from .rocksdb_tail import CommitLogTail
from .snapshot_configs import TABLE_SUFFIXES, copy_rocksdb_database, read_whole


class RocksDbQueueCopy:
    """Mixin of :class:`rmqsource.store.snapshot.Snapshot` (whose state and staging it uses)."""

    rocksdb_max_offsets: Optional[dict] = None

    def _copy_rocksdb_queues(self) -> Optional[int]:
        """Copy the database, set ``valid_end`` and the served max offsets; returns the last record's offset."""
        folder = str(self.layout.consumequeue_dir)
        if not rocksdict_available():       # as every reader of the database: an UnsupportedLayoutError
            raise RocksDbOpenError(NEEDS_ROCKSDICT, file=folder, status="rocksdict is not installed")
        rel_dir = os.path.relpath(folder, self.root).replace(os.sep, "/")
        with tempfile.TemporaryDirectory(prefix="rmq-snapshot-rocksdb-") as copy:
            copy_rocksdb_database(folder, copy, what="ConsumeQueues")
            with ReadOnlyRocksDb(copy, what="ConsumeQueue database (snapshot copy)") as db:
                last_phy = self._end_of(RocksDbQueueStore(self.layout, db), folder)
            for name in sorted(os.listdir(copy)):
                self._stage_database_file(f"{rel_dir}/{name}", os.path.join(copy, name), name)
        return last_phy

    def _end_of(self, store: RocksDbQueueStore, folder: str) -> Optional[int]:
        start = store.dispatch_end
        next_offsets = {key: queue_offset + 1 for key, (_, queue_offset) in store.max_entries.items()}
        tail = CommitLogTail(start, next_offsets, self.config.message_delay_levels_ms, check_crc=True)
        last_phy = max((phy for phy, _ in store.max_entries.values()), default=None)
        cl = CommitLog(self.layout)
        try:
            tail.extend(cl)
            self.valid_end = end = tail.end
            # The database's furthest unit must point at a whole record below the end (the walk starts past it).
            reach = start
            if last_phy is not None:
                decoded, _ = cl.decode_at(last_phy, check_crc=True)
                reach = max(reach, last_phy + decoded.size if decoded.kind is Kind.MESSAGE else end + 1)
            if cl.segments and reach > end:
                raise StoreError(f"{folder}: the RocksDB ConsumeQueues reach CommitLog offset {reach}, past its valid "
                                 f"end {end}: not this store's database, or the CommitLog was truncated")
        finally:
            cl.close()
        if self.previous and end < self.previous["validEnd"]:
            raise StoreError(f"the store's CommitLog ends at {end}, before the snapshot in {self.dest.uri} "
                             f"(validEnd {self.previous['validEnd']}): not the store it was taken of, or it was "
                             f"truncated")
        self.rocksdb_max_offsets = offsets = {key: q + 1 for key, (_, q) in store.max_entries.items()}
        for key, t in tail.view().items():
            offsets[key] = max(offsets.get(key, 0), t.end_offset)
            if len(t.units):
                phy = int(t.units["phy_offset"].max())
                last_phy = phy if last_phy is None else max(last_phy, phy)
        return last_phy

    def _stage_database_file(self, rel: str, path: str, name: str) -> None:
        size = os.path.getsize(path)
        prev = self._prev(rel, size)
        if name.endswith(TABLE_SUFFIXES):
            # Table files never change once written (their name is never reused): copied once.
            if prev is not None:
                self._keep(rel, prev)
            else:
                self.planned[rel] = self._stage_copy(rel, "consumequeue", path, size, None, 0, size)
            return
        self._stage_bytes(rel, "consumequeue", read_whole(path, missing_ok=False))
