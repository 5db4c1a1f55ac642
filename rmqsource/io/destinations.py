"""Where ``rmq snapshot`` puts bytes: a local directory, or any file system ``pyarrow.fs`` opens.

A destination is written one whole file at a time.  :meth:`Destination.stage` gives a local temporary file
(:class:`StagedFile`) that the caller fills; :meth:`Destination.publish` then makes it visible under its
name in one step: on a local directory a ``rename`` over the old file after an ``fsync`` (through
:data:`rmqsource.io.files.ops`, the fault-injection seam), on an object store one whole PUT of the staged
bytes (``open_output_stream``), so a reader never sees a half-written file either way.

Local destinations stage in ``DEST/.rmq-snapshot-staging/`` (the same file system, so the rename is atomic);
the folder is emptied at the next open.  Remote ones (``s3://``, ``gs://``, ``hdfs://``, ``file://`` ...)
stage in a local temporary folder.  A local destination can also start a staged file with the first bytes
of its own current copy (:meth:`Destination.clone_prefix`, ``copy_file_range``), which is how a growing
file is extended without reading those bytes from the source again; remote ones cannot (objects are whole).

Libraries: local paths need nothing; URIs go through ``pyarrow.fs.FileSystem.from_uri`` (S3 settings from
the usual AWS environment, ``AWS_ENDPOINT_URL`` among them, or ``options`` given to ``S3FileSystem``; HDFS
needs libhdfs and a Hadoop client, as pyarrow documents); ``webhdfs://`` needs only HTTP (:mod:`.webhdfs`).
:func:`rmqsource.io.destination_uri.open_destination` picks one for a DEST.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import threading
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Mapping, Optional

from ..errors import FormatError, OptionError, StoreError
from . import files
from .durable import fsync_dir

STAGING_DIR = ".rmq-snapshot-staging"
COPY_CHUNK_BYTES = 8 * 1024 * 1024
OBJECT_STORES = ("s3", "gcs")           # pyarrow.fs type names


class StagedFile:
    """A local temporary file being filled for one destination file (``rel``, a ``/`` path)."""

    def __init__(self, rel: str, path: str, durable: bool, syncer: Optional[ThreadPoolExecutor] = None):
        self.rel = rel
        self.path = path
        self.durable = durable           # fsync when finished (a local DEST renames it in)
        self.fd: Optional[int] = files.ops.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.length = 0
        self._syncer = syncer
        self._synced: Optional[Future] = None

    def write(self, data) -> None:
        files.pwrite_all(self.fd, data, self.length)
        self.length += len(data)

    def write_at(self, data, position: int) -> None:
        """Write ``data`` at ``position`` (over what a cloned prefix holds there, or past the end)."""
        files.pwrite_all(self.fd, data, position)
        self.length = max(self.length, position + len(data))

    def pad_to(self, size: int) -> None:
        """Zeros up to ``size`` bytes (a hole where the file system has them: nothing is written)."""
        if size > self.length:
            files.ops.ftruncate(self.fd, size)
            self.length = size

    def finish(self) -> None:
        """Done writing: fsynced (in the background when a syncer thread is given, while the next file is
        copied) and closed.  Not all at publish time: a long run of dirty pages slows every write."""
        if self.fd is None or self._synced is not None:
            return
        if self.durable and self._syncer is not None:
            self._synced = self._syncer.submit(self._sync_and_close)
        else:
            self._sync_and_close()

    def _sync_and_close(self) -> None:
        if self.durable:
            files.ops.fsync(self.fd)
        files.ops.close(self.fd)
        self.fd = None

    def wait(self) -> None:
        """finish(), and wait for its fsync."""
        self.finish()
        if self._synced is not None:
            self._synced.result()

    def discard(self) -> None:
        if self._synced is not None:
            try:
                self._synced.result()
            except OSError:
                pass
        if self.fd is not None:
            files.ops.close(self.fd)
            self.fd = None
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class SourceSpan:
    """A destination file that is the first ``valid`` bytes of a source file, then zeros up to ``size``, sent
    straight from the source when it is published (a remote DEST: no local copy written and read back); its
    CRC-32 (of the ``valid`` bytes) is taken on the way, in ``crc32``.  The source is opened now, so a file
    deleted meanwhile (retention) still reads."""

    def __init__(self, rel: str, src_path: str, valid: int, size: int, on_discard=None):
        self.rel = rel
        self._on_discard = on_discard
        self.src_path = src_path
        self.valid = valid
        self.size = size
        self.crc32: Optional[int] = None
        self.fd: Optional[int] = os.open(src_path, os.O_RDONLY)
        length = os.fstat(self.fd).st_size
        if length < valid:
            self.discard()
            raise FormatError(f"file ends at {length}, before the {valid} bytes the snapshot copies",
                              file=src_path, offset=length)

    def wait(self) -> None:
        pass

    def discard(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            if self._on_discard is not None:
                self._on_discard()


class MemorySpan:
    """A destination file that is ``parts`` (bytes-like, in memory already) then zeros up to ``size``, sent as
    it is when published (a remote DEST: no local copy)."""

    def __init__(self, rel: str, parts: list, size: int):
        self.rel = rel
        self.parts = parts
        self.size = size
        self.crc32: Optional[int] = None       # the caller's, as for a staged file

    def wait(self) -> None:
        pass

    def discard(self) -> None:
        self.parts = []


class Destination:
    """Base: a place holding one snapshot, addressed by ``/``-separated relative names."""

    uri: str
    local_root: Optional[str] = None     # set for a local directory
    parallel_publish = 1                 # files of a kind published at once (publish() from that many threads)

    def read_bytes(self, rel: str) -> Optional[bytes]:
        raise NotImplementedError

    def stage(self, rel: str) -> StagedFile:
        raise NotImplementedError

    def stage_memory(self, rel: str, parts: list, size: int) -> Optional[MemorySpan]:
        """A :class:`MemorySpan` where this destination publishes one without a local copy (remote ones)."""
        return None

    def stage_source(self, rel: str, src_path: str, valid: int, size: int) -> Optional[SourceSpan]:
        """A :class:`SourceSpan` where this destination publishes one without a local copy (remote ones);
        None here: the caller stages a copy (a local DEST renames a durable copy in)."""
        return None

    def publish(self, staged: StagedFile, *, sync_dir: bool = True) -> None:
        """Make ``staged`` visible under its name; ``sync_dir=False`` leaves the directory's fsync to
        :meth:`sync_dirs` (files of one kind, whose relative order does not matter)."""
        raise NotImplementedError

    def sync_dirs(self) -> None:
        """Make the renames :meth:`publish` left unsynced durable."""

    def put_bytes(self, rel: str, data: bytes) -> None:
        staged = self.stage(rel)
        try:
            staged.write(data)
        except BaseException:
            staged.discard()
            raise
        self.publish(staged)

    def delete(self, rel: str) -> None:
        raise NotImplementedError

    def clone_prefix(self, rel: str, staged: StagedFile, length: int) -> bool:
        """Start ``staged`` with the first ``length`` bytes of this destination's ``rel``; False when not
        possible here (the caller copies them from the source instead)."""
        return False

    def holds_store_files(self) -> bool:
        """Whether the destination already holds a store (a CommitLog folder)."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class LocalDestination(Destination):
    def __init__(self, root: str):
        self.uri = root
        self.local_root = os.path.abspath(root)
        if os.path.exists(self.local_root) and not os.path.isdir(self.local_root):
            raise OptionError(f"DEST {root!r} exists and is not a directory")
        os.makedirs(self.local_root, exist_ok=True)
        self.staging = os.path.join(self.local_root, STAGING_DIR)
        shutil.rmtree(self.staging, ignore_errors=True)     # left by a run that was stopped
        os.makedirs(self.staging)
        self._count = 0
        self._syncer = ThreadPoolExecutor(1, thread_name_prefix="rmq-snapshot-fsync")
        self._unsynced_dirs: set[str] = set()

    def _path(self, rel: str) -> str:
        return os.path.join(self.local_root, *rel.split("/"))

    def read_bytes(self, rel: str) -> Optional[bytes]:
        try:
            with open(self._path(rel), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def stage(self, rel: str) -> StagedFile:
        self._count += 1
        return StagedFile(rel, os.path.join(self.staging, f"{self._count:08d}"), durable=True, syncer=self._syncer)

    def publish(self, staged: StagedFile, *, sync_dir: bool = True) -> None:
        staged.wait()
        target = self._path(staged.rel)
        parent = os.path.dirname(target)
        os.makedirs(parent, exist_ok=True)
        files.ops.replace(staged.path, target)
        self._unsynced_dirs.add(parent)
        if sync_dir:
            self.sync_dirs()

    def sync_dirs(self) -> None:
        for parent in sorted(self._unsynced_dirs):
            fsync_dir(parent)
        self._unsynced_dirs.clear()

    def delete(self, rel: str) -> None:
        try:
            files.ops.unlink(self._path(rel))
        except FileNotFoundError:
            pass

    def clone_prefix(self, rel: str, staged: StagedFile, length: int) -> bool:
        source = self._path(rel)
        try:
            fd = os.open(source, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            if os.fstat(fd).st_size < length:
                return False
            _copy_range(fd, staged.fd, 0, length)
        finally:
            os.close(fd)
        staged.length = length
        return True

    def holds_store_files(self) -> bool:
        return os.path.isdir(self._path("commitlog"))

    def close(self) -> None:
        self._syncer.shutdown(wait=True)
        shutil.rmtree(self.staging, ignore_errors=True)


def _copy_range(src_fd: int, dst_fd: int, position: int, length: int) -> None:
    """Copy ``length`` bytes at ``position`` of ``src_fd`` to the same place of ``dst_fd`` (in the kernel
    when it can: ``copy_file_range``; a reflink on file systems that share blocks)."""
    done = 0
    use_kernel = hasattr(os, "copy_file_range")
    for _ in range(length // 4096 + 2 + length // COPY_CHUNK_BYTES):
        if done >= length:
            return
        n = 0
        if use_kernel:
            try:
                n = os.copy_file_range(src_fd, dst_fd, length - done, position + done, position + done)
            except OSError as e:
                if e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                    raise
                use_kernel = False
        if not use_kernel:
            data = os.pread(src_fd, min(COPY_CHUNK_BYTES, length - done), position + done)
            if data:
                files.pwrite_all(dst_fd, data, position + done)
            n = len(data)
        if n <= 0:
            raise OSError(errno.EIO, f"copy stopped {length - done} bytes short")
        done += n
    if done < length:
        raise OSError(errno.EIO, f"copy stopped {length - done} bytes short")


class RemoteDestination(Destination):
    """A destination off this machine (an object store, HDFS): files go up whole, sent from memory or straight
    from their source file where they can be (no local copy written and read back)."""

    def __init__(self) -> None:
        self._open_spans = 0
        self._spans_lock = threading.Lock()

    def stage_memory(self, rel: str, parts: list, size: int) -> Optional[MemorySpan]:
        return MemorySpan(rel, parts, size)

    def stage_source(self, rel: str, src_path: str, valid: int, size: int) -> Optional[SourceSpan]:
        # Each span holds its source open until it is published: past a share of the process's file
        # descriptors (a first snapshot of thousands of segments), the rest are staged as copies.
        with self._spans_lock:
            if self._open_spans >= _span_budget():
                return None
            self._open_spans += 1
        try:
            return SourceSpan(rel, src_path, valid, size, on_discard=self._span_closed)
        except BaseException:
            self._span_closed()
            raise

    def _span_closed(self) -> None:
        with self._spans_lock:
            self._open_spans -= 1


class ArrowDestination(RemoteDestination):
    """A folder of any ``pyarrow.fs`` file system: every file is one whole upload (of a locally staged copy,
    or of a :class:`SourceSpan`), several at once where the order does not matter (the snapshot says)."""

    parallel_publish = 4

    def __init__(self, uri: str, options: Optional[Mapping[str, str]] = None):
        super().__init__()
        try:
            import pyarrow.fs as pafs
        except ImportError as e:       # pragma: no cover - pyarrow is a dependency
            raise OptionError(f"DEST {uri!r}: pyarrow is needed for URI destinations") from e
        self.uri = uri
        self._pafs = pafs
        try:
            if options and uri.startswith(("s3://", "s3a://")):
                bucket_path = uri.split("://", 1)[1]
                self.fs = pafs.S3FileSystem(**_typed_options(options))
                self.base = bucket_path.rstrip("/")
            else:
                if options:
                    raise OptionError(f"DEST {uri!r}: options (-O) are read for s3:// destinations only")
                self.fs, path = pafs.FileSystem.from_uri(uri)
                self.base = path.rstrip("/")
        except OptionError:
            raise
        except Exception as e:         # pyarrow raises ArrowInvalid, OSError, ... for a URI it cannot open
            raise OptionError(f"DEST {uri!r}: cannot open it with pyarrow.fs: {' '.join(str(e).split())}") from e
        self.staging = tempfile.mkdtemp(prefix="rmq-snapshot-")
        self._count = 0

    def _path(self, rel: str) -> str:
        return f"{self.base}/{rel}" if self.base else rel

    def read_bytes(self, rel: str) -> Optional[bytes]:
        info = self.fs.get_file_info(self._path(rel))
        if info.type != self._pafs.FileType.File:
            return None
        with self.fs.open_input_stream(self._path(rel)) as f:
            return f.read()

    def stage(self, rel: str) -> StagedFile:
        self._count += 1
        return StagedFile(rel, os.path.join(self.staging, f"{self._count:08d}"), durable=False)

    def publish(self, staged: StagedFile | SourceSpan | MemorySpan, *, sync_dir: bool = True) -> None:
        staged.wait()
        target = self._path(staged.rel)
        parent = target.rsplit("/", 1)[0] if "/" in target else ""
        try:
            if parent and self.fs.type_name not in OBJECT_STORES:      # object stores have no folders to make
                self.fs.create_dir(parent, recursive=True)
            with self.fs.open_output_stream(target) as out:
                send_staged(staged, out)
        except OSError as e:
            raise StoreError(f"{self.uri}: writing {staged.rel} failed: {' '.join(str(e).split())}") from e
        finally:
            staged.discard()

    def delete(self, rel: str) -> None:
        try:
            self.fs.delete_file(self._path(rel))
        except FileNotFoundError:
            pass
        except OSError as e:
            if "not found" not in str(e).lower() and "does not exist" not in str(e).lower():
                raise

    def holds_store_files(self) -> bool:
        info = self.fs.get_file_info(self._path("commitlog"))
        return info.type != self._pafs.FileType.NotFound

    def close(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


def _span_budget() -> int:
    """Source files a remote destination keeps open at once: a quarter of the soft descriptor limit."""
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        soft = 1024
    return max(16, min(soft, 1 << 16) // 4)


def send_staged(staged: StagedFile | SourceSpan | MemorySpan, out) -> None:
    """Every byte of a staged file, a source span or a memory span into ``out`` (anything with ``write``)."""
    if isinstance(staged, SourceSpan):
        _send_span(staged, out)
    elif isinstance(staged, MemorySpan):
        for part in staged.parts:
            out.write(part)
        _send_zeros(out, staged.size - sum(len(part) for part in staged.parts))
    else:
        with open(staged.path, "rb") as src:
            for _ in range(os.fstat(src.fileno()).st_size // COPY_CHUNK_BYTES + 2):
                chunk = src.read(COPY_CHUNK_BYTES)
                if not chunk:
                    break
                out.write(chunk)


def _send_span(span: SourceSpan, out) -> None:
    """The span's source bytes (CRC-32 taken on the way), then its zeros, into ``out``."""
    crc, pos = 0, 0
    for _ in range(span.size // COPY_CHUNK_BYTES + 2):
        if pos >= span.valid:
            break
        chunk = os.pread(span.fd, min(COPY_CHUNK_BYTES, span.valid - pos), pos)
        if not chunk:
            raise FormatError(f"file ends at {pos}, before the {span.valid} bytes the snapshot copies",
                              file=span.src_path, offset=pos)
        crc = zlib.crc32(chunk, crc)
        out.write(chunk)
        pos += len(chunk)
    _send_zeros(out, span.size - span.valid)
    span.crc32 = crc


def _send_zeros(out, count: int) -> None:
    zeros = bytes(min(COPY_CHUNK_BYTES, max(0, count)))
    for _ in range(count // COPY_CHUNK_BYTES + 1):
        n = min(len(zeros), count)
        if n <= 0:
            break
        out.write(zeros if n == len(zeros) else memoryview(zeros)[:n])
        count -= n


def _typed_options(options: Mapping[str, str]) -> dict:
    """S3FileSystem keyword arguments from ``key=value`` strings (true/false become booleans)."""
    out = {}
    for k, v in options.items():
        lowered = v.lower()
        out[k] = True if lowered == "true" else False if lowered == "false" else v
    return out
