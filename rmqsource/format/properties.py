"""Message properties: ``name 0x01 value 0x02 ...`` (spec §2.8, §2.9).

Serialization order is the caller's (RocketMQ uses a HashMap's order, so it is
never relied on).  The trailing 0x02 after the last entry depends on the
engine generation: present up to 4.9.0 and from 5.2.0, absent in 4.9.1–5.1.4.
Parsing follows the 4.9.1+/5.x algorithm exactly: empty keys and values are
dropped, segments without 0x01 are dropped, a later duplicate key wins.
"""

from __future__ import annotations

from typing import Iterable, Mapping

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

# Property names (MessageConst) used by the store itself.
TAGS = "TAGS"
KEYS = "KEYS"
UNIQ_KEY = "UNIQ_KEY"
DELAY = "DELAY"
REAL_TOPIC = "REAL_TOPIC"
REAL_QID = "REAL_QID"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_PROPERTIES = (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS)
WAIT = "WAIT"
TRAN_MSG = "TRAN_MSG"
INNER_NUM = "INNER_NUM"
INNER_BASE = "INNER_BASE"
CRC32 = "__CRC32#"
KEY_SEPARATOR = " "


def parse_properties(raw: bytes | str) -> dict[str, str]:
    """Decode a PROPERTIES field into a dict with RocketMQ's parsing rules."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray, memoryview)) else raw
    if isinstance(raw, memoryview):
        text = bytes(raw).decode("utf-8", "replace")
    result: dict[str, str] = {}
    n = len(text)
    i = 0
    while i < n:
        j = text.find(PROPERTY_SEPARATOR, i)
        if j < 0:
            j = n
        if j - i >= 3:
            k = text.find(NAME_VALUE_SEPARATOR, i)
            if i < k < j - 1:
                result[text[i:k]] = text[k + 1:j]
        i = j + 1
    return result


def serialize_properties(items: Mapping[str, str] | Iterable[tuple[str, str]], *,
                         trailing_separator: bool) -> str:
    """Encode properties; entries whose value is None are omitted (as RocketMQ does)."""
    pairs = items.items() if isinstance(items, Mapping) else items
    parts = [f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in pairs if v is not None]
    if not parts:
        return ""
    text = PROPERTY_SEPARATOR.join(parts)
    return text + PROPERTY_SEPARATOR if trailing_separator else text


def split_keys(keys: str | None) -> list[str]:
    """KEYS split like Java ``split(" ")`` with empty items skipped (spec §5.2)."""
    if not keys:
        return []
    return [k for k in keys.split(KEY_SEPARATOR) if k]
