"""Exclusive writer lock on ``{root}/lock`` (spec §7.2).

RocketMQ opens ``lock``, takes an exclusive OS lock on its first byte
(``FileChannel.tryLock(0, 1, false)`` = POSIX ``fcntl`` record lock) and writes
the 4 ASCII bytes ``lock`` at offset 0.  Taking the same kind of lock here means
a broker and an rmqsource writer exclude each other too.

POSIX record locks belong to the process, not to the file descriptor, so a
second lock attempt from the *same* process would silently succeed; a
process-wide registry of held paths closes that hole.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from typing import Optional

from ..errors import StoreLockedError

LOCK_FILE_NAME = "lock"
LOCK_CONTENT = b"lock"
# Poll interval while waiting for another holder to let go.
_POLL_S = 0.05

_held_lock = threading.Lock()
_held_paths: set[str] = set()


class StoreLock:
    """The writer lock of one store root; release() (or ``with``) gives it back."""

    def __init__(self, root: str | os.PathLike, *, timeout_s: float = 0.0):
        self.path = os.path.join(os.fspath(root), LOCK_FILE_NAME)
        self.timeout_s = max(0.0, float(timeout_s))
        self._fd: Optional[int] = None
        self._key: Optional[str] = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "StoreLock":
        """Take the lock, waiting up to ``timeout_s``; StoreLockedError if another writer keeps it."""
        if self._fd is not None:
            return self
        key = os.path.realpath(self.path)
        deadline = time.monotonic() + self.timeout_s
        # Bounded: each round sleeps _POLL_S until the deadline passes.
        for _ in range(int(self.timeout_s / _POLL_S) + 2):
            with _held_lock:
                in_process = key in _held_paths
                if not in_process:
                    fd = self._try_os_lock()
                    if fd is not None:
                        _held_paths.add(key)
                        self._fd, self._key = fd, key
                        return self
            if time.monotonic() >= deadline:
                break
            time.sleep(_POLL_S)
        who = "this process" if in_process else "another process"
        raise StoreLockedError(f"store is locked by {who}: {self.path} (another writer or a broker is running)")

    def _try_os_lock(self) -> Optional[int]:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                return None
            raise
        try:
            os.pwrite(fd, LOCK_CONTENT, 0)
        except OSError:
            os.close(fd)
            raise
        return fd

    def release(self) -> None:
        if self._fd is None:
            return
        fd, key = self._fd, self._key
        self._fd = self._key = None
        with _held_lock:
            try:
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
            finally:
                os.close(fd)
                _held_paths.discard(key)

    def __enter__(self) -> "StoreLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def acquire_store_lock(root: str | os.PathLike, *, timeout_s: float = 0.0) -> StoreLock:
    """Lock ``{root}/lock`` for writing (the root must exist)."""
    return StoreLock(root, timeout_s=timeout_s).acquire()


def is_store_locked(root: str | os.PathLike) -> bool:
    """Whether some process (a broker, another writer) holds the lock right now."""
    path = os.path.join(os.fspath(root), LOCK_FILE_NAME)
    with _held_lock:
        if os.path.realpath(path) in _held_paths:
            return True
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                return True
            raise
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
        return False
    finally:
        os.close(fd)
