"""Put statuses and results: RocketMQ's ``PutMessageStatus``, ``AppendMessageStatus``,
``AppendMessageResult`` and ``PutMessageResult``."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional

from ..format.msgid import create_offset_msg_id

__all__ = ["AppendMessageResult", "AppendMessageStatus", "PutMessageResult", "PutMessageStatus",
           "failed_result"]


class PutMessageStatus(str, enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class AppendMessageStatus(str, enum.Enum):
    PUT_OK = "PUT_OK"
    END_OF_FILE = "END_OF_FILE"
    MESSAGE_SIZE_EXCEEDED = "MESSAGE_SIZE_EXCEEDED"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


@dataclass(frozen=True, slots=True)
class AppendMessageResult:
    """Where a record went.  ``msg_id`` (offset msgId) is derived on access, not per put."""

    status: AppendMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    store_addr: bytes = b""
    store_timestamp_ms: int = 0
    logics_offset: int = 0
    store_port: int = 0

    @property
    def msg_id(self) -> str:
        if self.status is not AppendMessageStatus.PUT_OK:
            return ""
        return create_offset_msg_id(self.store_addr, self.store_port, self.wrote_offset)


@dataclass(frozen=True, slots=True)
class PutMessageResult:
    """Outcome of one put: status, where the record went, the record's final topic/queue/sysFlag."""

    status: PutMessageStatus
    append_result: Optional[AppendMessageResult]
    topic: str
    queue_id: int
    sys_flag: int
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK

    @property
    def append_status(self) -> Optional[AppendMessageStatus]:
        return self.append_result.status if self.append_result else None

    @property
    def msg_id(self) -> Optional[str]:
        return self.append_result.msg_id if self.append_result else None

    @property
    def commit_log_offset(self) -> int:
        return self.append_result.wrote_offset if self.append_result else -1

    @property
    def queue_offset(self) -> int:
        return self.append_result.logics_offset if self.append_result else -1

    @property
    def size(self) -> int:
        return self.append_result.wrote_bytes if self.append_result else 0

    @property
    def store_timestamp_ms(self) -> int:
        return self.append_result.store_timestamp_ms if self.append_result else 0

    def to_json_dict(self) -> dict:
        """The fields of a corpus ``put.jsonl`` line."""
        a = self.append_result
        return {"status": self.status.value, "appendStatus": a.status.value if a else None,
                "msgId": a.msg_id if a else None, "commitLogOffset": a.wrote_offset if a else None,
                "queueOffset": a.logics_offset if a else None, "size": a.wrote_bytes if a else None,
                "storeTimestamp": a.store_timestamp_ms if a else None, "topic": self.topic,
                "queueId": self.queue_id, "sysFlag": self.sys_flag}



def failed_result(m, status: PutMessageStatus, append: Optional[AppendMessageStatus] = None,
                  reason: str = "") -> PutMessageResult:
    """The result of a message that was not written (its fields as far as they are well typed)."""
    topic = m.topic if isinstance(getattr(m, "topic", None), str) else ""
    qid = m.queue_id if isinstance(getattr(m, "queue_id", None), int) else -1
    sys_flag = getattr(m, "sys_flag", 0)
    return PutMessageResult(status, AppendMessageResult(append, -1, 0, b"", 0, -1) if append else None, topic, qid,
                            sys_flag if isinstance(sys_flag, int) else 0, reason)
