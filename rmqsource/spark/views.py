"""``option("view", "dlq" | "retry" | "trace")``: RocketMQ's own topics as tables (docs/views.md; the JVM
twin: spark/read/RmqViewScan.java).

Each view is a messages read of some topics (chosen by :func:`~rmqsource.spark.options.parse_options`:
``%DLQ%...``, ``%RETRY%...`` or the trace topic), planned and partitioned as any messages read, whose
batches are then turned into the view's rows here, in the task:

* ``dlq`` / ``retry``: the message columns asked for, then ``group``, ``originTopic``, ``originMsgId`` from
  the topic name and the properties the broker set when the consumer sent the message back;
* ``trace``: one row per event of each trace message's body (:mod:`rmqsource.format.trace`).
"""

from __future__ import annotations

from typing import Iterator, Optional

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptRecordError
from ..format.trace import TraceEvent, parse_trace_events
from ..names import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from .pushdown import Pushed, push_filters
from .schema import COLUMNS, TRACE_ARROW_SCHEMA, VIEW_SCHEMAS, column_array, ddl

MESSAGE_VIEWS = ("dlq", "retry", "trace")         # the views read here (timers: rmqsource.spark.timers)
GROUP_TOPIC_COLUMNS = ("group", "originTopic", "originMsgId")
# the message columns a trace row is made of
TRACE_MESSAGE_COLUMNS = ("topic", "queueId", "queueOffset", "commitLogOffset", "storeTimestamp", "broker",
                         "storePath", "sysFlag", "body")
# trace view column -> TraceEvent field
_EVENT_FIELDS = {"traceType": "trace_type", "timestamp": "timestamp_ms", "regionId": "region_id", "group": "group", "topic": "topic",
                 "msgId": "msg_id", "offsetMsgId": "offset_msg_id", "tags": "tags", "keys": "keys",
                 "storeHost": "store_host", "clientHost": "client_host", "bodyLength": "body_length",
                 "costTime": "cost_time", "msgType": "msg_type", "success": "success", "requestId": "request_id",
                 "retryTimes": "retry_times", "contextCode": "context_code", "transactionId": "transaction_id",
                 "transactionState": "transaction_state", "fromTransactionCheck": "from_transaction_check"}
# trace view column -> message column of the trace message
_MESSAGE_FIELDS = {"traceTopic": "topic", "traceQueueId": "queueId", "traceQueueOffset": "queueOffset",
                   "traceCommitLogOffset": "commitLogOffset", "traceStoreTimestamp": "storeTimestamp",
                   "broker": "broker"}


def view_ddl(view: str) -> str:
    return ddl(VIEW_SCHEMAS[view])


def message_columns(view: str, columns: tuple) -> tuple:
    """The columns the messages read under the view decodes for the view's ``columns``."""
    if view == "trace":
        return TRACE_MESSAGE_COLUMNS
    wanted = [c for c in columns if c in COLUMNS]
    if any(c in GROUP_TOPIC_COLUMNS for c in columns):
        wanted += [c for c in ("topic", "properties") if c not in wanted]
    return tuple(wanted) or ("topic",)


def push_view_filters(view: str, filters, *, index_lookups: bool) -> tuple[Pushed, list]:
    """dlq / retry: the message columns' filters push as in a messages read; trace: none (its ``topic`` is
    the traced message's, not the topic read)."""
    if view == "trace":
        return Pushed(), list(filters)
    ours = [f for f in filters if _column(f) not in GROUP_TOPIC_COLUMNS]
    pushed, rejected = push_filters(ours, index_lookups=index_lookups)
    return pushed, rejected + [f for f in filters if _column(f) in GROUP_TOPIC_COLUMNS]


def _column(f) -> Optional[str]:
    attr = getattr(f, "attribute", None)
    return attr[0] if attr else None


def read_view(view: str, options, columns: tuple, pushed: Optional[Pushed] = None) -> Iterator[pa.RecordBatch]:
    """The view's rows of ``columns`` over every partition of the messages read under it, in this process (the
    CLI's read; Spark reads each partition in a task through :func:`view_batches`)."""
    from .batch import read_partition
    from .planning import plan
    from .read_spec import ReadSpec
    pushed = pushed or Pushed()
    spec = ReadSpec(options, pushed, message_columns(view, columns))
    for part in plan(options, pushed):
        yield from view_batches(view, columns, read_partition(spec, part), options)


