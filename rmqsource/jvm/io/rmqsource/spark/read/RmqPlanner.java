package io.rmqsource.spark.read;

import io.rmqsource.errors.DataLossError;
import io.rmqsource.errors.OptionError;
import io.rmqsource.errors.Repr;
import io.rmqsource.format.ConsumeQueue;
import io.rmqsource.format.DLedgerFormat;
import io.rmqsource.format.SystemTopics;
import io.rmqsource.io.StoreFiles;
import io.rmqsource.spark.RmqOptions;
import io.rmqsource.spark.StoreAccess;
import io.rmqsource.spark.read.RmqInputPartition.CommitLogRange;
import io.rmqsource.spark.read.RmqInputPartition.QueueCounts;
import io.rmqsource.spark.read.RmqInputPartition.QueueRange;
import io.rmqsource.spark.read.RmqInputPartition.QueueRanges;
import io.rmqsource.store.QueueKey;
import io.rmqsource.store.QueueUnits;
import io.rmqsource.store.Segment;
import io.rmqsource.store.Segments;
import io.rmqsource.store.StoreReader;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Function;
import java.util.regex.Pattern;

/**
 * Planning: options and pushed filters to input partitions (twin of rmqsource/spark/planning.py,
 * the same split points, bounds, messages): whole-store CommitLog ranges and topic / queue ranges here; the
 * msgId / uniqKey / keys lookups over the IndexFiles in {@link LookupPlanner} (LookupPlanner.java, twin of
 * rmqsource/spark/lookup_planning.py), which calls back for queue bounds and an index tail's partitions.
 *
 * Parallelism, in both paths: whole queues of a store get a task each up to
 * max({@link #MIN_QUEUE_TASKS}, 2 x default parallelism, minPartitions) tasks and are packed beyond
 * that (a topic of 8 queues is 8 partitions), and ranges are split
 * until there are as many partitions as the session's default parallelism when every piece keeps
 * at least {@link #MIN_SPLIT_RECORDS} records / {@link #MIN_SPLIT_BYTES} bytes.
 */
public final class RmqPlanner {
    static final int MIN_QUEUE_TASKS = 8;
    static final long MIN_SPLIT_RECORDS = 4096;
    static final long MIN_SPLIT_BYTES = 1 << 20;

    private final RmqOptions opts;
    private final PushedFilters pushed;
    private final int defaultParallelism;
    private final List<StoreReader> readers = new ArrayList<>();
    private final List<StoreRef> refs = new ArrayList<>();
    private final long[] p1 = new long[1];
    private final int[] s1 = new int[1];
    private final long[] c1 = new long[1];

    RmqPlanner(RmqOptions opts, PushedFilters pushed, int defaultParallelism) {
        this.opts = opts;
        this.pushed = pushed;
        this.defaultParallelism = defaultParallelism;
    }

    /** Whether the plan reads through ConsumeQueues (topic options, or pushed tag/topic/queue filters). */
    static boolean queueMode(RmqOptions opts, PushedFilters pushed) {
        return opts.topicMode() || (!opts.includeTransactional
                && (pushed.tags != null || pushed.topics != null || pushed.queueIds != null)
                && !(pushed.msgIds != null || (pushed.uniqKeys != null && opts.indexLookups)
                        || (opts.keys != null && opts.indexLookups)));
    }

    /** The msgId / uniqKey / keys lookups of this plan (LookupPlanner.java), over the readers opened by plan(). */
    private LookupPlanner lookups() {
        return new LookupPlanner(this, opts, pushed, defaultParallelism, readers, refs);
    }

