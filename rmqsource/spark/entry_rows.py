"""Rows of the views whose rows are messages the store layer chose (timers, transactions): each entry names a
record by CommitLog offset and the real topic, queue and unit it belongs to; the message columns come from the
read path's own lookup reader at that offset (the JVM twin: spark/read/EntryRows.java)."""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator

import pyarrow as pa

from .planning import Lookup
from .schema import ARROW_SCHEMA, COLUMNS, column_array


def entry_batches(spec, reader, store, entries: list, extra: dict, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Batches of ``spec.columns`` (of ``schema``): per entry, the message columns of the record at
    ``entry.phy_offset`` under ``real_topic`` / ``real_queue_id`` / ``queue_offset`` / ``tags_code``, and the
    view's own columns (``extra``: column -> function of the entry giving the value, in ``schema``'s type).
    Entries whose record cannot be read are left out."""
    from .pushdown import Pushed
    from .queue_range import read_lookup
    opts, columns = spec.options, spec.columns
    if not entries:
        return
    # the rows are chosen here: the lookup keeps every record asked for (copies live in internal topics)
    lookup_spec = replace(spec, options=replace(opts, include_transactional=True, exclude_internal_topics=False),
                          pushed=Pushed(), columns=COLUMNS)
    got = list(read_lookup(lookup_spec, reader, Lookup(store, tuple(e.phy_offset for e in entries), None)))
    table = pa.Table.from_batches(got, schema=ARROW_SCHEMA) if got else ARROW_SCHEMA.empty_table()
    row_of = {o: i for i, o in enumerate(table.column("commitLogOffset").to_pylist())}
    entries = [e for e in entries if e.phy_offset in row_of]
    t = table.take(pa.array([row_of[e.phy_offset] for e in entries], type=pa.int64()))
    out = {name: t.column(name).combine_chunks() if t.num_rows else pa.array([], type=ARROW_SCHEMA.field(name).type)
           for name in COLUMNS}
    out["topic"] = pa.array([e.real_topic for e in entries], type=pa.string())
    out["queueId"] = pa.array([e.real_queue_id for e in entries], type=pa.int32())
    out["queueOffset"] = pa.array([e.queue_offset for e in entries], type=pa.int64())
    out["tagsCode"] = pa.array([e.tags_code for e in entries], type=pa.int64())
    for name, value in extra.items():
        out[name] = column_array([value(e) for e in entries], schema.field(name).type)
    out_schema = pa.schema([schema.field(c) for c in columns])
    step = max(1, opts.batch_size)
    for a in range(0, len(entries), step):
        yield pa.RecordBatch.from_arrays([out[c].slice(a, step) for c in columns], schema=out_schema)
