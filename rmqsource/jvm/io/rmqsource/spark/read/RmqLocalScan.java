package io.rmqsource.spark.read;

import io.rmqsource.spark.RmqOptions;
import io.rmqsource.spark.read.RmqInputPartition.Lookup;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.connector.read.LocalScan;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * A point lookup ({@code msgId = x}, {@code uniqKey = x} through the IndexFile) answered on the
 * driver while the query is planned: a few positioned reads cost far less than launching a Spark
 * job.  Spark turns it into a LocalTableScan (a select that reorders the columns adds a projection,
 * which Spark still runs as a one-task job).  Used only when the plan is point reads of at most
 * {@link #MAX_RECORDS} records; anything larger stays a distributed scan.
 */
final class RmqLocalScan implements LocalScan {
    static final int MAX_RECORDS = 4096;

    private final ReadSpec spec;
    private final List<Lookup> lookups;
    private final Filter[] pushedFilters;

    private RmqLocalScan(ReadSpec spec, List<Lookup> lookups, Filter[] pushedFilters) {
        this.spec = spec;
        this.lookups = lookups;
        this.pushedFilters = pushedFilters;
    }

    /** The local scan of a lookup plan, or null when the plan is not point reads of a few records. */
    static RmqLocalScan plan(RmqOptions opts, PushedFilters pushed, StructType schema, Filter[] pushedFilters) {
        List<RmqInputPartition> parts = new RmqPlanner(opts, pushed, RmqBatch.defaultParallelism()).plan(false);
        List<Lookup> lookups = new ArrayList<>();
        long records = 0;
        for (RmqInputPartition p : parts) {
            if (!(p instanceof Lookup)) return null;
            lookups.add((Lookup) p);
            records += ((Lookup) p).offsets.length;
        }
        return records <= MAX_RECORDS ? new RmqLocalScan(new ReadSpec(opts, pushed, schema), lookups, pushedFilters) : null;
    }

    @Override
    public InternalRow[] rows() {
        UnsafeProjection toRow = UnsafeProjection.create(spec.schema);
        List<InternalRow> out = new ArrayList<>();
        for (Lookup part : lookups) {
            LookupReader reader = new LookupReader(spec, part, spec.schema);
            try {
                while (reader.next()) {
                    ColumnarBatch batch = reader.get();
                    for (int i = 0; i < batch.numRows(); i++) out.add(toRow.apply(batch.getRow(i)).copy());
                }
            } finally {
                reader.close();
            }
        }
        return out.toArray(new InternalRow[0]);
    }

    @Override
    public StructType readSchema() {
        return spec.schema;
    }

    @Override
    public String description() {
        String filters = Arrays.stream(pushedFilters).map(Filter::toString).collect(Collectors.joining(", "));
        return "RmqScan(JVM, point reads on the driver) PushedFilters: [" + filters + "], ReadSchema: "
                + spec.schema.catalogString();
    }
}
