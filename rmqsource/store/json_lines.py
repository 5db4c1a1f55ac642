"""JSON-lines input (``inputs.jsonl`` shape) for ``put_json_lines``: a block of lines as
:class:`~rmqsource.format.message_columns.MessageColumns`, parsed by pyarrow's C++ reader
(:func:`columns_from_json_lines`), else the per-line parse that names the bad line, and the columns
of messages that all take the per-message path."""

from __future__ import annotations

import binascii
from typing import TYPE_CHECKING, Any, Optional, Sequence

import numpy as np

from ..errors import OptionError, RmqError
from ..format.message import MessageExtBrokerInner

# pyarrow and the columnar modules are imported where they are used: opening a writer does not load them.
if TYPE_CHECKING:
    import pyarrow as pa

    from ..format.message_columns import MessageColumns

__all__ = ["columns_from_json_lines", "columns_of_messages", "json_lines_problem", "messages_from_json_block"]


def messages_from_json_block(data: bytes, what: str, first_line: int) -> list:
    """Per-line parse of a JSON-lines block (the fallback of ``put_json_lines``), with the CLI's
    error messages (``{what} line {n}: ...``)."""
    import json
    msgs = []
    for n, line in enumerate(data.split(b"\n"), first_line):
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise OptionError(f"{what} line {n}: not valid UTF-8 (byte {line[e.start]:#04x} at column "
                              f"{e.start + 1}: {e.reason})") from None
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise OptionError(f"{what} line {n}: not valid JSON: {e}") from None
        except RecursionError:
            raise OptionError(f"{what} line {n}: JSON nested too deeply") from None
        try:
            if not isinstance(obj, dict):
                raise TypeError(f"expected a JSON object, got {type(obj).__name__}")
            if "topic" not in obj:
                raise KeyError("topic")
            body = obj.get("body")
            if body:
                if not isinstance(body, str):
                    raise TypeError(f"body must be a base64 string, got {type(body).__name__}")
                binascii.a2b_base64(body, strict_mode=True)
            msgs.append(MessageExtBrokerInner.from_json_dict(obj))
        except KeyError as e:
            raise OptionError(f"{what} line {n}: missing field {e.args[0]!r}") from None
        except binascii.Error as e:
            raise OptionError(f"{what} line {n}: body is not base64: {e}") from None
        except (TypeError, ValueError, AttributeError) as e:
            raise OptionError(f"{what} line {n}: {' '.join(str(e).split())}") from None
        except RmqError as e:
            raise OptionError(f"{what} line {n}: {' '.join(str(e).split())}") from None
    return msgs


def columns_of_messages(msgs: Sequence[MessageExtBrokerInner]):
    """MessageColumns whose rows all take the per-message path (fallback of the bulk entry points)."""
    import pyarrow as pa
    from ..format.message_columns import MessageColumns
    n = len(msgs)
    zeros = np.zeros(n, np.int64)
    empty = pa.array([""] * n, pa.string())
    nulls = pa.nulls(n, pa.string())
    return MessageColumns(
        n=n, topic=empty, queue_id=zeros, body=pa.array([b""] * n, pa.binary()), flag=zeros, sys_flag=zeros,
        born_ts=zeros, reconsume=zeros, prepared_tx=zeros, store_ts=zeros, store_ts_valid=np.zeros(n, bool),
        born_host=nulls, store_host=nulls, tags=nulls, keys=nulls, map_part=empty, map_count=zeros,
        uniq=nulls, slow=np.ones(n, bool), row_message=msgs.__getitem__)


_JSON_INT_FIELDS = ("queue_id", "flag", "sys_flag", "born_timestamp_ms", "reconsume_times",
                    "prepared_transaction_offset", "store_timestamp_ms")


# Brackets allowed on one input line before it goes to the per-line parser (pyarrow's reader
# crashes past ~10,000 levels of nesting; a line's bracket count bounds its depth).
JSON_MAX_BRACKETS_PER_LINE = 1000


def json_lines_problem(data: bytes) -> Optional[str]:
    """Why pyarrow's JSON reader must not see this block of lines (None: it may).

    pyarrow.json.read_json dies (SIGSEGV) on a top-level ``null`` and on very
    deep nesting, and passes invalid UTF-8 through into string columns; a block
    with a line that does not start with ``{``, with invalid UTF-8 or with more
    than JSON_MAX_BRACKETS_PER_LINE brackets on a line goes to the per-line
    parser, which names the bad line.  Vectorized: about two passes over the bytes."""
    import pyarrow as pa
    if not data.isascii():
        text = pa.Array.from_buffers(pa.large_string(), 1, [None, pa.py_buffer(np.array([0, len(data)], np.int64)),
                                                            pa.py_buffer(data)])
        try:
            text.validate(full=True)
        except pa.ArrowInvalid:
            return "not valid UTF-8"
    b = np.frombuffer(data, np.uint8)
    nl = np.flatnonzero(b == 10)
    starts = np.concatenate(([0], nl + 1))
    ends = np.concatenate((nl, [len(b)]))
    keep = starts < len(b)
    starts, ends = starts[keep], ends[keep]
    for s in starts[b[starts] != 123].tolist():             # blank or indented lines are fine
        end = data.find(b"\n", s)
        text = data[s:end if end >= 0 else len(data)].strip()
        if text and not text.startswith(b"{"):
            return "a line is not a JSON object"
    long = np.flatnonzero(ends - starts > JSON_MAX_BRACKETS_PER_LINE)
    for s, e in zip(starts[long].tolist(), ends[long].tolist()):   # only long lines can nest deeply
        if data.count(b"{", s, e) + data.count(b"[", s, e) > JSON_MAX_BRACKETS_PER_LINE:
            return "a line nests too deeply"
    return None


