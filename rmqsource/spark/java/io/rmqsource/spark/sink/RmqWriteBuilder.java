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
    private boolean truncate;

    public RmqWriteBuilder(LogicalWriteInfo info, CaseInsensitiveStringMap options) {
        this.info = info;
        this.options = options;
    }

    @Override
    public WriteBuilder truncate() {
        truncate = true;
        return this;
    }

    @Override
    public Write build() {
        return new RmqWrite(options.asCaseSensitiveMap(), info.schema(), info.queryId(), truncate);
    }
}
