"""JSON shapes of engine answers, field for field as the golden corpora hold them.

``get`` message lines, status lines, ``view`` results, ``query`` hits and
``recover`` documents use exactly these names, so a corpus can be replayed
through the ``rmq`` CLI and compared line by line.
"""

from __future__ import annotations

import base64
from typing import Optional

from .reader import FoundMessage, GetMessageResult, QueryResult, QueueInfo, ViewResult, key_matches


def message_json(found: FoundMessage) -> dict:
    r = found.record
    props = r.properties
    cq = found.cq
    return {
        "topic": r.topic,
        "queueId": r.queue_id,
        "queueOffset": r.queue_offset,
        "commitLogOffset": r.phy_offset,
        "storeSize": r.store_size,
        "bodyCRC": r.body_crc,
        "flag": r.flag,
        "sysFlag": r.sys_flag,
        "bornTimestamp": r.born_timestamp_ms,
        "bornHost": r.born_host,
        "storeTimestamp": r.store_timestamp_ms,
        "storeHost": r.store_host,
        "reconsumeTimes": r.reconsume_times,
        "preparedTransactionOffset": r.prepared_transaction_offset,
        # The engine leaves an empty body null (MessageDecoder reads it only when bodyLen > 0).
        "body": base64.b64encode(r.body).decode("ascii") if r.body else None,
        "properties": dict(sorted(props.items())),
        "tags": props.get("TAGS"),
        "keys": props.get("KEYS"),
        "msgId": r.msg_id,
        "cq": None if cq is None else {"commitLogOffset": cq.commit_log_offset, "size": cq.size,
                                       "tagsCode": cq.tags_code},
        "raw": base64.b64encode(r.raw).decode("ascii"),
    }


def status_json(result: GetMessageResult, *, count: int, calls: int) -> dict:
    return {
        "status": result.status.value,
        "nextBeginOffset": result.next_begin_offset,
        "minOffset": result.min_offset,
        "maxOffset": result.max_offset,
        "count": count,
        "calls": calls,
    }


def view_json(result: ViewResult) -> dict:
    doc = {
        "msgIdStoreHost": result.store_host,
        "msgIdOffset": result.commit_log_offset,
        "found": result.message is not None,
    }
    if result.message is not None:
        doc["message"] = message_json(result.message)
    return doc


def query_json(result: QueryResult, topic: str, key: str) -> dict:
    hits = []
    for found in result.messages:
        hit = message_json(found)
        hit["keyMatch"] = key_matches(found.record, topic, key)
        hits.append(hit)
    return {
        "hits": hits,
        "summary": {
            "count": len(hits),
            "indexLastUpdatePhyoffset": result.index_last_update_phy_offset,
            "indexLastUpdateTimestamp": result.index_last_update_timestamp_ms,
        },
    }


def queue_json(info: QueueInfo) -> dict:
    return {
        "topic": info.topic,
        "queueId": info.queue_id,
        "minOffset": info.min_offset,
        "maxOffset": info.max_offset,
        "cqMaxPhysicOffset": info.cq_max_physic_offset,
    }


def optional_int(value: Optional[int]) -> Optional[int]:
    return None if value is None else int(value)
