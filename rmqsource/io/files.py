"""The writer's file operations behind one replaceable object (the fault-injection seam).

Everything the writer does to files -- open, pwrite/write, fsync, space
reservation (``posix_fallocate``), ftruncate, mmap creation, rename, unlink --
goes through :data:`ops`, looked up at call time, so a test can swap in an
object that fails chosen calls (:mod:`rmqsource.io.faults`) with
:func:`installed`.  Reads never go through it.

Space reservation: a page of a memory-mapped file that has no disk block
behind it is allocated when it is first written; on a full filesystem that
write raises SIGBUS and kills the process.  Files the store maps for writing
(IndexFiles) and ConsumeQueue files therefore get their blocks reserved with
:meth:`FileOps.reserve` before anything is written into them, so a full disk
surfaces as an ``OSError`` (ENOSPC) at a point where the writer can report it.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
from typing import Iterator

__all__ = ["FileOps", "describe", "installed", "ops", "pwrite_all"]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


# The path of each fd opened through FileOps: an OSError of a call on an fd (a full disk's ENOSPC from
# pwrite, fsync, fallocate) names no file by itself; FileOps sets it, so every write error names its file.
_fd_paths: dict[int, str] = {}


@contextlib.contextmanager
def _naming(fd: int) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = _fd_paths.get(fd)
        raise


class FileOps:
    """Plain OS calls (an error of a call on an fd names the fd's file).  Subclasses override methods to
    inject faults."""

    def open(self, path: str | os.PathLike, flags: int, mode: int = 0o644) -> int:
        fd = os.open(path, flags | _CLOEXEC, mode)
        _fd_paths[fd] = os.fspath(path)
        return fd

    def close(self, fd: int) -> None:
        _fd_paths.pop(fd, None)
        os.close(fd)

    def dup(self, fd: int) -> int:
        new = os.dup(fd)
        if fd in _fd_paths:
            _fd_paths[new] = _fd_paths[fd]
        return new

    def pwrite(self, fd: int, data, offset: int) -> int:
        with _naming(fd):
            return os.pwrite(fd, data, offset)

    def write(self, fd: int, data) -> int:
        with _naming(fd):
            return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        with _naming(fd):
            os.fsync(fd)

    def ftruncate(self, fd: int, length: int) -> None:
        with _naming(fd):
            os.ftruncate(fd, length)

    def reserve(self, fd: int, offset: int, length: int) -> None:
        """Allocate disk blocks for [offset, offset + length) (extends the file if needed).

        Raises OSError(ENOSPC) when the filesystem cannot hold them."""
        if length > 0:
            with _naming(fd):
                os.posix_fallocate(fd, offset, length)

    def mmap(self, fd: int, length: int, writable: bool) -> mmap.mmap:
        with _naming(fd):
            return mmap.mmap(fd, length, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ)

    def replace(self, src: str | os.PathLike, dst: str | os.PathLike) -> None:
        os.replace(src, dst)

    def unlink(self, path: str | os.PathLike) -> None:
        os.unlink(path)


ops: FileOps = FileOps()


@contextlib.contextmanager
def installed(replacement: FileOps) -> Iterator[FileOps]:
    """Use ``replacement`` for every writer file operation inside the block (tests)."""
    global ops
    previous, ops = ops, replacement
    try:
        yield replacement
    finally:
        ops = previous


def pwrite_all(fd: int, data, position: int) -> None:
    """pwrite all of ``data`` at ``position`` (a short write continues where it stopped).

    On failure the OSError carries ``bytes_written``: how many bytes from the
    start of ``data`` reached the file before it (so the caller can undo them)."""
    view = memoryview(data)
    done = 0
    try:
        for _ in range(len(view) + 1):           # each pwrite makes progress or raises
            if done >= len(view):
                return
            n = ops.pwrite(fd, view[done:], position + done)
            if n <= 0:
                raise OSError(errno.EIO, f"pwrite wrote {n} bytes")
            done += n
    except OSError as exc:
        exc.bytes_written = done
        raise


def describe(exc: BaseException) -> str:
    """An error as put results and messages quote it: its type and text (an OSError's text names its file)."""
    return f"{type(exc).__name__}: {exc}"