    List<RmqInputPartition> plan(boolean countsOnly) {
        try {
            List<StoreFiles> files = StoreAccess.forPaths(opts.paths);
            for (int i = 0; i < opts.paths.size(); i++) {
                StoreReader r = new StoreReader(files.get(i), opts.paths.get(i), opts.storeConfig, null);
                readers.add(r);
                refs.add(new StoreRef(i, opts.paths.get(i), opts.brokers.get(i), opts.storeConfig, r.commitLog.minOffset(),
                        r.commitLogMaxOffset(), r.hasConsumeQueueFiles(), files.get(i)));
            }
            boolean queueMode = queueMode(opts, pushed);
            List<List<QueueKey>> selected = queueMode ? selectQueues() : null;
            if (pushed.empty() || (opts.keys != null && opts.keys.isEmpty())) {
                return countsOnly ? emptyCounts() : new ArrayList<>();
            }
            boolean allIndexed = true;
            for (StoreReader r : readers) allIndexed &= r.config.messageIndexEnable();
            if (!countsOnly && opts.keys != null && pushed.msgIds == null && opts.indexLookups && allIndexed) {
                List<RmqInputPartition> hits = lookups().planKeyLookups(selected);
                if (hits != null) return hits;
                // a key with more hits than a lookup returns: the scan, every record's keys checked
                if (!queueMode && queueModeWithoutKeys()) selected = selectQueues();
                queueMode = selected != null;
            }
            if (!countsOnly && (pushed.msgIds != null || (pushed.uniqKeys != null && opts.indexLookups && allIndexed))) {
                return lookups().planLookups(selected);
            }
            if (countsOnly) {
                List<RmqInputPartition> counts = asCounts(planQueues(selected));
                return counts.isEmpty() ? emptyCounts() : counts;
            }
            if (queueMode) return planQueues(selected);
            return planCommitLog();
        } finally {
            for (StoreReader r : readers) r.close();
        }
    }

    // ------------------------------------------------------------------ helpers over a queue

    private boolean unit(QueueUnits q, long i) {
        return q.unit(i, p1, s1, c1);
    }

    /** Largest unit phyOffset <= phy among units [lo, hi) (pre-blank units skipped), or -1. */
    private long lastUnitAtOrBefore(QueueUnits q, long lo, long hi, long phy) {
        long a = lo;
        long b = hi;
        while (a < b) {
            long mid = (a + b) >>> 1;
            if (!unit(q, mid)) {
                b = mid;
                continue;
            }
            if (s1[0] == ConsumeQueue.PRE_BLANK_SIZE || p1[0] <= phy) a = mid + 1;
            else b = mid;
        }
        if (a - 1 < lo) return -1;
        if (!unit(q, a - 1) || s1[0] == ConsumeQueue.PRE_BLANK_SIZE) return -1;
        return p1[0];
    }

    private long firstIndexWithPhyAtLeast(QueueUnits q, long lo, long hi, long phy) {
        long a = lo;
        long b = hi;
        while (a < b) {
            long mid = (a + b) >>> 1;
            if (unit(q, mid) && s1[0] != ConsumeQueue.PRE_BLANK_SIZE && p1[0] >= phy) b = mid;
            else a = mid + 1;
        }
        return a;
    }

    private Long storeTimestampAt(StoreReader reader, QueueUnits q, long i) {
        if (!unit(q, i) || s1[0] == ConsumeQueue.PRE_BLANK_SIZE) return null;
        if (p1[0] < reader.commitLog.minOffset()) return null;
        return reader.commitLog.storeTimestampAt(p1[0]);
    }

    /** First queue offset in [lo, hi) whose storeTimestamp >= ts (getOffsetInQueueByTime), hi when none. */
    private long offsetByTime(StoreReader reader, QueueUnits q, long lo, long hi, long ts) {
        long a = lo;
        long b = hi;
        while (a < b) {
            long mid = (a + b) >>> 1;
            Long t = storeTimestampAt(reader, q, mid);
            if (t != null && t >= ts) b = mid;
            else a = mid + 1;
        }
        return a;
    }

    public static List<long[]> splitRange(long start, long end, long maxRecords) {
        List<long[]> out = new ArrayList<>();
        long n = end - start;
        if (n <= 0) return out;
        long pieces = (n + maxRecords - 1) / maxRecords;
        long step = (n + pieces - 1) / pieces;
        for (long s = start; s < end; s += step) out.add(new long[] {s, Math.min(end, s + step)});
        return out;
    }

