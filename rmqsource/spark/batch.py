"""Task side: read one partition into ``pyarrow.RecordBatch``es (no Spark import needed).

:func:`read_partition` hands the partition to its reader: a CommitLog range
(:mod:`~rmqsource.spark.commitlog_range`), a ConsumeQueue range or a lookup
(:mod:`~rmqsource.spark.queue_range`); all of them make their rows with
:mod:`~rmqsource.spark.record_batches`.

Memory is bounded by ``batchSize`` rows and the CommitLog read chunk
(:data:`~rmqsource.spark.commitlog_range.CHUNK_BYTES`, or one record when a single record is larger), whatever the
segment size.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator

import pyarrow as pa

from ..store.reader import MessageStoreReader
from .commitlog_range import read_commitlog_range
from .planning import CommitLogRange, Lookup, QueueRange, QueueRanges, RmqPartition
from .queue_range import read_lookup, read_queue_range
from .read_spec import InflateBudget, ReadSpec


def read_partition(spec: ReadSpec, part: RmqPartition) -> Iterator[pa.RecordBatch]:
    # The planned valid end: every task sees the store as it was at planning.
    reader = MessageStoreReader(part.store.root, part.store.config, commit_log_end=part.store.commit_log_max)
    if spec.options.decompress:
        spec = replace(spec, inflated=InflateBudget(spec.options.max_inflated_task_bytes))
    try:
        if isinstance(part, CommitLogRange):
            yield from read_commitlog_range(spec, reader, part)
        elif isinstance(part, QueueRange):
            yield from read_queue_range(spec, reader, part)
        elif isinstance(part, QueueRanges):
            for piece in part.pieces():
                yield from read_queue_range(spec, reader, piece)
        elif isinstance(part, Lookup):
            yield from read_lookup(spec, reader, part)
        elif type(part).__name__ == "TimersPartition":
            from .timers import read_timers
            yield from read_timers(spec, reader, part)
        elif type(part).__name__ == "TransactionsPartition":
            from .transactions import transaction_rows
            yield from transaction_rows(spec, reader, part)
        else:
            raise TypeError(f"unknown partition {part!r}")
    finally:
        reader.close()
