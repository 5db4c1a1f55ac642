package io.rmqsource.spark.stream;

import io.rmqsource.errors.DataLossError;
import io.rmqsource.errors.OptionError;
import io.rmqsource.errors.Repr;
import io.rmqsource.spark.RmqOptions;
import io.rmqsource.spark.StoreAccess;
import io.rmqsource.spark.compat.ReadLimits;
import io.rmqsource.spark.read.RmqPlanner;
import io.rmqsource.spark.stream.StreamReaderFactory.StreamRange;
import io.rmqsource.store.ConfigRdb;
import io.rmqsource.store.ConsumerOffsetSource;
import io.rmqsource.store.ConsumerOffsetsFile;
import io.rmqsource.store.QueueKey;
import io.rmqsource.store.QueueTail;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.CompositeReadLimit;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadAllAvailable;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.ReadMinRows;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code spark.readStream.format("rmq")} on the JVM, with the contract of the Python source
 * (RmqStreamReader in rmqsource/spark/stream.py; its docstring describes the options): offsets
 * {@code {topic: {queueId: next offset}}} in the same JSON, one ConsumeQueue range per queue and
 * batch, new topics and queues picked up between batches, admission control, AvailableNow, group
 * commits into {@code config/consumerOffset.json}.  Planning a batch touches only the queues'
 * tails (mapped between batches) and one directory listing: no Python, no scans.
 *
 * Progress metrics, like Kafka's: {@code minOffsetsBehindLatest}, {@code maxOffsetsBehindLatest},
 * {@code avgOffsetsBehindLatest} (messages per queue between the batch's end and the queue's max
 * offset as last seen, counted from the queue's min offset as {@code rmq lag} does) and
 * {@code bytesBehindLatest} (their record bytes, from the ConsumeQueue units).
 */
public final class RmqMicroBatchStream implements MicroBatchStream, SupportsTriggerAvailableNow, ReportsSourceMetrics {
    /** bytesBehindLatest reads at most this many units per queue; beyond, it extrapolates. */
    static final long BYTES_BEHIND_EXACT_UNITS = 1L << 20;

    private final RmqStreamOptions opts;
    private final StructType schema;
    private final RmqOptions lenient;
    /** Typed bodies (docs/bodies.md), else null. */
    private final io.rmqsource.spark.bodies.BodySpec body;
    private final StoreWatcher watcher;
    private Map<QueueKey, Long> target;                            // Trigger.AvailableNow
    private double lastTriggerMs = nowMs();
    private final Map<QueueKey, Long> committed = new HashMap<>();
    /** Max offsets (uncapped by AvailableNow) and min offsets as of the last latestOffset call. */
    private final TreeMap<QueueKey, Long> latest = new TreeMap<>();
    private final Map<QueueKey, Long> lowest = new HashMap<>();
    /** Per queue, the last exact bytesBehindLatest: {from, to, bytes}. */
    private final Map<QueueKey, long[]> behindBytes = new HashMap<>();

    public RmqMicroBatchStream(CaseInsensitiveStringMap options, StructType schema) {
        this.opts = RmqStreamOptions.parse(options);
        this.schema = schema;
        this.lenient = RmqStreamOptions.parse(options).read;
        lenient.failOnDataLoss = false;
        this.body = io.rmqsource.spark.bodies.BodySpec.parse(options);
        if (body != null) {            // bodies are decoded inflated (docs/bodies.md)
            opts.read.decompress = true;
            lenient.decompress = true;
        }
        this.watcher = new StoreWatcher(opts, StoreAccess.forStream(opts.root()));
        watcher.layout.checkIsStore();
    }

    private static double nowMs() {
        return System.nanoTime() / 1e6;
    }

    private static Map<QueueKey, Long> offsets(Offset o) {
        if (o == null) return new TreeMap<>();
        RmqStreamOffset r = o instanceof RmqStreamOffset ? (RmqStreamOffset) o : RmqStreamOffset.fromJson(o.json());
        return new TreeMap<>(r.offsets());
    }

    /** What the query progress shows as the source's description. */
    @Override
    public String toString() {
        RmqOptions r = opts.read;
        String what = r.topics != null ? "topics=" + String.join(",", r.topics)
                : r.topicPattern != null ? "topicPattern=" + r.topicPattern : "queues=" + r.queues.size();
        return "RmqMicroBatchStream(JVM)[" + opts.root() + ", " + what + "]";
    }

    // ------------------------------------------------------------------ offsets

    @Override
    public Offset initialOffset() {
        StoreWatcher w = watcher;
        RmqStreamOptions o = opts;
        if (o.commits()) {          // fail before reading anything
            ConsumerOffsetSource.refuseGroupCommit(o.root());
            ConfigRdb.usesConfigRdb(Path.of(o.root()), o.read.storeConfig);   // configManagerVersion=v1 beside config/rdb/
            new ConsumerOffsetsFile(o.root(), o.read.storeConfig).checkWritable();
        }
        long clMin = w.commitLogMin();
        Map<QueueKey, Long> groupOffsets = new HashMap<>();
        if (RmqStreamOptions.GROUP.equals(o.starting)) {
            ConsumerOffsetSource source = ConsumerOffsetSource.locate(o.root());
            for (Map.Entry<String, TreeMap<Integer, Long>> t : source.offsetsForGroup(o.consumerGroup).entrySet()) {
                for (Map.Entry<Integer, Long> q : t.getValue().entrySet()) {
                    groupOffsets.put(new QueueKey(t.getKey(), q.getKey()), q.getValue());
                }
            }
        }
        List<QueueKey> keys = w.keys();
        Set<QueueKey> keySet = new HashSet<>(keys);
        if (RmqStreamOptions.GROUP.equals(o.starting)) checkGroupStart(keys, groupOffsets);
        Map<String, Map<Integer, Long>> given = startingJson();
        Map<String, Map<Integer, Long>> byTime = o.read.startingByTimestamp;
        for (Object[] spec : new Object[][] {{"startingOffsets", given}, {"startingOffsetsByTimestamp", byTime}}) {
            if (spec[1] == null) continue;
            @SuppressWarnings("unchecked") Map<String, Map<Integer, Long>> m = (Map<String, Map<Integer, Long>>) spec[1];
            for (Map.Entry<String, Map<Integer, Long>> t : m.entrySet()) {
                for (Integer qid : t.getValue().keySet()) {
                    if (!keySet.contains(new QueueKey(t.getKey(), qid))) {
                        throw new OptionError(spec[0] + " names queue " + t.getKey() + ":" + qid
                                + ", which does not exist in " + o.root());
                    }
                }
            }
        }
        TreeMap<QueueKey, Long> out = new TreeMap<>();
        for (QueueKey key : keys) {
            long mx = w.maxOffset(key);
            long mn = w.minOffset(key, mx, clMin);
            String where = "topic " + key.topic + " queue " + key.queueId;
            if (o.startingTimestamp != null) {
                out.put(key, w.offsetByTime(key, mn, mx, o.startingTimestamp));
                continue;
            }
            Long ts = RmqOptions.timestampFor(byTime, key.topic, key.queueId);
            if (ts != null) {
                long off = w.offsetByTime(key, mn, mx, ts);
                if (off == mx && "error".equals(o.read.byTimestampStrategy)) {
                    throw RmqOptions.noOffsetForTimestamp(where + " in " + o.root(), ts);
                }
                out.put(key, off);
                continue;
            }
            Object spec = o.starting;
            if (RmqStreamOptions.GROUP.equals(spec)) {
                Long c = groupOffsets.get(key);
                spec = c != null ? (Object) c : o.startingFallback != null ? o.startingFallback : RmqOptions.EARLIEST;
            } else if (given != null) {
                Map<Integer, Long> q = given.get(key.topic);
                Long v = q == null ? null : q.get(key.queueId);
                spec = v == null || v == -1 ? RmqOptions.LATEST : v == -2 ? RmqOptions.EARLIEST : (Object) v;
            }
            long off;
            if (RmqOptions.EARLIEST.equals(spec)) {
                off = mn;
            } else if (RmqOptions.LATEST.equals(spec)) {
                off = mx;
            } else {
                off = (Long) spec;
                if (off > mx) {
                    if (RmqStreamOptions.GROUP.equals(o.starting)) {
                        off = mx;          // committed past what the store now holds: resume at the end
                    } else {
                        throw new OptionError("startingOffsets: " + where + ": offset " + off
                                + " is past the queue's max offset " + mx);
                    }
                }
                if (off < mn) {
                    if (o.read.failOnDataLoss) {
                        throw new DataLossError(where + " in " + o.root() + ": starting offset " + off
                                + " is below the queue's min offset " + mn + " (messages " + off + ".." + (mn - 1)
                                + " were removed); set failOnDataLoss=false to start at " + mn);
                    }
                    off = mn;
                }
            }
            out.put(key, off);
        }
        return new RmqStreamOffset(out);
    }

    /**
     * startingOffsets=group: a group without commits fails unless startingOffsetsFallback says where
     * to start (Kafka's auto.offset.reset); with "none" every queue needs a committed offset.
     */
    private void checkGroupStart(List<QueueKey> keys, Map<QueueKey, Long> committed) {
        RmqStreamOptions o = opts;
        boolean any = false;
        for (QueueKey k : keys) any |= committed.containsKey(k);
        if (!any && o.startingFallback == null) {
            TreeSet<String> topics = new TreeSet<>();
            for (QueueKey k : keys) topics.add(k.topic);
            throw new OptionError("startingOffsets=group: consumer group " + Repr.of(o.consumerGroup)
                    + " has no committed offsets for " + (topics.isEmpty() ? "(no queues)" : String.join(", ", topics))
                    + " in " + o.root() + " (" + ConsumerOffsetSource.locate(o.root()).description() + "); set startingOffsetsFallback=earliest or latest"
                    + " to start anyway (like Kafka's auto.offset.reset)");
        }
        if (RmqStreamOptions.NONE.equals(o.startingFallback)) {
            List<String> missing = new ArrayList<>();
            for (QueueKey k : new TreeSet<>(keys)) if (!committed.containsKey(k)) missing.add(k.toString());
            if (!missing.isEmpty()) {
                String shown = String.join(", ", missing.subList(0, Math.min(10, missing.size())))
                        + (missing.size() > 10 ? " ..." : "");
                throw new OptionError("startingOffsets=group with startingOffsetsFallback=none: consumer group "
                        + Repr.of(o.consumerGroup) + " has no committed offset for " + shown);
            }
        }
    }

    @SuppressWarnings("unchecked")
    private Map<String, Map<Integer, Long>> startingJson() {
        return opts.starting instanceof Map ? (Map<String, Map<Integer, Long>>) opts.starting : null;
    }

    @Override
    public Offset deserializeOffset(String json) {
        return RmqStreamOffset.fromJson(json);
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        if (opts.maxMessages != null) return ReadLimit.maxRows(opts.maxMessages);
        if (opts.maxBytes != null) return ReadLimits.maxBytes(opts.maxBytes);
        if (opts.minMessages != null) return ReadLimit.minRows(opts.minMessages, opts.maxTriggerDelayMs);
        return ReadLimit.allAvailable();
    }

    @Override
    public void prepareForTriggerAvailableNow() {
        Map<QueueKey, Long> t = new HashMap<>();
        for (QueueKey k : watcher.keys()) t.put(k, watcher.maxOffset(k));
        target = t;
    }

    @Override
    public Offset reportLatestOffset() {
        if (!opts.reportLatest) return null;
        if (latest.isEmpty()) {
            for (QueueKey k : watcher.keys()) latest.put(k, watcher.maxOffset(k));
        }
        return new RmqStreamOffset(latest);
    }

    @Override
    public Offset latestOffset() {
        throw new UnsupportedOperationException("latestOffset(start, limit) is the entry point of the rmq stream");
    }

    @Override
    public Offset latestOffset(Offset startOffset, ReadLimit limit) {
        RmqStreamOptions o = opts;
        StoreWatcher w = watcher;
        Map<QueueKey, Long> begin = offsets(startOffset);
        // ``start`` is the end of the last batch, processed and committed to the checkpoint before
        // the next batch is planned (also after a restart): the group's progress.
        commitGroup(begin);
        TreeSet<QueueKey> keys = new TreeSet<>(begin.keySet());
        keys.addAll(w.keys());
        if (target != null) keys.removeIf(k -> !begin.containsKey(k) && !target.containsKey(k));
        long clMin = w.commitLogMin();
        TreeMap<QueueKey, Long> eff = new TreeMap<>();
        TreeMap<QueueKey, Long> avail = new TreeMap<>();
        latest.clear();
        lowest.clear();
        for (QueueKey key : keys) {
            long mx = w.maxOffset(key);
            long[] counted = behindBytes.get(key);
            if (counted != null && mx < counted[1]) behindBytes.remove(key);    // the queue shrank (rebuilt)
            latest.put(key, mx);
            if (target != null && target.containsKey(key)) {
                mx = Math.min(mx, Math.max(target.get(key), begin.getOrDefault(key, 0L)));
            }
            Long s = begin.get(key);
            if (s == null) {
                long mn = mx > 0 ? w.minOffset(key, mx, clMin) : 0;
                lowest.put(key, mn);
                s = Math.max(0, mn);
            } else {
                if (s > mx) {
                    // The queue shrank (ConsumeQueue rebuilt / truncated): nothing to read until it grows back.
                    eff.put(key, s);
                    avail.put(key, 0L);
                    continue;
                }
                long mn = (clMin > 0 || s < mx) ? w.minOffset(key, mx, clMin) : 0;
                lowest.put(key, mn);
                if (s < mn) {
                    if (o.read.failOnDataLoss) {
                        throw new DataLossError("topic " + key.topic + " queue " + key.queueId + " in " + o.root()
                                + ": messages at queue offsets " + s + ".." + (mn - 1) + " were removed before they were "
                                + "read (the queue now starts at " + mn + ", ends at " + mx + "); set failOnDataLoss=false "
                                + "to skip ahead");
                    }
                    s = mn;
                }
            }
            eff.put(key, s);
            avail.put(key, Math.max(0, mx - s));
        }
        Long maxRows = null;
        Long maxBytes = null;
        Long minRows = null;
        if (!(limit instanceof ReadAllAvailable)) {
            maxRows = o.maxMessages;
            maxBytes = o.maxBytes;
            minRows = o.minMessages;
            List<ReadLimit> parts = new ArrayList<>();
            if (limit instanceof CompositeReadLimit) parts.addAll(List.of(((CompositeReadLimit) limit).getReadLimits()));
            else parts.add(limit);
            for (ReadLimit l : parts) {
                if (l instanceof ReadMaxRows) {
                    long v = ((ReadMaxRows) l).maxRows();
                    maxRows = maxRows == null ? v : Math.min(maxRows, v);
                } else if (ReadLimits.maxBytesOf(l) != null) {
                    long v = ReadLimits.maxBytesOf(l);
                    maxBytes = maxBytes == null ? v : Math.min(maxBytes, v);
                } else if (l instanceof ReadMinRows) {
                    long v = ((ReadMinRows) l).minRows();
                    minRows = minRows == null ? v : Math.max(minRows, v);
                }
            }
        }
        long total = 0;
        for (long a : avail.values()) total += a;
        double now = nowMs();
        if (minRows != null && target == null && total < minRows && now - lastTriggerMs < o.maxTriggerDelayMs) {
            return startOffset;
        }
        TreeMap<QueueKey, Long> take = new TreeMap<>(avail);
        if (maxRows != null) take = StreamAdmission.splitBudget(take, maxRows);
        if (maxBytes != null) {
            take = StreamAdmission.applyBytes(take, maxBytes,
                    (key, cap, share) -> w.unitsFitting(key, eff.get(key), cap, share));
        }
        TreeMap<QueueKey, Long> end = new TreeMap<>(begin);
        for (Map.Entry<QueueKey, Long> e : eff.entrySet()) {
            end.put(e.getKey(), e.getValue() + take.getOrDefault(e.getKey(), 0L));
        }
        if (end.equals(begin)) return startOffset;
        lastTriggerMs = now;
        return new RmqStreamOffset(end);
    }

    // ------------------------------------------------------------------ planning / reading

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
        Map<QueueKey, Long> begin = offsets(start);
        Map<QueueKey, Long> stop = offsets(end);
        long maxRecords = opts.read.maxRecordsPerPartition;
        List<InputPartition> parts = new ArrayList<>();
        for (Map.Entry<QueueKey, Long> e : stop.entrySet()) {
            QueueKey key = e.getKey();
            boolean newQueue = !begin.containsKey(key);
            long s = begin.getOrDefault(key, 0L);
            for (long[] r : RmqPlanner.splitRange(s, e.getValue(), maxRecords)) {
                parts.add(new StreamRange(key.topic, key.queueId, r[0], r[1], newQueue));
            }
        }
        return parts.toArray(new InputPartition[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new StreamReaderFactory(opts, lenient, schema, watcher.layout.files, body);
    }

    // ------------------------------------------------------------------ lifecycle

    @Override
    public void commit(Offset end) {
        commitGroup(offsets(end));
    }

    /** Merges offsets into config/consumerOffset.json for consumerGroup (never backwards). */
    private void commitGroup(Map<QueueKey, Long> offs) {
        if (!opts.commits() || offs.isEmpty()) return;
        boolean news = false;
        for (Map.Entry<QueueKey, Long> e : offs.entrySet()) news |= committed.getOrDefault(e.getKey(), -1L) < e.getValue();
        if (!news) return;
        Map<String, Map<Integer, Long>> perTopic = new TreeMap<>();
        for (Map.Entry<QueueKey, Long> e : offs.entrySet()) {
            perTopic.computeIfAbsent(e.getKey().topic, x -> new TreeMap<>()).put(e.getKey().queueId, e.getValue());
        }
        Map<String, Map<Integer, Long>> effective = new ConsumerOffsetsFile(opts.root(), opts.read.storeConfig)
                .commit(opts.consumerGroup, perTopic, false);
        for (Map.Entry<String, Map<Integer, Long>> t : effective.entrySet()) {
            for (Map.Entry<Integer, Long> q : t.getValue().entrySet()) {
                committed.merge(new QueueKey(t.getKey(), q.getKey()), q.getValue(), Math::max);
            }
        }
    }

    @Override
    public void stop() {
        watcher.close();
    }

    // ------------------------------------------------------------------ metrics

    /**
     * Lag after the batch ending at {@code latestConsumedOffset}: per queue, messages between
     * max(consumed, min offset) and the max offset seen when the batch was planned.
     */
    @Override
    public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
        Map<String, String> out = new HashMap<>();
        if (latest.isEmpty() || latestConsumedOffset.isEmpty()) return out;
        Map<QueueKey, Long> consumed = offsets(latestConsumedOffset.get());
        long min = Long.MAX_VALUE;
        long max = 0;
        long sum = 0;
        long bytes = 0;
        for (Map.Entry<QueueKey, Long> e : latest.entrySet()) {
            QueueKey key = e.getKey();
            long from = Math.max(consumed.getOrDefault(key, 0L), lowest.getOrDefault(key, 0L));
            long behind = Math.max(0, e.getValue() - from);
            min = Math.min(min, behind);
            max = Math.max(max, behind);
            sum += behind;
            if (behind > 0) bytes += bytesBehind(key, from, e.getValue());
        }
        out.put("minOffsetsBehindLatest", Long.toString(min));
        out.put("maxOffsetsBehindLatest", Long.toString(max));
        out.put("avgOffsetsBehindLatest", Double.toString((double) sum / latest.size()));
        out.put("bytesBehindLatest", Long.toString(bytes));
        return out;
    }

    /**
     * Record bytes of units [from, to) of a queue.  The last exact answer per queue is kept, so a
     * query that stays behind reads only the units that moved since (the batch's, the new ones),
     * not its whole lag every batch.
     */
    private long bytesBehind(QueueKey key, long from, long to) {
        QueueTail tail = watcher.tail(key);
        long[] last = behindBytes.get(key);                 // {from, to, bytes}
        if (last != null && last[0] <= from && from <= last[1] && last[1] <= to) {
            long gone = tail.bytesBetween(last[0], from);
            long added = tail.bytesBetween(last[1], to);
            if (gone >= 0 && added >= 0) {
                last[0] = from;
                last[1] = to;
                last[2] += added - gone;
                return last[2];
            }
        }
        behindBytes.remove(key);
        long n = to - from;
        long read = Math.min(n, BYTES_BEHIND_EXACT_UNITS);
        long b = tail.bytesBetween(to - read, to);
        if (b < 0) return 0;                                // units removed meanwhile: nothing to count on
        if (read == n) behindBytes.put(key, new long[] {from, to, b});
        return read == n || read == 0 ? b : StreamAdmission.mulDiv(b, n, read);
    }
}
