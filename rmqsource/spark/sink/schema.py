"""Which columns the sink writes and their types (the JVM twin: SinkSchema.java)."""

from __future__ import annotations

from ...errors import OptionError

# Columns of the read schema that a sink ignores (the store assigns them).
READ_ONLY_COLUMNS = frozenset({
    "queueOffset", "commitLogOffset", "msgId", "uniqKey", "storeTimestamp", "storeHost", "sysFlag",
    "reconsumeTimes", "bodyCRC", "preparedTransactionOffset", "transactionType", "storeSize", "tagsCode",
    "broker", "storePath",
})
WRITABLE_COLUMNS = ("topic", "body", "queueId", "tags", "keys", "properties", "flag", "bornTimestamp", "bornHost")
# Written only with preserveStoreFields.
STORE_FIELD_COLUMNS = ("storeTimestamp", "storeHost", "sysFlag", "reconsumeTimes", "preparedTransactionOffset")
# Refusals of a string properties column (RocketMQ's wire form); the JVM sink reads the same texts from
# contract.json (tests/test_contract.py checks they agree).
SINK_ERRORS = {
    "stringPropertiesWithoutPreserveStoreFields":
        "column 'properties' is a string (RocketMQ's wire form name\\x01value\\x02...), which the rmq sink "
        "writes only with option preserveStoreFields=true; otherwise give it as a map<string,string>",
    "stringPropertiesWithTagsOrKeys":
        "column 'properties' is a string, which holds TAGS and KEYS itself (RocketMQ's wire form): "
        "drop the columns 'tags' and 'keys'",
}


def check_schema(schema, store_fields: bool = False) -> tuple[str, ...]:
    """The writable columns present in ``schema``; OptionError for missing / unknown ones.

    ``store_fields`` (preserveStoreFields): the store-field columns are written too, so typed."""
    from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, MapType, ShortType, StringType,
                                   TimestampNTZType, TimestampType, ByteType)
    fields = {f.name: f.dataType for f in schema.fields}
    for required in ("topic", "body"):
        if required not in fields:
            raise OptionError(f"the rmq sink needs a column {required!r}; columns are: {', '.join(fields)}")
    ints = (IntegerType, LongType, ShortType, ByteType)
    allowed = {
        "topic": (StringType,), "body": (BinaryType, StringType), "queueId": ints, "tags": (StringType,),
        "keys": (StringType, ArrayType), "properties": (MapType,), "flag": ints,
        "bornTimestamp": (TimestampType, TimestampNTZType) + ints, "bornHost": (StringType,),
    }
    if store_fields:
        allowed.update({"storeTimestamp": (TimestampType, TimestampNTZType) + ints, "storeHost": (StringType,),
                        "sysFlag": ints, "reconsumeTimes": ints, "preparedTransactionOffset": ints})
    for name, dt in fields.items():
        if name in READ_ONLY_COLUMNS and name not in allowed:
            continue
        if name == "properties" and isinstance(dt, StringType):
            # Verbatim wire form (duplicate or empty keys, junk entries): a replay of stored records only.
            if not store_fields:
                raise OptionError(SINK_ERRORS["stringPropertiesWithoutPreserveStoreFields"])
            if "tags" in fields or "keys" in fields:
                raise OptionError(SINK_ERRORS["stringPropertiesWithTagsOrKeys"])
            continue
        if name not in allowed:
            raise OptionError(f"the rmq sink does not know column {name!r}; writable columns are: "
                              f"{', '.join(WRITABLE_COLUMNS)}")
        if not isinstance(dt, allowed[name]):
            raise OptionError(f"column {name!r} has type {dt.simpleString()}, which the rmq sink cannot write")
        if name == "keys" and isinstance(dt, ArrayType) and not isinstance(dt.elementType, StringType):
            raise OptionError("column 'keys' must be a string or an array of strings")
        if name == "properties" and not (isinstance(dt.keyType, StringType) and isinstance(dt.valueType, StringType)):
            raise OptionError("column 'properties' must be a map<string,string>")
    return tuple(c for c in WRITABLE_COLUMNS + (STORE_FIELD_COLUMNS if store_fields else ()) if c in fields)
