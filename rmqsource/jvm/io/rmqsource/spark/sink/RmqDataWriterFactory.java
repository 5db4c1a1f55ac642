package io.rmqsource.spark.sink;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;

/** Shipped to the executors: one {@link RmqDataWriter} per task attempt. */
final class RmqDataWriterFactory implements DataWriterFactory {
    private static final long serialVersionUID = 1L;
    private final SinkOptions opts;
    private final SinkSchema schema;
    private final String writeKey;

    RmqDataWriterFactory(SinkOptions opts, SinkSchema schema, String writeKey) {
        this.opts = opts;
        this.schema = schema;
        this.writeKey = writeKey;
    }

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
        return new RmqDataWriter(opts, schema, writeKey, partitionId);
    }
}
