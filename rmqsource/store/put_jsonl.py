"""``put.jsonl`` lines of many put results at once, element-wise in Arrow (what ``rmq put --json`` prints;
:meth:`rmqsource.store.batch_results.BatchPutResults.to_put_jsonl`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..format.batch_encode import as_binary, binary_offsets

_HEX = np.frombuffer(b"0123456789ABCDEF", np.uint8)


def hex_fixed(values: np.ndarray, digits: int) -> np.ndarray:
    """Upper-case hex of non-negative ints, ``digits`` wide: (n, digits) uint8."""
    v = values.astype(np.uint64)
    out = np.empty((len(v), digits), np.uint8)
    for k in range(digits):
        out[:, digits - 1 - k] = _HEX[((v >> np.uint64(4 * k)) & np.uint64(15)).astype(np.intp)]
    return out


_JSON_SPECIAL = np.zeros(256, bool)
_JSON_SPECIAL[[0, *range(3, 32), ord('"'), ord("\\")]] = True      # besides 0x01/0x02


def _json_str_needs_escape(arr: pa.Array) -> np.ndarray:
    """Rows holding a byte JSON must escape other than 0x01/0x02 (one LUT pass over the data)."""
    n = len(arr)
    out = np.zeros(n, bool)
    if n == 0:
        return out
    off, data = binary_offsets(as_binary(arr))
    lo, hi = int(off[0]), int(off[-1])
    hit = np.flatnonzero(_JSON_SPECIAL[data[lo:hi]])
    if hit.size:
        out[np.searchsorted(off, hit + lo, side="right") - 1] = True
    return out


def json_escape_props(arr: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """JSON string bodies of properties strings (\\x01/\\x02 escaped) and the rows that need
    general escaping (done by the caller)."""
    s = pc.replace_substring(pc.replace_substring(arr, "\x01", "\\u0001"), "\x02", "\\u0002")
    return s, _json_str_needs_escape(arr)


def render_put_jsonl(first_i: int, ok_rows: np.ndarray, msg_ids: pa.Array, phy: np.ndarray, qo: np.ndarray,
                     size: np.ndarray, store_ts: np.ndarray, topic: pa.Array, qid: np.ndarray,
                     sys_flag: np.ndarray, tags_code: np.ndarray, props: pa.Array, newline: bool = False) -> pa.Array:
    """The put.jsonl lines (with a trailing newline if ``newline``) of PUT_OK rows, element-wise in Arrow.

    All arguments are already restricted to ``ok_rows``; ``topic`` and ``props``
    must not need JSON escaping beyond \\x01/\\x02 (checked by the caller)."""
    def s(a):
        return pc.cast(pa.array(a), pa.string())
    return pc.binary_join_element_wise(
        '{"i":', s(ok_rows + first_i),
        ',"status":"PUT_OK","appendStatus":"PUT_OK","msgId":"', msg_ids,
        '","commitLogOffset":', s(phy), ',"queueOffset":', s(qo), ',"size":', s(size),
        ',"storeTimestamp":', s(store_ts), ',"topic":"', topic, '","queueId":', s(qid),
        ',"sysFlag":', s(sys_flag), ',"tagsCode":', s(tags_code), ',"propertiesString":"', props,
        '"}\n' if newline else '"}', "")
