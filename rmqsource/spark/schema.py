"""The output schema, defined once as an Arrow schema; the Spark DDL is derived from it.

One row per message.  Every field is nullable (Spark's DDL default), so the
Arrow schema below equals Spark's ``to_arrow_schema(<parsed DDL>)`` in UTC
field for field, which is what PySpark checks record batches against.
A user-specified schema (``spark.read.format("rmq").schema("topic string,
body binary")``) selects a subset of these columns: only those are decoded.
"""

from __future__ import annotations

import pyarrow as pa

from ..errors import OptionError

MAP_TYPE = pa.map_(pa.field("key", pa.string(), nullable=False), pa.field("value", pa.string(), nullable=True))
KEYS_TYPE = pa.list_(pa.field("element", pa.string(), nullable=True))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()),
    ("queueId", pa.int32()),
    ("queueOffset", pa.int64()),
    ("commitLogOffset", pa.int64()),
    ("msgId", pa.string()),                    # offset msgId (storeHost + port + commitLogOffset)
    ("uniqKey", pa.string()),                  # UNIQ_KEY property (client msgId)
    ("tags", pa.string()),
    ("keys", KEYS_TYPE),                       # KEYS split on spaces, empty items dropped
    ("body", pa.binary()),
    ("properties", MAP_TYPE),
    ("bornTimestamp", TIMESTAMP_TYPE),
    ("storeTimestamp", TIMESTAMP_TYPE),
    ("bornHost", pa.string()),
    ("storeHost", pa.string()),
    ("sysFlag", pa.int32()),
    ("flag", pa.int32()),
    ("reconsumeTimes", pa.int32()),
    ("bodyCRC", pa.int32()),
    ("preparedTransactionOffset", pa.int64()),
    ("transactionType", pa.string()),          # NOT_TYPE / PREPARED_TYPE / COMMIT_TYPE / ROLLBACK_TYPE
    ("storeSize", pa.int32()),
    ("tagsCode", pa.int64()),                  # ConsumeQueue tagsCode; null when the record has no unit
    ("broker", pa.string()),
    ("storePath", pa.string()),
])

COLUMNS = tuple(ARROW_SCHEMA.names)

# option view=timers (rmqsource.spark.timers): the message columns, then these three
TIMERS_ARROW_SCHEMA = pa.schema(list(ARROW_SCHEMA) + [
    pa.field("deliverTime", TIMESTAMP_TYPE),     # due time: TIMER_OUT_MS, or the schedule unit's tagsCode
    pa.field("delayLevel", pa.int32()),          # DELAY of a delay-level message; null for a timer
    pa.field("state", pa.string()),              # pending | delivered | recalled
])
TIMERS_COLUMNS = tuple(TIMERS_ARROW_SCHEMA.names)

# option view=transactions (rmqsource.spark.transactions, rows from rmqsource.store.transactions): the message
# columns (of its first commit, else of its first half record), then these
TRANSACTIONS_ARROW_SCHEMA = pa.schema(list(ARROW_SCHEMA) + [
    pa.field("transactionId", pa.string()),      # __transactionId__
    pa.field("producerGroup", pa.string()),      # PGROUP
    pa.field("state", pa.string()),              # committed | rolled_back | discarded | pending
    pa.field("checkTimes", pa.int32()),          # the broker's check rounds (TRANSACTION_CHECK_TIMES)
    pa.field("halfCopies", pa.int32()),          # half records: the first, and one per check round
    pa.field("commits", pa.int32()),             # records committed into the real queue (more than 1: duplicates)
    pa.field("resolvedTime", TIMESTAMP_TYPE),    # store time of the first commit, or of the op of a rollback
    pa.field("open", pa.bool_()),                # the newest half copy has no op record: the broker checks it again
    pa.field("halfCommitLogOffset", pa.int64()),  # the first half record
])

# option view=dlq / view=retry (rmqsource.spark.views): the message columns, then these three
GROUP_TOPIC_ARROW_SCHEMA = pa.schema(list(ARROW_SCHEMA) + [
    pa.field("group", pa.string()),              # ORIGIN_GROUP, else from the topic name
    pa.field("originTopic", pa.string()),        # RETRY_TOPIC, else from a POP retry topic's name
    pa.field("originMsgId", pa.string()),        # ORIGIN_MESSAGE_ID
])

# option view=trace (rmqsource.spark.views): one row per trace event (rmqsource.format.trace), then where
# its trace message is stored
TRACE_ARROW_SCHEMA = pa.schema([
    ("traceType", pa.string()),
    ("timestamp", TIMESTAMP_TYPE),
    ("regionId", pa.string()),
    ("group", pa.string()),
    ("topic", pa.string()),
    ("msgId", pa.string()),
    ("offsetMsgId", pa.string()),
    ("tags", pa.string()),
    ("keys", KEYS_TYPE),
    ("storeHost", pa.string()),
    ("clientHost", pa.string()),
    ("bodyLength", pa.int32()),
    ("costTime", pa.int32()),
    ("msgType", pa.string()),
    ("success", pa.bool_()),
    ("requestId", pa.string()),
    ("retryTimes", pa.int32()),
    ("contextCode", pa.int32()),
    ("transactionId", pa.string()),
    ("transactionState", pa.string()),
    ("fromTransactionCheck", pa.bool_()),
    ("traceTopic", pa.string()),
    ("traceQueueId", pa.int32()),
    ("traceQueueOffset", pa.int64()),
    ("traceCommitLogOffset", pa.int64()),
    ("traceStoreTimestamp", TIMESTAMP_TYPE),
    ("broker", pa.string()),
])

