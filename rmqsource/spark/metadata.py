"""``option("metadata", "queues" | "topics" | "groups" | "segments" | "indexes")``: the store's structure as a
table (docs/metadata.md; the JVM twin: spark/read/RmqMetadataScan.java). The rows are
:mod:`rmqsource.store.metadata`'s, one partition per store, each read by the task that reads it.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from ..store.metadata import metadata_rows
from .planning import RmqPartition, StoreRef, store_partitions
from .schema import METADATA_SCHEMAS, column_array, ddl


def metadata_ddl(table: str) -> str:
    return ddl(METADATA_SCHEMAS[table])


class MetadataPartition(RmqPartition):
    """Metadata table ``table`` of one store."""

    def __init__(self, store: StoreRef, table: str):
        super().__init__(store)
        self.table = table

    def __repr__(self):
        return f"Metadata({self.table}, {self.store.broker})"


def plan_metadata(opts) -> list[MetadataPartition]:
    return store_partitions(opts, lambda store: MetadataPartition(store, opts.metadata))


def metadata_batches(columns: tuple, part: MetadataPartition) -> Iterator[pa.RecordBatch]:
    schema = METADATA_SCHEMAS[part.table]
    rows = metadata_rows(part.table, part.store.root, part.store.config)
    for r in rows:
        r["broker"], r["storePath"] = part.store.broker, part.store.root
    if not rows:
        return
    out = [column_array([r[c] for r in rows], schema.field(c).type) for c in columns]
    yield pa.RecordBatch.from_arrays(out, schema=pa.schema([schema.field(c) for c in columns]))
