package io.rmqsource.spark.sink;

import io.rmqsource.spark.Contract;
import io.rmqsource.errors.OptionError;
import io.rmqsource.errors.Repr;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;

/**
 * sink/schema.py check_schema: which columns of the DataFrame the sink writes, at which ordinal, of which
 * type; the same OptionError texts for missing, unknown and mistyped columns.
 */
final class SinkSchema implements Serializable {
    private static final long serialVersionUID = 1L;
    // Columns of the read schema that a sink ignores (the store assigns them); with
    // preserveStoreFields the store-field columns among them are written.
    private static final List<String> READ_ONLY = List.of("queueOffset", "commitLogOffset", "msgId", "uniqKey",
            "storeTimestamp", "storeHost", "sysFlag", "reconsumeTimes", "bodyCRC", "preparedTransactionOffset",
            "transactionType", "storeSize", "tagsCode", "broker", "storePath");

    /** Ordinal of each column in the row, or -1 when absent. */
    final int topic;
    final int body;
    final int queueId;
    final int tags;
    final int keys;
    final int properties;
    final int flag;
    final int bornTimestamp;
    final int bornHost;
    final int storeTimestamp;
    final int storeHost;
    final int sysFlag;
    final int reconsumeTimes;
    final int preparedTransactionOffset;
    /** The properties column is a string: RocketMQ's wire form, written verbatim (preserveStoreFields only). */
    final boolean propertiesIsString;
    final StructType schema;

    private SinkSchema(StructType schema, boolean storeFields) {
        this.schema = schema;
        topic = index(schema, "topic");
        body = index(schema, "body");
        queueId = index(schema, "queueId");
        tags = index(schema, "tags");
        keys = index(schema, "keys");
        properties = index(schema, "properties");
        flag = index(schema, "flag");
        bornTimestamp = index(schema, "bornTimestamp");
        bornHost = index(schema, "bornHost");
        storeTimestamp = storeFields ? index(schema, "storeTimestamp") : -1;
        storeHost = storeFields ? index(schema, "storeHost") : -1;
        sysFlag = storeFields ? index(schema, "sysFlag") : -1;
        reconsumeTimes = storeFields ? index(schema, "reconsumeTimes") : -1;
        preparedTransactionOffset = storeFields ? index(schema, "preparedTransactionOffset") : -1;
        propertiesIsString = isType(properties, StringType.class);
    }

    private static int index(StructType schema, String name) {
        String[] names = schema.fieldNames();
        for (int i = 0; i < names.length; i++) if (names[i].equals(name)) return i;
        return -1;
    }

    boolean isType(int ordinal, Class<?> type) {
        return ordinal >= 0 && type.isInstance(schema.fields()[ordinal].dataType());
    }

    /** check_schema: OptionError for a missing, unknown or mistyped column. */
    static SinkSchema check(StructType schema, boolean preserveStoreFields) {
        List<String> names = new ArrayList<>(List.of(schema.fieldNames()));
        for (String required : new String[] {"topic", "body"}) {
            if (!names.contains(required)) {
                throw new OptionError("the rmq sink needs a column " + Repr.of(required) + "; columns are: "
                        + String.join(", ", names));
            }
        }
        for (StructField f : schema.fields()) {
            String name = f.name();
            DataType dt = f.dataType();
            boolean storeField = Contract.SINK_STORE_FIELD_COLUMNS.contains(name);
            if (READ_ONLY.contains(name) && !(preserveStoreFields && storeField)) continue;
            if (name.equals("properties") && dt instanceof StringType) {
                // Verbatim wire form (duplicate or empty keys, junk entries): a replay of stored records only.
                if (!preserveStoreFields) {
                    throw new OptionError(Contract.SINK_ERRORS.get("stringPropertiesWithoutPreserveStoreFields"));
                }
                if (names.contains("tags") || names.contains("keys")) {
                    throw new OptionError(Contract.SINK_ERRORS.get("stringPropertiesWithTagsOrKeys"));
                }
                continue;
            }
            if (!Contract.SINK_COLUMNS.contains(name) && !storeField) {
                throw new OptionError("the rmq sink does not know column " + Repr.of(name) + "; writable columns are: "
                        + String.join(", ", Contract.SINK_COLUMNS));
            }
            if (!allowed(name, dt)) {
                throw new OptionError("column " + Repr.of(name) + " has type " + dt.simpleString()
                        + ", which the rmq sink cannot write");
            }
            if (name.equals("keys") && dt instanceof ArrayType && !(((ArrayType) dt).elementType() instanceof StringType)) {
                throw new OptionError("column 'keys' must be a string or an array of strings");
            }
            if (name.equals("properties") && !(((MapType) dt).keyType() instanceof StringType
                    && ((MapType) dt).valueType() instanceof StringType)) {
                throw new OptionError("column 'properties' must be a map<string,string>");
            }
        }
        return new SinkSchema(schema, preserveStoreFields);
    }

    private static boolean integral(DataType dt) {
        return dt instanceof IntegerType || dt instanceof LongType || dt instanceof ShortType || dt instanceof ByteType;
    }

    private static boolean allowed(String name, DataType dt) {
        switch (name) {
            case "topic":
            case "tags":
            case "bornHost":
            case "storeHost":
                return dt instanceof StringType;
            case "body":
                return dt instanceof BinaryType || dt instanceof StringType;
            case "keys":
                return dt instanceof StringType || dt instanceof ArrayType;
            case "properties":
                return dt instanceof MapType;
            case "bornTimestamp":
            case "storeTimestamp":
                return dt instanceof TimestampType || dt instanceof TimestampNTZType || integral(dt);
            default:                    // queueId, flag, sysFlag, reconsumeTimes, preparedTransactionOffset
                return integral(dt);
        }
    }
}