    /** Split the largest ranges in two until there are {@code target} (pieces of at least minPiece). */
    static <T> List<T> ensureMinPartitions(List<T> ranges, int target, long minPiece, Function<T, Long> sizeOf,
                                           Function<T, Object[]> splitOne) {
        List<T> out = new ArrayList<>(ranges);
        while (target > 0 && out.size() < target) {
            int best = -1;
            for (int i = 0; i < out.size(); i++) {
                if (best < 0 || sizeOf.apply(out.get(i)) > sizeOf.apply(out.get(best))) best = i;
            }
            if (best < 0 || sizeOf.apply(out.get(best)) < Math.max(2, 2 * minPiece)) break;
            Object[] two = splitOne.apply(out.get(best));
            if (two == null) break;
            @SuppressWarnings("unchecked") T a = (T) two[0];
            @SuppressWarnings("unchecked") T b = (T) two[1];
            out.set(best, a);
            out.add(best + 1, b);
        }
        return out;
    }

    // ------------------------------------------------------------------ queue selection

    private static String joinOrNone(java.util.Collection<String> items) {
        return items.isEmpty() ? "none" : String.join(", ", items);
    }

    private List<List<QueueKey>> selectQueues() {
        List<List<QueueKey>> perStore = new ArrayList<>();
        Set<QueueKey> allKeys = new HashSet<>();
        TreeSet<String> allTopics = new TreeSet<>();
        for (StoreReader r : readers) {
            List<QueueKey> keys = r.queueKeys();
            perStore.add(keys);
            allKeys.addAll(keys);
            for (QueueKey k : keys) allTopics.add(k.topic);
        }
        String stores = String.join(", ", opts.paths);
        boolean excluded = opts.internalTopicsExcluded();
        java.util.function.Predicate<QueueKey> wanted;
        if (opts.topicsByView) {
            // a store without dead letters (retries, traces) has no rows in the view: nothing to refuse
            Pattern rx = opts.topicPattern == null ? null : Pattern.compile(opts.topicPattern);
            Set<String> ts = opts.topics == null ? Set.of() : new HashSet<>(opts.topics);
            wanted = k -> rx != null ? rx.matcher(k.topic).matches() : ts.contains(k.topic);
        } else if (opts.topics != null) {
            for (String t : opts.topics) {
                if (!allTopics.contains(t)) {
                    throw new OptionError("topic " + Repr.of(t) + " does not exist in " + stores + " (topics: "
                            + joinOrNone(allTopics) + ")");
                }
            }
            Set<String> ts = new HashSet<>(opts.topics);
            wanted = k -> ts.contains(k.topic);
        } else if (opts.topicPattern != null) {
            Pattern rx = Pattern.compile(opts.topicPattern);
            List<String> matched = new ArrayList<>();
            boolean ownOnly = true;
            for (String t : allTopics) {
                if (rx.matcher(t).matches()) {
                    matched.add(t);
                    ownOnly &= SystemTopics.isInternal(t);
                }
            }
            if (matched.isEmpty()) {
                throw new OptionError("topicPattern " + Repr.of(opts.topicPattern) + " matches no topic in " + stores
                        + " (topics: " + joinOrNone(allTopics) + ")");
            }
            if (excluded && ownOnly) {
                throw new OptionError("topicPattern " + Repr.of(opts.topicPattern) + " matches only RocketMQ's own topics in "
                        + stores + " (" + String.join(", ", matched) + "), left out by excludeInternalTopics=true; set it "
                        + "to false or name them in topics");
            }
            wanted = k -> rx.matcher(k.topic).matches();
        } else if (opts.queues != null) {
            Set<QueueKey> chosen = new HashSet<>();
            for (String[] tq : opts.queues) {
                QueueKey k = new QueueKey(tq[0], Integer.parseInt(tq[1]));
                if (!allKeys.contains(k)) {
                    if (!allTopics.contains(k.topic)) {
                        throw new OptionError("option queues: topic " + Repr.of(k.topic) + " does not exist in " + stores
                                + " (topics: " + joinOrNone(allTopics) + ")");
                    }
                    TreeSet<Integer> ids = new TreeSet<>();
                    for (QueueKey x : allKeys) if (x.topic.equals(k.topic)) ids.add(x.queueId);
                    throw new OptionError("option queues: queue " + k + " does not exist (queues of " + k.topic + ": "
                            + new ArrayList<>(ids) + ")");
                }
                chosen.add(k);
            }
            wanted = chosen::contains;
        } else {
            wanted = k -> true;
        }
        for (Object[] spec : new Object[][] {{"startingOffsets", opts.startingOffsets}, {"endingOffsets", opts.endingOffsets},
                {"startingOffsetsByTimestamp", opts.startingByTimestamp},
                {"endingOffsetsByTimestamp", opts.endingByTimestamp}}) {
            if (spec[1] instanceof Map) {
                @SuppressWarnings("unchecked") Map<String, Map<Integer, Long>> m = (Map<String, Map<Integer, Long>>) spec[1];
                for (Map.Entry<String, Map<Integer, Long>> e : m.entrySet()) {
                    for (Integer qid : e.getValue().keySet()) {
                        if (!allKeys.contains(new QueueKey(e.getKey(), qid))) {
                            throw new OptionError(spec[0] + ": queue " + e.getKey() + ":" + qid + " does not exist in " + stores);
                        }
                    }
                }
            }
        }
        List<List<QueueKey>> out = new ArrayList<>();
        for (List<QueueKey> keys : perStore) {
            List<QueueKey> sel = new ArrayList<>();
            for (QueueKey k : keys) {
                if (!wanted.test(k) || (excluded && SystemTopics.isInternal(k.topic))) continue;
                if (pushed.topics != null && !pushed.topics.contains(k.topic)) continue;
                if (pushed.queueIds != null && !pushed.queueIds.contains(k.queueId)) continue;
                sel.add(k);
            }
            out.add(sel);
        }
        return out;
    }

