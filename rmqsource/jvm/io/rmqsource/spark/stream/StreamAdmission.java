package io.rmqsource.spark.stream;

import io.rmqsource.store.QueueKey;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Admission control of a micro-batch (split_budget and apply_bytes in rmqsource/spark/stream_admission.py,
 * the same arithmetic so both implementations admit the same offsets).
 */
final class StreamAdmission {
    /** The smallest record RocketMQ stores: bounds how many units a byte budget can need. */
    static final int MIN_RECORD_BYTES = 91;

    private StreamAdmission() {
    }

    /** floor(a * b / c) for non-negative longs, exact. */
    static long mulDiv(long a, long b, long c) {
        long hi = Math.multiplyHigh(a, b);
        if (hi == 0 && a * b >= 0) return (a * b) / c;
        return BigInteger.valueOf(a).multiply(BigInteger.valueOf(b)).divide(BigInteger.valueOf(c)).longValueExact();
    }

    /** (a * b) mod c for non-negative longs, exact. */
    static long mulMod(long a, long b, long c) {
        long hi = Math.multiplyHigh(a, b);
        if (hi == 0 && a * b >= 0) return (a * b) % c;
        return BigInteger.valueOf(a).multiply(BigInteger.valueOf(b)).mod(BigInteger.valueOf(c)).longValueExact();
    }

    /**
     * Splits {@code budget} messages across queues in proportion to their backlog: the shares add
     * up to min(budget, total) exactly, no queue gets more than its backlog, remainders go to the
     * largest fractional shares (ties: key order).
     */
    static TreeMap<QueueKey, Long> splitBudget(Map<QueueKey, Long> avail, long budget) {
        long total = 0;
        for (long a : avail.values()) total += a;
        TreeMap<QueueKey, Long> alloc = new TreeMap<>(avail);
        if (total <= budget) return alloc;
        long given = 0;
        for (Map.Entry<QueueKey, Long> e : avail.entrySet()) {
            long share = mulDiv(budget, e.getValue(), total);
            alloc.put(e.getKey(), share);
            given += share;
        }
        long rest = budget - given;
        final long t = total;
        List<QueueKey> order = new ArrayList<>(avail.keySet());
        order.sort((x, y) -> {
            int c = Long.compare(mulMod(budget, avail.get(y), t), mulMod(budget, avail.get(x), t));
            return c != 0 ? c : x.compareTo(y);
        });
        for (QueueKey k : order) {
            if (rest <= 0) break;
            if (alloc.get(k) < avail.get(k)) {
                alloc.put(k, alloc.get(k) + 1);
                rest--;
            }
        }
        return alloc;
    }

    /** How many of a queue's next units (at most {@code cap}) have record sizes adding up to at most {@code share}. */
    interface Fitting {
        long units(QueueKey key, long cap, long share);
    }

    /**
     * maxBytesPerTrigger: each queue gets a share of the byte budget in proportion to its admitted
     * messages and takes the prefix of its units whose record sizes fit; never stalls (one message
     * from the largest backlog when nothing fits).
     */
    static TreeMap<QueueKey, Long> applyBytes(Map<QueueKey, Long> take, long maxBytes, Fitting fitting) {
        long totalUnits = 0;
        for (long n : take.values()) totalUnits += n;
        TreeMap<QueueKey, Long> out = new TreeMap<>();
        for (Map.Entry<QueueKey, Long> e : take.entrySet()) {
            long n = e.getValue();
            if (n <= 0) {
                out.put(e.getKey(), 0L);
                continue;
            }
            long share = mulDiv(maxBytes, n, totalUnits);
            long cap = Math.min(n, share / MIN_RECORD_BYTES + 1);
            out.put(e.getKey(), fitting.units(e.getKey(), cap, share));
        }
        long admitted = 0;
        for (long v : out.values()) admitted += v;
        if (admitted == 0 && totalUnits > 0) {
            QueueKey best = null;
            for (Map.Entry<QueueKey, Long> e : take.entrySet()) {
                if (best == null || e.getValue() > take.get(best)
                        || (e.getValue().equals(take.get(best)) && e.getKey().compareTo(best) > 0)) {
                    best = e.getKey();
                }
            }
            out.put(best, 1L);
        }
        return out;
    }
}
