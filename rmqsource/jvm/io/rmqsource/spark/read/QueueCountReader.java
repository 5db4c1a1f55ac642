package io.rmqsource.spark.read;

import io.rmqsource.spark.Contract;
import io.rmqsource.spark.read.RmqInputPartition.QueueCounts;
import io.rmqsource.spark.read.RmqInputPartition.QueueRange;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Aggregate pushdown of a topic read: count(*), min and max of queueOffset, commitLogOffset and
 * storeTimestamp, per queue range, one row per group a range holds (the requested group columns,
 * then one column per aggregate, named {@code agg<i>:count} / {@code agg<i>:min:<column>} /
 * {@code agg<i>:max:<column>}); Spark merges the rows of a group (partial pushdown).
 *
 * Each range is walked by a {@link ConsumeQueueRangeReader} that requests only the columns the
 * aggregation needs (none for a plain count): the units and every record's header get exactly the
 * checks of a read (data loss, valid end, the record holding together at its offset), so a damaged
 * store fails the aggregate as it fails a read, but no other column is decoded and no row crosses
 * into Spark.  The min / max are those of the rows that walk gives (exact whatever the order of store
 * times), and group columns topic and queueId are the rows' own (a light message queue's records
 * keep their topic and queue).  Reading only a range's ends would skip the checks of the records
 * between them: an aggregate of a column must fail on a damaged record as a read of it does.
 */
final class QueueCountReader implements PartitionReader<ColumnarBatch> {
    static final String COUNT = "count";
    /** Fields a min / max is taken of, in this order in a group's state. */
    private static final String[] FIELDS = {"queueOffset", "commitLogOffset", "storeTimestamp"};

    private final QueueCounts part;
    private final ReadSpec spec;
    private final StructType schema;
    private final String[] groupBy;
    /** Per aggregate: -1 count, else the index into FIELDS; and whether it is a max. */
    private final int[] field;
    private final boolean[] isMax;
    /** The columns the reader is asked for, and their indexes (-1: not asked). */
    private final StructType columns;
    private final int topicCol;
    private final int queueIdCol;
    private final int[] fieldCol = new int[FIELDS.length];
    private ColumnarBatch batch;
    private boolean consumed;
    private long recordsRead;
    private long bytesRead;

    /** One group of a range: its topic and queue id (as the rows say), rows seen, min and max per field. */
    private static final class Group {
        final String topic;
        final int queueId;
        long rows;
        final long[] min = {Long.MAX_VALUE, Long.MAX_VALUE, Long.MAX_VALUE};
        final long[] max = {Long.MIN_VALUE, Long.MIN_VALUE, Long.MIN_VALUE};

        Group(String topic, int queueId) {
            this.topic = topic;
            this.queueId = queueId;
        }

        void add(long[] values) {
            rows++;
            for (int f = 0; f < values.length; f++) {
                min[f] = Math.min(min[f], values[f]);
                max[f] = Math.max(max[f], values[f]);
            }
        }
    }

    QueueCountReader(ReadSpec spec, QueueCounts part, StructType schema, String[] groupBy) {
        this.spec = spec;
        this.part = part;
        this.schema = schema;
        this.groupBy = groupBy;
        int n = schema.fields().length - groupBy.length;
        field = new int[n];
        isMax = new boolean[n];
        boolean[] wanted = new boolean[FIELDS.length];
        for (int i = 0; i < n; i++) {
            String name = schema.fields()[groupBy.length + i].name();
            String what = name.contains(":") ? name.substring(name.indexOf(':') + 1) : COUNT;   // count<i>: count
            if (COUNT.equals(what)) {
                field[i] = -1;
                continue;
            }
            isMax[i] = what.startsWith("max:");
            field[i] = List.of(FIELDS).indexOf(what.substring(4));
            if (field[i] < 0) throw new IllegalStateException("unknown pushed aggregate " + name);
            wanted[field[i]] = true;
        }
        boolean byTopic = List.of(groupBy).contains("topic");
        boolean byQueue = List.of(groupBy).contains("queueId");
        StructType cols = new StructType();
        for (String c : new String[] {"topic", "queueId", "queueOffset", "commitLogOffset", "storeTimestamp"}) {
            int f = List.of(FIELDS).indexOf(c);
            boolean ask = c.equals("topic") ? byTopic : c.equals("queueId") ? byQueue : wanted[f];
            if (ask) cols = cols.add(Contract.SCHEMA.apply(c));
        }
        columns = cols;
        List<String> names = List.of(cols.fieldNames());
        topicCol = names.indexOf("topic");
        queueIdCol = names.indexOf("queueId");
        for (int f = 0; f < FIELDS.length; f++) fieldCol[f] = names.indexOf(FIELDS[f]);
    }

