"""The streaming sink, ``writeStream.format("rmq")``: exactly-once appends per micro-batch (the JVM twins:
RmqStreamingWrite.java, RmqStreamDataWriter.java)."""

from __future__ import annotations

import os
import time
from typing import Iterator, Mapping

import numpy as np
import pyarrow as pa

from ...errors import StoreError, StoreLockedError
from ...io.lock import StoreLock
from ...store.queue_select import QueueChooser
from ..compat import DataSourceStreamArrowWriter
from .append import appending, open_store_writer, put_all, refuse_unsupported_layout
from .appended import find_appended, rows_put_from
from .batch import SinkCommitMessage
from .faults import FAULT_ENV, take_fault
from .log import SinkLog
from .options import parse_sink_options
from .rows import table_from_batch
from .schema import check_schema

def _stream_ids() -> tuple[str, int, int]:
    from pyspark import TaskContext
    tc = TaskContext.get()
    if tc is None:
        raise StoreError("the rmq streaming sink must run inside a Spark task")
    qid = tc.getLocalProperty("sql.streaming.queryId")
    bid = tc.getLocalProperty("streaming.sql.batchId")
    if not qid or bid is None:
        raise StoreError("the rmq streaming sink needs the Spark local properties sql.streaming.queryId and "
                         "streaming.sql.batchId (micro-batch queries set them)")
    return qid, int(bid), tc.partitionId()


class RmqStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("rmq")``: exactly-once appends per micro-batch (see the module docstring)."""

    def __init__(self, options: Mapping[str, str], schema, overwrite: bool):
        self.opts = parse_sink_options(options)
        self.columns = check_schema(schema, self.opts.preserve_store_fields)
        refuse_unsupported_layout(self.opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        query_id, batch_id, pid = _stream_ids()
        batches = [b for b in iterator if b.num_rows]
        rows = sum(b.num_rows for b in batches)
        tag = f"{query_id}:{batch_id}"
        task_key = f"{batch_id}:{pid}"
        msg = SinkCommitMessage(partition_id=pid, rows=rows, batch_id=batch_id, query_id=query_id)
        if rows == 0:
            return msg
        t0 = time.monotonic()
        writer = open_store_writer(self.opts)
        t1 = time.monotonic()
        msg.lock_wait_s = t1 - t0
        with appending(writer, self.opts.root):
            log = SinkLog(self.opts.root)
            doc = log.load()
            q = doc["queries"].setdefault(query_id, {"committedBatch": -1, "tasks": {}})
            if batch_id <= q.get("committedBatch", -1):
                msg.skipped = rows
                return msg
            entry = q["tasks"].get(task_key)
            if entry is not None and entry.get("done"):
                msg.skipped = rows
                return msg
            skip: set[int] = set()
            preserve = self.opts.preserve_store_fields
            if entry is not None and preserve:
                # An earlier attempt died while appending: keep what it wrote (found by content).
                tables = (table_from_batch(b, QueueChooser(self.opts, seed=pid), store_fields=True) for b in batches)
                put = rows_put_from(self.opts, int(entry["start"]), writer.commit_log_max_offset, tables, rows, 0)
                skip = set(np.flatnonzero(put).tolist())
            elif entry is not None:
                # An earlier attempt died while appending: keep what it wrote.
                skip = find_appended(self.opts.root, self.opts.config, int(entry["start"]),
                                     writer.commit_log_max_offset, tag, pid)
            else:
                entry = {"start": writer.commit_log_max_offset, "done": False, "rows": rows}
                q["tasks"][task_key] = entry
                log.save(doc)
            chooser = QueueChooser(self.opts, seed=pid)
            tables = []
            seq = 0
            for b in batches:
                tables.append(table_from_batch(b, chooser, seq_start=seq, skip=skip, store_fields=preserve,
                                               stamp=None if preserve else (tag, pid)))
                seq += b.num_rows
            msgs = pa.concat_tables(tables)
            if msgs.num_rows > 1 and take_fault(self.opts.root, f"mid-append:{batch_id}"):
                put_all(writer, msgs.slice(0, msgs.num_rows // 2))
                writer.flush()
                os._exit(17)          # the task dies half-way through its append
            n, first, end = put_all(writer, msgs)
            writer.flush()
            entry["done"] = True
            entry["appended"] = n + len(skip)
            log.save(doc)
            msg.appended, msg.skipped = n, len(skip)
            msg.first_offset, msg.end_offset = first, end
        msg.append_s = time.monotonic() - t1
        return msg

    def commit(self, messages, batchId: int) -> None:
        """Record the batch as committed and forget its task entries (under the store lock)."""
        root = self.opts.root
        query_ids = {m.query_id for m in messages if isinstance(m, SinkCommitMessage) and m.query_id}
        if not query_ids or not os.path.isdir(root):
            return
        if take_fault(root, f"commit:{batchId}"):
            raise StoreError(f"injected fault before committing batch {batchId} (test hook {FAULT_ENV})")
        lock = StoreLock(root, timeout_s=self.opts.lock_timeout_s)
        try:
            lock.acquire()
        except StoreLockedError as exc:
            raise StoreLockedError(f"rmq sink: could not lock the store {root} to commit batch {batchId} "
                                   f"within {self.opts.lock_timeout_s:g} s: {exc}") from None
        try:
            log = SinkLog(root)
            doc = log.load()
            for query_id in sorted(query_ids):
                q = doc["queries"].setdefault(query_id, {"committedBatch": -1, "tasks": {}})
                q["committedBatch"] = max(int(q.get("committedBatch", -1)), int(batchId))
                q["tasks"] = {k: v for k, v in q.get("tasks", {}).items() if int(k.split(":")[0]) > batchId}
            log.save(doc)
        finally:
            lock.release()

    def abort(self, messages, batchId: int) -> None:
        # Nothing to undo: finished tasks are recorded as done and are skipped when the batch is retried.
        return None
