"""Exclusive writer lock on ``{root}/lock`` (spec §7.2).

RocketMQ opens ``lock``, takes an exclusive OS lock on its first byte
(``FileChannel.tryLock(0, 1, false)`` = POSIX ``fcntl`` record lock) and writes
the 4 ASCII bytes ``lock`` at offset 0.  Taking the same kind of lock here means
a broker and an rmqsource writer exclude each other too.

POSIX record locks belong to the process, not to the file descriptor, so a
second lock attempt from the *same* process would silently succeed; a
process-wide registry of held paths closes that hole.

An rmqsource writer also locks byte 1 (the broker locks only byte 0), so a
reader can tell a running broker from an rmqsource writer.  Readers only
*test* the lock (``F_GETLK`` on a read-only descriptor): they never create,
write or lock the file, so a store on a read-only mount reads fine.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import threading
import time
from dataclasses import dataclass
from typing import Optional

from ..errors import StoreLockedError

LOCK_FILE_NAME = "lock"
LOCK_CONTENT = b"lock"
# Byte 0 is the broker's lock (FileChannel.tryLock(0, 1, false) = fcntl F_SETLK on Linux);
# rmqsource writers also hold byte 1, which marks them as not being a broker.
BROKER_LOCK_BYTE = 0
RMQSOURCE_MARK_BYTE = 1
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
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, BROKER_LOCK_BYTE)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                return None
            raise
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, RMQSOURCE_MARK_BYTE)
        except OSError:
            pass            # only the mark is missing: readers would take us for a broker
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
                fcntl.lockf(fd, fcntl.LOCK_UN, 2, 0)
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


@dataclass(frozen=True)
class LockState:
    """Who holds a store's ``lock`` right now, as a reader can see without taking it."""

    held: bool
    by_rmqsource: bool = False       # the holder also holds the rmqsource mark byte
    pid: Optional[int] = None        # holder's pid when the kernel reports it (POSIX locks)
    in_this_process: bool = False

    @property
    def by_broker(self) -> bool:
        """Held by a process that is not an rmqsource writer: a running broker (or another tool)."""
        return self.held and not self.by_rmqsource and not self.in_this_process


_FLOCK = struct.Struct("hhqqi4x")          # struct flock on 64-bit Linux: type, whence, start, len, pid


def _conflicting_holder(fd: int, start: int) -> Optional[int]:
    """F_GETLK for an exclusive lock of byte ``start``: the holder's pid (-1: unknown / OFD lock), or None."""
    query = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, start, 1, 0)
    l_type, _, _, _, pid = _FLOCK.unpack(fcntl.fcntl(fd, fcntl.F_GETLK, query))
    if l_type == fcntl.F_UNLCK:
        return None
    return pid if pid > 0 else -1


def store_lock_state(root: str | os.PathLike) -> LockState:
    """Test ``{root}/lock`` without writing, creating or locking anything (works on read-only mounts)."""
    path = os.path.join(os.fspath(root), LOCK_FILE_NAME)
    with _held_lock:
        if os.path.realpath(path) in _held_paths:
            return LockState(True, True, os.getpid(), True)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        return LockState(False)      # no lock file, or one we may not read: nobody we can see holds it
    try:
        holder = _conflicting_holder(fd, BROKER_LOCK_BYTE)
        if holder is None:
            return LockState(False)
        marked = _conflicting_holder(fd, RMQSOURCE_MARK_BYTE) is not None
        return LockState(True, marked, holder if holder > 0 else None)
    finally:
        os.close(fd)       # (this process holds no lock on the file: closing releases nothing)


def describe_holder(state: LockState) -> str:
    """``process 1234 (java ... BrokerStartup)`` as far as /proc tells, for messages."""
    if state.pid is None:
        return "another process"
    try:
        with open(f"/proc/{state.pid}/cmdline", "rb") as f:
            cmd = f.read(4096).replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        cmd = ""
    if len(cmd) > 120:
        cmd = cmd[:60] + " ... " + cmd[-55:]
    return f"process {state.pid}" + (f" ({cmd})" if cmd else "")


def is_store_locked(root: str | os.PathLike) -> bool:
    """Whether some process (a broker, another writer) holds the lock right now."""
    return store_lock_state(root).held
