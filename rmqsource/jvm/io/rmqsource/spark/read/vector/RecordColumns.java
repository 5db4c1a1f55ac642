package io.rmqsource.spark.read.vector;

import io.rmqsource.errors.CorruptRecordError;
import io.rmqsource.errors.DecompressionError;
import io.rmqsource.format.Compression;
import io.rmqsource.format.MsgId;
import io.rmqsource.format.Properties;
import io.rmqsource.format.Record;
import io.rmqsource.spark.Contract;
import io.rmqsource.spark.RmqOptions;
import io.rmqsource.spark.compat.ByteSpans;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * The requested output columns of one task as reusable Spark column vectors, filled straight
 * from the mapped CommitLog (strings are copied from the buffer into the vectors, no byte[] per
 * value; stored bodies stay in the buffer, {@link MappedBinaryVector}).  Only the requested columns are decoded; the properties section is parsed
 * only when properties, keys, uniqKey or tags are requested (or filtered on).
 */
public final class RecordColumns {
    /** A batch is handed to Spark once it holds this many bytes of variable-length data. */
    static final long MAX_BATCH_BYTES = 32L * 1024 * 1024;

    public static final int TOPIC = 0, QUEUE_ID = 1, QUEUE_OFFSET = 2, COMMIT_LOG_OFFSET = 3, MSG_ID = 4, UNIQ_KEY = 5,
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
    /** Deferred mode: the column indexes decoded at append (the others on first access), else null. */
    private final int[] eager;
    private final DeferredColumnVector[] deferred;
    private final Rows kept;
    /** The body column read in place (stored bodies), or -1 / null. */
    private final int bodyColumn;
    private final MappedBinaryVector bodyView;
    /** Batch scans: the columns of few distinct values, as shared values (null elsewhere). */
    private final InternedStringVector[] interned;
    public final boolean needsProperties;
    private final int capacity;
    private final boolean decompress;
    private final long maxInflated;
    private final long batchBytesLimit;
    private final long maxInflatedTask;
    private long inflatedTotal;
    public int rows;
    private long bytes;
    private final byte[] msgId = new byte[56];
    private final HostCache hosts = new HostCache();
    private byte[] broker = new byte[0];
    private byte[] storePath = new byte[0];

    /**
     * {@code defer}: the columns are decoded on first access instead of at append (the batch keeps
     * where its records are), for a scan that cannot prune columns (a stream).  Only the
     * ConsumeQueue's tagsCode and inflated bodies (their size cuts batches) are decoded at once.
     * {@code capacity}: rows per batch.
     */
    public RecordColumns(StructType schema, RmqOptions options, boolean defer, int capacity) {
        this.capacity = capacity;
        this.decompress = options.decompress;
        this.maxInflated = options.maxInflatedBodyBytes;
        this.maxInflatedTask = options.maxInflatedTaskBytes;
        // decompress=true: a batch is also cut at maxInflatedBatchBytes of values
        this.batchBytesLimit = decompress ? Math.min(MAX_BATCH_BYTES, options.maxInflatedBatchBytes) : MAX_BATCH_BYTES;
        ids = new int[schema.fields().length];
        boolean props = false;
        for (int i = 0; i < ids.length; i++) {
            ids[i] = Contract.columnIndex(schema.fields()[i].name());
            props |= needsProps(ids[i]);
        }
        int body = -1;
        for (int c = 0; c < ids.length; c++) if (ids[c] == BODY && !decompress) body = c;
        bodyColumn = body;
        bodyView = body >= 0 ? new MappedBinaryVector(capacity) : null;
        vectors = new OnHeapColumnVector[ids.length];      // none for a body read in place or an interned column
        interned = new InternedStringVector[ids.length];
        for (int c = 0; c < ids.length; c++) {
            if (!defer && isInterned(ids[c])) {
                interned[c] = new InternedStringVector(capacity);
            } else if (c != body && !(defer && isDeferrable(ids[c]))) {
                // a deferred column's values are allocated at its first access: a stream's query reads few of them
                vectors[c] = new OnHeapColumnVector(capacity, schema.fields()[c].dataType());
            }
        }
        if (!defer) {
            needsProperties = props;
            eager = null;
            deferred = null;
            kept = null;
            ColumnVector[] out = java.util.Arrays.copyOf(vectors, vectors.length, ColumnVector[].class);
            if (body >= 0) out[body] = bodyView;
            for (int c = 0; c < ids.length; c++) if (interned[c] != null) out[c] = interned[c];
            batch = new ColumnarBatch(out);
            return;
        }
        ColumnVector[] out = new ColumnVector[ids.length];
        deferred = new DeferredColumnVector[ids.length];
        int[] now = new int[ids.length];
        int n = 0;
        boolean eagerProps = false;
        for (int c = 0; c < ids.length; c++) {
            if (c == body) {
                out[c] = bodyView;                 // set at append: a view costs less than remembering to decode
            } else if (isDeferrable(ids[c])) {
                DataType type = schema.fields()[c].dataType();
                deferred[c] = new DeferredColumnVector(type, () -> new OnHeapColumnVector(capacity, type),
                        this::fillDeferred, c);
                out[c] = deferred[c];
            } else {
                now[n++] = c;
                out[c] = vectors[c];
                eagerProps |= needsProps(ids[c]);
            }
        }
        needsProperties = eagerProps;
        eager = java.util.Arrays.copyOf(now, n);
        kept = new Rows(capacity);
        batch = new ColumnarBatch(out);
    }

