"""Read-only opens of a broker's RocksDB databases: the ConsumeQueues of ``storeType=defaultRocksDB``
(``consumequeue/``) and the RocksDB configs that hold consumer offsets (``config/rdb/`` of config v2,
``config/consumerOffsets/`` and ``config/metadata/`` of the 5.2 layout).  Java twin: ReadOnlyRocksDb.java.

The ``rocksdict`` binding (``pip install 'rmqsource[rocksdb]'``) is imported here and nowhere else.  The
broker's folder is never written, locked or renamed in: RocksDB's read-only open writes nothing, but
rocksdict 0.3.29 saves a ``rocksdict-config.json`` beside any database it opens, read-only or not (fixed
upstream after that release).  So the database is opened through a *shadow* folder in a temporary
directory: copies of the small files RocksDB reads at open (``CURRENT``, ``IDENTITY``, ``MANIFEST-*``,
``OPTIONS-*`` and the write-ahead ``*.log`` files) and links to the table files (``*.sst``, ``*.blob``),
which are immutable once written: a hard link where the temporary folder shares the file system (it keeps
a table file a live broker's compaction deletes meanwhile), a symbolic link otherwise.  ``LOCK``, ``LOG*``
and anything else are left out.  Every column family is opened.  A shadow is removed at close or at the
process's exit; one left by a process that was killed (a Spark Python worker stopped with its session) is
removed by the next open on the machine, so its links do not keep deleted table files on the broker's disk.

A read-only open is a snapshot.  :class:`ReadOnlyRocksDb` is one open (a context manager: the config
readers open, read and close); :func:`open_read_only` keeps one per folder and process and opens a fresh
one when the folder's listing changed (a broker that is still writing), so a stream sees units written
since its last trigger.  Since a snapshot never changes, what a caller derives from it may be kept with it
(``memo``, dropped at close and with the snapshot): the store layer keeps decoded units there.

Errors: :class:`RocksDbOpenError` (an :class:`~rmqsource.errors.UnsupportedLayoutError` naming the folder,
with RocksDB's own words in ``status``) when the database cannot be opened, the same class with
:data:`NEEDS_ROCKSDICT` when rocksdict is not installed; callers that answer with another error
(the offset source's :class:`~rmqsource.errors.StoreError`) catch it and say what they were reading.

:class:`WritableRocksDb` is the one read-write open: the writer's records in a config-v2 broker's
``config/rdb/``, opened only by a process that holds the store's lock (no broker runs on it). What it leaves
on disk must open in the broker's RocksDB (rocketmq-rocksdb 1.0.2 of 5.3.3 is RocksDB 8.x, older than the
binding's 9.8): table ``format_version`` 5 and no compression, as the broker's ``ConfigHelper`` writes, every
batch flushed into a table file before the close (the broker's older WAL reader never sees our log records),
and rocksdict's own ``rocksdict-config.json`` removed again.

Layer: io (no store semantics; ``rmqsource/store/rocksdb_queue.py`` and ``rmqsource/store/offset_source.py``
decode what is read here).
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
DEFAULT_CF = "default"
MAX_FILES = 1_000_000                     # more files than any RocksDB folder a broker writes holds
_LINKED_SUFFIXES = (".sst", ".blob")
_COPIED_PREFIXES = ("CURRENT", "IDENTITY", "MANIFEST-", "OPTIONS-")
_OPEN_ATTEMPTS = 3                        # a live broker's compaction may delete a table file meanwhile


class RocksDbOpenError(UnsupportedLayoutError):
    """The database in ``file`` cannot be opened read-only (``status``: RocksDB's first line, or why not)."""

    def __init__(self, message: str, *, file: str, status: str):
        super().__init__(message, file=file)
        self.status = status


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
        raise RocksDbOpenError(NEEDS_ROCKSDICT, file=folder, status="rocksdict is not installed") from None
    return rocksdict


def is_rocksdb(folder: str | os.PathLike) -> bool:
    """A folder holding a RocksDB database (its ``CURRENT`` file)."""
    return os.path.isfile(os.path.join(os.fspath(folder), "CURRENT"))


def _listing(folder: str) -> tuple[tuple[str, int, int], ...]:
    """(name, size, mtime_ns) of each regular file: what changes when the broker writes."""
    out = []
    with os.scandir(folder) as entries:
        for e in entries:
            if e.is_file():
                st = e.stat()
                out.append((e.name, st.st_size, st.st_mtime_ns))
                if len(out) > MAX_FILES:
                    raise RocksDbOpenError(f"more than {MAX_FILES} files: not a RocksDB database a broker wrote",
                                           file=folder, status="too many files")
    return tuple(sorted(out))


SHADOW_PREFIX = "rmq-rocksdb-"


def sweep_stale_shadows(parent: str) -> int:
    """Removes the shadows in ``parent`` whose process is gone; returns how many."""
    removed = 0
    try:
        names = os.listdir(parent)
    except OSError:
        return 0
    for name in names:
        pid_text = name[len(SHADOW_PREFIX):].split("-", 1)[0] if name.startswith(SHADOW_PREFIX) else ""
        if not pid_text.isdigit() or _process_alive(int(pid_text)):
            continue
        shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
        removed += 1
    return removed


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:             # another user's process: alive
        return True
    return True


def fill_shadow(folder: str, shadow: str) -> None:
    """Make ``shadow`` (an empty folder) a copy of the database in ``folder`` RocksDB can open read-only."""
    for name, _size, _mtime in _listing(folder):
        src = os.path.join(folder, name)
        dst = os.path.join(shadow, name)
        if name.endswith(_LINKED_SUFFIXES):
            try:
                os.link(src, dst)
            except OSError:
                os.symlink(os.path.abspath(src), dst)
        elif name.startswith(_COPIED_PREFIXES) or name.endswith(".log"):
            try:
                shutil.copyfile(src, dst)
            except FileNotFoundError:    # a WAL or manifest the broker just rolled over
                continue


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class ReadOnlyRocksDb:
    """One read-only open of the database in ``folder`` (through its shadow), every column family."""

    def __init__(self, folder: str | os.PathLike, *, what: str = "database"):
        self.folder = os.fspath(folder)
        self.what = what
        rocksdict = self._rocksdict = _require_rocksdict(self.folder)
        if not is_rocksdb(self.folder):
            raise RocksDbOpenError(f"no RocksDB {what} here (no CURRENT file)", file=self.folder,
                                   status="no CURRENT file")
        self.listing = _listing(self.folder)
        sweep_stale_shadows(tempfile.gettempdir())
        self._shadow = tempfile.mkdtemp(prefix=f"{SHADOW_PREFIX}{os.getpid()}-")
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._shadow, True)
        try:
            self._db, names = self._open(rocksdict)
        except BaseException:
            self._cleanup()
            raise
        self._cfs: dict[str, object] = {DEFAULT_CF: self._db}
        self.column_families: tuple[str, ...] = tuple(names)
        self.memo: dict[str, object] = {}       # what callers derive from this snapshot (it never changes)

    def _open(self, rocksdict):
        last: Optional[BaseException] = None
        for _ in range(_OPEN_ATTEMPTS):
            for name in os.listdir(self._shadow):
                os.unlink(os.path.join(self._shadow, name))
            fill_shadow(self.folder, self._shadow)
            try:
                opts = rocksdict.Options(raw_mode=True)
                opts.create_if_missing(False)
                names = rocksdict.Rdict.list_cf(self._shadow, opts)
                cfs = {c: rocksdict.Options(raw_mode=True) for c in names if c != DEFAULT_CF}
                db = rocksdict.Rdict(self._shadow, options=opts, column_families=cfs,
                                     access_type=rocksdict.AccessType.read_only(False))
                return db, names
            except Exception as e:              # rocksdict raises plain Exception with RocksDB's status text
                last = e
        status = _first_line(last) if last is not None else "unknown"
        raise RocksDbOpenError(f"cannot open the RocksDB {self.what} read-only: {status}", file=self.folder,
                               status=status)

    def __enter__(self) -> "ReadOnlyRocksDb":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def has_column_family(self, name: str) -> bool:
        return name in self.column_families

    def column_family(self, name: str):
        cf = self._cfs.get(name)
        if cf is None:
            try:
                cf = self._db.get_column_family(name)
            except Exception:
                raise RocksDbOpenError(f"the RocksDB {self.what} has no column family {name!r}", file=self.folder,
                                       status=f"no column family {name!r}") from None
            self._cfs[name] = cf
        return cf

    def get(self, cf: str, key: bytes) -> Optional[bytes]:
        return self.column_family(cf).get(key)

    def items(self, cf: str, from_key: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        """(key, value) from the first key >= ``from_key``, in key order (the caller stops)."""
        return self.column_family(cf).items(from_key=from_key)

    # An iterator's upper bound must outlive the iterator: with rocksdict 0.3.29 a bound whose bytes and
    # ReadOptions were dropped while the iterator was still read ended a 50,000-key scan after 96 keys (the
    # freed memory then compared lower).  Each method below holds ``end_key`` and ``ro`` until its iterator
    # is consumed, and hands out lists, never a live iterator.

    def _bounded(self, end_key: bytes):
        ro = self._rocksdict.ReadOptions()
        ro.set_iterate_upper_bound(end_key)
        return ro

    def values_range(self, cf: str, first_key: bytes, end_key: bytes) -> list[bytes]:
        """The values of every key in [first_key, end_key), in key order: one iterator pass, no key copied
        into Python (the bulk read of a queue range; the caller knows how many keys the range can hold)."""
        ro = self._bounded(end_key)
        values = list(self.column_family(cf).values(from_key=first_key, read_opt=ro))
        del ro
        return values

    def range(self, cf: str, first_key: bytes, end_key: bytes, limit: int) -> tuple[list[bytes], list[bytes]]:
        """(keys, values) of the keys in [first_key, end_key), at most ``limit``, in key order."""
        keys: list[bytes] = []
        values: list[bytes] = []
        if limit <= 0:
            return keys, values
        ro = self._bounded(end_key)
        for k, v in self.column_family(cf).items(from_key=first_key, read_opt=ro):
            keys.append(k)
            values.append(v)
            if len(keys) >= limit:
                break
        del ro
        return keys, values

    def first_key(self, cf: str, first_key: bytes, end_key: bytes) -> Optional[bytes]:
        """The first key in [first_key, end_key), or None."""
        ro = self._bounded(end_key)
        key = next(iter(self.column_family(cf).keys(from_key=first_key, read_opt=ro)), None)
        del ro
        return key

    def close(self) -> None:
        db, self._db = getattr(self, "_db", None), None
        self._cfs = {}
        self.memo = {}
        if db is not None:
            try:
                db.close()
            except Exception:
                pass
        self._cleanup()


BROKER_TABLE_FORMAT_VERSION = 5         # rocketmq ConfigHelper.createConfigColumnFamilyOptions
ROCKSDICT_CONFIG_FILE = "rocksdict-config.json"


class WritableRocksDb:
    """A read-write open of the database in ``folder`` (created when ``create``), default column family only.

    The caller holds the store's lock. ``write`` applies one batch and flushes it into a table file;
    ``close`` (also as a context manager) closes and removes rocksdict's side file."""

    def __init__(self, folder: str | os.PathLike, *, create: bool, what: str = "config database"):
        self.folder = os.fspath(folder)
        self.what = what
        rocksdict = self._rocksdict = _require_rocksdict(self.folder)
        if not create and not is_rocksdb(self.folder):
            raise RocksDbOpenError(f"no RocksDB {what} here (no CURRENT file)", file=self.folder,
                                   status="no CURRENT file")
        had_side_file = os.path.exists(os.path.join(self.folder, ROCKSDICT_CONFIG_FILE))
        self._remove_side_file = not had_side_file
        opts = rocksdict.Options(raw_mode=True)
        opts.create_if_missing(create)
        table = rocksdict.BlockBasedOptions()
        table.set_format_version(BROKER_TABLE_FORMAT_VERSION)
        table.set_block_size(32 * 1024)
        table.set_bloom_filter(16, False)
        opts.set_block_based_table_factory(table)
        opts.set_compression_type(rocksdict.DBCompressionType.none())
        # the broker's own pair (ConfigHelper); rocksdict takes the folder's OPTIONS file into account, and
        # in-place updates with concurrent memtable writes is refused at open
        opts.set_inplace_update_support(True)
        opts.set_allow_concurrent_memtable_write(False)
        try:
            if create:
                os.makedirs(self.folder, exist_ok=True)
            self._db = rocksdict.Rdict(self.folder, options=opts)
        except Exception as e:                  # RocksDB's status text (a broker's LOCK, a damaged database)
            self._cleanup_side_file()
            raise RocksDbOpenError(f"cannot open the RocksDB {what} read-write: {_first_line(e)}",
                                   file=self.folder, status=_first_line(e)) from None

    def __enter__(self) -> "WritableRocksDb":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def get(self, key: bytes) -> Optional[bytes]:
        return self._db.get(key)

    def prefixed(self, prefix: bytes, limit: int) -> list[tuple[bytes, bytes]]:
        """(key, value) of every key starting with ``prefix``, in key order; RocksDbOpenError past ``limit``."""
        out = []
        for k, v in self._db.items(from_key=prefix):
            k = bytes(k)
            if not k.startswith(prefix):
                break
            if len(out) >= limit:
                raise RocksDbOpenError(f"more than {limit} records under {prefix.hex()}", file=self.folder,
                                       status="too many records")
            out.append((k, bytes(v)))
        return out

    def write(self, puts: list[tuple[bytes, bytes]]) -> None:
        """One atomic batch of puts, then a flush into a table file (durable when it returns)."""
        batch = self._rocksdict.WriteBatch(raw_mode=True)
        for k, v in puts:
            batch.put(k, v)
        wo = self._rocksdict.WriteOptions()
        wo.sync = True
        self._db.write(batch, write_opt=wo)
        self._db.flush(True)

    def _cleanup_side_file(self) -> None:
        if self._remove_side_file:
            try:
                os.unlink(os.path.join(self.folder, ROCKSDICT_CONFIG_FILE))
            except FileNotFoundError:
                pass

    def close(self) -> None:
        db, self._db = getattr(self, "_db", None), None
        if db is not None:
            db.close()
            self._cleanup_side_file()


_open_lock = threading.Lock()
_opened: dict[str, ReadOnlyRocksDb] = {}


def open_read_only(folder: str | os.PathLike, *, refresh: bool = True,
                   what: str = "ConsumeQueue database") -> ReadOnlyRocksDb:
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
            db = ReadOnlyRocksDb(key, what=what)
            _opened[key] = db
        return db


def close_all() -> None:
    with _open_lock:
        for db in _opened.values():
            db.close()
        _opened.clear()


atexit.register(close_all)