    /** The offset a spec gives a queue: a number, or EARLIEST / LATEST. */
    private static Object offsetFromSpec(Object spec, String topic, int qid, String dflt) {
        if (spec instanceof Map) {
            @SuppressWarnings("unchecked") Map<String, Map<Integer, Long>> m = (Map<String, Map<Integer, Long>>) spec;
            Map<Integer, Long> q = m.get(topic);
            Long v = q == null ? null : q.get(qid);
            if (v == null) return dflt;
            if (v == -2) return RmqOptions.EARLIEST;
            if (v == -1) return RmqOptions.LATEST;
            return v;
        }
        return spec;
    }

    /** [start, end) of a queue after options and pushed filters (may be empty); queue_bounds. */
    long[] queueBounds(StoreReader reader, String topic, int qid, String storeRoot) {
        QueueUnits q = reader.consumeQueue(topic, qid);
        q.requireContiguous();              // a read across a gap would split ~1e17 units (spec: corruption)
        long mx = reader.queueMaxOffset(q);
        long mn = reader.queueMinOffset(q, mx);
        String where = topic + ":" + qid + " in " + storeRoot;
        Object s = offsetFromSpec(opts.startingOffsets, topic, qid, RmqOptions.EARLIEST);
        Object e = offsetFromSpec(opts.endingOffsets, topic, qid, RmqOptions.LATEST);
        long start = RmqOptions.EARLIEST.equals(s) ? mn : RmqOptions.LATEST.equals(s) ? mx : (Long) s;
        long end = RmqOptions.LATEST.equals(e) ? mx : RmqOptions.EARLIEST.equals(e) ? mn : (Long) e;
        if (start < mn) {
            if (opts.failOnDataLoss) {
                throw new DataLossError(where + ": startingOffsets " + start + " is below the queue's min offset " + mn
                        + " (messages " + start + ".." + (mn - 1) + " were removed); set failOnDataLoss=false to start at "
                        + mn);
            }
            start = mn;
        }
        if (start > mx) throw new OptionError(where + ": startingOffsets " + start + " is past the queue's max offset " + mx);
        if (end > mx) throw new OptionError(where + ": endingOffsets " + end + " is past the queue's max offset " + mx);
        if (end < start) {
            if (opts.endingOffsets instanceof Map && end < mn && !opts.failOnDataLoss) {
                end = start;
            } else if (end < mn && opts.failOnDataLoss) {
                throw new DataLossError(where + ": endingOffsets " + end + " is below the queue's min offset " + mn);
            } else {
                throw new OptionError(where + ": endingOffsets " + end + " is before startingOffsets " + start);
            }
        }
        if (opts.startingTimestamp != null) start = offsetByTime(reader, q, start, end, opts.startingTimestamp);
        Long byTs = RmqOptions.timestampFor(opts.startingByTimestamp, topic, qid);
        if (byTs != null) {
            // Kafka: the earliest offset whose timestamp >= ts, over the whole queue (startingOffsets does not apply)
            start = offsetByTime(reader, q, mn, mx, byTs);
            if (start == mx && "error".equals(opts.byTimestampStrategy)) throw RmqOptions.noOffsetForTimestamp(where, byTs);
            end = Math.max(start, end);
        }
        if (opts.endingTimestamp != null) end = Math.max(start, offsetByTime(reader, q, start, end, opts.endingTimestamp));
        byTs = RmqOptions.timestampFor(opts.endingByTimestamp, topic, qid);
        if (byTs != null) end = Math.max(start, offsetByTime(reader, q, start, mx, byTs));   // none: the queue's end
        start = Math.max(start, pushed.queueOffset[0]);
        end = Math.min(end, pushed.queueOffset[1]);
        if (start >= end) return new long[] {start, start};
        if (pushed.phyOffset[0] > PushedFilters.MIN) start = firstIndexWithPhyAtLeast(q, start, end, pushed.phyOffset[0]);
        if (pushed.phyOffset[1] < PushedFilters.MAX && start < end) {
            end = firstIndexWithPhyAtLeast(q, start, end, pushed.phyOffset[1]);
        }
        if (pushed.storeTs[0] > PushedFilters.MIN && start < end) start = offsetByTime(reader, q, start, end, pushed.storeTs[0]);
        if (pushed.storeTs[1] < PushedFilters.MAX && start < end) end = offsetByTime(reader, q, start, end, pushed.storeTs[1]);
        return new long[] {start, Math.max(start, end)};
    }

