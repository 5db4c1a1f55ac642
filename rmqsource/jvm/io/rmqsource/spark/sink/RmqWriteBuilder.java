package io.rmqsource.spark.sink;

import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code df.write.format("rmq")} and {@code writeStream.format("rmq")} on the JVM. Truncation (batch
 * overwrite) is accepted here only so that it can be refused with the Python sink's text.
 */
public final class RmqWriteBuilder implements SupportsTruncate {
    private final CaseInsensitiveStringMap options;
    private final LogicalWriteInfo info;
    private final SinkMetrics metrics;
    private boolean truncate;

    /** {@code metrics}: where a streaming write leaves its figures per micro-batch. */
    public RmqWriteBuilder(LogicalWriteInfo info, CaseInsensitiveStringMap options, SinkMetrics metrics) {
        this.info = info;
        this.options = options;
        this.metrics = metrics;
    }

    @Override
    public WriteBuilder truncate() {
        truncate = true;
        return this;
    }

    @Override
    public Write build() {
        return new RmqWrite(options.asCaseSensitiveMap(), info.schema(), info.queryId(), truncate, metrics);
    }
}
