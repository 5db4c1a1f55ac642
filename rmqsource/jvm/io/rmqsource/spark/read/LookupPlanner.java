package io.rmqsource.spark.read;

import io.rmqsource.format.MsgId;
import io.rmqsource.format.SystemTopics;
import io.rmqsource.spark.RmqOptions;
import io.rmqsource.spark.read.RmqInputPartition.Lookup;
import io.rmqsource.store.IndexService;
import io.rmqsource.store.QueueKey;
import io.rmqsource.store.Segment;
import io.rmqsource.store.Segments;
import io.rmqsource.store.StoreReader;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * Lookup planning: msgId / uniqKey / keys point reads to Lookup partitions (CommitLog offsets decoded from msgIds
 * or found in the IndexFiles), plus the partitions reading the CommitLog past what the IndexFiles cover (twin of
 * rmqsource/spark/lookup_planning.py, the same offsets, splits, tails).  Made by {@link RmqPlanner} with its open
 * readers, store refs, options, pushed filters and parallelism; the queue bounds and the queue / CommitLog
 * partitions of an index tail come from it.
 */
final class LookupPlanner {
    static final int LOOKUP_MAX_HITS = 1 << 20;

    private final RmqPlanner planner;
    private final RmqOptions opts;
    private final PushedFilters pushed;
    private final int defaultParallelism;
    private final List<StoreReader> readers;
    private final List<StoreRef> refs;

    LookupPlanner(RmqPlanner planner, RmqOptions opts, PushedFilters pushed, int defaultParallelism,
                  List<StoreReader> readers, List<StoreRef> refs) {
        this.planner = planner;
        this.opts = opts;
        this.pushed = pushed;
        this.defaultParallelism = defaultParallelism;
        this.readers = readers;
        this.refs = refs;
    }

    /**
     * Options keys / keysFile through the IndexFiles: every topic of the read (as a uniqKey lookup chooses them)
     * x every key, one query per IndexFile for all of them, bounded by the pushed storeTimestamp range; the hits,
     * sorted and without repeats, cut into Lookup partitions.  Null when a query reaches {@link #LOOKUP_MAX_HITS}
     * (its hits could be cut: the caller scans instead) or all hits together do.
     */
    List<RmqInputPartition> planKeyLookups(List<List<QueueKey>> selected) {
        long lo = pushed.storeTs[0];
        long hi = pushed.storeTs[1];
        // an entry's time is its store time cut to whole seconds from the file's start: up to 999 ms early
        long beginMs = lo == PushedFilters.MIN ? 0 : Math.max(0, lo - 1000);
        long endMs = hi == PushedFilters.MAX ? Long.MAX_VALUE : hi - 1;
        List<RmqInputPartition> out = new ArrayList<>();
        long[][] coverage = new long[readers.size()][];
        long total = 0;
        for (int i = 0; i < readers.size(); i++) {
            StoreReader reader = readers.get(i);
            StoreRef ref = refs.get(i);
            IndexService index = new IndexService(reader.layout, reader.config);
            long[] cover = coverage[i] = indexCoverage(reader, ref, index);
            TreeSet<String> rangeTopics = new TreeSet<>();
            Map<String, long[]> queueRanges = selected == null ? null : queueRanges(reader, ref, selected.get(i), rangeTopics);
            List<String> fullKeys = new ArrayList<>();
            for (String topic : queueRanges != null ? new ArrayList<>(rangeTopics) : reader.topics()) {
                if (pushed.topics != null && !pushed.topics.contains(topic)) continue;
                if (opts.internalTopicsExcluded() && SystemTopics.isInternal(topic)) continue;
                for (String key : opts.keys) {
                    if (!key.isEmpty()) fullKeys.add(io.rmqsource.format.IndexFile.indexKey(topic, key));
                }
            }
            long[][] hits = fullKeys.isEmpty() ? new long[0][] : index.queryOffsets(fullKeys, LOOKUP_MAX_HITS, beginMs, endMs);
            int n = cover[1] >= 0 ? 1 : 0;
            for (long[] h : hits) {
                if (h.length >= LOOKUP_MAX_HITS) return null;
                n += h.length;
            }
            total += n;
            if (total >= LOOKUP_MAX_HITS) return null;
            long[] offs = new long[n];
            int k = 0;
            for (long[] h : hits) {
                for (long p : h) if (ref.commitLogMin <= p && p < cover[0]) offs[k++] = p;
            }
            if (cover[1] >= 0) offs[k++] = cover[1];
            java.util.Arrays.sort(offs, 0, k);
            int m = 0;
            for (int j = 0; j < k; j++) if (m == 0 || offs[j] != offs[m - 1]) offs[m++] = offs[j];
            if (m == 0) continue;
            long pieces = Math.max(1, Math.min(Math.max(defaultParallelism, opts.minPartitions),
                    (m + RmqPlanner.MIN_SPLIT_RECORDS - 1) / RmqPlanner.MIN_SPLIT_RECORDS));
            for (long p = 0; p < pieces; p++) {
                int a = (int) (m * p / pieces);
                int b = (int) (m * (p + 1) / pieces);
                if (b > a) out.add(new Lookup(ref, java.util.Arrays.copyOfRange(offs, a, b), queueRanges));
            }
        }
        return withIndexTail(selected, out, coverage);
    }