    /** The string columns with few distinct values in a batch (a group-by on tags reads one value per tag). */
    private static boolean isInterned(int id) {
        return id == TOPIC || id == TAGS || id == TRANSACTION_TYPE || id == BROKER || id == STORE_PATH;
    }

    private static boolean needsProps(int id) {
        return id == UNIQ_KEY || id == TAGS || id == KEYS || id == PROPERTIES;
    }

    /** Everything but the ConsumeQueue's tagsCode (not in the record) and inflated bodies. */
    private boolean isDeferrable(int id) {
        return id != TAGS_CODE && !(id == BODY && decompress);
    }

    /** Position in the record of the columns at a fixed place (no decoding needed), else -1. */
    private static int fixedPosition(int id) {
        switch (id) {
            case STORE_SIZE: return 0;
            case BODY_CRC: return 8;
            case QUEUE_ID: return 12;
            case FLAG: return 16;
            case QUEUE_OFFSET: return 20;
            case COMMIT_LOG_OFFSET: return 28;
            case SYS_FLAG: return 36;
            case BORN_TIMESTAMP: return 40;
            default: return -1;
        }
    }

    public boolean has(int id) {
        for (int i : ids) if (i == id) return true;
        return false;
    }

    public void setStore(String brokerName, String root) {
        broker = brokerName.getBytes(StandardCharsets.UTF_8);
        storePath = root.getBytes(StandardCharsets.UTF_8);
    }

    public void reset() {
        if (deferred != null) {
            for (int c = 0; c < vectors.length; c++) {
                if (deferred[c] != null) deferred[c].reset();
                else if (vectors[c] != null) vectors[c].reset();
            }
        } else {
            for (OnHeapColumnVector v : vectors) if (v != null) v.reset();
            for (InternedStringVector v : interned) if (v != null) v.reset();
        }
        rows = 0;
        bytes = 0;
    }

    public boolean full() {
        return rows >= capacity || bytes >= batchBytesLimit;
    }

    public ColumnarBatch finish() {
        batch.setNumRows(rows);
        return batch;
    }

    public void close() {
        batch.close();
    }

    /**
     * One output row for the record {@code r} of buffer {@code b}.  {@code topicBytes} is the
     * topic as valid UTF-8; {@code props} is parsed when {@link #needsProperties}; {@code file} and
     * {@code fileOffset} name the record in errors (decompression).
     */
    public void append(ByteBuffer b, Record r, byte[] topicBytes, Properties props, long tagsCode, boolean tagsValid,
                String file, long fileOffset) {
        int row = rows;
        if (bodyView != null) {
            bodyView.set(row, b, r.bodyPos, r.bodyLen);
            if (eager == null) bytes += r.bodyLen;
        }
        if (eager == null) {
            for (int c = 0; c < ids.length; c++) {
                if (interned[c] != null) putInterned(interned[c], ids[c], row, b, r, topicBytes, props);
                else if (c != bodyColumn) put(c, vectors[c], row, b, r, topicBytes, props, tagsCode, tagsValid, file, fileOffset);
            }
        } else {
            for (int c : eager) put(c, vectors[c], row, b, r, topicBytes, props, tagsCode, tagsValid, file, fileOffset);
            kept.keep(row, b, r.pos, r.totalSize, topicBytes, file);
            bytes += r.bodyLen + r.propsLen;        // what the deferred bodies and properties will take
        }
        rows++;
    }

