"""A batch of messages as columns, the writer's columnar input: :class:`MessageColumns` built from a pyarrow
Table/RecordBatch (:func:`columns_from_arrow`) or, by :mod:`rmqsource.store.json_lines`, from JSON lines.

Rows the columnar encoder (:mod:`rmqsource.format.batch_encode`) cannot prove equivalent for (verbatim
properties strings, TAGS/KEYS/DELAY/``__CRC32#`` inside the properties map, duplicate map keys, nulls
where a default does not apply, ...) are flagged in ``slow`` and the writer runs them through the
per-message code (:meth:`MessageColumns.message`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .batch_encode import (INT32_MAX, INT32_MIN, entries_string, invalid_utf8_rows, rows_with_separators,
                           single_chunk)
from .properties import CRC32, DELAY, KEYS, TAGS, TIMER_PROPERTIES, UNIQ_KEY

_SPECIAL_MAP_KEYS = (TAGS, KEYS, DELAY, CRC32, *TIMER_PROPERTIES)


@dataclass
class MessageColumns:
    """A batch of messages as columns (see the module doc).  ``None`` columns take the defaults
    of :class:`~rmqsource.format.message.MessageExtBrokerInner`."""

    n: int
    topic: pa.Array                                  # string, no nulls
    queue_id: np.ndarray                             # int64
    body: pa.Array                                   # binary (nulls = empty)
    flag: np.ndarray
    sys_flag: np.ndarray
    born_ts: np.ndarray
    reconsume: np.ndarray
    prepared_tx: np.ndarray
    store_ts: np.ndarray                             # int64 (valid where store_ts_valid)
    store_ts_valid: np.ndarray                       # bool
    born_host: pa.Array                              # string, nulls = default
    store_host: pa.Array
    tags: pa.Array                                   # string, nullable
    keys: pa.Array                                   # string, nullable
    map_part: pa.Array                               # per row "k\x01v\x02..." of the properties map
    map_count: np.ndarray                            # non-null map entries per row
    uniq: pa.Array                                   # UNIQ_KEY value from the map (nullable)
    slow: np.ndarray                                 # rows for the per-message path
    row_message: Any = None                          # callable(i) -> MessageExtBrokerInner (slow rows)
    extra: dict = field(default_factory=dict)
    # True when map keys and values were checked for 0x01/0x02 (rows with them are in ``slow``):
    # then only tags/keys need the check before the properties are trusted.
    map_checked: bool = False

    def message(self, i: int):
        return self.row_message(i)


def _int_column(col, n: int, default: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """(values, bad mask): nulls take ``default``; values outside [lo, hi] are flagged bad."""
    if col is None:
        return np.full(n, default, dtype=np.int64), np.zeros(n, bool)
    col = single_chunk(col)
    if pa.types.is_null(col.type):
        return np.full(n, default, dtype=np.int64), np.zeros(n, bool)
    if not pa.types.is_integer(col.type):
        raise TypeError(f"integer column expected, got {col.type}")
    col = col.cast(pa.int64()) if col.type != pa.int64() else col
    v = np.asarray(col.fill_null(default) if col.null_count else col)
    return v, (v < lo) | (v > hi)


def _string_column(col, n: int) -> pa.Array:
    if col is None:
        return pa.nulls(n, pa.string())
    col = single_chunk(col)
    if pa.types.is_null(col.type):
        return pa.nulls(n, pa.string())
    if pa.types.is_large_string(col.type):
        col = col.cast(pa.string())
    if not pa.types.is_string(col.type):
        raise TypeError(f"string column expected, got {col.type}")
    return col


def _map_from_struct(col: pa.Array, n: int, slow: np.ndarray, special_row: np.ndarray):
    """Properties given as a struct (pyarrow's JSON inference): entries in field order.

    JSON object key order is only known per row when a row has at most one
    non-null field; rows with more are flagged slow (their order comes from the
    text).  Returns (map_part, map_count, uniq)."""
    names = [col.type.field(i).name for i in range(col.type.num_fields)]
    parts, count = [], np.zeros(n, np.int64)
    uniq = pa.nulls(n, pa.string())
    valid_struct = np.asarray(col.is_valid()) if col.null_count else None
    for i, name in enumerate(names):
        f = col.field(i)
        if pa.types.is_null(f.type):
            continue
        if not pa.types.is_string(f.type):
            raise TypeError(f"property {name!r} is not a string column")
        if valid_struct is not None:
            f = pc.if_else(pa.array(valid_struct), f, pa.scalar(None, pa.string()))
        present = np.asarray(f.is_valid())
        count += present
        if name in _SPECIAL_MAP_KEYS or "\x01" in name or "\x02" in name:
            special_row |= present
        special_row[rows_with_separators(f)] = True
        parts.append(pc.fill_null(pc.binary_join_element_wise(name + "\x01", f, "\x02", ""), ""))
        if name == UNIQ_KEY:
            uniq = f
    slow |= count > 1
    if not parts:
        return pa.array([""] * n, pa.string()) if n else pa.array([], pa.string()), count, uniq
    map_part = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "")
    return map_part, count, uniq


def _map_from_maparray(col: pa.Array, n: int, slow: np.ndarray, special_row: np.ndarray):
    """Properties given as map<string,string> (Parquet/Arrow input)."""
    offsets = np.asarray(col.offsets).astype(np.int64)
    if col.null_count:
        offsets = offsets.copy()      # a null map has an empty (or ignorable) range
    lo, hi = int(offsets[0]), int(offsets[-1])
    keys = _string_column(col.keys.slice(lo, hi - lo), hi - lo)
    vals = _string_column(col.items.slice(lo, hi - lo), hi - lo)
    rel = offsets - lo
    lens = np.diff(rel)
    if col.null_count:
        lens = np.where(np.asarray(col.is_valid()), lens, 0)
        # rebuild offsets so that null rows have no entries
        keep = np.repeat(np.asarray(col.is_valid()), np.diff(rel))
        keys, vals = keys.filter(pa.array(keep)), vals.filter(pa.array(keep))
        rel = np.concatenate([[0], np.cumsum(lens)])
    row_of = np.repeat(np.arange(n), lens)
    vvalid = np.asarray(vals.is_valid()) if vals.null_count else np.ones(len(vals), bool)
    count = np.bincount(row_of[vvalid], minlength=n).astype(np.int64) if len(vals) else np.zeros(n, np.int64)
    uniq = pa.nulls(n, pa.string())
    if len(keys):
        enc = pc.dictionary_encode(keys)
        dict_names = enc.dictionary.to_pylist()
        codes = np.asarray(enc.indices)
        bad_names = np.array([k in _SPECIAL_MAP_KEYS or "\x01" in k or "\x02" in k for k in dict_names])
        bad_entry = bad_names[codes]
        if bad_entry.any():
            special_row[np.unique(row_of[bad_entry])] = True
        if lens.size and int(lens.max()) > 1:          # duplicate key within a row: dict() semantics
            multi = np.repeat(lens > 1, lens)
            srt = np.sort(row_of[multi] * len(dict_names) + codes[multi])
            dup = srt[1:][srt[1:] == srt[:-1]] // len(dict_names)
            slow[np.unique(dup)] = True
        if len(vals):
            bad_vals = rows_with_separators(vals)
            if bad_vals.size:
                special_row[np.unique(row_of[bad_vals])] = True
        if UNIQ_KEY in dict_names:
            u = dict_names.index(UNIQ_KEY)
            hit = np.flatnonzero(codes == u)
            idx = np.full(n, -1, np.int64)
            idx[row_of[hit]] = hit
            if hit.size == n and len(vals) == n and bool(np.all(idx == np.arange(n))):
                uniq = vals                              # the only entry of every row
            elif len(vals):
                uniq = vals.take(pa.array(np.where(idx >= 0, idx, 0)))
                if not bool(np.all(idx >= 0)):
                    uniq = pc.if_else(pa.array(idx >= 0), uniq, pa.scalar(None, pa.string()))
    if n and len(keys) == n and not vals.null_count and int(rel[-1]) == n and bool(np.all(lens == 1)):
        map_part = pc.binary_join_element_wise(keys, "\x01", vals, "\x02", "")   # one entry per row
    else:
        map_part = entries_string(keys, vals, rel)
    return map_part, count, uniq


COLUMN_ALIASES = {"queueId": "queue_id", "bornTimestamp": "born_timestamp_ms", "bornHost": "born_host",
            "storeHost": "store_host", "sysFlag": "sys_flag", "reconsumeTimes": "reconsume_times",
            "preparedTransactionOffset": "prepared_transaction_offset", "storeTimestamp": "store_timestamp_ms",
            "propertiesString": "properties_string", "born_timestamp": "born_timestamp_ms",
            "store_timestamp": "store_timestamp_ms"}


FIELDS = ("topic", "queue_id", "body", "flag", "properties", "properties_string", "tags", "keys",
          "born_timestamp_ms", "born_host", "store_host", "sys_flag", "reconsume_times",
          "prepared_transaction_offset", "store_timestamp_ms")


def build_columns(cols: dict, n: int, *, null_is_default: bool, row_message) -> MessageColumns:
    """Common part of the Arrow and JSON converters (``cols`` keyed by snake_case field)."""
    slow = np.zeros(n, bool)
    topic = cols.get("topic")
    if topic is None:
        raise KeyError("topic")
    topic = _string_column(topic, n)
    if topic.null_count:
        slow |= ~np.asarray(topic.is_valid())
        topic = topic.fill_null("")
    ints = {}
    for name, default, lo, hi in (("queue_id", 0, 0, INT32_MAX), ("flag", 0, INT32_MIN, INT32_MAX),
                                  ("sys_flag", 0, INT32_MIN, INT32_MAX),
                                  ("born_timestamp_ms", 0, -(1 << 63), (1 << 63) - 1),
                                  ("reconsume_times", 0, INT32_MIN, INT32_MAX),
                                  ("prepared_transaction_offset", 0, -(1 << 63), (1 << 63) - 1)):
        col = cols.get(name)
        if col is not None and not null_is_default and single_chunk(col).null_count:
            slow |= ~np.asarray(single_chunk(col).is_valid())
        v, bad = _int_column(col, n, default, lo, hi)
        slow |= bad
        ints[name] = v
    st = cols.get("store_timestamp_ms")
    if st is None:
        store_ts, st_valid = np.zeros(n, np.int64), np.zeros(n, bool)
    else:
        st = single_chunk(st)
        if not pa.types.is_integer(st.type) and not pa.types.is_null(st.type):
            raise TypeError("storeTimestamp must be integers")
        st_valid = np.asarray(st.is_valid()) if st.null_count else np.ones(n, bool)
        store_ts = np.asarray(st.cast(pa.int64()).fill_null(0))
    body = cols.get("body")
    if body is None:
        body = pa.array([b""] * n, pa.binary()) if n else pa.array([], pa.binary())
    else:
        body = single_chunk(body)
        if pa.types.is_null(body.type):
            body = pa.array([b""] * n, pa.binary())
        elif pa.types.is_string(body.type):
            body = body.view(pa.binary())
        elif pa.types.is_large_string(body.type) or pa.types.is_large_binary(body.type):
            body = body.cast(pa.binary())
        elif not pa.types.is_binary(body.type):
            raise TypeError(f"body must be binary or string, got {body.type}")
        if body.null_count:
            body = body.fill_null(b"")
    hosts = {}
    for name in ("born_host", "store_host"):
        col = cols.get(name)
        if col is not None and not null_is_default and single_chunk(col).null_count:
            slow |= ~np.asarray(single_chunk(col).is_valid())
        hosts[name] = _string_column(col, n)
    tags = _string_column(cols.get("tags"), n)
    keys = _string_column(cols.get("keys"), n)
    special = np.zeros(n, bool)
    props = cols.get("properties")
    pstr = cols.get("properties_string")
    if pstr is not None:
        pstr = single_chunk(pstr)
        slow |= np.asarray(pstr.is_valid()) if null_is_default else np.ones(n, bool)
    if props is None or pa.types.is_null(single_chunk(props).type):
        map_part = pa.array([""] * n, pa.string()) if n else pa.array([], pa.string())
        count = np.zeros(n, np.int64)
        uniq = pa.nulls(n, pa.string())
    else:
        props = single_chunk(props)
        if pa.types.is_map(props.type):
            map_part, count, uniq = _map_from_maparray(props, n, slow, special)
        elif pa.types.is_struct(props.type):
            map_part, count, uniq = _map_from_struct(props, n, slow, special)
        elif pa.types.is_string(props.type) or pa.types.is_large_string(props.type):
            slow |= np.asarray(props.is_valid())       # verbatim properties strings: per message
            map_part = pa.array([""] * n, pa.string()) if n else pa.array([], pa.string())
            count = np.zeros(n, np.int64)
            uniq = pa.nulls(n, pa.string())
        else:
            raise TypeError(f"properties must be a map/struct of strings or a string, got {props.type}")
    slow |= special
    for col in (topic, hosts["born_host"], hosts["store_host"], tags, keys, map_part, uniq):
        slow[invalid_utf8_rows(col)] = True            # the per-message path refuses them
    uniq = pc.if_else(pc.equal(pc.binary_length(uniq), 0), pa.scalar(None, pa.string()), uniq) \
        if uniq.null_count < len(uniq) else uniq
    return MessageColumns(
        n=n, topic=topic, queue_id=ints["queue_id"], body=body, flag=ints["flag"], sys_flag=ints["sys_flag"],
        born_ts=ints["born_timestamp_ms"], reconsume=ints["reconsume_times"],
        prepared_tx=ints["prepared_transaction_offset"], store_ts=store_ts, store_ts_valid=st_valid,
        born_host=hosts["born_host"], store_host=hosts["store_host"], tags=tags, keys=keys,
        map_part=map_part, map_count=count, uniq=uniq, slow=slow, row_message=row_message, map_checked=True)


def columns_from_arrow(batch, allowed_unknown=()) -> MessageColumns:
    """Columns of a pyarrow Table/RecordBatch (snake_case field names or the corpus camelCase).

    Nulls take the field defaults (like the per-row ``put_arrow_batch``).  A
    ``properties`` column may be map<string,string>, a struct of strings or
    verbatim strings; ``propertiesString`` is a verbatim string."""
    from ..errors import OptionError
    cols: dict[str, Any] = {}
    for i, name in enumerate(batch.schema.names):
        if name in allowed_unknown:
            continue
        key = COLUMN_ALIASES.get(name, name)
        if key not in FIELDS:
            raise OptionError(f"unknown columns for put_arrow_batch: {[name]}")
        if key in cols:
            raise OptionError(f"columns {name!r} and another alias both give {key!r}")
        cols[key] = batch.column(i)
    n = batch.num_rows

    def row_message(r: int):
        from .message import MessageExtBrokerInner
        kw = {}
        for k, col in cols.items():
            x = col[r].as_py()
            if x is None:
                continue
            if k == "properties_string":
                k = "properties"
            if k == "body" and isinstance(x, str):
                x = x.encode("utf-8")
            elif k == "properties" and isinstance(x, list):
                x = dict(x)
            elif k == "properties" and isinstance(x, dict):
                x = {a: b for a, b in x.items()}
            kw[k] = x
        kw.setdefault("queue_id", 0)
        if "properties" in kw and isinstance(kw["properties"], dict) and "properties_string" in cols \
                and cols["properties_string"][r].as_py() is not None:
            kw["properties"] = cols["properties_string"][r].as_py()
        return MessageExtBrokerInner(**kw)

    return build_columns(cols, n, null_is_default=True, row_message=row_message)


_HOST_RE = (r"^(?P<a>0|[1-9][0-9]{0,2})\.(?P<b>0|[1-9][0-9]{0,2})\.(?P<c>0|[1-9][0-9]{0,2})\."
            r"(?P<d>0|[1-9][0-9]{0,2}):(?P<port>[0-9]{1,9})$")


def parse_ipv4_hosts(col: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(address as uint32, port, ok) of ``a.b.c.d:port`` strings, element-wise.

    ``ok`` is False for anything else (IPv6, other spellings, octets > 255,
    nulls): the caller parses those with ``msgid.parse_host``."""
    n = len(col)
    m = pc.extract_regex(col, _HOST_RE)
    ok = np.asarray(m.is_valid()) if m.null_count else np.ones(n, bool)
    addr = np.zeros(n, np.uint64)
    port = np.zeros(n, np.int64)
    if not ok.any():
        return addr.astype(np.uint32), port, ok
    parts = []
    for name in ("a", "b", "c", "d", "port"):
        f = pc.struct_field(m, name)
        f = f.fill_null("0") if f.null_count else f
        parts.append(np.asarray(f.cast(pa.int64())))
    a, b, c, d, port = parts
    ok &= (a <= 255) & (b <= 255) & (c <= 255) & (d <= 255)
    addr = ((a << 24) | (b << 16) | (c << 8) | d).astype(np.uint64)
    return np.where(ok, addr, 0).astype(np.uint32), np.where(ok, port, 0), ok
