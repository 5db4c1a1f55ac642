"""The rows of a task that an earlier attempt already appended, found in the CommitLog range it wrote: by
their stamps, or with preserveStoreFields by content (the JVM twin: AppendedRows.java)."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa

from ...format.record import Kind
from ...store.config import StoreConfig
from .options import SinkOptions
from .rows import BATCH_PROPERTY, SEQ_PROPERTY

def find_appended(root: str, config: StoreConfig, start: int, end: int, tag: str, partition: int) -> set[int]:
    """Row indexes already in the CommitLog range [start, end) with ``__RMQSOURCE_BATCH == tag``."""
    return set(appended_seqs(root, config, start, end, tag, partition))


def appended_seqs(root: str, config: StoreConfig, start: int, end: int, tag: str, partition: int) -> Iterator[int]:
    """The row indexes of ``partition`` in the CommitLog range [start, end) with ``__RMQSOURCE_BATCH == tag``."""
    from ...store.commitlog import CommitLog
    from ...store.layout import StoreLayout
    layout = StoreLayout.for_config(root, config)
    cl = CommitLog(layout)
    prefix = f"{partition}:"
    try:
        for step in cl.walk(max(start, cl.min_offset), stop_offset=end):
            if step.decoded.kind is not Kind.MESSAGE:
                if step.decoded.kind is Kind.BLANK:
                    continue
                break
            props = step.decoded.record.properties
            if props.get(BATCH_PROPERTY) == tag:
                seq = props.get(SEQ_PROPERTY, "")
                if seq.startswith(prefix) and seq[len(prefix):].isdigit():
                    yield int(seq[len(prefix):])
    finally:
        cl.close()


def rows_put_from(opts: SinkOptions, start: int, end: int, tables: Iterator[pa.Table], n: int, below: int) -> np.ndarray:
    """preserveStoreFields: which of the task's ``n`` rows (from ``below`` on) an earlier attempt put from
    CommitLog offset ``start``.  That attempt held the lock for its whole append, so its records come
    first and in row order; the first row that differs from the next record ends them (what follows is
    other tasks')."""
    from ...store.commitlog import CommitLog
    from ...store.layout import StoreLayout
    present = np.zeros(n, dtype=bool)
    cl = CommitLog(StoreLayout.for_config(opts.root, opts.config))

    def records():
        for step in cl.walk(max(start, cl.min_offset), stop_offset=end):
            if step.decoded.kind is Kind.BLANK:
                continue
            if step.decoded.kind is not Kind.MESSAGE:
                return
            yield step.decoded.record

    try:
        walk = records()
        seq = 0
        for table in tables:
            for row in table.to_pylist():
                i, seq = seq, seq + 1
                if i < below:
                    continue
                rec = next(walk, None)
                if rec is None or not _same_message(rec, row):
                    return present
                present[i] = True
    finally:
        cl.close()
    return present


def _same_message(rec, row: dict) -> bool:
    """Whether putting ``row`` (a STORE_FIELDS_SCHEMA row) wrote the record ``rec``."""
    if (rec.topic, rec.queue_id, rec.body, rec.flag, rec.born_timestamp_ms) != \
            (row["topic"], row["queueId"], row["body"], row["flag"], row["bornTimestamp"]):
        return False
    if row.get("storeTimestamp") is not None and rec.store_timestamp_ms != row["storeTimestamp"]:
        return False
    if isinstance(row["properties"], str):
        return same_verbatim(rec.properties_raw, row["properties"])
    props = rec.properties
    wanted = dict(row["properties"] or [])
    for name in ("tags", "keys"):
        if row[name] is not None:
            wanted[name.upper()] = row[name]
    return all(props.get(k) == v for k, v in wanted.items())


# The entry a store with enabledAppendPropCRC appends: __CRC32#\x01 and ten digits, then \x02.
_CRC_ENTRY_BYTES = 20


def same_verbatim(stored: bytes, given: str) -> bool:
    """Whether a verbatim properties string ``given``, put, was stored as ``stored``: as given, or with the
    CRC entry appended (after the 0x02 the writer adds when ``given`` does not end with one)."""
    g = given.encode("utf-8", "surrogatepass")
    if stored == g:
        return True
    head, tail = stored[:-_CRC_ENTRY_BYTES], stored[-_CRC_ENTRY_BYTES:]
    if len(stored) < _CRC_ENTRY_BYTES or not tail.startswith(b"__CRC32#\x01") or not tail.endswith(b"\x02"):
        return False
    return head == g or (g != b"" and not g.endswith(b"\x02") and head == g + b"\x02")
