package io.rmqsource.spark.read;

import io.rmqsource.errors.CorruptRecordError;
import io.rmqsource.format.MsgId;
import io.rmqsource.format.Properties;
import io.rmqsource.format.Record;
import io.rmqsource.format.SystemTopics;
import io.rmqsource.spark.read.vector.RecordColumns;
import io.rmqsource.store.MappedFaults;
import io.rmqsource.store.QueueUnits;
import io.rmqsource.store.StoreReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Shared task side of every read path (the row logic of rmqsource/spark/record_batches.py: row_mask
 * and finish_rows): row filters, exact checks of the pushed string filters, columnar batches bounded in
 * rows and bytes, and the source metrics.  Subclasses walk their input in {@link #fill}.
 */
abstract class RecordBatchReader implements PartitionReader<ColumnarBatch> {
    protected final ReadSpec spec;
    protected final StoreRef store;
    protected final StoreReader reader;
    protected final RecordColumns columns;
    protected final Record record = new Record();
    private final Properties props = new Properties();
    private static final int TOPIC_SLOT_BITS = 10;
    private final Topic[] topicSlots = new Topic[1 << TOPIC_SLOT_BITS];
    private final List<byte[]> tagValues;
    private final List<byte[]> uniqKeyValues;
    private final List<byte[]> topicValues;
    /** Options keys / keysFile: the exact check of every row (IndexFile hits or scanned records), else null. */
    private final KeyMatcher keys;
    private final boolean parseProperties;
    private final boolean topicColumn;
    /** Rows of a CommitLog walk or point reads in RocketMQ's own topics are dropped (topic reads drop their queues). */
    protected final boolean dropInternalTopics;
    private final byte[] msgId = new byte[56];
    private boolean done;
    /** File position of index 0 of the buffer being decoded (0 for a mapped file; a window's start otherwise). */
    protected long base;
    protected long recordsRead;
    protected long bytesRead;
    protected long unitsSkipped;

    RecordBatchReader(ReadSpec spec, StoreRef store, StructType schema) {
        this.spec = spec;
        this.store = store;
        this.reader = new StoreReader(store.files, store.root, store.config, store.commitLogMax);
        this.columns = new RecordColumns(schema, spec.options, spec.deferColumns, spec.batchRows);
        columns.setStore(store.broker, store.root);
        PushedFilters p = spec.pushed;
        tagValues = p.tags != null ? PushedFilters.utf8(p.tags) : null;
        uniqKeyValues = p.uniqKeys != null ? PushedFilters.utf8(p.uniqKeys) : null;
        topicValues = p.topics != null ? PushedFilters.utf8(p.topics) : null;
        keys = spec.options.keys != null ? new KeyMatcher(spec.options.keys) : null;
        parseProperties = columns.needsProperties || tagValues != null || uniqKeyValues != null || keys != null;
        topicColumn = columns.has(RecordColumns.TOPIC);
        dropInternalTopics = spec.options.internalTopicsExcluded();
    }

    /** Appends rows until the batch is full or the input ends; false once the input is exhausted. */
    protected abstract boolean fill();

    @Override
    public boolean next() {
        try {
            return nextBatch();
        } catch (InternalError e) {
            throw MappedFaults.convert(e);
        }
    }

    private boolean nextBatch() {
        if (done) return false;
        columns.reset();
        while (!columns.full()) {
            if (!fill()) {
                done = true;
                break;
            }
        }
        return columns.rows > 0;
    }

    @Override
    public ColumnarBatch get() {
        return MappedFaults.guard(columns::finish);
    }

    @Override
    public void close() {
        columns.close();
        reader.close();
    }

    @Override
    public CustomTaskMetric[] currentMetricsValues() {
        return RmqMetrics.taskValues(recordsRead, bytesRead, unitsSkipped);
    }

    // ------------------------------------------------------------------ topics

    /** A topic seen in this task: its name, valid UTF-8 bytes and queue handles (for tagsCode). */
    protected static final class Topic {
        final String name;
        final byte[] utf8;
        /** One of RocketMQ's own topics (SystemTopics.isInternal), decided once per topic seen. */
        final boolean internal;
        final Map<Integer, QueueUnits> queues = new HashMap<>();

        Topic(String name) {
            this.name = name;
            this.utf8 = name.getBytes(StandardCharsets.UTF_8);
            this.internal = SystemTopics.isInternal(name);
        }
    }

    /** The topic of record r: a direct-mapped cache of the topics seen (a colliding topic replaces the other). */
    protected Topic topic(ByteBuffer b, Record r) {
        int slot = Record.slot(r.topicHash, TOPIC_SLOT_BITS);
        Topic t = topicSlots[slot];
        if (t != null && r.topicEquals(b, t.utf8)) return t;
        byte[] raw = new byte[r.topicLen];
        b.get(r.topicPos, raw, 0, raw.length);
        Topic fresh = new Topic(new String(raw, StandardCharsets.UTF_8));
        if (java.util.Arrays.equals(raw, fresh.utf8)) topicSlots[slot] = fresh;
        return fresh;
    }

    /**
     * tagsCode of the ConsumeQueue unit at the record's (topic, queueId, queueOffset), valid only
     * when that unit points back at the record (same phyOffset and size); _cq_tags_codes.
     */
    private final long[] up = new long[1];
    private final int[] us = new int[1];
    private final long[] uc = new long[1];

    protected boolean unitTagsCode(Topic t, Record r) {
        if (r.isPreparedOrRollback() || r.queueOffset < 0) return false;
        QueueUnits q = t.queues.get(r.queueId);
        if (q == null) {
            if (t.queues.containsKey(r.queueId)) return false;
            q = reader.consumeQueue(t.name, r.queueId);
            t.queues.put(r.queueId, q);
            if (q == null) return false;
        }
        if (!q.unit(r.queueOffset, up, us, uc)) return false;
        return up[0] == r.phyOffset && us[0] == r.totalSize;
    }

    protected long lastUnitTagsCode() {
        return uc[0];
    }

    // ------------------------------------------------------------------ row logic

    /** Decodes the record at {@code pos} or fails naming file and offset. */
    protected void decode(ByteBuffer b, int pos, long available, int expectedSize, String file) {
        String reason = record.decode(b, pos, available, expectedSize);
        if (reason != null) throw new CorruptRecordError(reason, file, base + pos);
        recordsRead++;
        bytesRead += record.totalSize;
    }

    /** _row_mask: transaction types (whole-store reads), queueId set, offset and time ranges. */
    protected boolean rowMask(boolean wholeStore) {
        Record r = record;
        PushedFilters p = spec.pushed;
        if (wholeStore && !spec.options.includeTransactional && r.isPreparedOrRollback()) return false;
        if (p.queueIds != null && !p.queueIds.contains(r.queueId)) return false;
        return inRange(r.queueOffset, p.queueOffset) && inRange(r.phyOffset, p.phyOffset)
                && inRange(r.storeTimestamp, p.storeTs);
    }

    /**
     * v in [lo, hi), where MIN / MAX mean no bound (as in _row_mask): a record field holding
     * Long.MAX_VALUE is a row like any other, not one past an exclusive end.
     */
    private static boolean inRange(long v, long[] range) {
        return (range[0] == PushedFilters.MIN || v >= range[0]) && (range[1] == PushedFilters.MAX || v < range[1]);
    }

    private static boolean contains(List<byte[]> values, ByteBuffer b, int pos, int len) {
        outer:
        for (byte[] v : values) {
            if (v.length != len) continue;
            for (int i = 0; i < len; i++) if (b.get(pos + i) != v[i]) continue outer;
            return true;
        }
        return false;
    }

    /** _finish: exact topic / tags / uniqKey / keys / msgId checks, then one output row. */
    protected void emit(ByteBuffer b, Topic topic, long tagsCode, boolean tagsValid, String file) {
        Record r = record;
        if (topicValues != null && !contains(topicValues, b, r.topicPos, r.topicLen)) return;
        if (parseProperties) props.parse(b, r.propsPos, r.propsLen);
        if (tagValues != null) {
            int e = props.find(Properties.TAGS);
            if (e < 0 || !contains(tagValues, b, props.valueStart(e), props.valueLength(e))) return;
        }
        if (uniqKeyValues != null) {
            int e = props.find(Properties.UNIQ_KEY);
            if (e < 0 || !contains(uniqKeyValues, b, props.valueStart(e), props.valueLength(e))) return;
        }
        if (keys != null) {
            int e = props.find(Properties.KEYS);
            if (e < 0 || !keys.matches(b, props.valueStart(e), props.valueLength(e))) return;
        }
        if (spec.pushed.msgIds != null) {
            int n = MsgId.write(b, r.storeHostPos, r.storeHostV6(), r.phyOffset, msgId);
            if (!spec.pushed.msgIds.contains(new String(msgId, 0, n, StandardCharsets.US_ASCII))) return;
        }
        Topic t = topic != null ? topic : (topicColumn ? topic(b, r) : null);
        columns.append(b, r, t != null ? t.utf8 : null, props, tagsCode, tagsValid, file, base + r.pos);
    }
}
