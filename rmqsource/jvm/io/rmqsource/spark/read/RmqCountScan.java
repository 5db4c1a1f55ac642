package io.rmqsource.spark.read;

import io.rmqsource.format.SystemTopics;
import io.rmqsource.spark.RmqOptions;
import io.rmqsource.spark.StoreAccess;
import io.rmqsource.store.QueueKey;
import io.rmqsource.store.QueueTiling;
import io.rmqsource.store.StoreReader;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.read.LocalScan;
import org.apache.spark.sql.types.StructType;

/**
 * count(*) of a whole-store read (also grouped by topic / queueId / broker / storePath) answered
 * on the driver from ConsumeQueue offsets, with no Spark job: used only where that is exact, when
 * the ConsumeQueues tile the CommitLog ({@link QueueTiling}).  Anything else is counted by reading.
 */
final class RmqCountScan implements LocalScan {
    /** Units one driver thread walks at most (about 1 GiB of ConsumeQueue, seconds); larger stores are counted by tasks. */
    static final long MAX_UNITS = 50_000_000L;

    private final InternalRow[] rows;
    private final StructType schema;
    private final String aggregation;

    private RmqCountScan(InternalRow[] rows, StructType schema, String aggregation) {
        this.rows = rows;
        this.schema = schema;
        this.aggregation = aggregation;
    }

    /**
     * The answer of a whole-store count grouped by {@code groupBy} ({@code aggregates} count
     * columns, all equal), or null when it cannot be given exactly without reading records.
     */
    static RmqCountScan plan(RmqOptions opts, String[] groupBy, int aggregates, StructType schema, String aggregation) {
        if (opts.includeTransactional || opts.startingTimestamp != null || opts.endingTimestamp != null) return null;
        Map<List<Object>, Long> groups = new LinkedHashMap<>();
        List<io.rmqsource.io.StoreFiles> files = StoreAccess.forPaths(opts.paths);
        for (int i = 0; i < opts.paths.size(); i++) {
            Map<QueueKey, Long> counts;
            try (StoreReader reader = new StoreReader(files.get(i), opts.paths.get(i), opts.storeConfig, null)) {
                counts = QueueTiling.countsIfTiled(reader, MAX_UNITS);
            } catch (RuntimeException e) {
                return null;            // the read reports what is wrong with the store
            }
            if (counts == null) return null;
            for (Map.Entry<QueueKey, Long> e : counts.entrySet()) {
                if (e.getValue() == 0) continue;
                if (opts.internalTopicsExcluded() && SystemTopics.isInternal(e.getKey().topic)) continue;
                List<Object> key = new ArrayList<>();
                for (String g : groupBy) {
                    key.add(RmqScanBuilder.groupValue(g, e.getKey().topic, e.getKey().queueId, opts.brokers.get(i),
                            opts.paths.get(i)));
                }
                groups.merge(key, e.getValue(), Long::sum);
            }
        }
        if (groupBy.length == 0 && groups.isEmpty()) groups.put(List.of(), 0L);   // count of nothing is one row, 0
        List<InternalRow> rows = new ArrayList<>();
        for (Map.Entry<List<Object>, Long> g : groups.entrySet()) {
            Object[] values = new Object[groupBy.length + aggregates];
            for (int c = 0; c < groupBy.length; c++) values[c] = g.getKey().get(c);
            for (int c = groupBy.length; c < values.length; c++) values[c] = g.getValue();
            rows.add(new GenericInternalRow(values));
        }
        return new RmqCountScan(rows.toArray(new InternalRow[0]), schema, aggregation);
    }

    @Override
    public InternalRow[] rows() {
        return rows;
    }

    @Override
    public StructType readSchema() {
        return schema;
    }

    @Override
    public String description() {
        return "RmqScan(JVM, counted on the driver from ConsumeQueue offsets) PushedAggregation: " + aggregation
                + ", ReadSchema: " + schema.catalogString();
    }
}
