"""Where things live under a store root (spec §1), what is not a store, and which layouts are refused.

``{root}/commitlog/`` (or one ``storePathCommitLog`` directory),
``consumequeue/{topic}/{queueId}/``, ``index/``, ``checkpoint``, ``abort``,
``lock``, ``config/``; in DLedger mode also ``{root}/dledger-{selfId}/`` (``data/``,
``index/``, ``checkpoint``), whose data files continue the CommitLog's offsets.

:meth:`StoreLayout.check_supported` is the one place that decides whether the
files (and the store config) are a layout this package reads; every reader,
writer, planner and stream goes through it (twin: StoreLayout.java).  A store
holding data files of another layout (batch ConsumeQueues, ConsumeQueueExt,
compacted topics, tiered storage, several CommitLog directories) is refused
with one UnsupportedLayoutError naming the folder, never read in part (README
"Store layouts").  DLedger stores are read; :meth:`StoreLayout.check_writable`
refuses to write them.  ConsumeQueues kept in RocksDB (``storeType=defaultRocksDB``:
a database in ``consumequeue/``) are read through :mod:`rmqsource.store.rocksdb_queue`
(:mod:`rmqsource.store.queues` chooses); they are not written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Optional

from ..errors import NotAStoreError, UnsupportedLayoutError
from ..names import is_safe_dir_name, safe_join

ROCKSDB_MARKERS = ("CURRENT", "IDENTITY")
DLEDGER_PREFIX = "dledger-"           # DLedgerConfig: {storeBaseDir}/dledger-{selfId}/
DEFAULT_DLEDGER_SELF_ID = "n0"        # MessageStoreConfig.dLegerSelfId
# Folders of data rmqsource does not read (RocketMQ StorePathConfigHelper names).
ROCKSDB_CONSUME_QUEUE_DIRS = ("consumequeue", "consumequeue_rocksdb")
# consumequeue/ holding a RocksDB database: read.  consumequeue_rocksdb/ (the second copy a combined
# file + RocksDB queue store keeps) is still refused.
READ_ROCKSDB_CONSUME_QUEUE_DIR = "consumequeue"
BATCH_CONSUME_QUEUE_DIR = "batchconsumequeue"
CONSUME_QUEUE_EXT_DIR = "consumequeue_ext"
TIERED_METADATA = ("config", "tieredStoreMetadata.json")
COMPACTION_LOG = ("compaction", "compactionLog")      # 5.x CompactionStore; position-checkpoint alone is empty
ONLY_FILE_LAYOUT = "only the file CommitLog and ConsumeQueue layout is read"


@dataclass(frozen=True)
class LayoutKeys:
    """The store-config keys that announce a layout (all unset: the config says nothing)."""
    read_only_commit_log_store_paths: Optional[str] = None
    enable_dleger_commit_log: bool = False
    store_path_dledger_commit_log: Optional[str] = None
    dleger_self_id: Optional[str] = None


@dataclass(frozen=True)
class StoreLayout:
    root: Path
    commitlog_dirs: tuple[Path, ...]
    keys: LayoutKeys = LayoutKeys()

    @classmethod
    def for_root(cls, root: str | os.PathLike, store_path_commit_log: Optional[str] = None) -> "StoreLayout":
        root_path = Path(root)
        if store_path_commit_log:
            dirs = tuple(Path(p.strip()) for p in store_path_commit_log.split(",") if p.strip())
        else:
            dirs = (root_path / "commitlog",)
        return cls(root_path, dirs)

    @classmethod
    def for_config(cls, root: str | os.PathLike, config) -> "StoreLayout":
        """The layout of ``root`` as ``config`` (a StoreConfig) describes it."""
        layout = cls.for_root(root, config.store_path_commit_log or None)
        keys = LayoutKeys(config.read_only_commit_log_store_paths, config.enable_dleger_commit_log,
                          config.store_path_dledger_commit_log, config.dleger_self_id)
        return cls(layout.root, layout.commitlog_dirs, keys)

    @property
    def consumequeue_dir(self) -> Path:
        return self.root / "consumequeue"

    @cached_property
    def rocksdb_queues(self) -> bool:
        """Whether ``consumequeue/`` is a RocksDB database (``storeType=defaultRocksDB``), not queue folders."""
        return _is_rocksdb_dir(self.consumequeue_dir)

    @property
    def index_dir(self) -> Path:
        return self.root / "index"

    @property
    def config_dir(self) -> Path:
        return self.root / "config"

    @property
    def checkpoint_path(self) -> Path:
        return self.root / "checkpoint"

    @property
    def abort_path(self) -> Path:
        return self.root / "abort"

    @property
    def lock_path(self) -> Path:
        return self.root / "lock"

    # -- DLedger ----------------------------------------------------------------
    @cached_property
    def dledger_dir(self) -> Optional[Path]:
        """The ``dledger-<selfId>/`` folder of a DLedger store (it may not exist yet), else None.

        Found from the files (one ``dledger-*`` folder under the root, or under
        ``storePathDLedgerCommitLog``), or announced by the config (``enableDLegerCommitLog``,
        ``storePathDLedgerCommitLog``).  Several folders need ``dLegerSelfId`` to choose one.
        """
        keys = self.keys
        base = Path(keys.store_path_dledger_commit_log) if keys.store_path_dledger_commit_log else self.root
        if base != self.root and (base / "data").is_dir():
            return base                 # storePathDLedgerCommitLog names the folder itself
        folders = sorted(n for n in _dir_names(base) if n.startswith(DLEDGER_PREFIX))
        announced = keys.enable_dleger_commit_log or bool(keys.store_path_dledger_commit_log)
        if keys.dleger_self_id:
            name = DLEDGER_PREFIX + keys.dleger_self_id
            if name not in folders and not announced:
                raise UnsupportedLayoutError(
                    f"dLegerSelfId {keys.dleger_self_id} names no DLedger folder: no {name} under {base}"
                    + (f" (DLedger folders: {', '.join(folders)})" if folders else ""), file=str(self.root))
            return base / name
        if len(folders) > 1:
            raise UnsupportedLayoutError(f"several DLedger folders ({', '.join(folders)}): choose one with the "
                                         f"dLegerSelfId option", file=str(self.root))
        if folders:
            return base / folders[0]
        return base / (DLEDGER_PREFIX + DEFAULT_DLEDGER_SELF_ID) if announced else None

    @property
    def dledger_data_dir(self) -> Optional[Path]:
        return self.dledger_dir / "data" if self.dledger_dir is not None else None

    @property
    def dledger_index_dir(self) -> Optional[Path]:
        return self.dledger_dir / "index" if self.dledger_dir is not None else None

    @property
    def dledger_checkpoint_path(self) -> Optional[Path]:
        return self.dledger_dir / "checkpoint" if self.dledger_dir is not None else None

    def check_writable(self) -> None:
        """UnsupportedLayoutError when the store is one rmqsource reads but does not write (DLedger)."""
        self.check_supported()
        self.refuse_rocksdb_queues("written")
        if self.dledger_dir is not None:
            raise UnsupportedLayoutError(f"a DLedger store ({self.dledger_dir.name}) is written by its Raft group; "
                                         f"rmqsource reads it but does not write it", file=str(self.root))

    def check_recoverable(self) -> None:
        """UnsupportedLayoutError when ``rmq recover`` cannot do what the store's engine would (DLedger)."""
        self.check_is_store()
        self.refuse_rocksdb_queues("recovered")
        if self.dledger_dir is not None:
            raise UnsupportedLayoutError(
                f"recovery of a DLedger store ({self.dledger_dir.name}) is not supported: the engine's DLedger "
                f"recovery rebuilds a missing DLedger index and re-dispatches missing ConsumeQueues, which "
                f"rmqsource does not do; reads need no recovery (they see the store as that recovery would)",
                file=str(self.root))

    def refuse_rocksdb_queues(self, what: str) -> None:
        if self.rocksdb_queues:
            raise UnsupportedLayoutError(f"RocksDB ConsumeQueue (storeType=defaultRocksDB): its queues are the broker's "
                                         f"database, read-only here; the store is not {what}",
                                         file=str(self.consumequeue_dir))

    def queue_dir(self, topic: str, queue_id: int) -> Path:
        return safe_join(self.consumequeue_dir, topic, str(int(queue_id)))

    def abort_exists(self) -> bool:
        return self.abort_path.exists()

    def check_is_store(self) -> None:
        """Raise NotAStoreError / UnsupportedLayoutError unless this looks like a file store."""
        if not self.root.is_dir():
            raise NotAStoreError(f"{self.root} is not a directory")
        self.check_supported()
        has_commitlog = any(d.is_dir() for d in self.commitlog_dirs) or \
            (self.dledger_data_dir is not None and self.dledger_data_dir.is_dir())
        if not has_commitlog:
            raise NotAStoreError(
                f"{self.root} is not a RocketMQ store: no commitlog directory "
                f"({', '.join(str(d) for d in self.commitlog_dirs)})")

    def check_supported(self) -> None:
        """UnsupportedLayoutError naming the folder when the store holds data of a layout not read.

        Decided from the files (and from the config keys that move or add data folders). The
        order is fixed so both languages name the same folder first; a reader of one of these
        layouts plugs in here instead of the refusal.
        """
        refusal = self._unsupported()
        if refusal is not None:
            folder, reason = refusal
            raise UnsupportedLayoutError(f"{reason}; {ONLY_FILE_LAYOUT}", file=str(folder))

    def _unsupported(self) -> Optional[tuple[Path, str]]:
        """(folder, reason) of the first layout found that is not read, else None."""
        keys = self.keys
        self.dledger_dir                # several dledger-* folders, or a dLegerSelfId naming none: refused
        if len(self.commitlog_dirs) > 1:
            return self.commitlog_dirs[0], (f"multi-path CommitLog (storePathCommitLog names "
                                            f"{len(self.commitlog_dirs)} directories) is not read")
        if keys.read_only_commit_log_store_paths:
            return Path(keys.read_only_commit_log_store_paths.split(",")[0].strip()), \
                "read-only CommitLog directories (readOnlyCommitLogStorePaths) are not read"
        own = self.root / "commitlog"
        if self.commitlog_dirs != (own,) and _holds_files(own) and not _same_dir(own, self.commitlog_dirs[0]):
            return own, (f"CommitLog files while storePathCommitLog names {self.commitlog_dirs[0]}: "
                         f"two CommitLogs are not read")
        for name in ROCKSDB_CONSUME_QUEUE_DIRS:
            folder = self.root / name
            if name != READ_ROCKSDB_CONSUME_QUEUE_DIR and _is_rocksdb_dir(folder):
                return folder, "RocksDB ConsumeQueue (storeType=defaultRocksDB) is not read"
        folder = self.root / BATCH_CONSUME_QUEUE_DIR
        if _holds_files(folder):
            return folder, "BatchConsumeQueue (batch topics, queue.type=BatchCQ) is not read"
        folder = self.root / CONSUME_QUEUE_EXT_DIR
        if _holds_files(folder):
            return folder, "ConsumeQueueExt (enableConsumeQueueExt=true) is not read"
        folder = self.root.joinpath(*COMPACTION_LOG)
        if _holds_files(folder):
            return folder, "compacted topics (cleanup.policy=COMPACTION) are not read"
        metadata = self.root.joinpath(*TIERED_METADATA)
        if metadata.is_file():
            return metadata, "tiered storage (tieredstore metadata): messages moved to another tier are not read"
        return None

    def list_queues(self) -> list[tuple[str, int]]:
        """(topic, queueId) of every ConsumeQueue directory, sorted (a store's queues whatever they are kept in:
        :func:`rmqsource.store.queues.list_queues`)."""
        result = []
        cq = self.consumequeue_dir
        if not cq.is_dir():
            return result
        with os.scandir(cq) as topics:
            for t in topics:
                if not t.is_dir() or not is_safe_dir_name(t.name):
                    continue
                with os.scandir(t.path) as queues:
                    for q in queues:
                        if q.is_dir() and q.name.isdigit():
                            result.append((t.name, int(q.name)))
        result.sort()
        return result


def _is_rocksdb_dir(folder: Path) -> bool:
    return any(n in ROCKSDB_MARKERS or n.startswith("MANIFEST-") for n in _file_names(folder))


def _dir_names(folder: Path) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return [e.name for e in entries if e.is_dir()]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _file_names(folder: Path) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return [e.name for e in entries if e.is_file()]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _holds_files(folder: Path, depth: int = 3) -> bool:
    """True when a regular file lies under ``folder`` (the engine may leave empty folders).

    ``depth`` 3 covers ``{folder}/{topic}/{queueId}/{file}`` and bounds a walk through symlink loops.
    """
    try:
        with os.scandir(folder) as scan:
            entries = sorted(scan, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return False
    for e in entries:
        if e.is_file() or (depth > 1 and e.is_dir() and _holds_files(Path(e.path), depth - 1)):
            return True
    return False


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
