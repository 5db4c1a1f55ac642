"""Read-only opens of a broker's RocksDB database (the ConsumeQueues of ``storeType=defaultRocksDB``).

The ``rocksdict`` binding (``pip install 'rmqsource[rocksdb]'``) is imported here and nowhere else.  The
broker's folder is never written, locked or renamed in: RocksDB's read-only open writes nothing, but
rocksdict 0.3.29 saves a ``rocksdict-config.json`` beside any database it opens, read-only or not (fixed
upstream after that release).  So the database is opened through a *shadow* folder in a temporary
directory: copies of the small files RocksDB reads at open (``CURRENT``, ``IDENTITY``, ``MANIFEST-*``,
``OPTIONS-*`` and the write-ahead ``*.log`` files) and symbolic links to the table files (``*.sst``,
``*.blob``), which are immutable once written.  A read-only open is a snapshot: :func:`open_read_only`
keeps one per folder and process and opens a fresh one when the folder's listing changed (a broker that
is still writing), so a stream sees units written since its last trigger.

Layer: io (no store semantics; ``rmqsource/store/rocksdb_queue.py`` decodes what is read here).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import weakref
from typing import Iterator, Optional

from ..errors import UnsupportedLayoutError

ROCKSDB_EXTRA = "rocksdb"
NEEDS_ROCKSDICT = (f"reading RocksDB ConsumeQueues (storeType=defaultRocksDB) in Python needs the rocksdict "
                   f"package: pip install 'rmqsource[{ROCKSDB_EXTRA}]' (or read with Spark through the rmq jar, "
                   f"`rmq jar --build` and spark.jars, which uses the rocksdbjni Spark ships)")
_LINKED_SUFFIXES = (".sst", ".blob")
_COPIED_PREFIXES = ("CURRENT", "IDENTITY", "MANIFEST-", "OPTIONS-")


def rocksdict_available() -> bool:
    try:
        import rocksdict  # noqa: F401
    except ImportError:
        return False
    return True


def _require_rocksdict(folder: str):
    try:
        import rocksdict
    except ImportError:
        raise UnsupportedLayoutError(NEEDS_ROCKSDICT, file=folder) from None
    return rocksdict


def _listing(folder: str) -> tuple[tuple[str, int, int], ...]:
    """(name, size, mtime_ns) of each regular file: what changes when the broker writes."""
    out = []
    with os.scandir(folder) as entries:
        for e in entries:
            if e.is_file():
                st = e.stat()
                out.append((e.name, st.st_size, st.st_mtime_ns))
    return tuple(sorted(out))


class ReadOnlyRocksDb:
    """One read-only open of the database in ``folder`` (through its shadow); iterate, get, close."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = os.fspath(folder)
        rocksdict = _require_rocksdict(self.folder)
        if not os.path.isfile(os.path.join(self.folder, "CURRENT")):
            raise UnsupportedLayoutError("no RocksDB database here (no CURRENT file)", file=self.folder)
        self.listing = _listing(self.folder)
        self._shadow = tempfile.mkdtemp(prefix="rmq-rocksdb-")
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._shadow, True)
        try:
            self._db = self._open(rocksdict)
        except BaseException:
            shutil.rmtree(self._shadow, ignore_errors=True)
            raise
        self._cfs: dict[str, object] = {}

    def _open(self, rocksdict):
        last: Optional[Exception] = None
        for _ in range(3):                       # a live broker's compaction may delete a table file meanwhile
            for name in os.listdir(self._shadow):
                os.unlink(os.path.join(self._shadow, name))
            for name, _size, _mtime in _listing(self.folder):
                src = os.path.join(self.folder, name)
                dst = os.path.join(self._shadow, name)
                if name.endswith(_LINKED_SUFFIXES):
                    os.symlink(src, dst)
                elif name.startswith(_COPIED_PREFIXES) or name.endswith(".log"):
                    try:
                        shutil.copyfile(src, dst)
                    except FileNotFoundError:
                        continue
            try:
                opts = rocksdict.Options(raw_mode=True)
                opts.create_if_missing(False)
                return rocksdict.Rdict(self._shadow, options=opts,
                                       access_type=rocksdict.AccessType.read_only(False))
            except Exception as e:              # rocksdict raises plain Exception with RocksDB's status text
                last = e
        raise UnsupportedLayoutError(f"cannot open the RocksDB ConsumeQueue database read-only: {last}", file=self.folder)

    def column_family(self, name: str):
        cf = self._cfs.get(name)
        if cf is None:
            if name == "default":
                cf = self._db
            else:
                try:
                    cf = self._db.get_column_family(name)
                except Exception:
                    raise UnsupportedLayoutError(f"the RocksDB database has no column family {name!r}",
                                                 file=self.folder) from None
            self._cfs[name] = cf
        return cf

    def get(self, cf: str, key: bytes) -> Optional[bytes]:
        return self.column_family(cf).get(key)

    def items(self, cf: str, from_key: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        """(key, value) from the first key >= ``from_key``, in key order (the caller stops)."""
        return self.column_family(cf).items(from_key=from_key)

    def range(self, cf: str, first_key: bytes, end_key: bytes, limit: int) -> tuple[list[bytes], list[bytes]]:
        """(keys, values) of the keys in [first_key, end_key), at most ``limit``, in key order."""
        it = self.column_family(cf).iter()
        keys: list[bytes] = []
        values: list[bytes] = []
        it.seek(first_key)
        while len(keys) < limit and it.valid():
            k = it.key()
            if k >= end_key:
                break
            keys.append(k)
            values.append(it.value())
            it.next()
        return keys, values

    def keys_range(self, cf: str, first_key: bytes, end_key: bytes, limit: int) -> list[bytes]:
        return self.range(cf, first_key, end_key, limit)[0]

    def close(self) -> None:
        db, self._db = getattr(self, "_db", None), None
        self._cfs = {}
        if db is not None:
            try:
                db.close()
            except Exception:
                pass
        self._cleanup()


_open_lock = threading.Lock()
_opened: dict[str, ReadOnlyRocksDb] = {}


def open_read_only(folder: str | os.PathLike, *, refresh: bool = True) -> ReadOnlyRocksDb:
    """The process's read-only open of ``folder``; a new one when its files changed since (``refresh``)."""
    key = os.path.realpath(os.fspath(folder))
    with _open_lock:
        db = _opened.get(key)
        if db is not None and refresh:
            try:
                current = _listing(key)
            except FileNotFoundError:
                current = None
            if current != db.listing:
                db = None           # queues opened on the old snapshot keep it; it goes when they do
        if db is None:
            db = ReadOnlyRocksDb(key)
            _opened[key] = db
        return db


def close_all() -> None:
    with _open_lock:
        for db in _opened.values():
            db.close()
        _opened.clear()


atexit.register(close_all)
