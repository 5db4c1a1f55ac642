"""A store's structure as tables (``option("metadata", ...)``, docs/metadata.md; the JVM twin:
store/StoreMetadata.java): its queues, topics, consumer groups, CommitLog segments and IndexFiles, answered
from ConsumeQueues, configs, file lengths and IndexFile headers, never from a CommitLog record.

Each function gives a list of dicts keyed by the table's column names (rmqsource.spark.schema); the
``broker`` and ``storePath`` columns are the caller's.
"""

from __future__ import annotations

import os
from collections import defaultdict

from ..format.indexfile import IndexHeader
from ..format.system_topics import is_internal_topic
from .lag import group_lag_with_source
from .reader import MessageStoreReader

TABLES = ("queues", "topics", "groups", "segments", "indexes")


def queue_rows(reader: MessageStoreReader) -> list[dict]:
    """One row per queue (``rmq queues``, mqadmin topicStatus): min / max offsets, and the CommitLog end of its
    last unit (``cqMaxPhysicOffset``; -1 when it has none)."""
    return [{"topic": q.topic, "queueId": q.queue_id, "minOffset": q.min_offset, "maxOffset": q.max_offset,
             "messages": q.max_offset - q.min_offset, "cqMaxPhysicOffset": q.cq_max_physic_offset,
             "internal": is_internal_topic(q.topic)}
            for q in sorted(reader.queue_infos(), key=lambda q: (q.topic, q.queue_id))]


def topic_rows(reader: MessageStoreReader) -> list[dict]:
    """One row per topic (``rmq topics``): its queue ids, messages, lowest min and highest max offset."""
    per_topic: dict[str, list[dict]] = defaultdict(list)
    for q in queue_rows(reader):
        per_topic[q["topic"]].append(q)
    return [{"topic": t, "queueIds": [q["queueId"] for q in qs], "queues": len(qs),
             "messages": sum(q["messages"] for q in qs), "minOffset": min(q["minOffset"] for q in qs),
             "maxOffset": max(q["maxOffset"] for q in qs), "internal": is_internal_topic(t)}
            for t, qs in sorted(per_topic.items())]


def group_rows(root: str, config) -> list[dict]:
    """One row per consumer group, topic and queue (``rmq lag``, mqadmin consumerProgress): committed offset,
    the queue's max offset and the lag, wherever the broker keeps the offsets."""
    rows, committed = group_lag_with_source(root, config)
    return [{"group": r["group"], "topic": r["topic"], "queueId": r["queueId"], "brokerOffset": r["brokerOffset"],
             "consumerOffset": r["consumerOffset"], "minOffset": r["minOffset"], "diff": r["diff"],
             "requestMode": r["requestMode"], "offsetSource": committed.source.kind} for r in rows]


def segment_rows(reader: MessageStoreReader) -> list[dict]:
    """One row per CommitLog file: its start offset, length, and the bytes of it below the store's valid end."""
    end = reader.commit_log_max_offset
    return [{"file": s.path, "startOffset": s.start_offset, "fileSize": s.size_bytes,
             "validBytes": max(0, min(s.size_bytes, end - s.start_offset)), "dledger": s.dledger}
            for s in reader.commitlog.segments]


def index_rows(reader: MessageStoreReader) -> list[dict]:
    """One row per IndexFile, from its 40-byte header: the store times and CommitLog offsets it covers."""
    out = []
    for path in reader.index_file_paths():
        with open(path, "rb") as f:
            head = f.read(40)
        row = {"file": path, "fileSize": os.path.getsize(path), "beginTimestamp": None, "endTimestamp": None,
               "beginPhyOffset": None, "endPhyOffset": None, "hashSlotCount": None, "entries": None}
        if len(head) == 40:                  # a file cut inside its header has nulls
            h = IndexHeader.decode(head)
            row.update(beginTimestamp=h.begin_timestamp_ms, endTimestamp=h.end_timestamp_ms,
                       beginPhyOffset=h.begin_phy_offset, endPhyOffset=h.end_phy_offset,
                       hashSlotCount=h.hash_slot_count, entries=h.index_count - 1)   # the header counts from 1
        out.append(row)
    return out


def metadata_rows(table: str, root: str, config) -> list[dict]:
    """The rows of metadata table ``table`` of the store at ``root``."""
    if table == "groups":
        return group_rows(root, config)
    with MessageStoreReader(root, config) as reader:
        if table == "queues":
            return queue_rows(reader)
        if table == "topics":
            return topic_rows(reader)
        if table == "segments":
            return segment_rows(reader)
        return index_rows(reader)