    // ------------------------------------------------------------------ plans

    private static final class Piece {
        final StoreRef ref;
        final QueueRange range;

        Piece(StoreRef ref, QueueRange range) {
            this.ref = ref;
            this.range = range;
        }
    }

    /** {@code floors}: per store, the CommitLog offset below which units are left out (an IndexFile lookup's tail), or null. */
    private List<Piece> queuePieces(List<List<QueueKey>> selected, long[] floors) {
        List<Piece> ranges = new ArrayList<>();
        for (int i = 0; i < readers.size(); i++) {
            for (QueueKey k : selected.get(i)) {
                long[] b = queueBounds(readers.get(i), k.topic, k.queueId, refs.get(i).root);
                if (floors != null && b[0] < b[1]) {
                    QueueUnits q = readers.get(i).consumeQueue(k.topic, k.queueId);
                    b = new long[] {q == null ? b[1] : Math.max(b[0], firstIndexWithPhyAtLeast(q, b[0], b[1], floors[i])), b[1]};
                }
                for (long[] r : splitRange(b[0], b[1], opts.maxRecordsPerPartition)) {
                    ranges.add(new Piece(refs.get(i), new QueueRange(k.topic, k.queueId, r[0], r[1])));
                }
            }
        }
        return ranges;
    }

    private List<RmqInputPartition> planQueues(List<List<QueueKey>> selected) {
        return planQueues(selected, null);
    }

    List<RmqInputPartition> planQueues(List<List<QueueKey>> selected, long[] floors) {
        List<Piece> pieces = queuePieces(selected, floors);
        boolean remote = !readers.isEmpty();
        for (StoreReader r : readers) remote &= !r.commitLog.segments.files.mapped();
        if (remote && queueCount(pieces) > 1) {
            return planQueuesByCommitLogSpan(pieces);
        }
        Function<Piece, Long> size = p -> p.range.size();
        Function<Piece, Object[]> split = p -> {
            long m = (p.range.start + p.range.end) / 2;
            QueueRange r = p.range;
            return new Object[] {new Piece(p.ref, new QueueRange(r.topic, r.queueId, r.start, m)),
                new Piece(p.ref, new QueueRange(r.topic, r.queueId, m, r.end))};
        };
        List<Piece> ranges = ensureMinPartitions(pieces, opts.minPartitions, 1, size, split);
        ranges = ensureMinPartitions(ranges, defaultParallelism, MIN_SPLIT_RECORDS, size, split);
        return packQueueRanges(ranges);
    }