def columns_from_json_lines(data: bytes) -> Optional[MessageColumns]:
    """Columns of a block of JSON lines (``inputs.jsonl`` shape), parsed by pyarrow's C++ reader.

    Returns None when the block needs the per-line path (not plain JSON
    objects or not safe for pyarrow -- :func:`json_lines_problem` --, a type
    pyarrow infers differently from ``from_json_dict``, nulls where a default
    does not apply to a whole column...); the caller then
    parses it with ``json.loads`` and reports errors by line.  Bodies are
    base64-decoded strictly (invalid base64 -> None as well).
    """
    import pyarrow as pa
    import pyarrow.json as pj
    from ..format.batch_encode import single_chunk
    from ..format.message_columns import COLUMN_ALIASES, FIELDS, build_columns
    if not data or data.isspace():                      # (no copy, unlike strip())
        return None
    if json_lines_problem(data) is not None:
        return None
    try:
        table = pj.read_json(pa.BufferReader(data), read_options=pj.ReadOptions(block_size=16 << 20))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    n = table.num_rows
    lines_cache: list = []

    def lines():
        if not lines_cache:
            lines_cache.append([ln for ln in data.split(b"\n") if ln.strip()])
        return lines_cache[0]

    n_lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    if n_lines != n and len(lines()) != n:
        return None
    cols: dict[str, Any] = {}
    for i, name in enumerate(table.schema.names):
        key = COLUMN_ALIASES.get(name, name)
        if key not in FIELDS or key == "properties_string" and False:
            continue                                        # from_json_dict ignores unknown fields
        cols[key] = single_chunk(table.column(i))
    if "topic" not in cols or not pa.types.is_string(cols["topic"].type) or cols["topic"].null_count:
        return None
    for k in _JSON_INT_FIELDS:
        c = cols.get(k)
        if c is not None and not (pa.types.is_integer(c.type) or pa.types.is_null(c.type)):
            return None
        if c is not None and k != "store_timestamp_ms" and c.null_count:
            return None                                      # int(None) fails per line
    for k in ("tags", "keys", "born_host", "store_host", "properties_string"):
        c = cols.get(k)
        if c is not None and not (pa.types.is_string(c.type) or pa.types.is_null(c.type)):
            return None
    for k in ("born_host", "store_host"):
        c = cols.get(k)
        if c is not None and (c.null_count or pa.types.is_null(c.type)):
            return None
    props = cols.get("properties")
    if props is not None and not (pa.types.is_struct(props.type) or pa.types.is_null(props.type)):
        return None
    body = cols.get("body")
    if body is not None:
        if pa.types.is_null(body.type):
            cols["body"] = None
        elif not pa.types.is_string(body.type):
            return None
        else:
            decoded = _b64decode_column(body)
            if decoded is None:
                return None
            cols["body"] = decoded
    pstr_rows = None
    if "properties_string" in cols:
        # "propertiesString": null and absent differ in from_json_dict; rows naming it go per line.
        pstr_rows = np.fromiter((b'"propertiesString"' in ln for ln in lines()), dtype=bool, count=n)

    def row_message(r: int):
        import json
        return MessageExtBrokerInner.from_json_dict(json.loads(lines()[r]))

    try:
        mc = build_columns({k: v for k, v in cols.items() if k != "properties_string"}, n, null_is_default=True,
                           row_message=row_message)
    except TypeError:
        return None
    if pstr_rows is not None:
        mc.slow |= pstr_rows
    return mc


def _b64decode_column(col: pa.Array) -> Optional[pa.Array]:
    """Strict base64 decode of each string (null/empty -> b""); None when one is invalid.

    One ``a2b_base64(strict_mode=True)`` call per string over the Arrow data
    buffer (measured faster than a numpy decoder with the validation strict
    mode needs), decoded bytes joined into one buffer."""
    import pyarrow as pa
    from ..format.batch_encode import binary_offsets
    if col.null_count:
        col = col.fill_null("")
    off, data = binary_offsets(col.view(pa.binary()))
    return _b64decode_loop(off, data)


def _b64decode_loop(off: np.ndarray, data: np.ndarray) -> Optional[pa.Array]:
    import pyarrow as pa
    from ..format.batch_encode import INT32_MAX
    mv = memoryview(data)
    a2b = binascii.a2b_base64
    try:
        parts = [a2b(mv[a:b], strict_mode=True) if b > a else b"" for a, b in zip(off[:-1].tolist(), off[1:].tolist())]
    except binascii.Error:
        return None
    # Strictly valid base64 is 4-char groups, '=' padding only at the end: decoded sizes follow.
    enc_len = np.diff(off)
    ends = off[1:] - 1
    last = np.where(enc_len > 0, data[np.maximum(ends, 0)], 0) if len(ends) else ends
    last2 = np.where(enc_len > 1, data[np.maximum(ends - 1, 0)], 0) if len(ends) else ends
    lens = enc_len // 4 * 3 - (last == 61) - ((last == 61) & (last2 == 61))
    if not bool(np.all(enc_len % 4 == 0)):      # (strict mode would have refused; stay exact anyway)
        lens = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    offsets = np.zeros(len(parts) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    if offsets[-1] >= INT32_MAX:
        return pa.array(parts, pa.binary())
    return pa.Array.from_buffers(pa.binary(), len(parts),
                                 [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(parts))])