    /**
     * What the IndexFiles of a store cover: {end, last}.  Hits below {@code end} are answered by the IndexFiles;
     * the CommitLog from {@code end} to the planned valid end is not indexed yet (a live broker's dispatch lags
     * behind its CommitLog writes; a crashed broker rebuilds its index at recovery, which has not happened).
     * The newest IndexFile's endPhyOffset (read before any hash walk) is the start of the last message indexed,
     * which may have only some of its keys in the index (they are put one by one): {@code last} is that offset,
     * read as a point read with the hits, and {@code end} the record after it.  No IndexFile entry, or an
     * endPhyOffset naming no record: {@code end} is the CommitLog's min offset (all of it is the tail), {@code last}
     * -1.  Twin of _index_coverage in lookup_planning.py.
     */
    private long[] indexCoverage(StoreReader reader, StoreRef ref, IndexService index) {
        long t = index.endPhyOffset();
        long lo = ref.commitLogMin;
        long hi = ref.commitLogMax;
        if (t >= hi) return new long[] {hi, -1};
        if (t <= 0 || t < lo) return new long[] {lo, -1};
        Segments segments = reader.commitLog.segments;
        Segment seg = segments.find(t);
        if (seg != null && t - seg.startOffset + 8 <= seg.sizeBytes) {
            long pos = t - seg.startOffset;
            Segments.Window w = segments.look(seg, pos, 8, 8);
            if (pos + 8 <= w.fileLength && w.covers(pos, 8)) {
                int total = w.buf.getInt(w.at(pos));
                int magic = w.buf.getInt(w.at(pos) + 4);
                if ((magic == io.rmqsource.format.Record.MAGIC_V1 || magic == io.rmqsource.format.Record.MAGIC_V2)
                        && total >= io.rmqsource.format.Record.MIN_RECORD_BYTES && t + total <= hi) {
                    return new long[] {t + total, t};
                }
            }
        }
        return new long[] {lo, -1};          // a damaged header: the whole CommitLog is the tail
    }

    /**
     * An IndexFile lookup's partitions (hits below each store's coverage end only) and the partitions reading
     * each store's CommitLog past what its IndexFiles cover: the ranges a whole-store read cuts there, or for a
     * topic read the planned queue ranges' units there (the rows keep to them as the lookup's do).  Every row
     * of those gets the read's exact checks (uniqKey, keys, the other pushed filters).
     */
    private List<RmqInputPartition> withIndexTail(List<List<QueueKey>> selected, List<RmqInputPartition> lookups,
                                                  long[][] coverage) {
        long[] floors = new long[readers.size()];
        boolean any = false;
        for (int i = 0; i < floors.length; i++) {
            floors[i] = coverage[i][0];
            any |= floors[i] < refs.get(i).commitLogMax;
        }
        if (!any) return lookups;
        List<RmqInputPartition> out = new ArrayList<>(lookups);
        if (selected != null) {
            List<List<QueueKey>> tail = new ArrayList<>();
            for (int i = 0; i < floors.length; i++) {
                tail.add(floors[i] < refs.get(i).commitLogMax ? selected.get(i) : new ArrayList<>());
            }
            out.addAll(planner.planQueues(tail, floors));
        } else {
            out.addAll(planner.planCommitLog(floors));
        }
        return out;
    }

    /** The non-empty planned range of each selected queue ("topic\0queueId" to [start, end)); their topics to {@code topics}. */
    private Map<String, long[]> queueRanges(StoreReader reader, StoreRef ref, List<QueueKey> queues, Set<String> topics) {
        Map<String, long[]> out = new HashMap<>();
        for (QueueKey k : queues) {
            long[] b = planner.queueBounds(reader, k.topic, k.queueId, ref.root);
            if (b[0] < b[1]) {
                out.put(k.topic + "\0" + k.queueId, b);
                topics.add(k.topic);
            }
        }
        return out;
    }

    List<RmqInputPartition> planLookups(List<List<QueueKey>> selected) {
        List<RmqInputPartition> out = new ArrayList<>();
        long[][] coverage = new long[readers.size()][];
        for (int i = 0; i < readers.size(); i++) {
            StoreReader reader = readers.get(i);
            StoreRef ref = refs.get(i);
            TreeSet<String> rangeTopics = new TreeSet<>();
            Map<String, long[]> queueRanges = selected == null ? null : queueRanges(reader, ref, selected.get(i), rangeTopics);
            TreeSet<Long> offsets = new TreeSet<>();
            coverage[i] = null;
            if (pushed.msgIds != null) {
                for (String mid : pushed.msgIds) {
                    long phy = MsgId.decodePhyOffset(mid);
                    if (phy >= 0 && ref.commitLogMin <= phy && phy < ref.commitLogMax) offsets.add(phy);
                }
            } else {
                IndexService index = new IndexService(reader.layout, reader.config);
                long[] cover = coverage[i] = indexCoverage(reader, ref, index);
                if (cover[1] >= 0) offsets.add(cover[1]);
                List<String> topics = queueRanges != null ? new ArrayList<>(rangeTopics) : reader.topics();
                for (String topic : topics) {
                    if (pushed.topics != null && !pushed.topics.contains(topic)) continue;
                    if (opts.internalTopicsExcluded() && SystemTopics.isInternal(topic)) continue;
                    for (String key : pushed.uniqKeys) {
                        for (long p : index.queryOffsets(topic, key, LOOKUP_MAX_HITS, 0, Long.MAX_VALUE)) {
                            if (ref.commitLogMin <= p && p < cover[0]) offsets.add(p);
                        }
                    }
                }
            }
            if (!offsets.isEmpty()) {
                long[] offs = new long[offsets.size()];
                int k = 0;
                for (long o : offsets) offs[k++] = o;
                out.add(new Lookup(ref, offs, queueRanges));
            }
        }
        return pushed.msgIds != null ? out : withIndexTail(selected, out, coverage);
    }
}
