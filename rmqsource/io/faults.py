"""Fault injection for the writer's file operations (tests install it with ``files.installed``).

:class:`FaultyFileOps` counts every call of :class:`~rmqsource.io.files.FileOps`
and asks a *plan* whether this call fails.  A plan is a callable
``plan(call) -> kind or None`` where ``call`` is a :class:`Call` and ``kind`` is

* ``"ENOSPC"`` / ``"EIO"``: the call raises that OSError and changes nothing
  (POSIX: a failing ``pwrite`` writes nothing; a partial write is a short count);
* ``"short"``: ``pwrite``/``write`` write only the first half of the data and
  return the short count (other calls ignore it).

Plans: :func:`at_calls` (by call number), :func:`when` (by predicate),
:func:`disk_space` (a disk that fills up), :func:`random_plan` (seeded rate).
With ``track_unsynced=True`` the object also
remembers, per file, what every ``pwrite`` overwrote since the file's last
successful ``fsync``; :meth:`FaultyFileOps.lose_unsynced` then undoes a random
suffix of those writes per file -- the page cache lost at a crash.
"""

from __future__ import annotations

import errno
import os
import random
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from .files import FileOps

__all__ = ["Call", "FaultyFileOps", "at_calls", "disk_space", "random_plan", "when"]

KINDS = ("ENOSPC", "EIO", "short")


@dataclass(frozen=True)
class Call:
    number: int              # 0-based, over all operations
    op: str                  # open, close, pwrite, write, fsync, ftruncate, reserve, mmap, replace, unlink, dup
    path: Optional[str]      # the file (known for fds opened through this object)
    size: int = 0            # bytes asked for (pwrite/write/reserve/ftruncate)


Plan = Callable[[Call], Optional[str]]


def at_calls(kinds: dict[int, str]) -> Plan:
    """Fail the calls whose numbers are keys of ``kinds``."""
    return lambda call: kinds.get(call.number)


def when(predicate: Callable[[Call], bool], kind: str, times: Optional[int] = None) -> Plan:
    """Fail every call matching ``predicate`` (at most ``times`` of them)."""
    left = [times]

    def plan(call: Call) -> Optional[str]:
        if not predicate(call) or left[0] == 0:
            return None
        if left[0] is not None:
            left[0] -= 1
        return kind
    return plan


def disk_space(free_bytes: int) -> Plan:
    """A disk with ``free_bytes`` left: writes and reservations fail with ENOSPC once they would pass it
    (and every one after that: the disk stays full)."""
    used = [0]

    def plan(call: Call) -> Optional[str]:
        if call.op not in ("pwrite", "write", "reserve"):
            return None
        if used[0] + call.size > free_bytes:
            used[0] = free_bytes
            return "ENOSPC"
        used[0] += call.size
        return None
    return plan


def random_plan(rng: random.Random, rate: float, kinds: Iterable[str] = KINDS,
                ops: Iterable[str] = ("pwrite", "write", "fsync", "reserve", "open", "ftruncate", "mmap",
                                      "replace")) -> Plan:
    """Each call of ``ops`` fails with probability ``rate``, its kind drawn from ``kinds``."""
    kinds = tuple(kinds)
    ops = frozenset(ops)

    def plan(call: Call) -> Optional[str]:
        if call.op in ops and rng.random() < rate:
            return rng.choice(kinds)
        return None
    return plan


class FaultyFileOps(FileOps):
    """FileOps that fail where ``plan`` says; ``injected`` lists (call, kind) of every fault."""

    def __init__(self, plan: Plan, *, track_unsynced: bool = False):
        self.plan = plan
        self.calls = 0
        self.injected: list[tuple[Call, str]] = []
        self.track_unsynced = track_unsynced
        self._paths: dict[int, str] = {}
        self._unsynced: dict[str, list[tuple[int, bytes]]] = {}    # path -> [(offset, old bytes)]

    # -- decision ---------------------------------------------------------------
    def _fault(self, op: str, fd: Optional[int] = None, path=None, size: int = 0) -> Optional[str]:
        name = os.fspath(path) if path is not None else self._paths.get(fd) if fd is not None else None
        call = Call(self.calls, op, name, size)
        self.calls += 1
        kind = self.plan(call)
        if kind is None:
            return None
        if kind in ("ENOSPC", "EIO"):
            self.injected.append((call, kind))
            code = errno.ENOSPC if kind == "ENOSPC" else errno.EIO
            raise OSError(code, f"{os.strerror(code)} (injected, call {call.number} {op})", name)
        if kind == "short" and op in ("pwrite", "write") and size > 1:
            self.injected.append((call, kind))
            return kind
        return None

    # -- operations -------------------------------------------------------------
    def open(self, path, flags, mode=0o644):
        self._fault("open", path=path)
        fd = super().open(path, flags, mode)
        self._paths[fd] = os.fspath(path)
        return fd

    def close(self, fd):
        self._paths.pop(fd, None)
        super().close(fd)

    def dup(self, fd):
        self._fault("dup", fd)
        new = os.dup(fd)
        if fd in self._paths:
            self._paths[new] = self._paths[fd]
        return new

    def pwrite(self, fd, data, offset):
        view = memoryview(data)
        if self._fault("pwrite", fd, size=len(view)) == "short":
            view = view[:len(view) // 2]
        if self.track_unsynced and fd in self._paths:
            old = os.pread(fd, len(view), offset)
            old += bytes(len(view) - len(old))
            self._unsynced.setdefault(self._paths[fd], []).append((offset, old))
        return super().pwrite(fd, view, offset)

    def write(self, fd, data):
        view = memoryview(data)
        if self._fault("write", fd, size=len(view)) == "short":
            view = view[:len(view) // 2]
        return super().write(fd, view)

    def fsync(self, fd):
        self._fault("fsync", fd)
        super().fsync(fd)
        if fd in self._paths:
            self._unsynced.pop(self._paths[fd], None)

    def ftruncate(self, fd, length):
        self._fault("ftruncate", fd, size=length)
        super().ftruncate(fd, length)

    def reserve(self, fd, offset, length):
        self._fault("reserve", fd, size=length)
        super().reserve(fd, offset, length)

    def mmap(self, fd, length, writable):
        self._fault("mmap", fd, size=length)
        return super().mmap(fd, length, writable)

    def replace(self, src, dst):
        self._fault("replace", path=dst)
        super().replace(src, dst)
        moved = self._unsynced.pop(os.fspath(src), None)
        if moved is not None:
            self._unsynced[os.fspath(dst)] = moved

    def unlink(self, path):
        self._fault("unlink", path=path)
        super().unlink(path)
        self._unsynced.pop(os.fspath(path), None)

    # -- crash ------------------------------------------------------------------
    def lose_unsynced(self, rng: random.Random) -> int:
        """Undo, per file, a random suffix of the writes not covered by an fsync (newest first).

        Returns how many writes were undone.  Call after the writer's fds are closed."""
        undone = 0
        for path, writes in self._unsynced.items():
            keep = rng.randint(0, len(writes))
            if keep == len(writes) or not os.path.exists(path):
                continue
            fd = os.open(path, os.O_RDWR)
            try:
                for offset, old in reversed(writes[keep:]):
                    os.pwrite(fd, old, offset)
                    undone += 1
            finally:
                os.close(fd)
        self._unsynced.clear()
        return undone
