"""The config part of ``rmq snapshot`` (:mod:`rmqsource.store.snapshot`): ``config/`` read whole.

JSON files are parsed with the broker's rules; one caught mid-write (the broker rewrites it in place) is read
again, then its ``.bak`` is taken.  RocksDB folders (config v2's ``config/rdb/``, the 5.2 RocksDB configs; the
ConsumeQueue database too, :mod:`snapshot_rocksdb`) are copied by :func:`copy_rocksdb_database`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Optional

from ..errors import FormatError, StoreError
from ..format.configjson import loads_fastjson
from ..io.rocksdb import ReadOnlyRocksDb, RocksDbOpenError, is_rocksdb, rocksdict_available

CONFIG_READ_TRIES = 5           # a config file caught mid-write is read again
ROCKSDB_COPY_TRIES = 8          # a database caught mid-flush or mid-compaction is read again
TABLE_SUFFIXES = (".sst", ".blob")


class ConfigCopy:
    """Mixin of :class:`rmqsource.store.snapshot.Snapshot` (whose staging it uses): the config files."""

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
            data = self._read_config_file(path) if name.endswith(".json") else read_whole(path)
            if data is not None:
                self._stage_bytes(f"config/{name}", "config", data)

    def _read_config_file(self, path: str) -> Optional[bytes]:
        """The file's bytes once they parse (the broker rewrites it in place: read again), else its .bak."""
        error: Optional[FormatError] = None
        for attempt in range(CONFIG_READ_TRIES):
            data = read_whole(path)
            if data is None:
                break
            try:
                if data.strip():
                    loads_fastjson(data, file=path)
                return data
            except FormatError as e:
                error = e
                time.sleep(0.02 * (attempt + 1))
        bak = read_whole(path + ".bak")
        if bak is not None and bak.strip():
            loads_fastjson(bak, file=path + ".bak")        # a bad .bak raises, naming itself
            return bak
        if error is not None:
            raise error
        return None

    def _copy_rocksdb_folder(self, folder: str, rel: str) -> None:
        """A RocksDB database's files, as :func:`copy_rocksdb_database` copies them."""
        with tempfile.TemporaryDirectory(prefix="rmq-snapshot-rocksdb-") as copy:
            copy_rocksdb_database(folder, copy, what="config database", check_opens=rocksdict_available())
            for name in sorted(os.listdir(copy)):
                self._stage_bytes(f"{rel}/{name}", "config", read_whole(os.path.join(copy, name), missing_ok=False))


def copy_rocksdb_database(folder: str, copy: str, *, what: str, check_opens: bool = True) -> None:
    """Fill ``copy`` (an empty local folder) with a consistent copy of the database in ``folder``: ``CURRENT``,
    the MANIFEST it names, then the rest (table files never change once written: linked).  Taken when
    ``CURRENT`` and the MANIFEST's length held still while it was read (a MANIFEST copied while RocksDB
    appends to it opens without its last edits) and, with ``check_opens``, when it opens read-only; else read
    again (a file vanished: a compaction, a MANIFEST roll).  A StoreError naming the folder after
    :data:`ROCKSDB_COPY_TRIES` tries."""
    status = "it kept changing"
    for attempt in range(ROCKSDB_COPY_TRIES):
        if attempt:
            time.sleep(0.05 * attempt)
        try:
            current = read_whole(os.path.join(folder, "CURRENT"), missing_ok=False)
            manifest_name = current.decode("ascii", "replace").strip()
            manifest = read_whole(os.path.join(folder, manifest_name), missing_ok=False)
            listed = sorted(os.listdir(folder))
            tables = {n for n in listed if n.endswith(TABLE_SUFFIXES)}
            for name in set(os.listdir(copy)) - tables:
                os.unlink(os.path.join(copy, name))       # a table file linked on an earlier try is kept
            for name in listed:
                src, dst = os.path.join(folder, name), os.path.join(copy, name)
                if name == "LOCK" or name.startswith("LOG") or name == "CURRENT" or \
                        (name.startswith("MANIFEST-") and name != manifest_name) or not os.path.isfile(src):
                    continue
                if name == manifest_name:
                    _write(dst, manifest)
                elif name.endswith(TABLE_SUFFIXES):
                    if not os.path.exists(dst):
                        _link_or_copy(src, dst)
                else:
                    _write(dst, read_whole(src, missing_ok=False))
            stable = read_whole(os.path.join(folder, "CURRENT")) == current and \
                os.path.getsize(os.path.join(folder, manifest_name)) == len(manifest)
        except FileNotFoundError as e:      # a compaction deleted a file, or RocksDB rolled its MANIFEST
            status = f"{os.path.basename(e.filename or '?')} vanished while it was copied"
            continue
        if not stable:
            status = "its MANIFEST grew while it was copied"
            continue
        _write(os.path.join(copy, "CURRENT"), current)
        try:
            if check_opens:
                ReadOnlyRocksDb(copy, what=f"{what} (snapshot copy)").close()
        except RocksDbOpenError as e:
            status = f"the copy does not open: {e.status}"
            continue
        return
    raise StoreError(f"{folder}: no consistent copy of the RocksDB {what} after {ROCKSDB_COPY_TRIES} "
                     f"tries: {status}")


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link where the folders share a file system (it keeps a file a compaction deletes), else a copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def read_whole(path: str, missing_ok: bool = True) -> Optional[bytes]:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        if missing_ok:
            return None
        raise
