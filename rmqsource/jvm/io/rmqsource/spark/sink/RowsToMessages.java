package io.rmqsource.spark.sink;

import io.rmqsource.errors.OptionError;
import io.rmqsource.store.write.Message;
import io.rmqsource.store.write.TrailingProperties;
import java.util.LinkedHashMap;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * sink/rows.py table_from_batch on the JVM: one row becomes one Message (queue choice, TAGS/KEYS from their
 * columns, the stamps {@code __RMQSOURCE_BATCH} / {@code __RMQSOURCE_SEQ}); with preserveStoreFields the
 * store fields as given and no stamps. Messages are reused: the writer copies what it keeps.
 */
final class RowsToMessages {
    static final String BATCH_PROPERTY = "__RMQSOURCE_BATCH";
    static final String SEQ_PROPERTY = "__RMQSOURCE_SEQ";
    static final String DEFAULT_BORN_HOST = "127.0.0.1:0";
    static final String DEFAULT_STORE_HOST = "127.0.0.1:10911";
    private static final byte[] EMPTY = new byte[0];

    private final SinkSchema s;
    private final QueueChooser chooser;
    /** The stamps (the row's index ends the last), or null (preserveStoreFields). */
    private final TrailingProperties stamps;
    private final boolean bodyIsString;
    private final int queueIdKind;
    private final int flagKind;
    private final int bornKind;
    private final int storeTsKind;
    private final int sysFlagKind;
    private final int reconsumeKind;
    private final int prepKind;
    private final boolean keysIsArray;
    /** preserveStoreFields: an empty string is written as given, not taken for an absent value. */
    private final boolean keepEmpty;
    // Topics seen lately (rows of one topic share one String, without decoding it again)
    private final UTF8String[] topicBytes = new UTF8String[16];
    private final String[] topics = new String[16];
    private int nextTopicSlot;
    /** The properties map of the last row when each message is staged before the next row is filled, else null. */
    private LinkedHashMap<String, String> rowProperties;
    /** The body of the last row then (a binary body column of Spark's rows is copied into it), else null. */
    private byte[] rowBody;

    RowsToMessages(SinkSchema schema, QueueChooser chooser, String tag, int partition) {
        this.s = schema;
        this.chooser = chooser;
        this.stamps = tag == null ? null : new TrailingProperties(BATCH_PROPERTY, tag, SEQ_PROPERTY, partition + ":");
        this.keepEmpty = tag == null;
        this.bodyIsString = schema.isType(schema.body, StringType.class);
        this.keysIsArray = schema.isType(schema.keys, ArrayType.class);
        this.queueIdKind = kind(schema, schema.queueId);
        this.flagKind = kind(schema, schema.flag);
        this.bornKind = kind(schema, schema.bornTimestamp);
        this.storeTsKind = kind(schema, schema.storeTimestamp);
        this.sysFlagKind = kind(schema, schema.sysFlag);
        this.reconsumeKind = kind(schema, schema.reconsumeTimes);
        this.prepKind = kind(schema, schema.preparedTransactionOffset);
    }

    // how an integral or timestamp column is read: 1 byte, 2 short, 4 int, 8 long, 9 timestamp (us)
    private static int kind(SinkSchema s, int ordinal) {
        if (ordinal < 0) return 0;
        if (s.isType(ordinal, ByteType.class)) return 1;
        if (s.isType(ordinal, ShortType.class)) return 2;
        if (s.isType(ordinal, IntegerType.class)) return 4;
        if (s.isType(ordinal, LongType.class)) return 8;
        if (s.isType(ordinal, TimestampType.class) || s.isType(ordinal, TimestampNTZType.class)) return 9;
        return 0;
    }

    private static long integral(InternalRow row, int ordinal, int kind) {
        switch (kind) {
            case 1: return row.getByte(ordinal);
            case 2: return row.getShort(ordinal);
            case 4: return row.getInt(ordinal);
            case 9: return row.getLong(ordinal) / 1000L;         // Spark keeps microseconds; Arrow truncates to ms
            default: return row.getLong(ordinal);
        }
    }

    /** Each message is staged (copied) before the next row is filled: one properties map and body array serve every row. */
    RowsToMessages reusingBuffers() {
        rowProperties = new LinkedHashMap<>(16);
        rowBody = EMPTY;
        return this;
    }

    /** A binary body: copied into the reused array when there is one and the row is Spark's UnsafeRow. */
    private byte[] binaryBody(InternalRow row) {
        if (rowBody == null || !(row instanceof UnsafeRow)) return row.getBinary(s.body);
        UnsafeRow u = (UnsafeRow) row;
        long offsetAndSize = u.getLong(s.body);
        int offset = (int) (offsetAndSize >> 32);
        int size = (int) offsetAndSize;
        if (rowBody.length != size) rowBody = new byte[size];
        Platform.copyMemory(u.getBaseObject(), u.getBaseOffset() + offset, rowBody, Platform.BYTE_ARRAY_OFFSET, size);
        return rowBody;
    }

    private LinkedHashMap<String, String> propertiesMap(int entries) {
        if (rowProperties == null) return new LinkedHashMap<>(Math.max(4, 2 * entries));
        rowProperties.clear();
        return rowProperties;
    }

    /** The checks made as rows arrive (before the lock): a row without topic, a negative queueId. */
    void check(InternalRow row, long seq) {
        if (row.isNullAt(s.topic)) throw new OptionError("row " + seq + ": topic is null");
        if (s.queueId >= 0 && !row.isNullAt(s.queueId)) {
            long q = integral(row, s.queueId, queueIdKind);
            if (q < 0) throw new OptionError("queueId " + q + " is negative (topic " + topic(row) + ")");
        }
    }

