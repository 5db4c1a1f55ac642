package io.rmqsource.spark.sink;

import io.rmqsource.errors.OptionError;
import io.rmqsource.errors.UnsupportedLayoutError;
import io.rmqsource.store.ConfigRdb;
import io.rmqsource.store.StoreLayout;
import java.io.File;
import java.util.Map;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.types.StructType;

/** The planned write: options and columns checked on the driver, before any task runs. */
final class RmqWrite implements Write {
    private final Map<String, String> options;
    private final StructType schema;
    private final String queryId;
    private final boolean truncate;
    private final SinkMetrics metrics;

    RmqWrite(Map<String, String> options, StructType schema, String queryId, boolean truncate, SinkMetrics metrics) {
        this.options = options;
        this.schema = schema;
        this.queryId = queryId;
        this.truncate = truncate;
        this.metrics = metrics;
    }

    @Override
    public String description() {
        return "rmq sink";
    }

    @Override
    public BatchWrite toBatch() {
        if (truncate) {
            throw new OptionError("the rmq sink only appends (a message store cannot be overwritten); "
                    + "use .mode('append')");
        }
        SinkOptions o = SinkOptions.parse(options);
        SinkSchema s = SinkSchema.check(schema, o.preserveStoreFields);
        refuseUnsupportedLayout(o);
        return new RmqBatchWrite(o, s);
    }

    @Override
    public StreamingWrite toStreaming() {
        SinkOptions o = SinkOptions.parse(options);
        SinkSchema s = SinkSchema.check(schema, o.preserveStoreFields);
        refuseUnsupportedLayout(o);
        return new RmqStreamingWrite(o, s, queryId, metrics);
    }

    /**
     * layout.py check_writable: a store of a layout rmqsource reads but does not write fails the write here, and so
     * does configManagerVersion=v1 beside a config-v2 broker's config/rdb/ (ConfigRdb.usesConfigRdb).
     */
    static void refuseUnsupportedLayout(SinkOptions o) {
        if (!new File(o.root).isDirectory()) return;
        StoreLayout layout = new StoreLayout(o.root, o.config);
        layout.checkSupported();
        layout.refuseRocksDbQueues("written");
        String dledger = layout.dledgerDir();
        if (dledger != null) {
            throw new UnsupportedLayoutError("a DLedger store (" + new File(dledger).getName() + ") is written by its "
                    + "Raft group; rmqsource reads it but does not write it", o.root, -1);
        }
        ConfigRdb.usesConfigRdb(java.nio.file.Path.of(o.root), o.config);
    }
}
