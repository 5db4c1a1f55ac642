"""Vectorized decoding of many CommitLog records into Arrow arrays (no Spark import): hosts, msgId, bodies and
the whole batch of requested columns (:func:`build_columns`).

The record chain and fixed header fields are decoded by :mod:`columnar_headers`, the variable fields and
properties by :mod:`columnar_properties`; this module puts the columns together.
"""

from __future__ import annotations

import struct
from typing import Iterable, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import limits
from .columnar_headers import Headers, Locator, padded_words, spans_binary
from .columnar_properties import PropertyColumns, binary_to_string, parse_properties_columns, split_keys_column
from .compression import inflate_body
from .record import BORNHOST_V6_FLAG, COMPRESSED_FLAG, STOREHOST_V6_FLAG, TRANSACTION_MASK


# --------------------------------------------------------------------------- hosts, msgId

_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_HEX2 = np.stack([_HEX[np.arange(256) >> 4], _HEX[np.arange(256) & 15]], axis=1)   # (256, 2)
_HEX16 = np.ascontiguousarray(_HEX2).view("<u2").reshape(256)                      # two hex chars per byte


def _host_bytes(b: np.ndarray, host_pos: np.ndarray, v6: np.ndarray) -> np.ndarray:
    """(n, 21) uint8: [v6 flag, 16 address bytes (IPv4 left-aligned), 4 port bytes]."""
    n = len(host_pos)
    out = np.zeros((n, 21), dtype=np.uint8)
    if n == 0:
        return out
    width = np.where(v6, 20, 8)
    col = np.arange(20)
    idx = host_pos[:, None] + np.minimum(col[None, :], width[:, None] - 1)
    g = b[idx]
    out[:, 0] = v6
    # IPv6: 16 address + 4 port; IPv4: 4 address (cols 1-4) + port at 17-20.
    out[v6, 1:21] = g[v6]
    v4 = ~v6
    out[v4, 1:5] = g[v4, 0:4]
    out[v4, 17:21] = g[v4, 4:8]
    return out


def _format_host(key: bytes) -> str:
    port = int.from_bytes(key[17:21], "big", signed=True)
    if key[0]:
        groups = struct.unpack(">8H", key[1:17])
        return "[" + ":".join(f"{g:x}" for g in groups) + f"]:{port}"
    a = key[1:5]
    return f"{a[0]}.{a[1]}.{a[2]}.{a[3]}:{port}"


def _format_v4_key(key: int) -> str:
    port = key & 0xFFFFFFFF
    if port >= 1 << 31:
        port -= 1 << 32
    a = key >> 32
    return f"{a >> 24}.{(a >> 16) & 255}.{(a >> 8) & 255}.{a & 255}:{port}"


def host_strings(b: np.ndarray, host_pos: np.ndarray, v6: np.ndarray, key: Optional[np.ndarray] = None) -> pa.Array:
    """``a.b.c.d:port`` / ``[x:x:...]:port`` (Java's uncompressed IPv6 form) per row.

    ``key``: the big-endian 8-byte window at ``host_pos`` (IPv4 address and port), when known.
    """
    n = len(host_pos)
    if n == 0:
        return pa.array([], type=pa.string())
    if not v6.any():
        if key is None:
            hb = _host_bytes(b, host_pos, v6)
            key = (hb[:, 1:5].copy().view(">u4").reshape(-1).astype(np.uint64) << np.uint64(32)) | \
                hb[:, 17:21].copy().view(">u4").reshape(-1).astype(np.uint64)
        enc = pa.array(key.view(np.int64)).dictionary_encode()
        names = pa.array([_format_v4_key(v & 0xFFFFFFFFFFFFFFFF) for v in enc.dictionary.to_pylist()],
                         type=pa.string())
        return names.take(enc.indices)
    hb = _host_bytes(b, host_pos, v6)
    voids = np.ascontiguousarray(hb).view(np.dtype((np.void, 21))).reshape(-1)
    uniq, first, inv = np.unique(voids, return_index=True, return_inverse=True)
    names = pa.array([_format_host(hb[i].tobytes()) for i in first.tolist()], type=pa.string())
    return names.take(pa.array(inv.reshape(-1).astype(np.int32)))