    private static int queueCount(List<Piece> pieces) {
        Set<String> queues = new HashSet<>();
        for (Piece p : pieces) queues.add(p.ref.index + "\0" + p.range.topic + "\0" + p.range.queueId);
        return queues.size();
    }

    /**
     * Several queues off a remote file system: each task takes every queue's units whose records lie
     * in one span of the CommitLog, and reads them in CommitLog order (ConsumeQueueRangeReader), so
     * each CommitLog byte is fetched by one task at most.  A task per queue would walk the whole
     * CommitLog for each queue: the records of one queue are spread over all of it.  Spans are cut
     * as a whole-store read cuts them (bytes per partition), more when minPartitions or
     * maxRecordsPerPartition ask; the first span takes units below the CommitLog (deleted) and the
     * last units past it, so every unit is in exactly one task.
     */
    private List<RmqInputPartition> planQueuesByCommitLogSpan(List<Piece> pieces) {
        List<RmqInputPartition> out = new ArrayList<>();
        for (int si = 0; si < readers.size(); si++) {
            StoreRef ref = refs.get(si);
            StoreReader reader = readers.get(si);
            List<QueueRange> ranges = new ArrayList<>();
            long units = 0;
            for (Piece p : pieces) {
                if (p.ref != ref || p.range.size() == 0) continue;
                ranges.add(p.range);
                units += p.range.size();
            }
            if (ranges.isEmpty()) continue;
            long lo = ref.commitLogMin;
            long bytes = Math.max(1, ref.commitLogMax - lo);
            long spans = Math.max((bytes + opts.commitLogBytesPerPartition(bytes, defaultParallelism) - 1)
                    / opts.commitLogBytesPerPartition(bytes, defaultParallelism), opts.minPartitions);
            spans = Math.max(spans, (units + opts.maxRecordsPerPartition - 1) / opts.maxRecordsPerPartition);
            spans = Math.max(1, Math.min(spans, bytes));
            long[] from = new long[ranges.size()];
            for (int k = 0; k < from.length; k++) from[k] = ranges.get(k).start;
            for (long j = 1; j <= spans; j++) {
                long spanStart = lo + (long) ((double) bytes * (j - 1) / spans);
                long spanEnd = lo + (long) ((double) bytes * j / spans);
                List<QueueRange> task = new ArrayList<>();
                for (int k = 0; k < from.length; k++) {
                    QueueRange r = ranges.get(k);
                    long to = r.end;
                    if (j < spans) {
                        long cut = lo + (long) ((double) bytes * j / spans);
                        to = Math.max(from[k], firstIndexWithPhyAtLeast(reader.consumeQueue(r.topic, r.queueId),
                                from[k], r.end, cut));
                    }
                    if (to > from[k]) task.add(new QueueRange(r.topic, r.queueId, from[k], to));
                    from[k] = to;
                }
                if (!task.isEmpty()) out.add(new QueueRanges(ref, task, commitLogHosts(reader, spanStart, spanEnd)));
            }
        }
        return out;
    }

    /** The hosts of the blocks holding most of CommitLog bytes [start, end) (file systems that report block hosts). */
    private static String[] commitLogHosts(StoreReader reader, long start, long end) {
        Segments segments = reader.commitLog.segments;
        Segment seg = segments.find(start);
        if (seg == null || end <= start) return new String[0];
        long segEnd = seg.startOffset + segments.lengthOf(seg);
        return segments.files.hosts(seg.path, start - seg.startOffset, Math.min(end, segEnd) - start);
    }

