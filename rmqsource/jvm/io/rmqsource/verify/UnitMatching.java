package io.rmqsource.verify;

import io.rmqsource.store.QueueKey;
import io.rmqsource.store.RocksDbQueues;
import io.rmqsource.store.StoreLayout;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.TreeMap;

/**
 * The unit matching of {@link Verifier} (rmqsource/store/verify_units.py): the ConsumeQueue units, taken in
 * CommitLog order from the queue cursors, and the IndexFile entries pointing into each window the
 * {@link CommitLogWalk} checked, against the window's records (a unit of another queue the record's multi-dispatch
 * names, an LMQ copy, matches it too); records without a unit, counted per queue, those past a RocksDB database's
 * dispatch checkpoint apart (the database holds no unit of theirs by design: a warning); units and entries left
 * after the walk point past the CommitLog's valid end.  The queues are files ({@link QueueCursor}) or the units of
 * the RocksDB database ({@link RocksDbQueueCursor}), never the ones the readers dispatch past its checkpoint.
 */
final class UnitMatching {
    private static final int PER_CHECK_DETAIL = Verifier.PER_CHECK_DETAIL;

    private final StoreLayout layout;
    private final Report report;
    private final TopicIds topics;
    /** The records of the window the walk just checked. */
    private final Window w;
    List<UnitCursor> queues;
    /** RocksDB ConsumeQueues: the database (null for queue files), and the CommitLog offset its units reach. */
    RocksDbQueues rocksDb;
    private long dispatchEnd = -1;
    /** As {@link #unmatched}, for the records from {@link #dispatchEnd} on: the database holds none by design. */
    private final TreeMap<Long, long[]> pastDispatchEnd = new TreeMap<>();
    private final Map<Long, Integer> queueKeyIndex = new HashMap<>();
    private final PriorityQueue<long[]> heap = new PriorityQueue<>(new PairOrder());   // {next phy, queue index}
    private final UnitQueue pending = new UnitQueue();
    private IndexCheck.Cursor index;
    int indexFileCount;
    final long[] indexEntries = {0};
    boolean indexChecked;
    private final TreeMap<Long, long[]> unmatched = new TreeMap<>();   // (topic id, queueId) -> {count, first phy}
    private long lastDispatched = -1;   // CommitLog offset of the last record a ConsumeQueue unit points at

    /** {a, b} pairs of longs, by a then b. */
    private static final class PairOrder implements java.util.Comparator<long[]> {
        @Override
        public int compare(long[] x, long[] y) {
            return x[0] != y[0] ? Long.compare(x[0], y[0]) : Long.compare(x[1], y[1]);
        }
    }

    UnitMatching(StoreLayout layout, Report report, TopicIds topics, Window w) {
        this.layout = layout;
        this.report = report;
        this.topics = topics;
        this.w = w;
    }

    /** Opens the queue cursors and checks the IndexFiles (their entries are matched as the walk goes). */
    void open(long hashSlotNum, long indexNum, long clMin) {
        queues = new ArrayList<>();
        for (UnitCursor q : queueCursors(clMin)) {
            if (q.hasUnits()) {
                q.topicId = topics.topicId(q.topic);
                queues.add(q);
            }
        }
        for (int i = 0; i < queues.size(); i++) {
            long p = queues.get(i).nextPhy();
            if (p != UnitCursor.END) heap.add(new long[] {p, i});
            queueKeyIndex.put(queueKey(queues.get(i).topicId, queues.get(i).queueId), i);
        }
        List<String> files = IndexCheck.indexFiles(layout.indexDir());
        indexFileCount = files.size();
        long[] geometry = IndexCheck.geometry(files, hashSlotNum, indexNum);
        List<IndexCheck.Usable> usable = new ArrayList<>();
        for (String path : files) {
            IndexCheck.Usable u = IndexCheck.check(path, geometry[0], geometry[1], report, indexEntries);
            if (u != null) {
                usable.add(u);
                indexChecked = true;
            }
        }
        index = new IndexCheck.Cursor(usable, clMin);
    }

    /**
     * A cursor per ConsumeQueue: its files, or its units in the RocksDB database (only the database's: verify checks
     * what is on disk, never the units the readers dispatch from the CommitLog past it).
     */
    private List<UnitCursor> queueCursors(long clMin) {
        List<UnitCursor> out = new ArrayList<>();
        if (!layout.rocksDbQueues()) {
            for (QueueKey k : layout.listQueues()) {
                String dir = layout.queueDir(k.topic, k.queueId).getPath();
                out.add(new QueueCursor(dir, k.topic, k.queueId, report, clMin));
            }
            return out;
        }
        rocksDb = RocksDbQueues.open(layout.consumeQueueDir().getPath());
        dispatchEnd = rocksDb.dispatchEnd();
        String folder = report.rel(layout.consumeQueueDir().getPath());
        for (QueueKey k : rocksDb.maxEntries().keySet()) {
            out.add(new RocksDbQueueCursor(rocksDb, folder, k.topic, k.queueId, report, clMin));
        }
        return out;
    }

