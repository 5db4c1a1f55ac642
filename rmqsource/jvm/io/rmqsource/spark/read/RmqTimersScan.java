package io.rmqsource.spark.read;

import io.rmqsource.errors.OptionError;
import io.rmqsource.spark.Contract;
import io.rmqsource.spark.RmqOptions;
import io.rmqsource.store.Timers;
import java.io.Serializable;
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
 * {@code option("view", "timers")}: one row per timer / delay message ({@link Timers}; twin of
 * rmqsource/spark/timers.py), answered on the driver while the query is planned (the view holds the parked
 * messages only).  The message columns are decoded by {@link LookupReader} at each row's CommitLog offset and
 * put under the real topic and queue; {@code deliverTime}, {@code delayLevel} and {@code state} follow.
 * Pushed (exactly): {@code topic} = / IN (restricts the real queues read), {@code state} = / IN and
 * {@code deliverTime} comparisons (entries dropped before their records are read).
 */
public final class RmqTimersScan implements LocalScan {
    /** The message columns, then deliverTime, delayLevel, state (contract.json viewColumns). */
    public static final StructType SCHEMA = Contract.viewSchema("timers");

    /** Whether these read options ask for the timers view (looked at before they are parsed). */
    public static boolean requested(Map<String, String> options) {
        String v = options.get("view");
        return v != null && v.strip().equalsIgnoreCase("timers");
    }

    /** The filters this view enforces (PushedFilters' literals, other columns). */
    static final class TimersFilters implements Serializable {
        private static final long serialVersionUID = 1L;
        Set<String> topics;
        Set<String> states;
        final long[] deliverMs = {PushedFilters.MIN, PushedFilters.MAX};
        final List<String> descriptions = new ArrayList<>();

        private static Set<String> intersect(Set<String> cur, Set<String> v) {
            if (cur == null) return v;
            Set<String> out = new LinkedHashSet<>(cur);
            out.retainAll(v);
            return out;
        }

        Filter[] push(Filter[] filters) {
            List<Filter> rejected = new ArrayList<>();
            for (Filter f : filters) {
                String col = PushedFilters.attribute(f);
                boolean ok = false;
                if ("topic".equals(col) || "state".equals(col)) {
                    Set<String> v = PushedFilters.strings(f);
                    if (v != null) {
                        if (col.equals("topic")) topics = intersect(topics, v);
                        else states = intersect(states, v);
                        ok = true;
                    }
                } else if ("deliverTime".equals(col)) {
                    long[] r = PushedFilters.tsRange(f);
                    if (r != null) {
                        deliverMs[0] = Math.max(deliverMs[0], r[0]);
                        deliverMs[1] = Math.min(deliverMs[1], r[1]);
                        ok = true;
                    }
                }
                if (ok) descriptions.add(f.toString());
                else rejected.add(f);
            }
            return rejected.toArray(new Filter[0]);
        }

        boolean keeps(Timers.Entry e) {
            if (states != null && !states.contains(e.state)) return false;
            if (deliverMs[0] != PushedFilters.MIN || deliverMs[1] != PushedFilters.MAX) {
                Long t = e.deliverTimeMs;
                return t != null && t >= deliverMs[0] && (deliverMs[1] == PushedFilters.MAX || t < deliverMs[1]);
            }
            return true;
        }
    }

    private final Map<String, String> options;
    private final TimersFilters filters;
    private final StructType schema;
    private final Filter[] pushedFilters;

    RmqTimersScan(Map<String, String> options, TimersFilters filters, StructType schema, Filter[] pushedFilters) {
        this.options = options;
        this.filters = filters;
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
        return "RmqScan(JVM, timers view on the driver) PushedFilters: [" + f + "], ReadSchema: " + schema.catalogString();
    }

    /** A stream of this view is refused (RmqOptions.parse in stream mode says why, in one line). */
    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
        RmqOptions.parse(options, "stream");
        throw new OptionError("option view=timers is for batch reads (spark.read)");
    }

    @Override
    public InternalRow[] rows() {
        RmqOptions opts = RmqOptions.parse(options);
        // RocketMQ's own real topics (retries the broker schedules, POP checkpoints) follow the whole-store rule
        boolean excludeInternal = opts.internalTopicsExcluded();
        Set<String> real = opts.topics == null ? null : new LinkedHashSet<>(opts.topics);
        if (filters.topics != null) {
            if (real == null) real = new LinkedHashSet<>(filters.topics);
            else real.retainAll(filters.topics);
        }
        Set<String> topics = real;
        Pattern rx = opts.topicPattern == null ? null : Pattern.compile(opts.topicPattern);
        return EntryRows.rows(opts, schema, r -> {
            List<Timers.Entry> entries = new ArrayList<>();
            for (Timers.Entry e : Timers.entries(r, topics, excludeInternal)) {
                if ((rx == null || rx.matcher(e.realTopic).matches()) && filters.keeps(e)) entries.add(e);
            }
            return entries;
        }, e -> e.phyOffset, RmqTimersScan::column);
    }

    /** The value of a timers-view column for an entry (Spark's internal form), or the record's own. */
    private static Object column(Timers.Entry e, String name) {
        return switch (name) {
            case "topic" -> UTF8String.fromString(e.realTopic);
            case "queueId" -> e.realQueueId;
            case "queueOffset" -> e.queueOffset;
            case "tagsCode" -> e.tagsCode;
            case "deliverTime" -> e.deliverTimeMs == null ? null : e.deliverTimeMs * 1000L;
            case "delayLevel" -> e.delayLevel;
            case "state" -> UTF8String.fromString(e.state);
            default -> EntryRows.FROM_RECORD;
        };
    }
}
