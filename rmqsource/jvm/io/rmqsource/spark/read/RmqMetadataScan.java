package io.rmqsource.spark.read;

import io.rmqsource.errors.OptionError;
import io.rmqsource.io.StoreFiles;
import io.rmqsource.spark.Contract;
import io.rmqsource.spark.RmqOptions;
import io.rmqsource.spark.StoreAccess;
import io.rmqsource.spark.stream.RmqStreamOptions;
import io.rmqsource.store.MappedFaults;
import io.rmqsource.store.StoreMetadata;
import io.rmqsource.store.StoreReader;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * {@code option("metadata", "queues" | "topics" | "groups" | "segments" | "indexes")}: the store's structure as a
 * table (docs/metadata.md; twin of rmqsource/spark/metadata.py). The rows are {@link StoreMetadata}'s.
 *
 * <p>One partition per store, its rows computed <b>in the task</b> that reads it (as the Python path does): the
 * driver only opens each store at planning (a path that is no store fails there) and pins its CommitLog's valid
 * end, which the task reuses (the queues' capped max offsets and the segments' valid bytes are those of the plan).
 * Each store's rows carry its {@code broker} and {@code storePath}. Nothing is pushed: every filter goes back to
 * Spark (the tables are small), no aggregate is pushed; columns are pruned. Batch only: a stream fails with the
 * option parser's error.
 */
public final class RmqMetadataScan implements Scan, Batch {
    /**
     * The table these read options ask for (checked: an unknown name fails with parse_metadata's error), else
     * null; looked at before the options are parsed.
     */
    public static String requested(Map<String, String> options) {
        String v = options.get("metadata");
        return v == null ? null : RmqOptions.metadataTable(v);
    }

    private final Map<String, String> options;
    private final String table;
    private final StructType schema;

    RmqMetadataScan(Map<String, String> options, String table, StructType schema) {
        this.options = options;
        this.table = table;
        this.schema = schema;
    }

    @Override
    public StructType readSchema() {
        return schema;
    }

    @Override
    public String description() {
        return "RmqScan(JVM, metadata " + table + ", one task per store) PushedFilters: [], ReadSchema: "
                + schema.catalogString();
    }

    @Override
    public Batch toBatch() {
        return this;
    }

    /** A stream of a metadata table is refused (the stream's option parser says why, in one line). */
    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
        RmqStreamOptions.parse(options);
        throw new OptionError("option metadata=" + table + " is for batch reads (spark.read)");
    }

    @Override
    public ColumnarSupportMode columnarSupportMode() {
        return ColumnarSupportMode.UNSUPPORTED;
    }

    @Override
    public InputPartition[] planInputPartitions() {
        RmqOptions opts = RmqOptions.parse(options);      // batch only, alone (parse_metadata)
        List<StoreFiles> files = StoreAccess.forPaths(opts.paths);
        List<InputPartition> parts = new ArrayList<>();
        for (int i = 0; i < opts.paths.size(); i++) {
            int at = i;
            StoreRef ref = MappedFaults.guard(() -> {
                try (StoreReader r = new StoreReader(files.get(at), opts.paths.get(at), opts.storeConfig, null)) {
                    return new StoreRef(at, opts.paths.get(at), opts.brokers.get(at), opts.storeConfig,
                            r.commitLog.minOffset(), r.commitLogMaxOffset(), r.hasConsumeQueueFiles(), files.get(at));
                }
            });
            parts.add(new MetadataPartition(ref, opts.metadata));
        }
        return parts.toArray(new InputPartition[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new Factory(schema);
    }

    /** Metadata table {@code table} of one store. */
    static final class MetadataPartition extends RmqInputPartition {
        private static final long serialVersionUID = 1L;
        final String table;

        MetadataPartition(StoreRef store, String table) {
            super(store);
            this.table = table;
        }

        @Override
        public String toString() {
            return "Metadata(" + table + ", " + store.broker + ")";
        }
    }

    static final class Factory implements PartitionReaderFactory {
        private static final long serialVersionUID = 1L;
        private final StructType schema;

        Factory(StructType schema) {
            this.schema = schema;
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            MetadataPartition p = (MetadataPartition) partition;
            StoreRef s = p.store;
            List<Map<String, Object>> rows = MappedFaults.guard(() ->
                    StoreMetadata.rows(p.table, s.files, s.root, s.config, s.commitLogMax));
            return new Rows(rows, schema, s.broker, s.root);
        }
    }

    /** The rows of one store as Spark rows of the requested columns. */
    private static final class Rows implements PartitionReader<InternalRow> {
        private final List<Map<String, Object>> rows;
        private final StructField[] fields;
        private final UTF8String broker;
        private final UTF8String storePath;
        private final UnsafeProjection out;
        private int next;
        private InternalRow current;

        Rows(List<Map<String, Object>> rows, StructType schema, String broker, String storePath) {
            this.rows = rows;
            this.fields = schema.fields();
            this.broker = UTF8String.fromString(broker);
            this.storePath = UTF8String.fromString(storePath);
            this.out = UnsafeProjection.create(schema);
        }

        @Override
        public boolean next() {
            if (next >= rows.size()) return false;
            Map<String, Object> r = rows.get(next++);
            Object[] values = new Object[fields.length];
            for (int c = 0; c < fields.length; c++) {
                String name = fields[c].name();
                if (name.equals("broker")) values[c] = broker;
                else if (name.equals("storePath")) values[c] = storePath;
                else values[c] = value(r.get(name), fields[c].dataType());
            }
            current = out.apply(new GenericInternalRow(values));
            return true;
        }

        private static Object value(Object v, DataType type) {
            if (v == null) return null;
            if (v instanceof String) return UTF8String.fromString((String) v);
            if (type.sameType(DataTypes.TimestampType)) return ((Long) v) * 1000L;     // ms -> Spark's microseconds
            if (v instanceof List) return new GenericArrayData(((List<?>) v).toArray());
            return v;
        }

        @Override
        public InternalRow get() {
            return current;
        }

        @Override
        public void close() throws IOException {
        }
    }
}
