"""JSON-lines input (``inputs.jsonl`` shape) for ``put_json_lines``: the per-line parse that
names the bad line, and the columns of messages that all take the per-message path."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import OptionError, RmqError
from ..format.message import MessageExtBrokerInner

__all__ = ["columns_of_messages", "messages_from_json_block"]


def messages_from_json_block(data: bytes, what: str, first_line: int) -> list:
    """Per-line parse of a JSON-lines block (the fallback of ``put_json_lines``), with the CLI's
    error messages (``{what} line {n}: ...``)."""
    import binascii
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
    from ..format.batch_encode import MessageColumns
    n = len(msgs)
    zeros = np.zeros(n, np.int64)
    empty = pa.array([""] * n, pa.string())
    nulls = pa.nulls(n, pa.string())
    return MessageColumns(
        n=n, topic=empty, queue_id=zeros, body=pa.array([b""] * n, pa.binary()), flag=zeros, sys_flag=zeros,
        born_ts=zeros, reconsume=zeros, prepared_tx=zeros, store_ts=zeros, store_ts_valid=np.zeros(n, bool),
        born_host=nulls, store_host=nulls, tags=nulls, keys=nulls, map_part=empty, map_count=zeros,
        uniq=nulls, slow=np.ones(n, bool), row_message=msgs.__getitem__)
