"""Transactional messages: what the broker kept of each, and how it ended (``option("view", "transactions")``,
docs/views.md; the JVM twin: store/Transactions.java).

A transactional send stores a half message in ``RMQ_SYS_TRANS_HALF_TOPIC`` (real topic and queue in
``REAL_TOPIC`` / ``REAL_QID``, the producer group in ``PGROUP``). The producer then ends it
(``EndTransaction``): a commit writes the message into its real queue with the commit type in its sysFlag and
``preparedTransactionOffset`` = the half record's CommitLog offset; a rollback writes nothing there. Either way
the broker writes an op record into ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` (same queue id as the half's; tag ``d``;
body: the removed half queue offsets, comma-separated). A half still open after the transaction timeout is
checked: the broker stores it again at the end of the half queue (``TRANSACTION_CHECK_TIMES`` counting the
rounds) and asks the producer, whose answer ends that copy as above. Past ``transactionCheckMax`` rounds the
half goes to ``TRANS_CHECK_MAX_TIME_TOPIC`` (discarded).

The check can answer a half whose end the broker has not yet written as an op (5.x writes ops in batches),
so one message can be committed more than once: every commit is a delivery. :func:`transaction_entries`
counts them (``commits``) instead of assuming one.

One :class:`TransactionEntry` per message (its UNIQ_KEY, else its transaction id, else its first half record):
* ``committed``: a record of its real queue commits one of its half copies;
* ``rolled_back``: no commit, and an op record removed one of its copies;
* ``discarded``: neither, and a copy is in ``TRANS_CHECK_MAX_TIME_TOPIC``;
* ``pending``: none of these (the broker will check it).
``open``: its newest half copy has no op record (a broker started on this store checks it again).
Commits are found by a pass over the real queues named by the halves, each from its first unit stored at or
after the earliest half of that queue (store times ascend along a queue), as the timers' deliveries are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..format.properties import REAL_QID, REAL_TOPIC, UNIQ_KEY
from ..format.record import TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK
from ..format.tagscode import java_parse_int
from .reader import MessageStoreReader
from .timers import _first_at_or_after, _queue_units, _record

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
CHECK_MAX_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
REMOVE_TAG = "d"                                  # TransactionalMessageUtil.REMOVE_TAG
CHECK_TIMES = "TRANSACTION_CHECK_TIMES"           # MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES
TRANSACTION_ID = "__transactionId__"              # MessageConst.PROPERTY_TRANSACTION_ID
PRODUCER_GROUP = "PGROUP"                         # MessageConst.PROPERTY_PRODUCER_GROUP
COMMITTED, ROLLED_BACK, DISCARDED, PENDING = "committed", "rolled_back", "discarded", "pending"


@dataclass(frozen=True)
class TransactionEntry:
    """One transactional message. ``phy_offset`` / ``size``: the record the row shows (its first commit, else its
    first half record); ``queue_offset`` / ``tags_code``: the first commit's unit in the real queue (None when
    never committed); ``half_offset``: the first half record's CommitLog offset."""
    real_topic: str
    real_queue_id: int
    uniq_key: Optional[str]
    transaction_id: Optional[str]
    producer_group: Optional[str]
    state: str
    check_times: int
    half_copies: int
    commits: int
    resolved_time_ms: Optional[int]
    open: bool
    phy_offset: int
    size: int
    queue_offset: Optional[int]
    tags_code: Optional[int]
    half_offset: int


def _ops(reader: MessageStoreReader) -> dict:
    """(half queue id, half queue offset) -> store time of the first op record removing it."""
    removed: dict = {}
    for t, qid in reader.queue_keys():
        if t != OP_TOPIC:
            continue
        for _, phy, size, _ in _queue_units(reader, t, qid):
            r = _record(reader, phy, size)
            if r is None or r.topic != OP_TOPIC or r.tags != REMOVE_TAG or not r.body:
                continue
            for item in r.body.decode("ascii", errors="replace").split(","):
                off = java_parse_int(item.strip()) if item.strip() else None
                if off is not None:
                    removed.setdefault((qid, off), r.store_timestamp_ms)
    return removed


