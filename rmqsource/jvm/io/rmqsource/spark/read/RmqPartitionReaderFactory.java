package io.rmqsource.spark.read;

import io.rmqsource.spark.bodies.BodyDecodingReader;
import io.rmqsource.spark.bodies.BodySpec;
import java.util.Iterator;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** Creates the task-side reader of each partition; every partition is read as columnar batches. */
final class RmqPartitionReaderFactory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;
    private final ReadSpec spec;
    private final String[] groupBy;        // count pushdown: group columns (null: a normal read)
    /** Typed bodies (docs/bodies.md): their options, and the read of the message columns they need; else null. */
    private final BodySpec body;
    private final ReadSpec messages;

    RmqPartitionReaderFactory(ReadSpec spec, String[] groupBy, BodySpec body) {
        this.spec = spec;
        this.groupBy = groupBy;
        this.body = groupBy == null ? body : null;
        this.messages = this.body == null ? spec
                : new ReadSpec(spec.options, spec.pushed, BodyDecodingReader.innerSchema(spec.schema, body));
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
        return true;
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
        if (body == null || partition instanceof RmqInputPartition.QueueCounts) return messageReader(spec, partition);
        return new BodyDecodingReader(messageReader(messages, partition), messages.schema, spec.schema, body,
                messages.batchRows);
    }

    private PartitionReader<ColumnarBatch> messageReader(ReadSpec spec, InputPartition partition) {
        StructType schema = spec.schema;
        if (partition instanceof RmqInputPartition.QueueCounts) {
            return new QueueCountReader(spec, (RmqInputPartition.QueueCounts) partition, schema, groupBy);
        }
        if (partition instanceof RmqInputPartition.CommitLogRange) {
            return new CommitLogRangeReader(spec, (RmqInputPartition.CommitLogRange) partition, schema);
        }
        if (partition instanceof RmqInputPartition.QueueRanges) {
            RmqInputPartition.QueueRanges q = (RmqInputPartition.QueueRanges) partition;
            return new ConsumeQueueRangeReader(spec, q.store, q.ranges, schema);
        }
        if (partition instanceof RmqInputPartition.Lookup) {
            return new LookupReader(spec, (RmqInputPartition.Lookup) partition, schema);
        }
        throw new IllegalArgumentException("unknown partition " + partition);
    }

    /** Row reads (Spark asks for them only when it cannot take batches): the rows of the batches. */
    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
        PartitionReader<ColumnarBatch> batches = createColumnarReader(partition);
        return new PartitionReader<InternalRow>() {
            private Iterator<InternalRow> rows;
            private InternalRow current;

            @Override
            public boolean next() throws java.io.IOException {
                while (rows == null || !rows.hasNext()) {
                    if (!batches.next()) return false;
                    rows = batches.get().rowIterator();
                }
                current = rows.next();
                return true;
            }

            @Override
            public InternalRow get() {
                return current;
            }

            @Override
            public void close() throws java.io.IOException {
                batches.close();
            }

            @Override
            public CustomTaskMetric[] currentMetricsValues() {
                return batches.currentMetricsValues();
            }
        };
    }
}
