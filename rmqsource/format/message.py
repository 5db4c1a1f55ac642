"""The message handed to the store: RocketMQ's ``MessageExtBrokerInner`` (input side, pure values).

Lives in ``format/`` so that the columnar encoder (``batch_encode``) and the
store writer share it without ``format`` importing ``store``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from ..errors import OptionError

__all__ = ["Message", "MessageExtBrokerInner"]


@dataclass(frozen=True, slots=True)
class MessageExtBrokerInner:
    """One message handed to the store (RocketMQ's MessageExtBrokerInner).

    ``properties`` is either a mapping (serialized after TAGS and KEYS, in its
    own order, like the corpora's harness) or a verbatim properties string
    (``k\\x01v\\x02...``, stored as given; then ``tags``/``keys`` must be None).
    Hosts are ``"a.b.c.d:port"`` / ``"[v6]:port"`` or ``(address_bytes, port)``.
    ``store_timestamp_ms`` pins the store clock (else the wall clock is used).
    """

    topic: str
    queue_id: int
    body: bytes = b""
    flag: int = 0
    properties: Optional[Mapping[str, Optional[str]] | str] = None
    tags: Optional[str] = None
    keys: Optional[str] = None
    born_timestamp_ms: int = 0
    born_host: Any = "127.0.0.1:0"
    store_host: Any = "127.0.0.1:10911"
    sys_flag: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    store_timestamp_ms: Optional[int] = None

    def __post_init__(self):
        if isinstance(self.properties, str) and (self.tags is not None or self.keys is not None):
            raise OptionError("a verbatim properties string cannot be combined with tags/keys")

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any]) -> "MessageExtBrokerInner":
        """From one line of a corpus ``inputs.jsonl`` (camelCase harness fields, base64 body)."""
        import base64
        props: Any = d.get("properties")
        if "propertiesString" in d:
            props = d["propertiesString"]
        return cls(
            topic=d["topic"], queue_id=int(d.get("queueId", 0)),
            body=base64.b64decode(d.get("body") or ""), flag=int(d.get("flag", 0)),
            properties=props, tags=d.get("tags"), keys=d.get("keys"),
            born_timestamp_ms=int(d.get("bornTimestamp", 0)),
            born_host=d.get("bornHost", "127.0.0.1:0"), store_host=d.get("storeHost", "127.0.0.1:10911"),
            sys_flag=int(d.get("sysFlag", 0)), reconsume_times=int(d.get("reconsumeTimes", 0)),
            prepared_transaction_offset=int(d.get("preparedTransactionOffset", 0)),
            store_timestamp_ms=d.get("storeTimestamp"))


Message = MessageExtBrokerInner
