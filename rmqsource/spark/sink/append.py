"""One task's append under the store lock: the writer opened with a clear error when another process keeps
the lock, the rows put in chunks, the writer closed, one typed error for whatever fails (the JVM twin:
StoreAppend.java)."""

from __future__ import annotations

import contextlib
import os

import numpy as np
import pyarrow as pa

from ...errors import StoreError, StoreLockedError
from .options import SinkOptions

PUT_CHUNK = 65536


def put_all(writer, table: pa.Table) -> tuple[int, int, int]:
    """Put the rows through the writer's columnar path; (count, first CommitLog offset, end offset).

    Raises on a refused put (nothing of the task is acknowledged to Spark then)."""
    first = -1
    end = -1
    for i in range(0, table.num_rows, PUT_CHUNK):
        chunk = table.slice(i, PUT_CHUNK)
        results = writer.put_arrow_batch(chunk)
        if results.ok_count != chunk.num_rows:
            j = int(np.flatnonzero(~results.ok_mask)[0])
            r = results[j]
            raise StoreError(f"rmq sink: put of a message to {r.topic}:{r.queue_id} failed with "
                             f"{r.status.value}: {r.reason or r.append_status}")
        if first < 0:
            first = results[0].commit_log_offset
        last = results[chunk.num_rows - 1]
        end = last.commit_log_offset + last.size
    return table.num_rows, first, end


def refuse_unsupported_layout(opts: SinkOptions) -> None:
    """At planning, on the driver: a store of another layout, or configManagerVersion=v1 beside a config-v2
    broker's config/rdb/, fails the write before any task runs."""
    from ...store.config_rdb import uses_config_rdb
    from ...store.layout import StoreLayout
    StoreLayout.for_config(opts.root, opts.config).check_writable()
    uses_config_rdb(opts.root, opts.config)


def open_store_writer(opts: SinkOptions):
    """Open the store writer under the lock, with a clear error when another process keeps it."""
    from ...store.writer import MessageStoreWriter
    os.makedirs(opts.root, exist_ok=True)
    try:
        return MessageStoreWriter(opts.root, opts.config, lock_timeout_s=opts.lock_timeout_s)
    except StoreLockedError as exc:
        raise StoreLockedError(f"rmq sink: could not lock the store {opts.root} within {opts.lock_timeout_s:g} s "
                               f"(option lockTimeout): another process - a broker or another writer - holds "
                               f"{os.path.join(opts.root, 'lock')}. ({exc})") from None
    except OSError as exc:
        raise StoreError(f"rmq sink: could not open the store {opts.root} for writing: {exc}") from exc


@contextlib.contextmanager
def appending(writer, root: str):
    """Append under ``writer``, then close it; one typed error for whatever fails.

    An OSError while appending (a full disk: the sink log, a put) becomes a StoreError that names
    the file.  When the append failed, an error of the close that follows is dropped: the first
    error is the one that explains, and the next writer's open recovers the store."""
    try:
        yield writer
    except BaseException as exc:
        try:
            writer.close()
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise StoreError(f"rmq sink: writing to the store {root} failed: {exc}") from exc
        raise
    try:
        writer.close()
    except OSError as exc:
        raise StoreError(f"rmq sink: the store {root} could not be closed cleanly ({exc}); the appended "
                         f"messages are in its CommitLog and its next writer recovers it") from exc