def msg_id_strings(b: np.ndarray, h: Headers, store_v6: np.ndarray) -> pa.Array:
    """Offset msgId: hex(storeIP + port + stored physical offset), 32 or 56 upper-case chars."""
    n = len(h)
    if n == 0:
        return pa.array([], type=pa.string())
    if not store_v6.any():
        raw = np.empty((n, 2), dtype=">u8")
        raw[:, 0] = h.store_key
        raw[:, 1] = h.phy_offset.view(np.uint64)
        chars = _HEX16[raw.view(np.uint8)]                     # (n, 16) uint16 = (n, 32) ASCII bytes
        offsets = np.arange(0, 32 * (n + 1), 32, dtype=np.int32)
        return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(chars)])
    width = np.where(store_v6, 28, 16)
    host_w = width - 8
    col = np.arange(28)[None, :]
    idx = np.where(col < host_w[:, None], h.store_host_pos[:, None] + col,
                   h.pos[:, None] + 28 + np.minimum(col - host_w[:, None], 7))
    raw = b[idx]                                    # (n, 28)
    mask = np.arange(28)[None, :] < width[:, None]
    data = _HEX16[raw[mask]]
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(2 * width, out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


_TX_NAMES = ("NOT_TYPE", "PREPARED_TYPE", "COMMIT_TYPE", "ROLLBACK_TYPE")


def transaction_type_strings(sys_flag: np.ndarray) -> pa.Array:
    return pa.array(_TX_NAMES, type=pa.string()).take(pa.array(((sys_flag & TRANSACTION_MASK) >> 2).astype(np.int32)))


def timestamps_us(ms: np.ndarray) -> pa.Array:
    return pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), len(ms),
                                 [None, pa.py_buffer(np.ascontiguousarray(ms, dtype=np.int64) * 1000)])


def constant_string(value: str, n: int) -> pa.Array:
    return pa.array([value], type=pa.string()).take(pa.array(np.zeros(n, dtype=np.int32)))


def int_array(values: np.ndarray, arrow_type) -> pa.Array:
    return pa.array(np.ascontiguousarray(values).astype(arrow_type.to_pandas_dtype(), copy=False), type=arrow_type)


# --------------------------------------------------------------------------- bodies

def body_array(buf, h: Headers, *, decompress: bool = False, max_inflated: int = limits.DEFAULT_MAX_INFLATED_BODY_BYTES,
               locate: Optional[Locator] = None) -> pa.Array:
    arr = spans_binary(buf, h.body_pos, h.body_len)
    if decompress:
        comp = np.flatnonzero(h.sys_flag & COMPRESSED_FLAG)
        if len(comp):
            new = []
            for i in comp.tolist():
                file, off = locate(int(h.pos[i])) if locate else (None, int(h.pos[i]))
                new.append(inflate_body(arr[i].as_py(), int(h.sys_flag[i]), max_bytes=max_inflated,
                                        file=file, offset=off))
            mask = np.zeros(len(h), dtype=bool)
            mask[comp] = True
            arr = pc.replace_with_mask(arr, pa.array(mask), pa.array(new, type=pa.binary()))
    return arr


# --------------------------------------------------------------------------- full batch

def needs_properties(columns: Iterable[str]) -> bool:
    return bool({"properties", "tags", "keys", "uniqKey"} & set(columns))


