"""A sink task's rows, held until the task has them all: in memory up to a budget, the rest on local disk.

The batch sink appends a partition only once its input iterator is exhausted (an upstream failure that
reaches it as an error appends nothing) and takes the store lock only for the append, never while
upstream work runs.  Rows
waiting for that are kept here: Arrow tables in memory up to :data:`MEMORY_BYTES`, then everything in
one Arrow IPC stream file in Spark's local directory, read back one batch at a time (plain reads, not a
map, so the pages read do not stay in the process).  A task's memory is therefore bounded by the budget
plus one put chunk, whatever the partition's size.
"""

from __future__ import annotations

import os
import tempfile
from typing import Iterator, Optional

import pyarrow as pa

__all__ = ["MEMORY_BYTES", "RowSpill", "local_dir", "put_chunks"]

MEMORY_BYTES = 64 << 20           # rows kept in memory before spilling to disk
PUT_ROWS = 65536                  # a put chunk: at most this many rows ...
PUT_BYTES = 32 << 20              # ... or about this many bytes


def local_dir() -> str:
    """Spark's local directory of this worker (SPARK_LOCAL_DIRS, set for Python workers), else the temp dir."""
    for d in os.environ.get("SPARK_LOCAL_DIRS", "").split(","):
        if d and os.path.isdir(d):
            return d
    return tempfile.gettempdir()


class RowSpill:
    """Tables of one schema, in order; ``tables()`` gives them back once every one was added."""

    def __init__(self, directory: Optional[str] = None):
        self.directory = directory
        self.rows = 0
        self.path: Optional[str] = None
        self._memory: list[pa.Table] = []
        self._memory_bytes = 0
        self._file = None
        self._stream = None

    def add(self, table: pa.Table) -> None:
        self.rows += table.num_rows
        if self._stream is None and self._memory_bytes + table.nbytes <= MEMORY_BYTES:
            self._memory.append(table)
            self._memory_bytes += table.nbytes
            return
        if self._stream is None:
            fd, self.path = tempfile.mkstemp(prefix="rmq-sink-", suffix=".arrows",
                                             dir=self.directory or local_dir())
            os.close(fd)
            self._file = pa.OSFile(self.path, "wb")
            self._stream = pa.ipc.new_stream(self._file, table.schema)
            for t in self._memory:
                self._stream.write_table(t)
            self._memory, self._memory_bytes = [], 0
        self._stream.write_table(table)

    @property
    def spilled(self) -> bool:
        return self.path is not None

    def tables(self) -> Iterator[pa.Table]:
        if self.path is None:
            yield from self._memory
            return
        if self._stream is not None:
            self._stream.close()
            self._file.close()
            self._stream = self._file = None
        with pa.OSFile(self.path, "rb") as f:
            for batch in pa.ipc.open_stream(f):
                yield pa.Table.from_batches([batch])

    def close(self) -> None:
        """Drop the rows (remove the spill file)."""
        self._memory = []
        try:
            if self._stream is not None:
                self._stream.close()
                self._file.close()
        except (OSError, pa.ArrowException):
            pass
        self._stream = self._file = None
        if self.path is not None:
            try:
                os.unlink(self.path)
            except OSError:
                pass


def put_chunks(tables: Iterator[pa.Table]) -> Iterator[pa.Table]:
    """The tables regrouped into put chunks of up to PUT_ROWS rows / about PUT_BYTES bytes."""
    held: list[pa.Table] = []
    rows = size = 0
    for t in tables:
        start = 0
        while start < t.num_rows:
            piece = t.slice(start, PUT_ROWS - rows)
            start += piece.num_rows
            held.append(piece)
            rows += piece.num_rows
            size += piece.nbytes
            if rows >= PUT_ROWS or size >= PUT_BYTES:
                yield held[0] if len(held) == 1 else pa.concat_tables(held)
                held, rows, size = [], 0, 0
    if held:
        yield held[0] if len(held) == 1 else pa.concat_tables(held)