    /** Column {@code id} of {@code row} in a column of shared values (see {@link #isInterned}). */
    private void putInterned(InternedStringVector v, int id, int row, ByteBuffer b, Record r, byte[] topicBytes,
                             Properties props) {
        switch (id) {
            case TOPIC:
                v.putBytes(row, topicBytes);
                break;
            case TAGS: {
                int e = props.find(Properties.TAGS);
                if (e < 0) v.putNull(row);
                else v.putSpan(row, b, props.valueStart(e), props.valueLength(e));
                break;
            }
            case TRANSACTION_TYPE:
                v.putBytes(row, TX_NAMES[(r.sysFlag & Record.TRANSACTION_MASK) >> 2]);
                break;
            case BROKER:
                v.putBytes(row, broker);
                break;
            case STORE_PATH:
                v.putBytes(row, storePath);
                break;
            default:
                throw new IllegalStateException("column " + id + " is not interned");
        }
    }

    /** Column {@code c} of {@code row}: the value of record {@code r} (in {@code b}). */
    private void put(int c, WritableColumnVector v, int row, ByteBuffer b, Record r, byte[] topicBytes, Properties props,
                     long tagsCode, boolean tagsValid, String file, long fileOffset) {
        switch (ids[c]) {
            case TOPIC:
                v.putByteArray(row, topicBytes, 0, topicBytes.length);
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
                    v.putByteArray(row, plain, 0, plain.length);
                    bytes += plain.length;
                } else {
                    ByteSpans.put(v, row, b, r.bodyPos, r.bodyLen);
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

    /** Decodes deferred column {@code c} of the current batch's rows into {@code v}. */
    private void fillDeferred(int c, WritableColumnVector v) {
        Rows k = kept;
        int id = ids[c];
        int at = fixedPosition(id);
        if (at >= 0) {
            for (int row = 0; row < rows; row++) {
                ByteBuffer b = k.buffers[row];
                int p = k.positions[row] + at;
                if (id == QUEUE_OFFSET || id == COMMIT_LOG_OFFSET) v.putLong(row, b.getLong(p));
                else if (id == BORN_TIMESTAMP) v.putLong(row, b.getLong(p) * 1000);
                else v.putInt(row, b.getInt(p));
            }
            return;
        }
        if (id == TOPIC || id == BROKER || id == STORE_PATH) {      // known without decoding the record again
            for (int row = 0; row < rows; row++) put(c, v, row, null, null, k.topics[row], null, 0, false, null, 0);
            return;
        }
        boolean props = needsProps(id);
        for (int row = 0; row < rows; row++) {
            ByteBuffer b = k.buffers[row];
            k.record.trustedTopic = k.topics[row];        // checked when the row was appended
            String reason = k.record.decode(b, k.positions[row], k.sizes[row], k.sizes[row]);
            if (reason != null) {
                throw new CorruptRecordError("the record changed after it was read: " + reason, k.files[row], k.positions[row]);
            }
            if (props) k.props.parse(b, k.record.propsPos, k.record.propsLen);
            put(c, v, row, b, k.record, k.topics[row], k.props, 0, false, k.files[row], k.positions[row]);
        }
    }

    /** Where the rows of the current batch are, for the deferred columns. */
    private static final class Rows {
        final ByteBuffer[] buffers;
        final int[] positions;
        final int[] sizes;
        final byte[][] topics;
        final String[] files;
        final Record record = new Record();
        final Properties props = new Properties();

        Rows(int capacity) {
            buffers = new ByteBuffer[capacity];
            positions = new int[capacity];
            sizes = new int[capacity];
            topics = new byte[capacity][];
            files = new String[capacity];
        }

        void keep(int row, ByteBuffer b, int pos, int size, byte[] topic, String file) {
            buffers[row] = b;
            positions[row] = pos;
            sizes[row] = size;
            topics[row] = topic;
            files[row] = file;
        }
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
        ByteSpans.put(v, row, b, pos, len);
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
