"""Durable file replacement: the one module that fsyncs and renames.

Writes go through :data:`rmqsource.io.files.ops` (the fault-injection seam).

RocketMQ's config files (``{root}/config/*.json``, spec §8.1) are written by
``MixAll.string2File``: write ``NAME.tmp``; copy ``NAME`` to ``NAME.bak``;
delete ``NAME``; rename ``NAME.tmp`` -> ``NAME`` (4.9.x; 5.x writes ``NAME.bak``
then ``NAME`` in place).  Neither fsyncs.  :func:`string2file` keeps the same
file names and end state but is crash-safe:

1. ``NAME.tmp`` is written and fsynced;
2. the current ``NAME`` (when non-empty and, if a validator is given, valid)
   is copied to ``NAME.bak`` and fsynced;
3. ``NAME.tmp`` is renamed over ``NAME`` (POSIX ``rename`` replaces the target
   atomically, so the "delete ``NAME``" step never leaves ``NAME`` missing);
4. the directory is fsynced so the rename itself is durable.

After a crash at any point ``NAME`` holds the old or the new content; if a
broker crashed between its delete and rename, :func:`load_with_bak` falls
back to ``NAME.bak`` as ``ConfigManager.load``/``loadBak`` do.
"""

from __future__ import annotations

import errno
import os
import secrets
from typing import Callable, Optional, TypeVar

from ..errors import FormatError
from . import files

T = TypeVar("T")

# Config files are read whole; anything bigger is refused as hostile.
DEFAULT_MAX_CONFIG_BYTES = 512 * 1024 * 1024

__all__ = [
    "DEFAULT_MAX_CONFIG_BYTES",
    "file2string",
    "fsync_dir",
    "load_with_bak",
    "read_file_bytes",
    "string2file",
    "write_file_atomically",
]


def fsync_dir(path: str | os.PathLike) -> None:
    """fsync a directory so renames/creations/deletions inside it are durable."""
    fd = files.ops.open(os.fspath(path), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        files.ops.fsync(fd)
    finally:
        files.ops.close(fd)


def _write_all_fsync(path: str, data: bytes, mode: int = 0o644) -> None:
    fd = files.ops.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        written = 0
        # write may write less than asked; each round makes progress or raises.
        for _ in range(len(data) + 1):
            if written >= len(data):
                break
            n = files.ops.write(fd, view[written:])
            if n <= 0:
                raise OSError(errno.EIO, f"write wrote {n} bytes", path)
            written += n
        files.ops.fsync(fd)
    finally:
        files.ops.close(fd)


def _ensure_parent(path: str) -> str:
    """Create the parent directory (like ``File.getParentFile().mkdirs()``), durably."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        missing: list[str] = []
        probe = parent
        for _ in range(256):            # bounded walk up to the first existing ancestor
            if os.path.isdir(probe):
                break
            missing.append(probe)
            probe = os.path.dirname(probe)
        os.makedirs(parent, exist_ok=True)
        for created in reversed(missing):
            fsync_dir(os.path.dirname(created))
    return parent


def write_file_atomically(path: str | os.PathLike, data: bytes, *,
                          tmp_path: Optional[str | os.PathLike] = None, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new bytes.

    Writes a temp file in the same directory (unique per call unless
    ``tmp_path`` is given), fsyncs it, renames it over ``path`` and fsyncs the
    directory.  The temp file is removed if anything fails before the rename.
    """
    target = os.fspath(path)
    parent = _ensure_parent(target)
    if tmp_path is None:
        tmp = os.path.join(parent, f".{os.path.basename(target)}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    else:
        tmp = os.fspath(tmp_path)
    try:
        _write_all_fsync(tmp, bytes(data), mode)
        files.ops.replace(tmp, target)
    except BaseException:
        try:
            files.ops.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(parent)


def read_file_bytes(path: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_CONFIG_BYTES) -> Optional[bytes]:
    """Whole content of ``path``, or ``None`` when it does not exist."""
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise FormatError("expected a file, found a directory", file=name, offset=0) from None
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise FormatError(f"file is {size} bytes, more than the {max_bytes}-byte limit for config files",
                              file=name, offset=0)
        chunks: list[bytes] = []
        total = 0
        # Read to EOF (the file may change size underneath us); bounded by max_bytes.
        for _ in range(max_bytes // 65536 + 2):
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                raise FormatError(f"file grew past the {max_bytes}-byte limit while being read",
                                  file=name, offset=max_bytes)
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def file2string(path: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_CONFIG_BYTES) -> Optional[str]:
    """``MixAll.file2String``: the file as UTF-8 text, ``None`` when missing.

    Invalid UTF-8 raises FormatError (offset of the first bad byte), which
    :func:`load_with_bak` treats like unparseable content.
    """
    data = read_file_bytes(path, max_bytes=max_bytes)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"config file is not UTF-8 text ({e.reason})",
                          file=os.fspath(path), offset=e.start) from None


def string2file(path: str | os.PathLike, content: str | bytes, *,
                validate_previous: Optional[Callable[[bytes], bool]] = None) -> None:
    """Crash-safe ``MixAll.string2File`` (module docstring): ``NAME.tmp``, ``NAME.bak``, rename.

    ``validate_previous(old_bytes)`` may veto copying the current ``NAME`` to
    ``NAME.bak`` (e.g. when ``NAME`` is corrupt and the existing ``.bak`` is
    the last good copy).  Empty ``NAME`` files are never copied over a ``.bak``.
    Callers serialize concurrent writers of one ``NAME`` themselves.
    """
    target = os.fspath(path)
    data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    parent = _ensure_parent(target)
    tmp = target + ".tmp"
    bak = target + ".bak"
    try:
        _write_all_fsync(tmp, data)
        previous = read_file_bytes(target)
        if previous and (validate_previous is None or validate_previous(previous)):
            _write_all_fsync(bak, previous)
        files.ops.replace(tmp, target)
    except BaseException:
        try:
            files.ops.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(parent)


def load_with_bak(path: str | os.PathLike, parse: Callable[[str, str], T], *,
                  max_bytes: int = DEFAULT_MAX_CONFIG_BYTES) -> Optional[T]:
    """``ConfigManager.load``: parse ``NAME``, else ``NAME.bak``; ``None`` if neither has content.

    ``parse(text, file_name)`` must raise FormatError on bad content.  ``NAME``
    is skipped when missing, empty or unparseable (a ``NAME.tmp`` left by a
    crash is ignored, as by the broker).  Unlike the broker, which then starts
    empty, a corrupt ``NAME`` without a usable ``NAME.bak`` raises its
    FormatError: silently dropping committed offsets would be data loss.
    """
    target = os.fspath(path)
    primary_error: Optional[FormatError] = None
    try:
        text = file2string(target, max_bytes=max_bytes)
        if text:
            return parse(text, target)
    except FormatError as e:
        primary_error = e
    bak = target + ".bak"
    try:
        bak_text = file2string(bak, max_bytes=max_bytes)
        if bak_text:
            return parse(bak_text, bak)
    except FormatError as e:
        if primary_error is not None:
            raise primary_error from e
        raise
    if primary_error is not None:
        raise primary_error
    return None

