package io.rmqsource.spark.read;

import io.rmqsource.spark.RmqOptions;
import io.rmqsource.spark.bodies.BodySpec;
import io.rmqsource.spark.stream.RmqMicroBatchStream;
import java.util.Arrays;
import java.util.stream.Collectors;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** The JVM columnar scan; micro-batch streams are {@link RmqMicroBatchStream}. */
final class RmqScan implements Scan {
    private final CaseInsensitiveStringMap options;
    private final PushedFilters pushed;
    private final Filter[] pushedFilters;
    private final StructType schema;
    private final String[] groupBy;
    private final String aggregation;
    private final StructType tableSchema;
    /** Typed bodies (docs/bodies.md), else null. */
    private final BodySpec body;

    RmqScan(CaseInsensitiveStringMap options, PushedFilters pushed, Filter[] pushedFilters, StructType schema,
            String[] groupBy, String aggregation, StructType tableSchema, BodySpec body) {
        this.body = body;
        this.options = options;
        this.pushed = pushed;
        this.pushedFilters = pushedFilters;
        this.schema = schema;
        this.groupBy = groupBy;
        this.aggregation = aggregation;
        this.tableSchema = tableSchema;
    }

    @Override
    public StructType readSchema() {
        return schema;
    }

    @Override
    public String description() {
        String filters = Arrays.stream(pushedFilters).map(Filter::toString).collect(Collectors.joining(", "));
        return "RmqScan(JVM) PushedFilters: [" + filters + "]"
                + (aggregation != null ? ", PushedAggregation: " + aggregation + " (per queue from ConsumeQueue units, record headers checked)" : "")
                + (body != null ? ", BodyFormat: " + body.format + (body.confluent ? " (confluent)" : "")
                        + ", OnBadRecord: " + body.onBadRecord : "")
                + keysDescription()
                + ", ReadSchema: " + schema.catalogString();
    }

    /**
     * Options keys / keysFile as the plan shows them: {@code , Keys: 3 (IndexFile)}, or (no IndexFile lookups:
     * indexLookups=false or a store written without them) each record's keys checked; empty without keys.
     */
    private String keysDescription() {
        RmqOptions opts;
        try {
            opts = RmqOptions.parse(options);
        } catch (RuntimeException e) {
            return "";
        }
        if (opts.keys == null) return "";
        boolean index = opts.indexLookups && opts.storeConfig.messageIndexEnable();
        return ", Keys: " + opts.keys.size() + (index ? " (IndexFile)" : " (every record checked)");
    }

    @Override
    public Batch toBatch() {
        RmqOptions opts = RmqOptions.parse(options);
        if (body != null) opts.decompress = true;       // bodies are decoded inflated (docs/bodies.md)
        return new RmqBatch(new ReadSpec(opts, pushed, schema), groupBy, body);
    }

    /** The native stream, reading the table's schema (Spark prunes no columns of a stream). */
    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
        return new RmqMicroBatchStream(options, tableSchema);
    }

    @Override
    public CustomMetric[] supportedCustomMetrics() {
        return RmqMetrics.all();
    }

    @Override
    public ColumnarSupportMode columnarSupportMode() {
        return ColumnarSupportMode.SUPPORTED;
    }
}
