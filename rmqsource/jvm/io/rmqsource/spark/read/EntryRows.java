package io.rmqsource.spark.read;

import io.rmqsource.io.StoreFiles;
import io.rmqsource.spark.Contract;
import io.rmqsource.spark.RmqOptions;
import io.rmqsource.spark.StoreAccess;
import io.rmqsource.spark.read.RmqInputPartition.Lookup;
import io.rmqsource.store.StoreReader;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiFunction;
import java.util.function.Function;
import java.util.function.ToLongFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Rows of the views whose rows are records the store layer chose (timers, transactions; twin of
 * rmqsource/spark/entry_rows.py): each entry names a record by CommitLog offset; the message columns come from
 * {@link LookupReader} at that offset, and the view fills the columns it knows (the real topic and queue, the
 * unit, its own columns). Entries whose record cannot be read are left out.
 */
final class EntryRows {
    /** What a view's column function returns for a column the record's own value fills. */
    static final Object FROM_RECORD = new Object();

    private EntryRows() {
    }

    /**
     * The rows of every store of {@code opts}: {@code entriesOf} chooses the entries of a store (run while it is
     * open), {@code phyOffset} names each one's record, {@code column} gives the value of a column of
     * {@code schema} for an entry (Spark's internal form), or {@link #FROM_RECORD}.
     */
    static <E> InternalRow[] rows(RmqOptions opts, StructType schema, Function<StoreReader, List<E>> entriesOf,
                                  ToLongFunction<E> phyOffset, BiFunction<E, String, Object> column) {
        // the rows are chosen by entriesOf: the lookup keeps every record asked for (copies live in internal topics)
        opts.includeTransactional = true;
        opts.excludeInternalTopics = false;
        StructType full = Contract.SCHEMA;
        int phyCol = full.fieldIndex("commitLogOffset");
        UnsafeProjection toRow = UnsafeProjection.create(full);
        UnsafeProjection out = UnsafeProjection.create(schema);
        StructField[] fields = schema.fields();
        List<InternalRow> rows = new ArrayList<>();
        List<StoreFiles> files = StoreAccess.forPaths(opts.paths);
        for (int i = 0; i < opts.paths.size(); i++) {
            StoreRef ref;
            List<E> entries;
            try (StoreReader r = new StoreReader(files.get(i), opts.paths.get(i), opts.storeConfig, null)) {
                ref = new StoreRef(i, opts.paths.get(i), opts.brokers.get(i), opts.storeConfig, r.commitLog.minOffset(),
                        r.commitLogMaxOffset(), r.hasConsumeQueueFiles(), files.get(i));
                entries = entriesOf.apply(r);
            }
            if (entries.isEmpty()) continue;
            long[] offsets = entries.stream().mapToLong(phyOffset).distinct().sorted().toArray();
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
            for (E e : entries) {
                InternalRow base = byPhy.get(phyOffset.applyAsLong(e));
                if (base == null) continue;
                Object[] values = new Object[fields.length];
                for (int c = 0; c < fields.length; c++) {
                    Object v = column.apply(e, fields[c].name());
                    if (v == FROM_RECORD) {
                        int j = full.fieldIndex(fields[c].name());
                        v = base.isNullAt(j) ? null : base.get(j, full.fields()[j].dataType());
                    }
                    values[c] = v;
                }
                rows.add(out.apply(new GenericInternalRow(values)).copy());
            }
        }
        return rows.toArray(new InternalRow[0]);
    }
}
