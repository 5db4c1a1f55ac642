package io.rmqsource.spark.read;

import io.rmqsource.spark.RmqOptions;
import java.io.Serializable;
import java.util.Arrays;
import org.apache.spark.sql.types.StructType;

/** What every task needs besides its partition: options, pushed filters, output columns. */
final class ReadSpec implements Serializable {
    private static final long serialVersionUID = 1L;
    final RmqOptions options;
    final PushedFilters pushed;
    final StructType schema;
    /** Java String.hashCode of the pushed tags, sorted (null: no tag filter). */
    final int[] tagHashes;
    /** Decode columns on first access (a stream, whose columns Spark does not prune). */
    final boolean deferColumns;
    /** Rows per columnar batch: batchSize, or fewer when the task reads fewer (no larger vectors). */
    final int batchRows;

    ReadSpec(RmqOptions options, PushedFilters pushed, StructType schema) {
        this(options, pushed, schema, false, Long.MAX_VALUE);
    }

    /** {@code rowsAtMost}: the task reads no more rows than this. */
    ReadSpec(RmqOptions options, PushedFilters pushed, StructType schema, boolean deferColumns, long rowsAtMost) {
        this.deferColumns = deferColumns;
        this.batchRows = (int) Math.max(1, Math.min(Math.max(1, options.batchSize), rowsAtMost));
        this.options = options;
        this.pushed = pushed;
        this.schema = schema;
        if (pushed.tags != null) {
            int[] h = pushed.tags.stream().mapToInt(String::hashCode).distinct().toArray();
            Arrays.sort(h);
            tagHashes = h;
        } else {
            tagHashes = null;
        }
    }
}