def view_batches(view: str, columns: tuple, batches: Iterator[pa.RecordBatch], options) -> Iterator[pa.RecordBatch]:
    """The view's rows of ``columns`` from the batches of the messages read."""
    schema = pa.schema([VIEW_SCHEMAS[view].field(c) for c in columns])
    for batch in batches:
        if batch.num_rows == 0:
            continue
        out = _trace_rows(batch, options) if view == "trace" else _group_topic_rows(view, batch)
        if out and len(next(iter(out.values()))):
            yield pa.RecordBatch.from_arrays([out[c] for c in columns], schema=schema)


# -- dlq and retry -------------------------------------------------------------------------------------


def group_of(view: str, topic: str, origin_group: Optional[str]) -> str:
    """ORIGIN_GROUP when set (POP retries), else the topic name after its prefix, up to a ``+``."""
    if origin_group is not None:
        return origin_group
    name = topic[len(DLQ_GROUP_TOPIC_PREFIX if view == "dlq" else RETRY_GROUP_TOPIC_PREFIX):]
    return name.split("+", 1)[0]


def origin_topic_of(view: str, topic: str, group: str, retry_topic: Optional[str]) -> Optional[str]:
    """RETRY_TOPIC when set (a consumer's send-back), else what follows ``<group>_`` or ``<group>+`` in a
    POP retry topic's name."""
    if retry_topic is not None:
        return retry_topic
    name = topic[len(DLQ_GROUP_TOPIC_PREFIX if view == "dlq" else RETRY_GROUP_TOPIC_PREFIX):]
    if len(name) > len(group) + 1 and name.startswith(group) and name[len(group)] in "_+":
        return name[len(group) + 1:]
    return None


def _property(props: pa.Array, key: str) -> pa.Array:
    return pc.map_lookup(props, pa.scalar(key, pa.string()), "first")


def _group_topic_rows(view: str, batch: pa.RecordBatch) -> dict:
    out = {c: batch.column(c) for c in batch.schema.names}
    if "properties" not in out:
        return out
    topics = batch.column("topic").to_pylist()
    origin_groups = _property(out["properties"], "ORIGIN_GROUP").to_pylist()
    retry_topics = _property(out["properties"], "RETRY_TOPIC").to_pylist()
    groups = [group_of(view, t, g) for t, g in zip(topics, origin_groups)]
    out["group"] = pa.array(groups, pa.string())
    out["originTopic"] = pa.array([origin_topic_of(view, t, g, r) for t, g, r in zip(topics, groups, retry_topics)],
                                  pa.string())
    out["originMsgId"] = _property(out["properties"], "ORIGIN_MESSAGE_ID").cast(pa.string())
    return out


# -- trace ---------------------------------------------------------------------------------------------


def _trace_rows(batch: pa.RecordBatch, options) -> dict:
    events: list[TraceEvent] = []
    source: list[int] = []              # the row of the trace message each event came from
    for i, body in enumerate(batch.column("body").to_pylist()):
        text = (body or b"").decode("utf-8", errors="replace")          # new String(body, UTF_8)
        try:
            got = parse_trace_events(text)
        except CorruptRecordError as exc:
            offset = batch.column("commitLogOffset")[i].as_py()
            raise CorruptRecordError(exc.reason, offset=offset, file=_commitlog_file(
                options, batch.column("storePath")[i].as_py(), offset)) from None
        events += got
        source += [i] * len(got)
    out = {column: column_array([getattr(e, name) for e in events], TRACE_ARROW_SCHEMA.field(column).type)
           for column, name in _EVENT_FIELDS.items()}
    take = pa.array(source, pa.int64())
    for column, name in _MESSAGE_FIELDS.items():
        out[column] = batch.column(name).take(take)
    return out


def _commitlog_file(options, store_path: str, offset: int) -> str:
    """The CommitLog file holding ``offset`` (named in an error only)."""
    from ..store.reader import MessageStoreReader
    reader = MessageStoreReader(store_path, options.store_config)
    try:
        return reader.commitlog.segment_path_for(offset)
    finally:
        reader.close()