# option metadata=... (rmqsource.spark.metadata, rows from rmqsource.store.metadata): the store's structure
_STORE = [("broker", pa.string()), ("storePath", pa.string())]
METADATA_SCHEMAS = {
    "queues": pa.schema([("topic", pa.string()), ("queueId", pa.int32()), ("minOffset", pa.int64()),
                         ("maxOffset", pa.int64()), ("messages", pa.int64()), ("cqMaxPhysicOffset", pa.int64()),
                         ("internal", pa.bool_())] + _STORE),
    "topics": pa.schema([("topic", pa.string()), ("queueIds", pa.list_(pa.field("element", pa.int32()))),
                         ("queues", pa.int32()), ("messages", pa.int64()), ("minOffset", pa.int64()),
                         ("maxOffset", pa.int64()), ("internal", pa.bool_())] + _STORE),
    "groups": pa.schema([("group", pa.string()), ("topic", pa.string()), ("queueId", pa.int32()),
                         ("brokerOffset", pa.int64()), ("consumerOffset", pa.int64()), ("minOffset", pa.int64()),
                         ("diff", pa.int64()), ("requestMode", pa.string()), ("offsetSource", pa.string())] + _STORE),
    "segments": pa.schema([("file", pa.string()), ("startOffset", pa.int64()), ("fileSize", pa.int64()),
                           ("validBytes", pa.int64()), ("dledger", pa.bool_())] + _STORE),
    "indexes": pa.schema([("file", pa.string()), ("fileSize", pa.int64()), ("beginTimestamp", TIMESTAMP_TYPE),
                          ("endTimestamp", TIMESTAMP_TYPE), ("beginPhyOffset", pa.int64()), ("endPhyOffset", pa.int64()),
                          ("hashSlotCount", pa.int32()), ("entries", pa.int32())] + _STORE),
}

VIEW_SCHEMAS = {"messages": ARROW_SCHEMA, "timers": TIMERS_ARROW_SCHEMA, "transactions": TRANSACTIONS_ARROW_SCHEMA, "dlq": GROUP_TOPIC_ARROW_SCHEMA,
                "retry": GROUP_TOPIC_ARROW_SCHEMA, "trace": TRACE_ARROW_SCHEMA}


def column_array(values: list, t: pa.DataType) -> pa.Array:
    """Python values as an Arrow column of type ``t``; a timestamp column takes epoch milliseconds (the store's
    unit), held in Spark's microseconds."""
    if pa.types.is_timestamp(t):
        return pa.array(values, pa.int64()).cast(pa.timestamp("ms", tz="UTC")).cast(t)
    return pa.array(values, type=t)


def _ddl_type(t: pa.DataType) -> str:
    if t == pa.string():
        return "string"
    if t == pa.binary():
        return "binary"
    if t == pa.int32():
        return "int"
    if t == pa.int64():
        return "bigint"
    if t == pa.bool_():
        return "boolean"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_map(t):
        return f"map<{_ddl_type(t.key_type)},{_ddl_type(t.item_type)}>"
    if pa.types.is_list(t):
        return f"array<{_ddl_type(t.value_type)}>"
    raise TypeError(f"no DDL for {t}")


def ddl(schema: pa.Schema = ARROW_SCHEMA) -> str:
    return ", ".join(f"`{f.name}` {_ddl_type(f.type)}" for f in schema)


SPARK_DDL = ddl()


def requested_columns(spark_schema, view: str = "messages", metadata: "str | None" = None,
                      extra: "pa.Schema | None" = None) -> tuple[str, ...]:
    """Column names of a (possibly user-specified) Spark schema, checked against ours.

    Every requested column must exist in ARROW_SCHEMA (or among the ``extra`` columns: the decoded bodies',
    rmqsource.spark.bodies.decode.arrow_schema) with the same type; the output batches then follow the
    requested order.
    """
    from .compat import to_arrow_schema

    schema = METADATA_SCHEMAS[metadata] if metadata else VIEW_SCHEMAS[view]
    if extra is not None:
        schema = pa.schema(list(schema) + list(extra))
    names = tuple(schema.names)
    wanted = to_arrow_schema(spark_schema)
    for f in wanted:
        if f.name not in names:
            raise OptionError(f"column {f.name!r} is not provided by the rmq source; columns are: {', '.join(names)}")
        ours = schema.field(f.name)
        if ours.type != f.type:
            shown = _ddl_type(ours.type) if extra is None or f.name in COLUMNS else str(ours.type)
            raise OptionError(f"column {f.name!r} must have type {shown}, the schema given says {f.type}")
    return tuple(wanted.names)


def output_schema(columns) -> pa.Schema:
    return pa.schema([ARROW_SCHEMA.field(c) for c in columns])
