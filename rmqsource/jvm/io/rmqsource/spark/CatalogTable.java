package io.rmqsource.spark;

import java.io.IOException;
import java.util.EnumSet;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A table of the {@link RmqCatalog}: an {@link RmqTable} with the store's read options (a topic's messages, or a
 * metadata table), read-only. Reads are the rmq table's own (its scan, pushdown and stream); a metadata table of
 * one topic ({@code rmq.<store>.<topic>.queues}) keeps the rows of that topic only. Writes are refused when Spark
 * plans them, with the catalog's one line: the table takes every write Spark can plan (any schema) so that an
 * {@code INSERT} reaches that line instead of a capability or schema error.
 */
final class CatalogTable implements SupportsRead, SupportsWrite {
    static final String READ_ONLY = "the rmq catalog is read-only: write with df.write.format(\"rmq\")";
    private static final Set<TableCapability> WRITES = EnumSet.of(TableCapability.BATCH_WRITE,
            TableCapability.STREAMING_WRITE, TableCapability.TRUNCATE, TableCapability.OVERWRITE_BY_FILTER,
            TableCapability.OVERWRITE_DYNAMIC, TableCapability.ACCEPT_ANY_SCHEMA);

    private final String name;
    private final RmqTable table;
    private final String onlyTopic;
    private final Set<TableCapability> capabilities;
    private final Map<String, String> properties;

    /**
     * {@code onlyTopic}: the topic whose rows a metadata table keeps (null: every row); {@code stream}: the table
     * can be streamed (a topic's messages).
     */
    CatalogTable(String name, StructType schema, Map<String, String> options, String onlyTopic, boolean stream,
                 Map<String, String> properties) {
        this.name = name;
        this.table = new RmqTable(schema, options);
        this.onlyTopic = onlyTopic;
        EnumSet<TableCapability> caps = EnumSet.copyOf(WRITES);
        caps.add(TableCapability.BATCH_READ);
        if (stream) caps.add(TableCapability.MICRO_BATCH_READ);
        this.capabilities = Set.copyOf(caps);
        this.properties = Map.copyOf(properties);
    }

    /** The rmq table of a table of messages (for {@link KeyLookupRule}), else null (a metadata table). */
    RmqTable messagesTable() {
        return onlyTopic == null ? table : null;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    @SuppressWarnings("deprecation")   // Spark still asks for schema(); columns() is its successor
    public StructType schema() {
        return table.schema();
    }

    @Override
    public Transform[] partitioning() {
        return new Transform[0];
    }

    @Override
    public Map<String, String> properties() {
        return properties;
    }

    @Override
    public Set<TableCapability> capabilities() {
        return capabilities;
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        ScanBuilder inner = table.newScanBuilder(options);
        return onlyTopic == null ? inner : new TopicRows(inner, onlyTopic);
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        throw new UnsupportedOperationException(READ_ONLY);
    }

    /**
     * The rows of one topic of a metadata table: the table's scan (every column: nothing pruned or pushed, the
     * tables are small) with each task's rows filtered on its {@code topic} column.
     */
    private static final class TopicRows implements ScanBuilder, Scan, Batch {
        private final ScanBuilder builder;
        private final String topic;
        private Scan scan;
        private Batch batch;

        TopicRows(ScanBuilder builder, String topic) {
            this.builder = builder;
            this.topic = topic;
        }

        @Override
        public Scan build() {
            scan = builder.build();
            return this;
        }

        @Override
        public StructType readSchema() {
            return scan.readSchema();
        }

        @Override
        public String description() {
            return scan.description() + " Topic: " + topic;
        }

        @Override
        public Batch toBatch() {
            batch = scan.toBatch();
            return this;
        }

        @Override
        public InputPartition[] planInputPartitions() {
            return batch.planInputPartitions();
        }

        @Override
        public PartitionReaderFactory createReaderFactory() {
            return new TopicFactory(batch.createReaderFactory(), scan.readSchema().fieldIndex("topic"), topic);
        }
    }

    private static final class TopicFactory implements PartitionReaderFactory {
        private static final long serialVersionUID = 1L;
        private final PartitionReaderFactory inner;
        private final int column;
        private final String topic;

        TopicFactory(PartitionReaderFactory inner, int column, String topic) {
            this.inner = inner;
            this.column = column;
            this.topic = topic;
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            PartitionReader<InternalRow> rows = inner.createReader(partition);
            UTF8String want = UTF8String.fromString(topic);
            return new PartitionReader<>() {
                @Override
                public boolean next() throws IOException {
                    while (rows.next()) {
                        InternalRow r = rows.get();
                        if (!r.isNullAt(column) && want.equals(r.getUTF8String(column))) return true;
                    }
                    return false;
                }

                @Override
                public InternalRow get() {
                    return rows.get();
                }

                @Override
                public void close() throws IOException {
                    rows.close();
                }
            };
        }
    }
}
