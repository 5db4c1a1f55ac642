package io.rmqsource.spark;

import io.rmqsource.spark.errors.DecompressionError;
import io.rmqsource.spark.format.Compression;
import io.rmqsource.spark.format.MsgId;
import io.rmqsource.spark.format.Properties;
import io.rmqsource.spark.format.Record;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * The requested output columns of one task as reusable Spark column vectors, filled straight
 * from the mapped CommitLog: strings are copied from the buffer into the vectors (no byte[] per
 * value), topics are dictionary ids, bodies stay in the map until Spark asks for them
 * ({@link BodyVector}).  Only the requested columns are decoded; the properties section is parsed
 * only when properties, keys, uniqKey or tags are requested (or filtered on).
 */
final class RecordColumns {
    /** A batch is handed to Spark once it holds this many bytes of variable-length data. */
    static final long MAX_BATCH_BYTES = 32L * 1024 * 1024;

    static final int TOPIC = 0, QUEUE_ID = 1, QUEUE_OFFSET = 2, COMMIT_LOG_OFFSET = 3, MSG_ID = 4, UNIQ_KEY = 5,
            TAGS = 6, KEYS = 7, BODY = 8, PROPERTIES = 9, BORN_TIMESTAMP = 10, STORE_TIMESTAMP = 11, BORN_HOST = 12,
            STORE_HOST = 13, SYS_FLAG = 14, FLAG = 15, RECONSUME_TIMES = 16, BODY_CRC = 17,
            PREPARED_TRANSACTION_OFFSET = 18, TRANSACTION_TYPE = 19, STORE_SIZE = 20, TAGS_CODE = 21, BROKER = 22,
            STORE_PATH = 23;
    private static final byte[][] TX_NAMES = new byte[4][];

    static {
        for (int i = 0; i < 4; i++) TX_NAMES[i] = Record.TRANSACTION_TYPE_NAMES[i].getBytes(StandardCharsets.US_ASCII);
    }

    private final int[] ids;
    private final OnHeapColumnVector[] vectors;
    final ColumnarBatch batch;
    final boolean needsProperties;
    private final int capacity;
    private final boolean decompress;
    private final long maxInflated;
    private final long batchBytesLimit;
    private final long maxInflatedTask;
    private long inflatedTotal;
    int rows;
    private long bytes;
    private final byte[] msgId = new byte[56];
    private final HostCache hosts = new HostCache();
    private final BytesDictionary topics = new BytesDictionary();
    private final BodyVector body;                 // the body column (null when not asked for)
    private byte[] broker = new byte[0];
    private byte[] storePath = new byte[0];

    RecordColumns(StructType schema, RmqOptions options) {
        this.capacity = options.batchSize;
        this.decompress = options.decompress;
        this.maxInflated = options.maxInflatedBodyBytes;
        this.maxInflatedTask = options.maxInflatedTaskBytes;
        // decompress=true: a batch is also cut at maxInflatedBatchBytes of values
        this.batchBytesLimit = decompress ? Math.min(MAX_BATCH_BYTES, options.maxInflatedBatchBytes) : MAX_BATCH_BYTES;
        ids = new int[schema.fields().length];
        boolean props = false;
        for (int i = 0; i < ids.length; i++) {
            ids[i] = Contract.columnIndex(schema.fields()[i].name());
            props |= ids[i] == UNIQ_KEY || ids[i] == TAGS || ids[i] == KEYS || ids[i] == PROPERTIES;
        }
        needsProperties = props;
        vectors = OnHeapColumnVector.allocateColumns(capacity, schema);
        for (int i = 0; i < ids.length; i++) {
            if (ids[i] == TOPIC) {          // a task sees few topics: ids into them, no bytes per row
                vectors[i].reserveDictionaryIds(capacity);
                vectors[i].setDictionary(topics);
            }
        }
        ColumnVector[] out = new ColumnVector[ids.length];
        BodyVector bodyVector = null;
        for (int i = 0; i < ids.length; i++) {
            out[i] = vectors[i];
            if (ids[i] == BODY) out[i] = bodyVector = new BodyVector(capacity);
        }
        body = bodyVector;
        batch = new ColumnarBatch(out);
    }