    private static long queueKey(int topicId, int queueId) {
        return ((long) topicId << 32) | (queueId & 0xFFFFFFFFL);
    }

    /** The window the walk just checked (its records in {@code w}), up to {@code windowEnd}. */
    void checkUnitsAndEntries(long windowEnd) {
        matchUnits(windowEnd);
        matchEntries(windowEnd);
        collectUnmatched();
        w.clear();
    }

    /** Moves the units with phy < {@code hi} from the queue cursors into {@link #pending}. */
    void takeUnits(long hi) {
        while (!heap.isEmpty() && heap.peek()[0] < hi) {
            int i = (int) heap.poll()[1];
            UnitCursor q = queues.get(i);
            q.takeBelow(hi, pending, i);
            long p = q.nextPhy();
            if (p != UnitCursor.END) heap.add(new long[] {p, i});
        }
    }

    /** The pending units with phy < {@code windowEnd} against the window's records (all queues at once). */
    private void matchUnits(long windowEnd) {
        UnitQueue u = pending;
        Listed targets = new Listed(report, "cq-target");
        Listed others = new Listed(report, "cq-queue");
        Listed sizes = new Listed(report, "cq-size");
        Listed codes = new Listed(report, "cq-tagscode");
        boolean any = false;
        for (int j = 0; j < u.n; j++) {
            if (u.phy[j] >= windowEnd) continue;
            any = true;
            int r = w.find(u.phy[j]);
            if (r < 0) {
                targets.addUnit(pending, j, "points at CommitLog offset " + u.phy[j] + ", where no valid record starts",
                        "a record start", "no valid record");
                continue;
            }
            UnitCursor q = queues.get(u.queue[j]);
            if (w.topic[r] == q.topicId && w.queueId[r] == q.queueId && w.queueOffset[r] == u.qoff[j]) {
                w.matched[r] = true;
            } else if (!w.isCopy(r, q.topic, q.queueId, u.qoff[j])) {   // a copy needs no unit of its own
                others.addUnit(pending, j, "points at the record at CommitLog offset " + u.phy[j] + " of another queue position",
                        q.topic + "/" + q.queueId + "/" + u.qoff[j],
                        topics.name(w.topic[r]) + "/" + w.queueId[r] + "/" + w.queueOffset[r]);
            }
            if (w.size[r] != u.size[j]) {
                sizes.addUnit(pending, j, "size differs from the record at CommitLog offset " + u.phy[j],
                        Integer.toString(w.size[r]), Integer.toString(u.size[j]));
            }
            if (w.code[r] != u.code[j]) {
                codes.addUnit(pending, j, "tagsCode differs from the record at CommitLog offset " + u.phy[j],
                        Long.toString(w.code[r]), Long.toString(u.code[j]));
            }
        }
        if (!any) return;
        for (Listed l : new Listed[] {targets, others, sizes, codes}) l.flushUnits(queues);
        u.dropBelow(windowEnd);
    }

    private void matchEntries(long windowEnd) {
        index.takeBelow(windowEnd, entryMatcher);
    }

    /** Entries pointing into the window must point at a record start. */
    private final IndexCheck.Sink entryMatcher = new IndexCheck.Sink() {
        @Override
        public void block(IndexCheck.Usable file, int[] numbers, long[] phy, int from, int to) {
            String rel = report.rel(file.path);
            int listed = 0;
            for (int j = from; j < to; j++) {
                if (w.find(phy[j]) >= 0) continue;
                if (listed++ >= PER_CHECK_DETAIL) {
                    report.count(Report.ERROR, "index-target", 1);
                    continue;
                }
                report.add("index", "index-target", rel, file.base + (long) numbers[j] * 20, "entry " + numbers[j]
                        + " points at CommitLog offset " + phy[j] + ", where no record starts", "a record start",
                        "no record");
            }
        }
    };

    private void collectUnmatched() {
        for (int r = 0; r < w.n; r++) {
            if (w.eligible[r] && w.matched[r]) lastDispatched = Math.max(lastDispatched, w.phy[r]);
            if (!w.eligible[r] || w.matched[r]) continue;
            TreeMap<Long, long[]> table = dispatchEnd >= 0 && w.phy[r] >= dispatchEnd ? pastDispatchEnd : unmatched;
            long key = queueKey(w.topic[r], w.queueId[r]);
            long[] e = table.get(key);
            if (e == null) table.put(key, e = new long[] {0, w.phy[r]});
            e[0]++;
        }
    }

