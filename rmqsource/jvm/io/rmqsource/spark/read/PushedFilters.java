package io.rmqsource.spark.read;

import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;

/**
 * Which Spark filters the scan enforces itself (twin of rmqsource/spark/pushdown.py).
 *
 * Every accepted filter is enforced exactly on each decoded row, so Spark need not re-check it;
 * planning also uses them to prune partitions and narrow offset ranges, and the tag filter to
 * skip ConsumeQueue units whose tagsCode cannot match.  Filters that cannot be enforced exactly
 * go back to Spark.  Beyond the Python path, IsNotNull is accepted where it is always true: on
 * columns that are never null, and on tags / uniqKey when an equality on them is pushed.
 */
public final class PushedFilters implements Serializable {
    private static final long serialVersionUID = 1L;
    public static final long MIN = Long.MIN_VALUE;
    public static final long MAX = Long.MAX_VALUE;
    /** Columns decoded from the record header or constant per store: never null. */
    private static final Set<String> NEVER_NULL = Set.of("topic", "queueId", "queueOffset", "commitLogOffset", "msgId",
            "body", "properties", "bornTimestamp", "storeTimestamp", "bornHost", "storeHost", "sysFlag", "flag",
            "reconsumeTimes", "bodyCRC", "preparedTransactionOffset", "transactionType", "storeSize", "broker",
            "storePath");

    public Set<String> tags;
    public Set<String> topics;
    public Set<Integer> queueIds;
    public long[] queueOffset = {MIN, MAX};       // [lo, hi)
    public long[] phyOffset = {MIN, MAX};
    public long[] storeTs = {MIN, MAX};          // ms
    public Set<String> msgIds;
    public Set<String> uniqKeys;
    public final List<String> descriptions = new ArrayList<>();

    /** A pushed set is empty or a range is empty: nothing can match. */
    public boolean empty() {
        for (Set<?> s : new Set<?>[] {tags, topics, queueIds, msgIds, uniqKeys}) {
            if (s != null && s.isEmpty()) return true;
        }
        return emptyRange(queueOffset) || emptyRange(phyOffset) || emptyRange(storeTs);
    }

    /** [lo, hi) holds nothing; hi = MAX means no upper bound, so {MAX, MAX} holds MAX itself. */
    private static boolean emptyRange(long[] r) {
        return r[1] == MAX ? r[0] > r[1] : r[0] >= r[1];
    }

    /** No filter was pushed: every record of the read is a row. */
    public boolean none() {
        return tags == null && topics == null && queueIds == null && msgIds == null && uniqKeys == null
                && queueOffset[0] == MIN && queueOffset[1] == MAX && !needsRecords();
    }

    /** Filters needing the record itself (a count from ConsumeQueue offsets cannot answer them). */
    public boolean needsRecords() {
        return tags != null || msgIds != null || uniqKeys != null || storeTs[0] != MIN || storeTs[1] != MAX
                || phyOffset[0] != MIN || phyOffset[1] != MAX;
    }

    private static <T> Set<T> intersect(Set<T> current, Set<T> values) {
        if (current == null) return values;
        Set<T> out = new LinkedHashSet<>(current);
        out.retainAll(values);
        return out;
    }

    /** Pushes what can be enforced; returns the filters Spark must still evaluate. */
    public Filter[] push(Filter[] filters) {
        List<Filter> rejected = new ArrayList<>();
        List<IsNotNull> notNulls = new ArrayList<>();
        for (Filter f : filters) {
            if (f instanceof IsNotNull) {
                notNulls.add((IsNotNull) f);
            } else if (pushOne(f)) {
                descriptions.add(f.toString());
            } else {
                rejected.add(f);
            }
        }
        for (IsNotNull f : notNulls) {
            String col = f.attribute();
            if (NEVER_NULL.contains(col) || ("tags".equals(col) && tags != null) || ("uniqKey".equals(col) && uniqKeys != null)) {
                descriptions.add(f.toString());
            } else {
                rejected.add(f);
            }
        }
        return rejected.toArray(new Filter[0]);
    }

    private boolean pushOne(Filter f) {
        String col = attribute(f);
        if (col == null) return false;
        switch (col) {
            case "tags": {
                Set<String> v = strings(f);
                if (v == null) return false;
                tags = intersect(tags, v);
                return true;
            }
            case "topic": {
                Set<String> v = strings(f);
                if (v == null) return false;
                topics = intersect(topics, v);
                return true;
            }
            case "queueId": {
                Set<Integer> v = ints(f);
                if (v == null) return false;
                queueIds = intersect(queueIds, v);
                return true;
            }
            case "msgId": {
                Set<String> v = strings(f);
                if (v == null) return false;
                Set<String> up = new LinkedHashSet<>();
                for (String s : v) up.add(s.strip().toUpperCase(java.util.Locale.ROOT));
                msgIds = intersect(msgIds, up);
                return true;
            }
            case "uniqKey": {
                Set<String> v = strings(f);
                if (v == null) return false;
                uniqKeys = intersect(uniqKeys, v);
                return true;
            }
            case "queueOffset":
            case "commitLogOffset": {
                long[] r = range(f);
                if (r == null) return false;
                long[] cur = col.equals("queueOffset") ? queueOffset : phyOffset;
                cur[0] = Math.max(cur[0], r[0]);
                cur[1] = Math.min(cur[1], r[1]);
                return true;
            }
            case "storeTimestamp": {
                long[] r = tsRange(f);
                if (r == null) return false;
                storeTs[0] = Math.max(storeTs[0], r[0]);
                storeTs[1] = Math.min(storeTs[1], r[1]);
                return true;
            }
            default:
                return false;
        }
    }

