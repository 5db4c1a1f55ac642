package io.rmqsource.spark.sink;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;

/** Shipped to the executors: one {@link RmqStreamDataWriter} per task of a micro-batch. */
final class RmqStreamingWriterFactory implements StreamingDataWriterFactory {
    private static final long serialVersionUID = 1L;
    private final SinkOptions opts;
    private final SinkSchema schema;
    private final String queryId;

    RmqStreamingWriterFactory(SinkOptions opts, SinkSchema schema, String queryId) {
        this.opts = opts;
        this.schema = schema;
        this.queryId = queryId;
    }

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId, long epochId) {
        return new RmqStreamDataWriter(opts, schema, queryId, partitionId, epochId);
    }
}