    private String topic(InternalRow row) {
        UTF8String t = row.getUTF8String(s.topic);
        for (int i = 0; i < topicBytes.length && topicBytes[i] != null; i++) {
            if (topicBytes[i].equals(t)) return topics[i];
        }
        int slot = nextTopicSlot;
        nextTopicSlot = (slot + 1) % topicBytes.length;
        topicBytes[slot] = t.clone();
        topics[slot] = t.toString();
        return topics[slot];
    }

    private String text(InternalRow row, int ordinal) {
        if (ordinal < 0 || row.isNullAt(ordinal)) return null;
        UTF8String v = row.getUTF8String(ordinal);
        return v.numBytes() == 0 && !keepEmpty ? null : v.toString();      // "" counts as absent
    }

    private String keys(InternalRow row) {
        if (s.keys < 0 || row.isNullAt(s.keys)) return null;
        if (!keysIsArray) return text(row, s.keys);
        ArrayData a = row.getArray(s.keys);
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < a.numElements(); i++) {
            if (a.isNullAt(i) || a.getUTF8String(i).numBytes() == 0) continue;
            if (sb.length() > 0) sb.append(' ');
            sb.append(a.getUTF8String(i).toString());
        }
        return sb.length() == 0 ? null : sb.toString();
    }

    /** The queue of the row (advances the topic's round-robin when the row has no queueId and no keys). */
    int queueOf(InternalRow row) {
        return queueOf(row, topic(row), keys(row));
    }

    private int queueOf(InternalRow row, String topic, String keys) {
        boolean has = s.queueId >= 0 && !row.isNullAt(s.queueId);
        return chooser.choose(topic, has ? integral(row, s.queueId, queueIdKind) : -1, has, keys);
    }

    /** Fill {@code m} from {@code row} (index {@code seq} of the task) going to {@code queueId}. */
    Message fill(Message m, InternalRow row, long seq, int queueId) {
        return fill(m, row, seq, queueId, topic(row), keys(row));
    }

    /** {@link #fill} to the queue {@link #queueOf} chooses, the row's topic and keys read once for both. */
    Message fillChoosingQueue(Message m, InternalRow row, long seq) {
        String topic = topic(row);
        String keys = keys(row);
        return fill(m, row, seq, queueOf(row, topic, keys), topic, keys);
    }

    private Message fill(Message m, InternalRow row, long seq, int queueId, String topic, String keys) {
        m.topic = topic;
        m.queueId = queueId;
        if (row.isNullAt(s.body)) m.body = EMPTY;
        else m.body = bodyIsString ? row.getUTF8String(s.body).getBytes() : binaryBody(row);
        m.flag = s.flag >= 0 && !row.isNullAt(s.flag) ? (int) integral(row, s.flag, flagKind) : 0;
        m.tags = text(row, s.tags);
        m.keys = keys;
        if (s.propertiesIsString) {             // verbatim (no tags / keys columns then)
            m.properties = null;
            m.propertiesString = row.isNullAt(s.properties) ? null : row.getUTF8String(s.properties).toString();
            m.trailing = null;
        } else {
            m.properties = properties(row);
            m.propertiesString = null;
            m.trailing = stamps;                // after the row's own properties
            m.trailingNumber = seq;
        }
        m.bornTimestampMs = s.bornTimestamp >= 0 && !row.isNullAt(s.bornTimestamp)
                ? integral(row, s.bornTimestamp, bornKind) : 0;
        String born = text(row, s.bornHost);
        m.bornHost = born == null || born.isEmpty() ? DEFAULT_BORN_HOST : born;
        String store = text(row, s.storeHost);
        m.storeHost = store == null || store.isEmpty() ? DEFAULT_STORE_HOST : store;
        m.storeTimestampMs = s.storeTimestamp >= 0 && !row.isNullAt(s.storeTimestamp)
                ? Long.valueOf(integral(row, s.storeTimestamp, storeTsKind)) : null;
        m.sysFlag = s.sysFlag >= 0 && !row.isNullAt(s.sysFlag) ? (int) integral(row, s.sysFlag, sysFlagKind) : 0;
        m.reconsumeTimes = s.reconsumeTimes >= 0 && !row.isNullAt(s.reconsumeTimes)
                ? (int) integral(row, s.reconsumeTimes, reconsumeKind) : 0;
        m.preparedTransactionOffset = s.preparedTransactionOffset >= 0 && !row.isNullAt(s.preparedTransactionOffset)
                ? integral(row, s.preparedTransactionOffset, prepKind) : 0;
        return m;
    }

    /** The user properties in their order (TAGS / KEYS dropped when their columns exist), or null. */
    private LinkedHashMap<String, String> properties(InternalRow row) {
        LinkedHashMap<String, String> out = null;
        if (s.properties >= 0 && !row.isNullAt(s.properties)) {
            MapData map = row.getMap(s.properties);
            int n = map.numElements();
            if (n > 0) {
                ArrayData k = map.keyArray();
                ArrayData v = map.valueArray();
                out = propertiesMap(n);
                for (int i = 0; i < n; i++) {
                    String key = k.getUTF8String(i).toString();
                    if ((s.tags >= 0 && key.equals("TAGS")) || (s.keys >= 0 && key.equals("KEYS"))) continue;
                    out.put(key, v.isNullAt(i) ? "" : v.getUTF8String(i).toString());
                }
            }
        }
        return out == null || out.isEmpty() ? null : out;
    }
}