    /**
     * Records no unit points at. After an unclean shutdown, those past the last dispatched record are the
     * broker's dispatch backlog (it dispatches in CommitLog order; its recovery, or rmq recover, finishes it): a
     * warning. Any other is an error.
     */
    void reportUnmatchedRecords() {
        boolean unclean = layout.abortExists();
        for (Map.Entry<Long, long[]> e : unmatched.entrySet()) {
            int tid = (int) (e.getKey() >>> 32);
            int qid = (int) (long) e.getKey();
            String topic = topics.name(tid);
            long count = e.getValue()[0];
            boolean hasUnits = queueKeyIndex.containsKey(e.getKey());
            String[] place = queuePlace(topic, qid);
            if (unclean && e.getValue()[1] > lastDispatched) {
                report.add("consumequeue", "cq-undispatched", place[0], -1,
                        count + " record(s) of " + topic + "/" + qid + " after the last dispatched record (first at "
                                + "CommitLog offset " + e.getValue()[1] + "): the broker stopped before dispatching "
                                + "them; its recovery (or rmq recover) does",
                        "a unit per record", count + " not yet dispatched", Report.WARNING);
                continue;
            }
            report.add("consumequeue", "cq-missing-unit", place[0], -1,
                    count + " record(s) of " + topic + "/" + qid + " have no ConsumeQueue unit (first at CommitLog "
                            + "offset " + e.getValue()[1] + ")" + (hasUnits ? "" : place[1]),
                    "a unit per record", count + " missing");
        }
        reportPastDispatchEnd();
    }

    /** {where a queue's units are (its folder, or the RocksDB database's), what a queue without any is}. */
    private String[] queuePlace(String topic, int qid) {
        if (rocksDb != null) {
            return new String[] {report.rel(layout.consumeQueueDir().getPath()),
                    "; the RocksDB database holds no unit of the queue"};
        }
        return new String[] {report.rel(layout.queueDir(topic, qid).getPath()),
                "; the queue has no ConsumeQueue files (dispatch rebuilds them)"};
    }

    /**
     * Records past the RocksDB database's dispatch checkpoint: the broker writes their units without a WAL into
     * memtables it flushes later (all column families at once), so the database holds none by design; the broker's
     * recovery dispatches them from the checkpoint.  One warning per queue.
     */
    private void reportPastDispatchEnd() {
        for (Map.Entry<Long, long[]> e : pastDispatchEnd.entrySet()) {
            int tid = (int) (e.getKey() >>> 32);
            int qid = (int) (long) e.getKey();
            String topic = topics.name(tid);
            long count = e.getValue()[0];
            report.add("consumequeue", "cq-undispatched", queuePlace(topic, qid)[0], -1,
                    count + " record(s) of " + topic + "/" + qid + " past the RocksDB database's dispatch "
                            + "checkpoint at offset " + dispatchEnd + " (first at CommitLog offset " + e.getValue()[1]
                            + "): the broker holds their units in memory until its next flush; its recovery "
                            + "dispatches them",
                    "a unit per record", count + " past the checkpoint", Report.WARNING);
        }
    }

    /** Units and entries left after the walk point past the CommitLog's valid end. */
    void drainCursors(long end) {
        w.clear();
        takeUnits(1L << 62);
        Listed past = new Listed(report, "cq-past-end");
        for (int j = 0; j < pending.n; j++) {
            past.addUnit(pending, j, "points at CommitLog offset " + pending.phy[j] + ", past the CommitLog's valid end "
                    + "(recovery trims it)", "< " + end, Long.toString(pending.phy[j]));
        }
        past.flushUnits(queues);
        index.takeBelow(1L << 62, new IndexCheck.Sink() {
            @Override
            public void block(IndexCheck.Usable file, int[] numbers, long[] phy, int from, int to) {
                String rel = report.rel(file.path);
                for (int j = from; j < to; j++) {
                    if (j - from >= PER_CHECK_DETAIL) {
                        report.count(Report.WARNING, "index-past-end", to - j);
                        break;
                    }
                    report.add("index", "index-past-end", rel, file.base + (long) numbers[j] * 20, "entry "
                            + numbers[j] + " points at CommitLog offset " + phy[j] + ", past the CommitLog's valid end",
                            "< " + end, Long.toString(phy[j]), Report.WARNING);
                }
            }
        });
    }
}
