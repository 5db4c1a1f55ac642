package io.rmqsource.spark.read;

import io.rmqsource.errors.OptionError;
import io.rmqsource.io.StoreFiles;
import io.rmqsource.spark.Contract;
import io.rmqsource.spark.RmqOptions;
import io.rmqsource.spark.StoreAccess;
import io.rmqsource.spark.read.RmqInputPartition.Lookup;
import io.rmqsource.store.StoreReader;
import io.rmqsource.store.Transactions;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.connector.read.LocalScan;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * {@code option("view", "transactions")}: one row per transactional message ({@link Transactions}; twin of
 * rmqsource/spark/transactions.py), answered on the driver while the query is planned.  The message columns are
 * those of its first commit (the message as delivered), else of its first half record, decoded by
 * {@link LookupReader} at that CommitLog offset and put under the real topic and queue; queueOffset and tagsCode
 * are the first commit's unit (null when never committed); the view's own columns follow (contract.json
 * viewColumns).  No filter is pushed (Spark filters the rows); {@code topics} / {@code topicPattern} name real
 * topics.
 */
public final class RmqTransactionsScan implements LocalScan {
    public static final String VIEW = "transactions";
    /** The message columns, then the view's own (contract.json viewColumns). */
    public static final StructType SCHEMA = Contract.viewSchema(VIEW);

    /** Whether these read options ask for the transactions view (looked at before they are parsed). */
    public static boolean requested(Map<String, String> options) {
        String v = options.get("view");
        return v != null && v.strip().equalsIgnoreCase(VIEW);
    }

    private final Map<String, String> options;
    private final StructType schema;
    private final Filter[] pushedFilters;
    private UnsafeProjection unsafe;

    RmqTransactionsScan(Map<String, String> options, StructType schema, Filter[] pushedFilters) {
        this.options = options;
        this.schema = schema;
        this.pushedFilters = pushedFilters;
    }

    @Override
    public StructType readSchema() {
        return schema;
    }

    @Override
    public String description() {
        String f = Arrays.stream(pushedFilters).map(Filter::toString).collect(Collectors.joining(", "));
        return "RmqScan(JVM, transactions view on the driver) PushedFilters: [" + f + "], ReadSchema: "
                + schema.catalogString();
    }

    /** A stream of this view is refused (RmqOptions.parse in stream mode says why, in one line). */
    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
        RmqOptions.parse(options, "stream");
        throw new OptionError("option view=transactions is for batch reads (spark.read)");
    }

    @Override
    public InternalRow[] rows() {
        RmqOptions opts = RmqOptions.parse(options);
        boolean excludeInternal = opts.internalTopicsExcluded();
        // the rows are chosen here: the lookup keeps every record asked for (half copies live in internal topics)
        opts.includeTransactional = true;
        opts.excludeInternalTopics = false;
        Set<String> real = opts.topics == null ? null : new LinkedHashSet<>(opts.topics);
        Pattern rx = opts.topicPattern == null ? null : Pattern.compile(opts.topicPattern);
        StructType full = Contract.SCHEMA;
        int phyCol = full.fieldIndex("commitLogOffset");
        UnsafeProjection toRow = UnsafeProjection.create(full);
        List<InternalRow> out = new ArrayList<>();
        List<StoreFiles> files = StoreAccess.forPaths(opts.paths);
        for (int i = 0; i < opts.paths.size(); i++) {
            StoreRef ref;
            List<Transactions.Entry> entries = new ArrayList<>();
            try (StoreReader r = new StoreReader(files.get(i), opts.paths.get(i), opts.storeConfig, null)) {
                ref = new StoreRef(i, opts.paths.get(i), opts.brokers.get(i), opts.storeConfig, r.commitLog.minOffset(),
                        r.commitLogMaxOffset(), r.hasConsumeQueueFiles(), files.get(i));
                for (Transactions.Entry e : Transactions.entries(r, real, excludeInternal)) {
                    if (rx == null || rx.matcher(e.realTopic).matches()) entries.add(e);
                }
            }
            if (entries.isEmpty()) continue;
            long[] offsets = entries.stream().mapToLong(e -> e.phyOffset).distinct().sorted().toArray();
            Map<Long, InternalRow> byPhy = new HashMap<>();
            LookupReader reader = new LookupReader(new ReadSpec(opts, new PushedFilters(), full),
                    new Lookup(ref, offsets, null), full);
            try {
                while (reader.next()) {
                    ColumnarBatch batch = reader.get();
                    for (int k = 0; k < batch.numRows(); k++) {
                        InternalRow row = toRow.apply(batch.getRow(k)).copy();
                        byPhy.put(row.getLong(phyCol), row);
                    }
                }
            } finally {
                reader.close();
            }
            for (Transactions.Entry e : entries) {
                InternalRow base = byPhy.get(e.phyOffset);
                if (base != null) out.add(row(e, base, full));
            }
        }
        return out.toArray(new InternalRow[0]);
    }

    private InternalRow row(Transactions.Entry e, InternalRow base, StructType full) {
        StructField[] fields = schema.fields();
        Object[] values = new Object[fields.length];
        for (int c = 0; c < fields.length; c++) {
            String name = fields[c].name();
            switch (name) {
                case "topic" -> values[c] = UTF8String.fromString(e.realTopic);
                case "queueId" -> values[c] = e.realQueueId;
                case "queueOffset" -> values[c] = e.queueOffset;
                case "tagsCode" -> values[c] = e.tagsCode;
                case "transactionId" -> values[c] = e.transactionId == null ? null : UTF8String.fromString(e.transactionId);
                case "producerGroup" -> values[c] = e.producerGroup == null ? null : UTF8String.fromString(e.producerGroup);
                case "state" -> values[c] = UTF8String.fromString(e.state);
                case "checkTimes" -> values[c] = e.checkTimes;
                case "halfCopies" -> values[c] = e.halfCopies;
                case "commits" -> values[c] = e.commits;
                case "resolvedTime" -> values[c] = e.resolvedTimeMs == null ? null : e.resolvedTimeMs * 1000L;
                case "open" -> values[c] = e.open;
                case "halfCommitLogOffset" -> values[c] = e.halfOffset;
                default -> {
                    int j = full.fieldIndex(name);
                    values[c] = base.isNullAt(j) ? null : base.get(j, full.fields()[j].dataType());
                }
            }
        }
        if (unsafe == null) unsafe = UnsafeProjection.create(schema);
        return unsafe.apply(new GenericInternalRow(values)).copy();
    }
}