    @Override
    public boolean next() throws IOException {
        if (consumed) return false;
        consumed = true;
        List<QueueRange> ranges = part.ranges;
        List<Group> rows = new ArrayList<>();
        for (QueueRange r : ranges) {
            Map<String, Group> groups = new LinkedHashMap<>();
            walk(r, groups);
            for (Group g : groups.values()) {
                if (g.rows == 0) continue;
                rows.add(g);
            }
        }
        // A global aggregate's task with no row gives count 0 and no min / max: Spark sums the counts,
        // and a sum over no row at all would be null where count(*) of no row is 0.
        boolean zeroRow = rows.isEmpty() && groupBy.length == 0;
        if (zeroRow) rows.add(new Group(null, 0));
        OnHeapColumnVector[] v = OnHeapColumnVector.allocateColumns(Math.max(1, rows.size()), schema);
        for (int row = 0; row < rows.size(); row++) {
            Group g = rows.get(row);
            for (int c = 0; c < groupBy.length; c++) {
                Object value = RmqScanBuilder.groupValue(groupBy[c], g.topic, g.queueId, part.store.broker, part.store.root);
                if (value instanceof Integer) {
                    v[c].putInt(row, (Integer) value);
                } else {
                    byte[] bytes = ((UTF8String) value).getBytes();
                    v[c].putByteArray(row, bytes, 0, bytes.length);
                }
            }
            for (int i = 0; i < field.length; i++) {
                OnHeapColumnVector out = v[groupBy.length + i];
                if (field[i] < 0) out.putLong(row, g.rows);
                else if (g.rows == 0) out.putNull(row);
                else out.putLong(row, isMax[i] ? g.max[field[i]] : g.min[field[i]]);   // timestamps: microseconds
            }
        }
        batch = new ColumnarBatch(v, rows.size());
        return rows.size() > 0;
    }

    /** Reads range r and adds each of its rows to its group. */
    private void walk(QueueRange r, Map<String, Group> groups) {
        ConsumeQueueRangeReader reader = new ConsumeQueueRangeReader(spec, part.store, List.of(r), columns);
        long[] values = new long[FIELDS.length];
        Group current = null;
        UTF8String seenTopic = null;        // the previous row's topic, as the rows hold it and as a String
        String seenTopicString = null;
        try {
            while (reader.next()) {
                ColumnarBatch b = reader.get();
                int n = b.numRows();
                if (columns.fields().length == 0) {            // a plain count: rows, no column
                    if (n > 0) {
                        if (current == null) current = groups.computeIfAbsent(key(r.topic, r.queueId),
                                x -> new Group(r.topic, r.queueId));
                        current.rows += n;
                    }
                    continue;
                }
                for (int row = 0; row < n; row++) {
                    String topic = r.topic;
                    if (topicCol >= 0) {
                        UTF8String t = b.column(topicCol).getUTF8String(row);
                        if (seenTopic == null || !seenTopic.equals(t)) {
                            seenTopic = t.clone();
                            seenTopicString = t.toString();
                        }
                        topic = seenTopicString;
                    }
                    int queueId = queueIdCol >= 0 ? b.column(queueIdCol).getInt(row) : r.queueId;
                    for (int f = 0; f < FIELDS.length; f++) {
                        values[f] = fieldCol[f] >= 0 ? b.column(fieldCol[f]).getLong(row) : 0;
                    }
                    if (current == null || !current.topic.equals(topic) || current.queueId != queueId) {
                        final String t = topic;
                        final int q = queueId;
                        current = groups.computeIfAbsent(key(t, q), x -> new Group(t, q));
                    }
                    current.add(values);
                }
            }
            recordsRead += reader.recordsRead;
            bytesRead += reader.bytesRead;
        } finally {
            reader.close();
        }
    }

    private static String key(String topic, int queueId) {
        return topic + "\0" + queueId;
    }

    @Override
    public ColumnarBatch get() {
        return batch;
    }

    @Override
    public void close() {
        if (batch != null) batch.close();
    }

    @Override
    public CustomTaskMetric[] currentMetricsValues() {
        return RmqMetrics.taskValues(recordsRead, bytesRead, 0);
    }
}