    boolean has(int id) {
        for (int i : ids) if (i == id) return true;
        return false;
    }

    void setStore(String brokerName, String root) {
        broker = brokerName.getBytes(StandardCharsets.UTF_8);
        storePath = root.getBytes(StandardCharsets.UTF_8);
    }

    void reset() {
        for (OnHeapColumnVector v : vectors) v.reset();
        if (body != null) body.reset(rows);
        rows = 0;
        bytes = 0;
    }

    boolean full() {
        return rows >= capacity || bytes >= batchBytesLimit;
    }

    ColumnarBatch finish() {
        batch.setNumRows(rows);
        return batch;
    }

    void close() {
        batch.close();
    }

    /**
     * One output row for the record {@code r} of buffer {@code b}.  {@code topic} is the record's
     * topic (null unless the topic column is asked for); {@code props} is parsed when {@link #needsProperties}; {@code file} and
     * {@code fileOffset} name the record in errors (decompression).
     */
    void append(ByteBuffer b, Record r, RecordBatchReader.Topic topic, Properties props, long tagsCode, boolean tagsValid,
                String file, long fileOffset) {
        int row = rows;
        for (int c = 0; c < ids.length; c++) {
            WritableColumnVector v = vectors[c];
            switch (ids[c]) {
                case TOPIC:
                    if (topic.dictionaryId < 0) topic.dictionaryId = topics.idOf(topic.utf8);
                    v.getDictionaryIds().putInt(row, topic.dictionaryId);
                    break;
                case QUEUE_ID:
                    v.putInt(row, r.queueId);
                    break;
                case QUEUE_OFFSET:
                    v.putLong(row, r.queueOffset);
                    break;
                case COMMIT_LOG_OFFSET:
                    v.putLong(row, r.phyOffset);
                    break;
                case MSG_ID: {
                    int n = MsgId.write(b, r.storeHostPos, r.storeHostV6(), r.phyOffset, msgId);
                    v.putByteArray(row, msgId, 0, n);
                    break;
                }
                case UNIQ_KEY:
                    putValue(v, row, b, props, props.find(Properties.UNIQ_KEY));
                    break;
                case TAGS:
                    putValue(v, row, b, props, props.find(Properties.TAGS));
                    break;
                case KEYS:
                    putKeys(v, row, b, props);
                    break;
                case BODY:
                    if (decompress && Compression.isCompressed(r.sysFlag)) {
                        byte[] plain = Compression.inflate(b, r.bodyPos, r.bodyLen, r.sysFlag, maxInflated, file, fileOffset);
                        inflatedTotal += plain.length;
                        if (inflatedTotal > maxInflatedTask) {
                            throw new DecompressionError("this task has inflated " + inflatedTotal + " bytes of bodies, "
                                    + "more than maxInflatedTaskBytes=" + maxInflatedTask + " (raise the option, or read "
                                    + "without decompress)", file, fileOffset);
                        }
                        body.putInflated(row, plain);
                        bytes += plain.length;
                    } else {
                        body.putMapped(row, b, r.bodyPos, r.bodyLen);
                        bytes += r.bodyLen;
                    }
                    break;
                case PROPERTIES:
                    putMap(v, row, b, props);
                    bytes += r.propsLen;
                    break;
                case BORN_TIMESTAMP:
                    v.putLong(row, r.bornTimestamp * 1000);
                    break;
                case STORE_TIMESTAMP:
                    v.putLong(row, r.storeTimestamp * 1000);
                    break;
                case BORN_HOST: {
                    byte[] h = hosts.get(b, r.bornHostPos, r.bornHostV6());
                    v.putByteArray(row, h, 0, h.length);
                    break;
                }
                case STORE_HOST: {
                    byte[] h = hosts.get(b, r.storeHostPos, r.storeHostV6());
                    v.putByteArray(row, h, 0, h.length);
                    break;
                }
                case SYS_FLAG:
                    v.putInt(row, r.sysFlag);
                    break;
                case FLAG:
                    v.putInt(row, r.flag);
                    break;
                case RECONSUME_TIMES:
                    v.putInt(row, r.reconsumeTimes);
                    break;
                case BODY_CRC:
                    v.putInt(row, r.bodyCrc);
                    break;
                case PREPARED_TRANSACTION_OFFSET:
                    v.putLong(row, r.preparedTransactionOffset);
                    break;
                case TRANSACTION_TYPE: {
                    byte[] t = TX_NAMES[(r.sysFlag & Record.TRANSACTION_MASK) >> 2];
                    v.putByteArray(row, t, 0, t.length);
                    break;
                }
                case STORE_SIZE:
                    v.putInt(row, r.totalSize);
                    break;
                case TAGS_CODE:
                    if (tagsValid) v.putLong(row, tagsCode);
                    else v.putNull(row);
                    break;
                case BROKER:
                    v.putByteArray(row, broker, 0, broker.length);
                    break;
                case STORE_PATH:
                    v.putByteArray(row, storePath, 0, storePath.length);
                    break;
                default:
                    throw new IllegalStateException("unknown column " + ids[c]);
            }
        }
        rows++;
    }

