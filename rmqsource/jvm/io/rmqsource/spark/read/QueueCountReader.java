package io.rmqsource.spark.read;

import io.rmqsource.spark.read.RmqInputPartition.QueueCounts;
import io.rmqsource.spark.read.RmqInputPartition.QueueRange;
import java.io.IOException;
import java.util.List;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * count(*) pushdown: one row per queue range (the requested group columns, then the count).
 * Each range is walked by a {@link ConsumeQueueRangeReader} that requests no column: the units
 * and every record's header get exactly the checks of a read (data loss, valid end, the record
 * holding together at its offset), so a damaged store fails the count as it fails a read, but no
 * column is decoded and no row crosses into Spark.
 */
final class QueueCountReader implements PartitionReader<ColumnarBatch> {
    private final QueueCounts part;
    private final ReadSpec spec;
    private final StructType schema;
    private final String[] groupBy;
    private ColumnarBatch batch;
    private boolean consumed;
    private long recordsRead;
    private long bytesRead;

    QueueCountReader(ReadSpec spec, QueueCounts part, StructType schema, String[] groupBy) {
        this.spec = spec;
        this.part = part;
        this.schema = schema;
        this.groupBy = groupBy;
    }

    @Override
    public boolean next() throws IOException {
        if (consumed) return false;
        consumed = true;
        List<QueueRange> ranges = part.ranges;
        OnHeapColumnVector[] v = OnHeapColumnVector.allocateColumns(Math.max(1, ranges.size()), schema);
        for (int row = 0; row < ranges.size(); row++) {
            QueueRange r = ranges.get(row);
            long n = 0;
            ConsumeQueueRangeReader reader = new ConsumeQueueRangeReader(spec, part.store, List.of(r), new StructType());
            try {
                while (reader.next()) n += reader.get().numRows();
                recordsRead += reader.recordsRead;
                bytesRead += reader.bytesRead;
            } finally {
                reader.close();
            }
            for (int c = 0; c < groupBy.length; c++) {
                Object value = RmqScanBuilder.groupValue(groupBy[c], r.topic, r.queueId, part.store.broker, part.store.root);
                if (value instanceof Integer) {
                    v[c].putInt(row, (Integer) value);
                } else {
                    byte[] bytes = ((UTF8String) value).getBytes();
                    v[c].putByteArray(row, bytes, 0, bytes.length);
                }
            }
            for (int c = groupBy.length; c < v.length; c++) v[c].putLong(row, n);
        }
        batch = new ColumnarBatch(v, ranges.size());
        return ranges.size() > 0;
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