    /**
     * Whole (unsplit) queue ranges of one store are packed into tasks when there are more of them
     * than tasks to fill (one task per queue then costs more than it reads); split queues keep one
     * partition per piece.
     */
    private List<RmqInputPartition> packQueueRanges(List<Piece> ranges) {
        Map<String, Integer> counts = new HashMap<>();
        for (Piece p : ranges) counts.merge(p.ref.index + "\0" + p.range.topic + "\0" + p.range.queueId, 1, Integer::sum);
        List<RmqInputPartition> out = new ArrayList<>();
        Map<Integer, List<Piece>> whole = new LinkedHashMap<>();
        for (Piece p : ranges) {
            if (counts.get(p.ref.index + "\0" + p.range.topic + "\0" + p.range.queueId) == 1 && p.range.size() > 0) {
                whole.computeIfAbsent(p.ref.index, x -> new ArrayList<>()).add(p);
            } else {
                out.add(new QueueRanges(p.ref, List.of(p.range)));
            }
        }
        long cap = opts.maxRecordsPerPartition;
        for (List<Piece> rs : whole.values()) {
            long total = 0;
            for (Piece p : rs) total += p.range.size();
            long binsN = Math.max(Math.max(1, (total + cap - 1) / cap),
                    Math.min(rs.size(), Math.max(Math.max(opts.minPartitions, 2 * defaultParallelism), MIN_QUEUE_TASKS)));
            if (binsN >= rs.size()) {
                for (Piece p : rs) out.add(new QueueRanges(p.ref, List.of(p.range)));
                continue;
            }
            List<Piece> sorted = new ArrayList<>(rs);
            sorted.sort(Comparator.comparingLong((Piece p) -> p.range.size()).reversed());
            long[] load = new long[(int) binsN];
            List<List<QueueRange>> bins = new ArrayList<>();
            for (int i = 0; i < binsN; i++) bins.add(new ArrayList<>());
            for (Piece p : sorted) {           // largest first, least loaded bin
                int b = 0;
                for (int i = 1; i < binsN; i++) if (load[i] < load[b]) b = i;
                load[b] += p.range.size();
                bins.get(b).add(p.range);
            }
            for (List<QueueRange> members : bins) {
                if (members.isEmpty()) continue;
                members.sort(Comparator.comparing((QueueRange r) -> r.topic).thenComparingInt(r -> r.queueId));
                out.add(new QueueRanges(rs.get(0).ref, members));
            }
        }
        return out;
    }

    /**
     * An aggregate pushdown with nothing to read: one task of no range, so that a global aggregate
     * still gets its row of count 0 (Spark sums the pushed counts: over no row at all that is null).
     */
    private List<RmqInputPartition> emptyCounts() {
        List<RmqInputPartition> out = new ArrayList<>();
        if (!refs.isEmpty()) out.add(new QueueCounts(refs.get(0), List.of()));
        return out;
    }

    /** count(*) pushdown: the same tasks as a topic read, each counting its queue ranges. */
    private static List<RmqInputPartition> asCounts(List<RmqInputPartition> parts) {
        List<RmqInputPartition> out = new ArrayList<>();
        for (RmqInputPartition p : parts) out.add(new QueueCounts(p.store, ((QueueRanges) p).ranges));
        return out;
    }

    private List<RmqInputPartition> planCommitLog() {
        return planCommitLog(null);
    }