    /** Copies a UTF-8 span; invalid UTF-8 is replaced with U+FFFD as Java and the Python path do. */
    static void putString(WritableColumnVector v, int row, ByteBuffer b, int pos, int len) {
        for (int i = 0; i < len; i++) {
            if (b.get(pos + i) < 0) {
                byte[] raw = new byte[len];
                b.get(pos, raw, 0, len);
                byte[] clean = new String(raw, StandardCharsets.UTF_8).getBytes(StandardCharsets.UTF_8);
                v.putByteArray(row, clean, 0, clean.length);
                return;
            }
        }
        v.putByteArray(row, b, pos, len);
    }

    private void putValue(WritableColumnVector v, int row, ByteBuffer b, Properties p, int e) {
        if (e < 0) {
            v.putNull(row);
            return;
        }
        putString(v, row, b, p.valueStart(e), p.valueLength(e));
        bytes += p.valueLength(e);
    }

    /** KEYS split on single spaces, empty items dropped; null when there is no KEYS property. */
    private void putKeys(WritableColumnVector v, int row, ByteBuffer b, Properties p) {
        int e = p.find(Properties.KEYS);
        if (e < 0) {
            v.putNull(row);
            return;
        }
        WritableColumnVector items = v.getChild(0);
        int start = items.getElementsAppended();
        int s = p.valueStart(e);
        int end = s + p.valueLength(e);
        int count = 0;
        int i = s;
        while (i <= end) {
            int j = i;
            while (j < end && b.get(j) != ' ') j++;
            if (j > i) {
                int idx = items.appendNotNull();
                putString(items, idx, b, i, j - i);
                count++;
            }
            i = j + 1;
        }
        v.putArray(row, start, count);
        bytes += end - s;
    }

    /** All properties as a map; a key repeated later wins. */
    private void putMap(WritableColumnVector v, int row, ByteBuffer b, Properties p) {
        WritableColumnVector keys = v.getChild(0);
        WritableColumnVector values = v.getChild(1);
        int start = keys.getElementsAppended();
        int count = 0;
        for (int e = 0; e < p.count; e++) {
            if (p.overridden(e)) continue;
            int k = keys.appendNotNull();
            putString(keys, k, b, p.keyStart[e], p.keyLength(e));
            int x = values.appendNotNull();
            putString(values, x, b, p.valueStart(e), p.valueLength(e));
            count++;
        }
        v.putArray(row, start, count);
    }

    /** Host strings by their 8 (IPv4) or 20 (IPv6) bytes; a small direct-mapped cache. */
    private static final class HostCache {
        private final long[] keys = new long[1024];
        private final byte[][] values = new byte[1024][];

        byte[] get(ByteBuffer b, int pos, boolean v6) {
            if (v6) return MsgId.host(b, pos, true).getBytes(StandardCharsets.US_ASCII);
            long key = b.getLong(pos);
            int slot = (int) ((key * 0x9E3779B97F4A7C15L) >>> 54);
            byte[] v = values[slot];
            if (v == null || keys[slot] != key) {
                v = MsgId.host(b, pos, false).getBytes(StandardCharsets.US_ASCII);
                keys[slot] = key;
                values[slot] = v;
            }
            return v;
        }
    }
}
