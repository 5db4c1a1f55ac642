"""The batch sink, ``df.write.format("rmq").mode("append")``: retry-safe appends per task (the JVM twins:
RmqBatchWrite.java, RmqDataWriter.java, SinkCommitMessage.java)."""

from __future__ import annotations

import os
import signal
import time
import uuid
from dataclasses import dataclass
from typing import Iterator, Mapping, Optional

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from ...errors import OptionError, RmqError
from ...io.lock import StoreLock
from ...store.queue_select import QueueChooser
from ..spill import RowSpill, put_chunks
from .append import appending, open_store_writer, put_all, refuse_unsupported_layout
from .appended import appended_seqs, rows_put_from
from .faults import injected_disk_fault, take_fault
from .log import SinkLog
from .options import parse_sink_options
from .rows import table_from_batch
from .schema import check_schema

ANONYMOUS_ENTRY_DAYS = 7          # sink log entries of writes without writeId whose job never ended


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    partition_id: int = -1
    rows: int = 0
    appended: int = 0
    skipped: int = 0
    first_offset: int = -1
    end_offset: int = -1
    batch_id: int = -1
    query_id: Optional[str] = None
    lock_wait_s: float = 0.0
    append_s: float = 0.0


def _task_partition_id() -> int:
    from pyspark import TaskContext
    tc = TaskContext.get()
    return tc.partitionId() if tc is not None else 0


class RmqBatchWriter(DataSourceArrowWriter):
    """``df.write.format("rmq").mode("append")``: each task appends its rows under the store lock, once.

    The writer object is made once per write on the driver and shipped to every task attempt, so
    its ``write_key`` names this write in every attempt (``write:<writeId>`` across jobs).
    """

    def __init__(self, options: Mapping[str, str], schema, overwrite: bool):
        if overwrite:
            raise OptionError("the rmq sink only appends (a message store cannot be overwritten); "
                              "use .mode('append')")
        self.opts = parse_sink_options(options)
        self.columns = check_schema(schema, self.opts.preserve_store_fields)
        refuse_unsupported_layout(self.opts)
        self.write_key = f"write:{self.opts.write_id}" if self.opts.write_id else f"job:{uuid.uuid4().hex}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        pid = _task_partition_id()
        msg = SinkCommitMessage(partition_id=pid)
        chooser = QueueChooser(self.opts, seed=pid)
        rows = RowSpill()
        try:
            for b in iterator:                # all of the partition first: an upstream error appends nothing
                if b.num_rows:
                    rows.add(table_from_batch(b, chooser, seq_start=rows.rows, store_fields=self.opts.preserve_store_fields,
                                              stamp=None if self.opts.preserve_store_fields else (self.write_key, pid)))
            msg.rows = rows.rows
            if rows.rows == 0:
                return msg
            with injected_disk_fault(self.opts.root, pid, rows):
                t0 = time.monotonic()
                writer = open_store_writer(self.opts)
                t1 = time.monotonic()
                with appending(writer, self.opts.root):
                    self._append(writer, rows, pid, msg)
            msg.lock_wait_s, msg.append_s = t1 - t0, time.monotonic() - t1
            return msg
        finally:
            rows.close()

    def _append(self, writer, rows: RowSpill, pid: int, msg: SinkCommitMessage) -> None:
        """Append the rows that no earlier attempt of this write appended (under the store lock)."""
        log = SinkLog(self.opts.root)
        doc = log.load()
        writes = doc.setdefault("writes", {})
        now_ms = int(time.time() * 1000)
        for key in [k for k, w in writes.items() if k.startswith("job:")
                    and now_ms - w.get("startedMs", now_ms) > ANONYMOUS_ENTRY_DAYS * 86_400_000]:
            del writes[key]               # left by a job whose driver died: nothing can run it again
        tasks = writes.setdefault(self.write_key, {"tasks": {}, "startedMs": now_ms})["tasks"]
        entry = tasks.get(str(pid))
        n = rows.rows
        present = np.zeros(n, dtype=bool)
        end = writer.commit_log_max_offset
        if entry is None:
            entry = {"start": end, "below": 0, "done": False, "rows": n}
        elif entry["done"]:
            if n <= entry["rows"]:
                msg.skipped = n
                return
            entry = {"start": end, "below": entry["rows"], "done": False, "rows": n}   # a re-run with more rows
        else:
            # An earlier attempt died while appending: keep what it wrote.
            if self.opts.preserve_store_fields:
                present |= rows_put_from(self.opts, int(entry["start"]), end, rows.tables(), n,
                                         min(int(entry.get("below", 0)), n))
            else:
                for seq in appended_seqs(self.opts.root, self.opts.config, int(entry["start"]), end, self.write_key,
                                         pid):
                    if seq < n:
                        present[seq] = True
        present[:min(int(entry.get("below", 0)), n)] = True
        tasks[str(pid)] = entry
        log.save(doc)
        msg.skipped = int(present.sum())
        kill_at = n // 2 if take_fault(self.opts.root, f"kill:{pid}") else -1
        seq = appended = 0
        first = end_offset = -1

        def missing():
            nonlocal seq
            for table in rows.tables():
                k = table.num_rows
                there = present[seq:seq + k]
                seq += k
                if there.all():
                    continue
                yield table.filter(pa.array(~there)) if there.any() else table

        for chunk in put_chunks(missing()):
            if 0 <= kill_at < appended + chunk.num_rows:
                put_all(writer, chunk.slice(0, max(kill_at - appended, 1)))
                os.kill(os.getpid(), signal.SIGKILL)        # the test's worker dies holding the lock
            k, f, e = put_all(writer, chunk)
            appended += k
            first = f if first < 0 else first
            end_offset = e
        writer.flush()
        entry["done"] = True
        entry["rows"] = max(n, int(entry.get("rows", 0)))
        log.save(doc)
        msg.appended, msg.first_offset, msg.end_offset = appended, first, end_offset

    def commit(self, messages) -> None:
        # Every task appended and dispatched its rows before reporting success.  A write without a
        # writeId forgets its task entries (nothing can run it again); a named write keeps them.
        self._forget_anonymous()

    def abort(self, messages) -> None:
        # A message store is append-only: rows of tasks that succeeded stay in the store (running the
        # write again with the same writeId appends only what is missing).
        self._forget_anonymous()

    def _forget_anonymous(self) -> None:
        """Best effort: an entry left behind (disk full, store locked) is never used again and is
        dropped by a later write after ANONYMOUS_ENTRY_DAYS; it must not fail the job or hide its error."""
        root = self.opts.root
        if self.opts.write_id or not os.path.isfile(SinkLog(root).path):
            return
        try:
            with StoreLock(root, timeout_s=self.opts.lock_timeout_s):
                log = SinkLog(root)
                doc = log.load()
                if doc.get("writes", {}).pop(self.write_key, None) is not None:
                    log.save(doc)
        except (OSError, RmqError):
            pass
