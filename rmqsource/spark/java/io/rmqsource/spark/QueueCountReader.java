package io.rmqsource.spark;

import io.rmqsource.spark.RmqInputPartition.QueueCounts;
import io.rmqsource.spark.RmqInputPartition.QueueRange;
import io.rmqsource.spark.errors.CorruptRecordError;
import io.rmqsource.spark.errors.DataLossError;
import io.rmqsource.spark.format.ConsumeQueue;
import io.rmqsource.spark.store.QueueUnits;
import io.rmqsource.spark.store.Segment;
import io.rmqsource.spark.store.StoreReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * count(*) pushdown: one row per queue range (the requested group columns, then the count),
 * counted from ConsumeQueue units without reading the CommitLog.  A unit counts exactly when a
 * topic read would read its record: the same data-loss and valid-end checks, pre-blank and empty
 * units left out.  (A damaged record under a sound unit is not seen; a full read would fail on it.)
 */
final class QueueCountReader implements PartitionReader<ColumnarBatch> {
    private final QueueCounts part;
    private final ReadSpec spec;
    private final StructType schema;
    private final String[] groupBy;
    private ColumnarBatch batch;
    private boolean consumed;

    QueueCountReader(ReadSpec spec, QueueCounts part, StructType schema, String[] groupBy) {
        this.spec = spec;
        this.part = part;
        this.schema = schema;
        this.groupBy = groupBy;
    }

    @Override
    public boolean next() {
        if (consumed) return false;
        consumed = true;
        List<QueueRange> ranges = part.ranges;
        OnHeapColumnVector[] v = OnHeapColumnVector.allocateColumns(Math.max(1, ranges.size()), schema);
        try (StoreReader reader = new StoreReader(part.store.root, part.store.config, part.store.commitLogMax)) {
            List<Segment> segs = reader.commitLog.list();
            long lastSegmentEnd = segs.isEmpty() ? 0 : segs.get(segs.size() - 1).startOffset
                    + reader.commitLog.segments.lengthOf(segs.get(segs.size() - 1));
            for (int row = 0; row < ranges.size(); row++) {
                QueueRange r = ranges.get(row);
                long n = count(reader, r, lastSegmentEnd);
                for (int c = 0; c < groupBy.length; c++) {
                    switch (groupBy[c]) {
                        case "topic":
                            byte[] t = r.topic.getBytes(StandardCharsets.UTF_8);
                            v[c].putByteArray(row, t, 0, t.length);
                            break;
                        case "queueId":
                            v[c].putInt(row, r.queueId);
                            break;
                        case "broker":
                            byte[] bk = part.store.broker.getBytes(StandardCharsets.UTF_8);
                            v[c].putByteArray(row, bk, 0, bk.length);
                            break;
                        default:
                            byte[] p = part.store.root.getBytes(StandardCharsets.UTF_8);
                            v[c].putByteArray(row, p, 0, p.length);
                    }
                }
                for (int c = groupBy.length; c < v.length; c++) v[c].putLong(row, n);
            }
        }
        batch = new ColumnarBatch(v, ranges.size());
        return ranges.size() > 0;
    }

    private long count(StoreReader reader, QueueRange r, long lastSegmentEnd) {
        QueueUnits q = reader.consumeQueue(r.topic, r.queueId);
        if (q == null) {
            throw new DataLossError("queue " + r.topic + ":" + r.queueId + " of " + part.store.root + " disappeared");
        }
        int cap = 1 << 16;
        long[] phy = new long[cap];
        int[] size = new int[cap];
        long[] code = new long[cap];
        long total = 0;
        long clMin = part.store.commitLogMin;
        for (long off = r.start; off < r.end; ) {
            int want = (int) Math.min(cap, r.end - off);
            int n = q.read(off, want, phy, size, code);
            if (n < want) {
                throw new CorruptRecordError("ConsumeQueue " + r.topic + ":" + r.queueId + " ends at unit " + (off + n)
                        + ", the plan expected " + r.end, q.where(), (off + n) * ConsumeQueue.UNIT_SIZE);
            }
            for (int i = 0; i < n; i++) {
                if (size[i] == ConsumeQueue.PRE_BLANK_SIZE) continue;
                if (phy[i] < clMin || phy[i] + size[i] > lastSegmentEnd) {
                    if (spec.options.failOnDataLoss) {
                        throw new DataLossError(r.topic + ":" + r.queueId + " in " + part.store.root + ": queue offset "
                                + (off + i) + " points at CommitLog offset " + phy[i] + ", which was deleted (the "
                                + "CommitLog now starts at " + clMin + "); set failOnDataLoss=false to skip it");
                    }
                    continue;
                }
                if (phy[i] + size[i] > part.store.commitLogMax) {
                    throw new CorruptRecordError("ConsumeQueue unit " + (off + i) + " of " + r.topic + ":" + r.queueId
                            + " points past the valid CommitLog end " + part.store.commitLogMax, q.where(),
                            (off + i) * ConsumeQueue.UNIT_SIZE);
                }
                if (size[i] > 0) total++;
            }
            off += n;
        }
        return total;
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
        return RmqMetrics.taskValues(0, 0, 0);
    }
}