    /** {@code floors}: per store, a record start below which nothing is read (an IndexFile lookup's tail), or null. */
    List<RmqInputPartition> planCommitLog(long[] floors) {
        List<long[]> spans = new ArrayList<>();          // {store, start, end, segmentStart}: what each segment gives
        List<List<QueueUnits>> queuesOf = new ArrayList<>();
        long total = 0;
        for (int si = 0; si < readers.size(); si++) {
            StoreReader reader = readers.get(si);
            StoreRef ref = refs.get(si);
            List<QueueUnits> queues = new ArrayList<>();
            for (QueueKey k : reader.queueKeys()) {
                QueueUnits q = reader.consumeQueue(k.topic, k.queueId);
                if (q != null) queues.add(q);
            }
            queuesOf.add(queues);
            long plo = pushed.phyOffset[0];
            long phi = pushed.phyOffset[1];
            List<Segment> segs = reader.commitLog.list();
            for (int segIndex = 0; segIndex < segs.size(); segIndex++) {
                Segment seg = segs.get(segIndex);
                long segEnd = seg.startOffset + reader.commitLog.segments.lengthOf(seg);
                // A file longer than its segment must not overlap the next one: its records would be
                // read twice, once from each file.
                if (segIndex + 1 < segs.size()) segEnd = Math.min(segEnd, segs.get(segIndex + 1).startOffset);
                long a = Math.max(seg.startOffset, ref.commitLogMin);
                long b = Math.min(segEnd, ref.commitLogMax);
                if (phi <= a) continue;
                // A bound inside a record must not cut it: end at a record start (rows past the
                // bound are dropped by the row filter).
                if (phi < b) b = boundaryAtOrAfter(queues, phi, b);
                if (a >= b) continue;
                if (plo > a) {
                    if (plo >= b) continue;
                    a = boundaryAtOrBefore(queues, plo, seg.startOffset);
                }
                if (floors != null && floors[si] > a) a = floors[si];
                // A DLedger file's first record follows its first entry header.
                if (seg.dledger && a == seg.startOffset) a += DLedgerFormat.ENTRY_HEADER_BYTES;
                if (a >= b) continue;
                spans.add(new long[] {si, a, b, seg.startOffset});
                total += b - a;
            }
        }
        long step = opts.commitLogBytesPerPartition(total, defaultParallelism);
        List<long[]> out = new ArrayList<>();
        for (long[] span : spans) {
            List<QueueUnits> queues = queuesOf.get((int) span[0]);
            List<Long> cuts = new ArrayList<>();
            cuts.add(span[1]);
            for (long t = span[1] + step; t < span[2]; t += step) {
                long c = boundaryAtOrBefore(queues, t, span[3]);
                if (c > cuts.get(cuts.size() - 1)) cuts.add(c);
            }
            cuts.add(span[2]);
            for (int i = 0; i + 1 < cuts.size(); i++) out.add(new long[] {span[0], cuts.get(i), cuts.get(i + 1), span[3]});
        }
        Function<long[], Long> size = r -> r[2] - r[1];
        Function<long[], Object[]> split = r -> {
            StoreReader reader = readers.get((int) r[0]);
            List<QueueUnits> queues = new ArrayList<>();
            for (QueueKey k : reader.queueKeys()) queues.add(reader.consumeQueue(k.topic, k.queueId));
            long mid = (r[1] + r[2]) / 2;
            long best = r[1];
            for (QueueUnits q : queues) {
                long p = lastUnitAtOrBefore(q, q.firstFileStartOffset(), q.maxOffset(), mid);
                if (p >= 0 && r[1] < p && p < r[2] && p > best) best = p;
            }
            if (best <= r[1]) return null;
            return new Object[] {new long[] {r[0], r[1], best, r[3]}, new long[] {r[0], best, r[2], r[3]}};
        };
        out = ensureMinPartitions(out, opts.minPartitions, 1, size, split);
        out = ensureMinPartitions(out, defaultParallelism, MIN_SPLIT_BYTES, size, split);
        List<RmqInputPartition> parts = new ArrayList<>();
        for (long[] r : out) {
            Segments segments = readers.get((int) r[0]).commitLog.segments;
            Segment seg = segments.find(r[3]);
            String[] hosts = seg == null ? new String[0] : segments.files.hosts(seg.path, r[1] - r[3], r[2] - r[1]);
            parts.add(new CommitLogRange(refs.get((int) r[0]), r[1], r[2], r[3], hosts));
        }
        return parts;
    }

    /** The largest record start known from any ConsumeQueue in [lowest, target], else segStart. */
    private long boundaryAtOrBefore(List<QueueUnits> queues, long target, long segStart) {
        long best = segStart;
        for (QueueUnits q : queues) {
            long p = lastUnitAtOrBefore(q, q.firstFileStartOffset(), q.maxOffset(), target);
            if (p >= 0 && segStart <= p && p <= target && p > best) best = p;
        }
        return best;
    }

    /** The first record start known from any ConsumeQueue in [target, limit), else limit. */
    private long boundaryAtOrAfter(List<QueueUnits> queues, long target, long limit) {
        long best = limit;
        for (QueueUnits q : queues) {
            long hi = q.maxOffset();
            long i = firstIndexWithPhyAtLeast(q, q.firstFileStartOffset(), hi, target);
            if (i < hi && unit(q, i) && s1[0] != ConsumeQueue.PRE_BLANK_SIZE && target <= p1[0] && p1[0] < best) {
                best = p1[0];
            }
        }
        return best;
    }

    /** Whether the read without its keys goes through ConsumeQueues (the scan a key lookup falls back to). */
    private boolean queueModeWithoutKeys() {
        List<String> k = opts.keys;
        opts.keys = null;
        try {
            return queueMode(opts, pushed);
        } finally {
            opts.keys = k;
        }
    }
}
