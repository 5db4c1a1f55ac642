"""The config part of ``rmq snapshot`` (:mod:`rmqsource.store.snapshot`): ``config/`` read whole.

JSON files are parsed with the broker's rules; one caught mid-write (the broker rewrites it in place) is read
again, then its ``.bak`` is taken.  RocksDB folders (config v2's ``config/rdb/``, the 5.2 RocksDB configs) are
copied file by file, ``CURRENT`` first, again from the start when a file vanished meanwhile (a compaction).
"""

from __future__ import annotations

import os
import time
from typing import Optional

from ..errors import FormatError, StoreError
from ..format.configjson import loads_fastjson
from ..io.rocksdb import is_rocksdb

CONFIG_READ_TRIES = 5           # a config file caught mid-write is read again
ROCKSDB_SKIPPED = ("LOCK",)


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
        """A RocksDB database's files: CURRENT first, then the rest (table files never change once written);
        a file gone meanwhile (a compaction) makes the whole folder read again."""
        for attempt in range(CONFIG_READ_TRIES):
            try:
                current = read_whole(os.path.join(folder, "CURRENT"), missing_ok=False)
                contents = {"CURRENT": current}
                for name in sorted(os.listdir(folder)):
                    if name in contents or name in ROCKSDB_SKIPPED or name.startswith("LOG"):
                        continue
                    if os.path.isfile(os.path.join(folder, name)):
                        contents[name] = read_whole(os.path.join(folder, name), missing_ok=False)
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


def read_whole(path: str, missing_ok: bool = True) -> Optional[bytes]:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        if missing_ok:
            return None
        raise
