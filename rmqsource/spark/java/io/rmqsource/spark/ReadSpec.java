package io.rmqsource.spark;

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

    ReadSpec(RmqOptions options, PushedFilters pushed, StructType schema) {
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