def build_columns(buf, h: Headers, columns: Sequence[str], *, tags_code: Optional[np.ndarray] = None,
                  tags_code_valid: Optional[np.ndarray] = None, broker: str = "", store_path: str = "",
                  decompress: bool = False, max_inflated: int = limits.DEFAULT_MAX_INFLATED_BODY_BYTES,
                  locate: Optional[Locator] = None, map_type: Optional[pa.DataType] = None,
                  props: Optional[PropertyColumns] = None, words: Optional[np.ndarray] = None,
                  topics: Optional[pa.Array] = None, body: Optional[pa.Array] = None) -> dict[str, pa.Array]:
    """Arrow arrays of the requested output columns for records ``h`` in ``buf``.

    ``words``: :func:`padded_words` of ``buf`` if the caller has them (saves a copy).
    ``body``: the body column when the caller built it (inflated bodies).
    """
    b = np.frombuffer(buf, dtype=np.uint8)
    n = len(h)
    cols = set(columns)
    out: dict[str, pa.Array] = {}
    if props is None and needs_properties(cols):
        if words is None:
            words = padded_words(buf)
        props = parse_properties_columns(buf, h, words=words)
    if "topic" in cols:
        out["topic"] = topics if topics is not None else binary_to_string(spans_binary(buf, h.topic_pos, h.topic_len))
    if "queueId" in cols:
        out["queueId"] = pa.array(h.queue_id, type=pa.int32())
    if "queueOffset" in cols:
        out["queueOffset"] = pa.array(h.queue_offset, type=pa.int64())
    if "commitLogOffset" in cols:
        out["commitLogOffset"] = pa.array(h.phy_offset, type=pa.int64())
    store_v6 = (h.sys_flag & STOREHOST_V6_FLAG) != 0
    if "msgId" in cols:
        out["msgId"] = msg_id_strings(b, h, store_v6)
    if props is not None:
        if "uniqKey" in cols:
            out["uniqKey"] = props.entry_values(props.value_index("UNIQ_KEY"))
        if "tags" in cols:
            out["tags"] = props.entry_values(props.value_index("TAGS"))
        if "keys" in cols:
            out["keys"] = split_keys_column(props, props.value_index("KEYS"))
        if "properties" in cols:
            out["properties"] = props.map_array(map_type or pa.map_(pa.field("key", pa.string(), False),
                                                                    pa.field("value", pa.string(), True)))
    if "body" in cols:
        out["body"] = body if body is not None else body_array(buf, h, decompress=decompress,
                                                               max_inflated=max_inflated, locate=locate)
    if "bornTimestamp" in cols:
        out["bornTimestamp"] = timestamps_us(h.born_ts)
    if "storeTimestamp" in cols:
        out["storeTimestamp"] = timestamps_us(h.store_ts)
    if "bornHost" in cols:
        out["bornHost"] = host_strings(b, h.born_host_pos, (h.sys_flag & BORNHOST_V6_FLAG) != 0, key=h.born_key)
    if "storeHost" in cols:
        out["storeHost"] = host_strings(b, h.store_host_pos, store_v6, key=h.store_key)
    if "sysFlag" in cols:
        out["sysFlag"] = pa.array(h.sys_flag, type=pa.int32())
    if "flag" in cols:
        out["flag"] = pa.array(h.flag, type=pa.int32())
    if "reconsumeTimes" in cols:
        out["reconsumeTimes"] = pa.array(h.reconsume_times, type=pa.int32())
    if "bodyCRC" in cols:
        out["bodyCRC"] = pa.array(h.body_crc, type=pa.int32())
    if "preparedTransactionOffset" in cols:
        out["preparedTransactionOffset"] = pa.array(h.prepared_tx_offset, type=pa.int64())
    if "transactionType" in cols:
        out["transactionType"] = transaction_type_strings(h.sys_flag)
    if "storeSize" in cols:
        out["storeSize"] = pa.array(h.total_size.astype(np.int32), type=pa.int32())
    if "tagsCode" in cols:
        if tags_code is None:
            out["tagsCode"] = pa.nulls(n, type=pa.int64())
        else:
            mask = None if tags_code_valid is None else ~tags_code_valid
            out["tagsCode"] = pa.array(np.asarray(tags_code, dtype=np.int64), type=pa.int64(),
                                       mask=mask if mask is not None and mask.any() else None)
    if "broker" in cols:
        out["broker"] = constant_string(broker, n)
    if "storePath" in cols:
        out["storePath"] = constant_string(store_path, n)
    return out
