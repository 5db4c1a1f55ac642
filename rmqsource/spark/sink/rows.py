"""Rows to messages: a task's Arrow batches as the writer's columnar input, with the queue chosen per row
and the retry stamps (the JVM twin: RowsToMessages.java)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pyarrow as pa

from ...errors import OptionError
from ...store.queue_select import QueueChooser, keys_string
from .schema import STORE_FIELD_COLUMNS

BATCH_PROPERTY = "__RMQSOURCE_BATCH"
SEQ_PROPERTY = "__RMQSOURCE_SEQ"


def _ms(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    import datetime as dt
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return int(value.timestamp() * 1000)
    return int(value)


MESSAGE_SCHEMA = pa.schema([
    ("topic", pa.string()), ("queueId", pa.int32()), ("body", pa.binary()), ("flag", pa.int32()),
    ("tags", pa.string()), ("keys", pa.string()), ("properties", pa.map_(pa.string(), pa.string())),
    ("bornTimestamp", pa.int64()), ("bornHost", pa.string()),
])


# MESSAGE_SCHEMA plus the store fields (preserveStoreFields); nulls take the writer's defaults.
STORE_FIELDS_SCHEMA = pa.schema(list(MESSAGE_SCHEMA) + [
    ("storeTimestamp", pa.int64()), ("storeHost", pa.string()), ("sysFlag", pa.int32()),
    ("reconsumeTimes", pa.int32()), ("preparedTransactionOffset", pa.int64()),
])
# STORE_FIELDS_SCHEMA with the properties as a verbatim string (a string properties column).
STORE_FIELDS_STRING_SCHEMA = STORE_FIELDS_SCHEMA.set(STORE_FIELDS_SCHEMA.get_field_index("properties"),
                                                     pa.field("properties", pa.string()))


def table_from_batch(batch: pa.RecordBatch, chooser: QueueChooser, *, extra_props=None,
                     seq_start: int = 0, skip=None, stamp: Optional[tuple[str, int]] = None,
                     store_fields: bool = False) -> pa.Table:
    """The rows as the writer's input columns (:data:`MESSAGE_SCHEMA`).

    ``stamp=(tag, partition)`` adds ``__RMQSOURCE_BATCH`` = tag and ``__RMQSOURCE_SEQ`` =
    ``partition:index`` (index = ``seq_start + i``) to row i; ``extra_props(index)`` adds any
    properties; rows whose index is in ``skip`` are left out (after their queue is chosen: each row
    takes its round-robin turn, so a resumed task puts every row where its first attempt would have).  ``store_fields`` adds the store-field
    columns (:data:`STORE_FIELDS_SCHEMA`; :data:`STORE_FIELDS_STRING_SCHEMA` when the properties
    column is a verbatim string, passed through as given).  Rows without a properties map or key lists take a
    columnar path; the others run per row in Python (queue choice, merges).
    """
    names = batch.schema.names
    if store_fields:
        pass                              # per row: the store fields ride along
    elif "properties" not in names or batch.column(names.index("properties")).null_count == batch.num_rows:
        if extra_props is None and not ("keys" in names and pa.types.is_list(batch.schema.field("keys").type)):
            return _columnar_table(batch, chooser, seq_start, skip, stamp)
    if stamp is not None:
        tag, part = stamp
        extra = extra_props
        extra_props = (lambda s: {BATCH_PROPERTY: tag, SEQ_PROPERTY: f"{part}:{s}"}) if extra is None else \
            (lambda s: {**extra(s), BATCH_PROPERTY: tag, SEQ_PROPERTY: f"{part}:{s}"})
    n = batch.num_rows

    def col(name):
        if name not in names:
            return [None] * n
        arr = batch.column(names.index(name))
        if name in ("bornTimestamp", "storeTimestamp") and pa.types.is_timestamp(arr.type):
            arr = arr.cast(pa.timestamp("ms", tz=arr.type.tz), safe=False).cast(pa.int64())   # Spark: us
        return arr.to_pylist()

    topics, bodies, qids = col("topic"), col("body"), col("queueId")
    tags, keys, props = col("tags"), col("keys"), col("properties")
    flags, borns, hosts = col("flag"), col("bornTimestamp"), col("bornHost")
    verbatim = "properties" in names and pa.types.is_string(batch.schema.field("properties").type)
    schema = (STORE_FIELDS_STRING_SCHEMA if verbatim else STORE_FIELDS_SCHEMA) if store_fields else MESSAGE_SCHEMA
    out = {c: [] for c in schema.names}
    stored = {c: col(c) for c in STORE_FIELD_COLUMNS} if store_fields else {}
    for i in range(n):
        seq = seq_start + i
        topic = topics[i]
        if topic is None:
            raise OptionError(f"row {seq}: topic is null")
        body = bodies[i]
        if body is None:
            body = b""
        elif isinstance(body, str):
            body = body.encode("utf-8")
        k = keys_string(keys[i])
        pmap = dict(props[i]) if props[i] and not verbatim else None
        if pmap:
            # TAGS / KEYS come from their own columns when present.
            if "tags" in names:
                pmap.pop("TAGS", None)
            if "keys" in names:
                pmap.pop("KEYS", None)
        if extra_props is not None:
            pmap = dict(pmap or {})
            pmap.update(extra_props(seq))
        queue_id = chooser.choose(topic, qids[i], k)      # skipped rows take their turn too
        if skip is not None and seq in skip:
            continue
        out["topic"].append(topic)
        out["queueId"].append(queue_id)
        out["body"].append(body)
        out["flag"].append(int(flags[i] or 0))
        if store_fields:                  # as given: "" is a value, not an absent one
            out["tags"].append(tags[i])
            out["keys"].append(keys[i] if isinstance(keys[i], str) else k)
        else:
            out["tags"].append(tags[i] or None)
            out["keys"].append(k or None)
        out["properties"].append(props[i] if verbatim else list(pmap.items()) if pmap else None)
        out["bornTimestamp"].append(_ms(borns[i]))
        out["bornHost"].append(hosts[i] or None)
        for c, values in stored.items():
            out[c].append(values[i] if values[i] != "" else None)
    return pa.table([pa.array(out[f.name], f.type) for f in schema], schema=schema)


def _columnar_table(batch: pa.RecordBatch, chooser: QueueChooser, seq_start: int, skip,
                    stamp: Optional[tuple[str, int]]) -> pa.Table:
    """table_from_batch for rows without properties maps or key lists, column by column."""
    import pyarrow.compute as pc
    names = batch.schema.names
    seqs = np.arange(seq_start, seq_start + batch.num_rows, dtype=np.int64)
    n = batch.num_rows

    def column(name, typ=None):
        if name not in names:
            return pa.nulls(n, typ or pa.string())
        arr = batch.column(names.index(name))
        return arr.cast(typ) if typ is not None and arr.type != typ else arr

    def empty_as_null(arr):          # "" counts as absent, as ``value or None`` does per row
        return pc.if_else(pc.equal(arr, ""), pa.nulls(n, arr.type), arr) if arr.null_count < n else arr

    topic = column("topic", pa.string())
    if topic.null_count:
        first = int(np.flatnonzero(topic.is_null().to_numpy(zero_copy_only=False))[0])
        raise OptionError(f"row {seqs[first]}: topic is null")
    keys = empty_as_null(column("keys", pa.string()))
    body = column("body")
    body = (body.cast(pa.binary()) if pa.types.is_string(body.type) else body).fill_null(b"")
    born = column("bornTimestamp", None) if "bornTimestamp" in names else pa.nulls(n, pa.int64())
    if pa.types.is_timestamp(born.type):
        born = born.cast(pa.timestamp("ms", tz=born.type.tz), safe=False).cast(pa.int64())
    table = pa.table({
        "topic": topic,
        "queueId": _queue_ids(topic, column("queueId", pa.int64()), keys, chooser),
        "body": body,
        "flag": column("flag", pa.int32()).fill_null(0),
        "tags": empty_as_null(column("tags", pa.string())),
        "keys": keys,
        "properties": _stamps(seqs, stamp),
        "bornTimestamp": born.cast(pa.int64()).fill_null(0),
        "bornHost": empty_as_null(column("bornHost", pa.string())),
    })
    if skip:       # left out after the queue choice: every row takes its round-robin turn, as on the first attempt
        table = table.filter(pa.array(~np.isin(seqs, np.fromiter(skip, np.int64, len(skip)))))
    return table if table.schema == MESSAGE_SCHEMA else table.cast(MESSAGE_SCHEMA)


def _queue_ids(topic: pa.Array, qid: pa.Array, keys: pa.Array, chooser: QueueChooser) -> pa.Array:
    """The queue of every row by the chooser's rule, in row order (round-robin per topic)."""
    import pyarrow.compute as pc
    n = len(topic)
    out = qid.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64) if qid.null_count < n \
        else np.full(n, -1, np.int64)
    given = ~qid.is_null().to_numpy(zero_copy_only=False)
    if given.any() and (out[given] < 0).any():
        i = int(np.flatnonzero(given & (out < 0))[0])
        raise OptionError(f"queueId {out[i]} is negative (topic {topic[i].as_py()})")
    has_keys = ~keys.is_null().to_numpy(zero_copy_only=False)
    hashed = np.flatnonzero(~given & has_keys)
    if hashed.size:
        tl, kl = topic.take(pa.array(hashed)).to_pylist(), keys.take(pa.array(hashed)).to_pylist()
        out[hashed] = [chooser.choose(t, None, k) for t, k in zip(tl, kl)]
    turns = np.flatnonzero(~given & ~has_keys)
    if turns.size:
        codes = pc.dictionary_encode(topic.take(pa.array(turns)))
        indices = codes.indices.to_numpy(zero_copy_only=False)
        for u, name in enumerate(codes.dictionary.to_pylist()):
            rows = turns[indices == u]
            out[rows] = chooser.round_robin(name, rows.size)
    return pa.array(out.astype(np.int32), pa.int32())


def _stamps(seqs: np.ndarray, stamp: Optional[tuple[str, int]]) -> pa.Array:
    """The properties column: null, or {__RMQSOURCE_BATCH: tag, __RMQSOURCE_SEQ: "partition:index"}."""
    n = len(seqs)
    if stamp is None:
        return pa.nulls(n, pa.map_(pa.string(), pa.string()))
    import pyarrow.compute as pc
    tag, part = stamp
    seq_values = pc.binary_join_element_wise(f"{part}:", pc.cast(pa.array(seqs), pa.string()), "")
    both = pa.concat_arrays([pa.array([tag], pa.string()), seq_values.cast(pa.string())])
    order = np.zeros(2 * n, dtype=np.int64)            # tag, seq, tag, seq ...
    order[1::2] = np.arange(1, n + 1)
    keys = pa.array([BATCH_PROPERTY, SEQ_PROPERTY], pa.string()).take(pa.array(np.tile([0, 1], n)))
    return pa.MapArray.from_arrays(pa.array(np.arange(0, 2 * n + 1, 2, dtype=np.int32)), keys, both.take(order))