def _keys_in(reader: MessageStoreReader, topic: str) -> set:
    out = set()
    for t, qid in reader.queue_keys():
        if t == topic:
            for _, phy, size, _ in _queue_units(reader, t, qid):
                r = _record(reader, phy, size)
                if r is not None and r.topic == topic:
                    out.add(r.properties.get(UNIQ_KEY) or r.properties.get(TRANSACTION_ID))
    return out


def transaction_entries(reader: MessageStoreReader, real_topics=None, *, exclude_internal: bool = False
                        ) -> list[TransactionEntry]:
    """Every transactional message of the store (restricted to ``real_topics`` when given), in the order
    (real topic, real queue, first half's CommitLog offset)."""
    from ..format.system_topics import is_internal_topic
    wanted = frozenset(real_topics) if real_topics is not None else None
    copies: dict = {}           # identity -> [(record, size, half queue id, half queue offset)] oldest first
    for t, qid in sorted(reader.queue_keys()):
        if t != HALF_TOPIC:
            continue
        for qoff, phy, size, _ in _queue_units(reader, t, qid):
            r = _record(reader, phy, size)
            if r is None or r.topic != HALF_TOPIC:
                continue
            p = r.properties
            real, real_qid = p.get(REAL_TOPIC), java_parse_int(p.get(REAL_QID))
            if real is None or real_qid is None or (wanted is not None and real not in wanted):
                continue
            if exclude_internal and is_internal_topic(real):
                continue
            ident = (real, real_qid, p.get(UNIQ_KEY) or p.get(TRANSACTION_ID) or phy)
            copies.setdefault(ident, []).append((r, size, qid, qoff))
    removed = _ops(reader)
    discarded = _keys_in(reader, CHECK_MAX_TOPIC)
    # commits: records of the real queues whose preparedTransactionOffset is a half copy's offset
    owner = {c[0].phy_offset: ident for ident, cs in copies.items() for c in cs}
    commits: dict = {}          # identity -> [(record, queue offset, tagsCode, size)] in queue order
    queues_on_disk = set(reader.queue_keys())
    per_queue: dict = {}
    for ident, cs in copies.items():
        key = ident[:2]
        per_queue[key] = min(per_queue.get(key, cs[0][0].store_timestamp_ms), cs[0][0].store_timestamp_ms)
    for (topic, qid), since in sorted(per_queue.items()):
        if (topic, qid) not in queues_on_disk:
            continue
        for qoff, phy, size, code in _queue_units(reader, topic, qid, _first_at_or_after(reader, topic, qid, since)):
            r = _record(reader, phy, size)
            if r is None or r.topic != topic or (r.sys_flag & TRANSACTION_MASK) != TRANSACTION_COMMIT_TYPE:
                continue
            ident = owner.get(r.prepared_transaction_offset)
            if ident is not None and ident[:2] == (topic, qid):
                commits.setdefault(ident, []).append((r, qoff, code, size))
    out = []
    for ident, cs in copies.items():
        first, size = cs[0][0], cs[0][1]
        p = first.properties
        done = [removed[(c[2], c[3])] for c in cs if (c[2], c[3]) in removed]
        mine = commits.get(ident, [])
        key = p.get(UNIQ_KEY) or p.get(TRANSACTION_ID)
        if mine:
            state, resolved = COMMITTED, mine[0][0].store_timestamp_ms
        elif done:
            state, resolved = ROLLED_BACK, min(done)
        elif key is not None and key in discarded:
            state, resolved = DISCARDED, None
        else:
            state, resolved = PENDING, None
        newest = cs[-1]
        checks = max((java_parse_int(c[0].properties.get(CHECK_TIMES)) or 0) for c in cs)
        out.append(TransactionEntry(
            real_topic=ident[0], real_queue_id=ident[1], uniq_key=p.get(UNIQ_KEY), transaction_id=p.get(TRANSACTION_ID),
            producer_group=p.get(PRODUCER_GROUP), state=state, check_times=checks, half_copies=len(cs),
            commits=len(mine), resolved_time_ms=resolved,
            open=(newest[2], newest[3]) not in removed and state != DISCARDED,
            phy_offset=mine[0][0].phy_offset if mine else first.phy_offset, size=mine[0][3] if mine else size,
            queue_offset=mine[0][1] if mine else None, tags_code=mine[0][2] if mine else None,
            half_offset=first.phy_offset))
    out.sort(key=lambda e: (e.real_topic, e.real_queue_id, e.phy_offset))
    return out
