package io.rmqsource.spark.read;

import io.rmqsource.errors.OptionError;
import io.rmqsource.errors.Repr;
import io.rmqsource.spark.Contract;
import io.rmqsource.spark.RmqOptions;
import io.rmqsource.spark.bodies.BodySpec;
import io.rmqsource.spark.stream.RmqMicroBatchStream;
import io.rmqsource.store.MappedFaults;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.aggregate.AggregateFunc;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.expressions.aggregate.Count;
import org.apache.spark.sql.connector.expressions.aggregate.CountStar;
import org.apache.spark.sql.connector.expressions.aggregate.Max;
import org.apache.spark.sql.connector.expressions.aggregate.Min;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownAggregates;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Builds the JVM batch scan of {@code format("rmq")}: filter pushdown (the Python path's set),
 * column pruning, and count(*) pushdown (also grouped by topic / queueId / broker / storePath)
 * answered from ConsumeQueue offsets where that is exact: topic reads whose filters need no record
 * (units and record headers walked by tasks, with min / max of queueOffset, commitLogOffset and
 * storeTimestamp beside the counts: {@link QueueCountReader}), and whole-store reads with no filter
 * whose ConsumeQueues tile the CommitLog (count(*) only, counted on the driver, {@link RmqCountScan}).
 *
 * A new builder per query: nothing is kept between queries of one DataFrame.  Options are parsed
 * only when a batch is planned, so a stream (whose options differ) builds through here untouched
 * and runs as {@link RmqMicroBatchStream}, reading the table's schema.
 */
public class RmqScanBuilder implements ScanBuilder, SupportsPushDownFilters, SupportsPushDownRequiredColumns,
        SupportsPushDownAggregates {
    private static final Set<String> GROUP_COLUMNS = Set.of("topic", "queueId", "broker", "storePath");
    /** Columns whose min / max a topic read answers from each queue range's ends. */
    private static final Set<String> MIN_MAX_COLUMNS = Set.of("queueOffset", "commitLogOffset", "storeTimestamp");
    private static final Set<String> NEVER_NULL = Set.of("topic", "queueId", "queueOffset", "commitLogOffset", "msgId",
            "body", "storeTimestamp", "bornTimestamp", "storeSize", "sysFlag", "broker", "storePath");


    /** The value of group column {@code column} for a queue of a store: a string, or the queueId. */
    static Object groupValue(String column, String topic, int queueId, String broker, String storePath) {
        return switch (column) {
            case "topic" -> UTF8String.fromString(topic);
            case "queueId" -> queueId;
            case "broker" -> UTF8String.fromString(broker);
            default -> UTF8String.fromString(storePath);
        };
    }

    private final CaseInsensitiveStringMap options;
    private final StructType tableSchema;
    private final PushedFilters pushed = new PushedFilters();
    private Filter[] pushedFilters = new Filter[0];
    private StructType required = Contract.SCHEMA;
    private String[] groupBy;
    private String aggregationText;
    private boolean countTried;
    private RmqCountScan wholeStoreCount;

    public RmqScanBuilder(CaseInsensitiveStringMap options, StructType tableSchema) {
        this.options = options;
        this.tableSchema = tableSchema;
        this.metadata = RmqMetadataScan.requested(options);
        // with option metadata, a view given too is refused when the options are parsed (parse_metadata)
        this.timers = metadata == null && RmqTimersScan.requested(options) ? new RmqTimersScan.TimersFilters() : null;
        if (timers != null) required = RmqTimersScan.SCHEMA;
        this.transactions = metadata == null && RmqTransactionsScan.requested(options);
        if (transactions) required = RmqTransactionsScan.SCHEMA;
        this.view = metadata == null ? RmqViewScan.requested(options) : null;
        if (view != null) required = Contract.viewSchema(view);
        if (metadata != null) required = Contract.metadataSchema(metadata);
        // refuses bodyFormat with a view or metadata (a message read only)
        this.body = BodySpec.parse(options);
        if (body != null) required = body.tableSchema();
    }

    /** Typed bodies (docs/bodies.md): their options, else null.  No aggregate is answered without decoding. */
    private final BodySpec body;

    /** Option metadata's table ({@link RmqMetadataScan}: nothing pushed), else null. */
    private final String metadata;

    /** View dlq, retry or trace ({@link RmqViewScan}), else null. */
    private final String view;

    /** Option view=transactions ({@link RmqTransactionsScan}: nothing pushed). */
    private final boolean transactions;

    /** The timers view's filters (option view=timers), else null. */
    private final RmqTimersScan.TimersFilters timers;

    @Override
    public Filter[] pushFilters(Filter[] filters) {
        if (metadata != null || transactions) return filters;
        if (timers != null) {
            Filter[] rejected = timers.push(filters);
            List<Filter> accepted = new ArrayList<>(List.of(filters));
            accepted.removeAll(List.of(rejected));
            pushedFilters = accepted.toArray(new Filter[0]);
            return rejected;
        }
        Filter[] rejected = view != null ? RmqViewScan.push(view, pushed, filters) : pushed.push(filters);
        List<Filter> accepted = new ArrayList<>(List.of(filters));
        accepted.removeAll(List.of(rejected));
        pushedFilters = accepted.toArray(new Filter[0]);
        return rejected;
    }

    @Override
    public Filter[] pushedFilters() {
        return pushedFilters;
    }

    /** The requested columns, checked against ours (name and type), in the order asked. */
    @Override
    public void pruneColumns(StructType requiredSchema) {
        StructType ours = metadata != null ? Contract.metadataSchema(metadata) : timers != null ? RmqTimersScan.SCHEMA
                : transactions ? RmqTransactionsScan.SCHEMA : view != null ? Contract.viewSchema(view)
                : body != null ? body.tableSchema() : Contract.SCHEMA;
        List<String> names = List.of(ours.fieldNames());
        for (StructField f : requiredSchema.fields()) {
            if (!names.contains(f.name())) {
                throw new OptionError("column " + Repr.of(f.name()) + " is not provided by the rmq source; columns are: "
                        + String.join(", ", names));
            }
            DataType want = ours.apply(f.name()).dataType();
            if (!want.sameType(f.dataType())) {
                throw new OptionError("column " + Repr.of(f.name()) + " must have type " + want.simpleString()
                        + ", the schema given says " + f.dataType().simpleString());
            }
        }
        StructType out = new StructType();
        for (StructField f : requiredSchema.fields()) out = out.add(ours.apply(f.name()));
        required = out;
    }

    /** The group columns of an aggregation (topic / queueId / broker / storePath only), or null. */
    private static String[] groupColumns(Aggregation aggregation) {
        List<String> group = new ArrayList<>();
        for (Expression e : aggregation.groupByExpressions()) {
            String n = e instanceof NamedReference ? name(e) : null;
            if (n == null || !GROUP_COLUMNS.contains(n)) return null;
            group.add(n);
        }
        return group.toArray(new String[0]);
    }

    private static boolean countsAll(AggregateFunc f) {
        return f instanceof CountStar || (f instanceof Count && !((Count) f).isDistinct()
                && ((Count) f).column() instanceof NamedReference && NEVER_NULL.contains(name(((Count) f).column())));
    }

    /** The group columns of a count-only aggregation we can answer, or null. */
    private static String[] countGroups(Aggregation aggregation) {
        for (AggregateFunc f : aggregation.aggregateExpressions()) if (!countsAll(f)) return null;
        return groupColumns(aggregation);
    }

    /**
     * The aggregates of an aggregation a topic read answers per queue range, as {@link QueueCountReader}
     * names its output columns ({@code count}, {@code min:queueOffset}, {@code max:storeTimestamp}, ...),
     * or null when one is outside count(*) / min / max of queueOffset, commitLogOffset, storeTimestamp.
     */
    private static String[] queueAggregates(Aggregation aggregation) {
        AggregateFunc[] fs = aggregation.aggregateExpressions();
        String[] out = new String[fs.length];
        for (int i = 0; i < fs.length; i++) {
            AggregateFunc f = fs[i];
            Expression col = f instanceof Min ? ((Min) f).column() : f instanceof Max ? ((Max) f).column() : null;
            String n = col instanceof NamedReference ? name(col) : null;
            if (countsAll(f)) out[i] = QueueCountReader.COUNT;
            else if (n != null && MIN_MAX_COLUMNS.contains(n)) out[i] = (f instanceof Min ? "min:" : "max:") + n;
            else return null;
        }
        return out;
    }

    private static StructType countSchema(String[] groupBy, int aggregates) {
        StructType schema = new StructType();
        for (String g : groupBy) schema = schema.add(Contract.SCHEMA.apply(g));
        for (int i = 0; i < aggregates; i++) schema = schema.add("count" + i, DataTypes.LongType, false);
        return schema;
    }

    /** Group columns, then one column per aggregate named {@code agg<i>:<what>} (counts never null). */
    private static StructType queueAggregateSchema(String[] groupBy, String[] aggregates) {
        StructType schema = new StructType();
        for (String g : groupBy) schema = schema.add(Contract.SCHEMA.apply(g));
        for (int i = 0; i < aggregates.length; i++) {
            String a = aggregates[i];
            boolean count = QueueCountReader.COUNT.equals(a);
            DataType type = count ? DataTypes.LongType : Contract.SCHEMA.apply(a.substring(4)).dataType();
            schema = schema.add("agg" + i + ":" + a, type, !count);
        }
        return schema;
    }

    /**
     * A whole-store count with no filter, answered on the driver when the ConsumeQueues tile the
     * CommitLog (then complete: one row per group, no aggregate left for Spark); computed once.
     */
    private RmqCountScan wholeStoreCount(Aggregation aggregation) {
        if (!countTried) {
            countTried = true;
            RmqOptions opts = RmqOptions.parse(options);
            String[] group = countGroups(aggregation);
            if (group != null && !RmqPlanner.queueMode(opts, pushed) && pushed.none() && opts.keys == null) {
                int n = aggregation.aggregateExpressions().length;
                wholeStoreCount = MappedFaults.guard(() ->
                        RmqCountScan.plan(opts, group, n, countSchema(group, n), describe(aggregation)));
            }
        }
        return wholeStoreCount;
    }

    @Override
    public boolean supportCompletePushDown(Aggregation aggregation) {
        if (metadata != null || timers != null || transactions || view != null || body != null) return false;
        return wholeStoreCount(aggregation) != null;
    }

    @Override
    public boolean pushAggregation(Aggregation aggregation) {
        // with bodyFormat a row is a decoded body: a skipped bad record is no row, counts need the bodies
        if (metadata != null || timers != null || transactions || view != null || body != null) return false;
        if (wholeStoreCount(aggregation) != null) {
            required = wholeStoreCount.readSchema();
            return true;
        }
        RmqOptions opts = RmqOptions.parse(options);
        String[] group = groupColumns(aggregation);
        String[] aggregates = queueAggregates(aggregation);
        // options keys / keysFile: a row is a record whose keys match, counts need the records
        if (group == null || aggregates == null || !RmqPlanner.queueMode(opts, pushed) || pushed.needsRecords()
                || opts.keys != null) {
            return false;
        }
        // Not complete: a queue range gives a row per group it holds and a group spans ranges (Spark merges them).
        groupBy = group;
        aggregationText = describe(aggregation);
        required = queueAggregateSchema(groupBy, aggregates);
        return true;
    }

    /** The aggregation as the plan shows it, e.g. {@code [COUNT(*)] GROUP BY [topic]} (Spark 3.5's has no toString). */
    static String describe(Aggregation aggregation) {
        List<String> aggregates = new ArrayList<>();
        for (AggregateFunc f : aggregation.aggregateExpressions()) aggregates.add(f.describe());
        List<String> groups = new ArrayList<>();
        for (Expression e : aggregation.groupByExpressions()) groups.add(e.describe());
        return aggregates + (groups.isEmpty() ? "" : " GROUP BY " + groups);
    }

    private static String name(Expression e) {
        String[] parts = ((NamedReference) e).fieldNames();
        return parts.length == 1 ? parts[0] : null;
    }

    @Override
    public Scan build() {
        if (metadata != null) return new RmqMetadataScan(options, metadata, required);
        if (timers != null) return new RmqTimersScan(options, timers, required, pushedFilters);
        if (transactions) return new RmqTransactionsScan(options, required, pushedFilters);
        if (view != null) return new RmqViewScan(options, view, pushed, pushedFilters, required);
        if (wholeStoreCount != null) return wholeStoreCount;
        if (groupBy == null && body == null && (pushed.msgIds != null || pushed.uniqKeys != null)) {
            RmqOptions opts = RmqOptions.parse(options);
            // with options keys the scan (its description names the keys) plans the lookups
            if (opts.keys == null && (pushed.msgIds != null || (opts.indexLookups && opts.storeConfig.messageIndexEnable()))) {
                Scan local = MappedFaults.guard(() -> RmqLocalScan.plan(opts, pushed, required, pushedFilters));
                if (local != null) return local;
            }
        }
        return new RmqScan(options, pushed, pushedFilters, required, groupBy, aggregationText, tableSchema, body);
    }
}
