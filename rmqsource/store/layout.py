"""Where things live under a store root (spec §1), and what is not a store.

``{root}/commitlog/`` (or ``storePathCommitLog``, possibly several
comma-separated directories), ``consumequeue/{topic}/{queueId}/``,
``index/``, ``checkpoint``, ``abort``, ``lock``, ``config/``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import NotAStoreError, UnsupportedLayoutError
from ..names import is_safe_dir_name, safe_join

ROCKSDB_MARKERS = ("CURRENT", "IDENTITY")


@dataclass(frozen=True)
class StoreLayout:
    root: Path
    commitlog_dirs: tuple[Path, ...]

    @classmethod
    def for_root(cls, root: str | os.PathLike, store_path_commit_log: Optional[str] = None) -> "StoreLayout":
        root_path = Path(root)
        if store_path_commit_log:
            dirs = tuple(Path(p.strip()) for p in store_path_commit_log.split(",") if p.strip())
        else:
            dirs = (root_path / "commitlog",)
        return cls(root_path, dirs)

    @property
    def consumequeue_dir(self) -> Path:
        return self.root / "consumequeue"

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

    def queue_dir(self, topic: str, queue_id: int) -> Path:
        return safe_join(self.consumequeue_dir, topic, str(int(queue_id)))

    def abort_exists(self) -> bool:
        return self.abort_path.exists()

    def check_is_store(self) -> None:
        """Raise NotAStoreError / UnsupportedLayoutError unless this looks like a file store."""
        if not self.root.is_dir():
            raise NotAStoreError(f"{self.root} is not a directory")
        has_commitlog = any(d.is_dir() for d in self.commitlog_dirs)
        if not has_commitlog:
            raise NotAStoreError(
                f"{self.root} is not a RocketMQ store: no commitlog directory "
                f"({', '.join(str(d) for d in self.commitlog_dirs)})")
        cq = self.consumequeue_dir
        if cq.is_dir():
            for marker in ROCKSDB_MARKERS:
                if (cq / marker).is_file() or any(cq.glob("MANIFEST-*")):
                    raise UnsupportedLayoutError(
                        "consumequeue/ holds a RocksDB database (storeType=defaultRocksDB); "
                        "only the file ConsumeQueue layout is supported", file=str(cq))

    def list_queues(self) -> list[tuple[str, int]]:
        """(topic, queueId) of every ConsumeQueue directory, sorted."""
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
