"""The tagsCode a ConsumeQueue unit stores for a record (spec §4).

Java ``String.hashCode`` of the TAGS property, except for records parked in
``SCHEDULE_TOPIC_XXXX`` with a positive DELAY level: there it is the deliver
time ``storeTimestamp + delay[min(level, maxLevel)]``.
"""

from __future__ import annotations

from typing import Sequence

from .javahash import tags_code
from .properties import DELAY, TAGS

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
DEFAULT_DELAY_LEVELS_MS = (1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000,
                           420000, 480000, 540000, 600000, 1200000, 1800000, 3600000, 7200000)


def parse_delay_level(value: str | None) -> int:
    """Integer DELAY level; anything unparsable counts as 0 (no delay)."""
    if value is None:
        return 0
    try:
        return int(value.strip())
    except ValueError:
        return 0


def consume_queue_tags_code(topic: str, properties: dict[str, str], store_timestamp_ms: int,
                            delay_levels_ms: Sequence[int] = DEFAULT_DELAY_LEVELS_MS) -> int:
    if topic == SCHEDULE_TOPIC and DELAY in properties:
        level = parse_delay_level(properties[DELAY])
        max_level = len(delay_levels_ms)
        if level > max_level:
            level = max_level
        if level > 0:
            return store_timestamp_ms + delay_levels_ms[level - 1]
        # level <= 0: fall through to the TAGS hash (computeDeliverTimestamp is skipped)
    return tags_code(properties.get(TAGS))
