"""``option("view", "transactions")``: one row per transactional message (the JVM twin:
spark/read/RmqTransactionsScan.java).

The rows come from :func:`rmqsource.store.transactions.transaction_entries`; the message columns are those of
its first commit (the message as delivered), else of its first half record, under the real topic and queue
(:mod:`rmqsource.spark.entry_rows`). Extra columns: ``transactionId``, ``producerGroup``, ``state``,
``checkTimes``, ``halfCopies``, ``commits``, ``resolvedTime``, ``open``, ``halfCommitLogOffset``. No filter is
pushed (Spark filters the rows); ``topics`` / ``topicPattern`` name real topics. One partition per store.
"""

from __future__ import annotations

import re
from typing import Iterator, Optional

import pyarrow as pa

from ..store.transactions import transaction_entries
from .entry_rows import entry_batches
from .planning import RmqPartition, StoreRef, store_partitions
from .read_spec import ReadSpec
from .schema import TRANSACTIONS_ARROW_SCHEMA, ddl

TRANSACTIONS_DDL = ddl(TRANSACTIONS_ARROW_SCHEMA)


class TransactionsPartition(RmqPartition):
    """All transactional messages of one store (topics: the real topics to keep, None for all)."""

    def __init__(self, store: StoreRef, topics: Optional[tuple]):
        super().__init__(store)
        self.topics = topics

    def __repr__(self):
        return f"Transactions({self.store.broker})"


def plan_transactions(opts) -> list[TransactionsPartition]:
    return store_partitions(opts, lambda store: TransactionsPartition(store, opts.topics))


def transaction_rows(spec: ReadSpec, reader, part: TransactionsPartition) -> Iterator[pa.RecordBatch]:
    opts = spec.options
    entries = transaction_entries(reader, part.topics, exclude_internal=opts.internal_topics_excluded)
    if opts.topic_pattern is not None:
        pat = re.compile(opts.topic_pattern)
        entries = [e for e in entries if pat.fullmatch(e.real_topic)]
    yield from entry_batches(spec, reader, part.store, entries, {
        "transactionId": lambda e: e.transaction_id, "producerGroup": lambda e: e.producer_group,
        "state": lambda e: e.state, "checkTimes": lambda e: e.check_times, "halfCopies": lambda e: e.half_copies,
        "commits": lambda e: e.commits, "resolvedTime": lambda e: e.resolved_time_ms, "open": lambda e: e.open,
        "halfCommitLogOffset": lambda e: e.half_offset}, TRANSACTIONS_ARROW_SCHEMA)
