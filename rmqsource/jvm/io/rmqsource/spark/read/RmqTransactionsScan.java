package io.rmqsource.spark.read;

import io.rmqsource.errors.OptionError;
import io.rmqsource.spark.Contract;
import io.rmqsource.spark.RmqOptions;
import io.rmqsource.store.Transactions;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.LocalScan;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
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
        Set<String> real = opts.topics == null ? null : new LinkedHashSet<>(opts.topics);
        Pattern rx = opts.topicPattern == null ? null : Pattern.compile(opts.topicPattern);
        return EntryRows.rows(opts, schema, r -> {
            List<Transactions.Entry> entries = new ArrayList<>();
            for (Transactions.Entry e : Transactions.entries(r, real, excludeInternal)) {
                if (rx == null || rx.matcher(e.realTopic).matches()) entries.add(e);
            }
            return entries;
        }, e -> e.phyOffset, RmqTransactionsScan::column);
    }

    /** The value of a transactions-view column for an entry (Spark's internal form), or the record's own. */
    private static Object column(Transactions.Entry e, String name) {
        return switch (name) {
            case "topic" -> UTF8String.fromString(e.realTopic);
            case "queueId" -> e.realQueueId;
            case "queueOffset" -> e.queueOffset;
            case "tagsCode" -> e.tagsCode;
            case "transactionId" -> e.transactionId == null ? null : UTF8String.fromString(e.transactionId);
            case "producerGroup" -> e.producerGroup == null ? null : UTF8String.fromString(e.producerGroup);
            case "state" -> UTF8String.fromString(e.state);
            case "checkTimes" -> e.checkTimes;
            case "halfCopies" -> e.halfCopies;
            case "commits" -> e.commits;
            case "resolvedTime" -> e.resolvedTimeMs == null ? null : e.resolvedTimeMs * 1000L;
            case "open" -> e.open;
            case "halfCommitLogOffset" -> e.halfOffset;
            default -> EntryRows.FROM_RECORD;
        };
    }
}