    static String attribute(Filter f) {
        if (f instanceof EqualTo) return ((EqualTo) f).attribute();
        if (f instanceof In) return ((In) f).attribute();
        if (f instanceof GreaterThan) return ((GreaterThan) f).attribute();
        if (f instanceof GreaterThanOrEqual) return ((GreaterThanOrEqual) f).attribute();
        if (f instanceof LessThan) return ((LessThan) f).attribute();
        if (f instanceof LessThanOrEqual) return ((LessThanOrEqual) f).attribute();
        return null;
    }

    private static Object value(Filter f) {
        if (f instanceof EqualTo) return ((EqualTo) f).value();
        if (f instanceof GreaterThan) return ((GreaterThan) f).value();
        if (f instanceof GreaterThanOrEqual) return ((GreaterThanOrEqual) f).value();
        if (f instanceof LessThan) return ((LessThan) f).value();
        if (f instanceof LessThanOrEqual) return ((LessThanOrEqual) f).value();
        return null;
    }

    static Set<String> strings(Filter f) {
        Object[] vals = f instanceof EqualTo ? new Object[] {((EqualTo) f).value()}
                : f instanceof In ? ((In) f).values() : null;
        if (vals == null) return null;
        Set<String> out = new LinkedHashSet<>();
        for (Object v : vals) {
            if (!(v instanceof String)) return null;
            out.add((String) v);
        }
        return out;
    }

    private static Long integral(Object v) {
        if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte) {
            return ((Number) v).longValue();
        }
        return null;
    }

    private static Set<Integer> ints(Filter f) {
        Object[] vals = f instanceof EqualTo ? new Object[] {((EqualTo) f).value()}
                : f instanceof In ? ((In) f).values() : null;
        if (vals == null) return null;
        Set<Integer> out = new LinkedHashSet<>();
        for (Object v : vals) {
            Long l = integral(v);
            if (l == null) return null;
            if (l >= Integer.MIN_VALUE && l <= Integer.MAX_VALUE) out.add((int) (long) l);
        }
        return out;
    }

    /** [lo, hi) for an integer comparison. */
    private static long[] range(Filter f) {
        Long v = integral(value(f));
        if (v == null) return null;
        if (f instanceof EqualTo) return v == MAX ? new long[] {MAX, MAX} : new long[] {v, v + 1};
        if (f instanceof GreaterThan) return v == MAX ? new long[] {0, 0} : new long[] {v + 1, MAX};
        if (f instanceof GreaterThanOrEqual) return new long[] {v, MAX};
        if (f instanceof LessThan) return new long[] {MIN, v};
        if (f instanceof LessThanOrEqual) return v == MAX ? new long[] {MIN, MAX} : new long[] {MIN, v + 1};
        return null;
    }

    /** [lo, hi) in ms for a comparison of storeTimestamp (microseconds) with a literal. */
    static long[] tsRange(Filter f) {
        Object v = value(f);
        long us;
        if (v instanceof Timestamp) {
            Timestamp t = (Timestamp) v;
            us = Math.floorDiv(t.getTime(), 1000L) * 1_000_000L + t.getNanos() / 1000;
        } else if (v instanceof Instant) {
            Instant t = (Instant) v;
            us = t.getEpochSecond() * 1_000_000L + t.getNano() / 1000;
        } else {
            return null;
        }
        long fl = Math.floorDiv(us, 1000L);
        long ce = -Math.floorDiv(-us, 1000L);
        if (f instanceof EqualTo) return Math.floorMod(us, 1000L) == 0 ? new long[] {fl, fl + 1} : new long[] {0, 0};
        if (f instanceof GreaterThan) return new long[] {fl + 1, MAX};
        if (f instanceof GreaterThanOrEqual) return new long[] {ce, MAX};
        if (f instanceof LessThan) return new long[] {MIN, ce};
        if (f instanceof LessThanOrEqual) return new long[] {MIN, fl + 1};
        return null;
    }

    public static List<byte[]> utf8(Set<String> values) {
        List<byte[]> out = new ArrayList<>();
        if (values != null) for (String v : values) out.add(v.getBytes(StandardCharsets.UTF_8));
        return out;
    }
}
