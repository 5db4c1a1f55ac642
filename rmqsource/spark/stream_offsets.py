"""A stream's offsets: ``{topic: {queueId: nextQueueOffset}}`` as JSON, ``{(topic, queueId): offset}`` in
between (the JVM twin: RmqStreamOffset.java)."""

from __future__ import annotations

from typing import Mapping, Optional

Key = tuple[str, int]


def offsets_to_json(offsets: Mapping[Key, int]) -> dict:
    """``{(topic, qid): off}`` -> ``{topic: {"qid": off}}`` in a stable key order."""
    out: dict = {}
    for (topic, qid) in sorted(offsets):
        out.setdefault(topic, {})[str(qid)] = int(offsets[(topic, qid)])
    return out


def offsets_from_json(doc: Optional[Mapping]) -> dict[Key, int]:
    out: dict[Key, int] = {}
    for topic, per_queue in (doc or {}).items():
        for qid, off in per_queue.items():
            out[(topic, int(qid))] = int(off)
    return out
