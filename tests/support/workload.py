"""A deterministic message workload shared by the crash and concurrency tests.

Message ``i`` is a pure function of (seed, i), so a test can check any record
read back from a store against what was written without keeping a copy.
"""

from __future__ import annotations

import random

TOPICS = ("OrdersA", "OrdersB", "Clicks", "Audit")
QUEUES_PER_TOPIC = 4
TAGS = ("TagA", "TagB", "TagC", None)


def message_fields(seed: int, i: int) -> dict:
    rng = random.Random(seed * 1_000_003 + i)
    topic = TOPICS[i % len(TOPICS)]
    size = rng.choice((0, 16, 200, 256, 1000))
    return {
        "topic": topic,
        "queue_id": (i // len(TOPICS)) % QUEUES_PER_TOPIC,
        "body": rng.randbytes(size),
        "tags": TAGS[i % len(TAGS)],
        "keys": f"k{i} order-{i % 97}",
        "properties": {"UNIQ_KEY": f"{seed:08X}{i:024X}", "seq": str(i)},
        "born_timestamp_ms": 1_700_000_000_000 + i,
        "flag": i % 7,
    }


def make_message(seed: int, i: int):
    from rmqsource.store.writer import Message
    return Message(**message_fields(seed, i))


def index_of(record) -> int:
    """The workload index carried by a stored record (its ``seq`` property)."""
    return int(record.properties["seq"])


def matches(seed: int, record) -> bool:
    want = message_fields(seed, index_of(record))
    props = record.properties
    return (record.topic == want["topic"] and record.queue_id == want["queue_id"]
            and record.body == want["body"] and props.get("TAGS") == want["tags"]
            and props.get("KEYS") == want["keys"] and props.get("UNIQ_KEY") == want["properties"]["UNIQ_KEY"]
            and record.flag == want["flag"] and record.born_timestamp_ms == want["born_timestamp_ms"])
