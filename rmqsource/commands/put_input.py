"""``rmq put --body-encoding``: bodies given as base64 (the corpus shape), UTF-8 text or hex.

JSON lines with text or hex bodies are rewritten to the base64 shape the
writer's bulk JSON path reads (line numbers kept, so its errors still point at
the input line); Parquet/Arrow body columns holding base64 or hex text are
decoded to bytes.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Optional

from ..errors import OptionError


def _decoder(encoding: str):
    if encoding == "hex":
        return bytes.fromhex
    if encoding == "base64":
        return lambda text: base64.b64decode(text, validate=True)
    return lambda text: text.encode("utf-8")


def json_bodies_as_base64(block: bytes, encoding: Optional[str], what: str, first_line: int) -> bytes:
    """Whole JSON lines with ``body`` in ``encoding`` -> the same lines with base64 bodies."""
    if encoding in (None, "base64"):
        return block
    decode = _decoder(encoding)
    out = []
    for n, line in enumerate(block.split(b"\n")[:-1] if block.endswith(b"\n") else block.split(b"\n"),
                             start=first_line):
        if not line.strip():
            out.append(line)
            continue
        try:
            obj = json.loads(line)
        except (ValueError, UnicodeDecodeError) as e:
            raise OptionError(f"{what} line {n}: not JSON: {e}") from None
        body = obj.get("body") if isinstance(obj, dict) else None
        if isinstance(body, str):
            try:
                obj["body"] = base64.b64encode(decode(body)).decode("ascii")
            except (ValueError, UnicodeEncodeError) as e:
                raise OptionError(f"{what} line {n}: body is not {encoding} text: {e}") from None
        out.append(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    return b"\n".join(out) + b"\n"


def arrow_bodies_decoded(batch, encoding: Optional[str], what: str):
    """``batch`` with a base64/hex text body column decoded to binary (utf8 / no encoding: as it is)."""
    import pyarrow as pa
    names = batch.schema.names
    if encoding in (None, "utf8") or "body" not in names:
        return batch
    i = names.index("body")
    decode = _decoder(encoding)
    values = []
    for row, v in enumerate(batch.column(i).to_pylist()):
        if v is None:
            values.append(None)
            continue
        try:
            values.append(decode(v if isinstance(v, str) else v.decode("ascii")))
        except (ValueError, UnicodeDecodeError, binascii.Error) as e:
            raise OptionError(f"{what}: row {row}: body is not {encoding} text: {e}") from None
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    return table.set_column(i, "body", pa.array(values, pa.binary()))
