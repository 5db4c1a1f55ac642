"""The tagsCode a ConsumeQueue unit stores for a record (spec §4).

Java ``String.hashCode`` of the TAGS property, except for records parked in
``SCHEDULE_TOPIC_XXXX`` with a positive DELAY level: there it is the deliver
time ``storeTimestamp + delay[min(level, maxLevel)]`` (``+1000`` for a level
the table does not know, as ``computeDeliverTimestamp`` does).
"""

from __future__ import annotations

import re
from typing import Mapping, Optional, Sequence

from .javahash import tags_code
from .properties import DELAY, TAGS

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
DEFAULT_DELAY_LEVELS_MS = (1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000,
                           420000, 480000, 540000, 600000, 1200000, 1800000, 3600000, 7200000)
_JAVA_INT = re.compile(r"[+-]?[0-9]{1,10}")


def java_parse_int(text: Optional[str]) -> Optional[int]:
    """``Integer.parseInt``, or None where Java would throw."""
    if text is None or not _JAVA_INT.fullmatch(text):
        return None
    value = int(text)
    return value if -(1 << 31) <= value < (1 << 31) else None


def consume_queue_tags_code(topic: str, properties: Mapping[str, Optional[str]], store_timestamp_ms: int,
                            delay_levels_ms: Sequence[int] = DEFAULT_DELAY_LEVELS_MS) -> int:
    code = tags_code(properties.get(TAGS))
    if topic == SCHEDULE_TOPIC:
        level = java_parse_int(properties.get(DELAY))
        if level is not None:
            max_level = len(delay_levels_ms)
            if level > max_level:
                level = max_level
            if level > 0:
                code = store_timestamp_ms + (delay_levels_ms[level - 1] if level <= max_level else 1000)
    return code
