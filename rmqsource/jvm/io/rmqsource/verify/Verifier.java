package io.rmqsource.verify;

import io.rmqsource.format.JsonText;
import io.rmqsource.store.CommitLog;
import io.rmqsource.store.QueueKey;
import io.rmqsource.store.RocksDbQueues;
import io.rmqsource.store.Segment;
import io.rmqsource.store.StoreLayout;
import java.io.File;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * ``rmq verify`` on the JVM: the CommitLog, ConsumeQueue and IndexFile checks of
 * rmqsource/store/verify.py, with the same windows, order and messages (the checkpoint and
 * config JSON checks stay in Python: they read a few small files).
 *
 * One pass over the CommitLog, window by window (CHUNK_BYTES of one segment): the totalSize chain,
 * every record's fields, PHYSICALOFFSET, body CRC and __CRC32# property; the ConsumeQueue units and
 * IndexFile entries pointing into the window against the records there; records without a unit.
 * This class drives the run; the walk is {@link CommitLogWalk}, the matching of units and entries
 * {@link UnitMatching} (rmqsource/store/verify.py, verify_walk.py, verify_units.py).
 */
public final class Verifier {
    static final int PER_CHECK_DETAIL = 200;           // problems of one kind listed per window (all are counted)

    private final StoreLayout layout;
    private final long hashSlotNum;
    private final long indexNum;
    private final long[] delays;
    private final Report report;
    private CommitLog cl;

    public Verifier(StoreLayout layout, long hashSlotNum, long indexNum, long[] delays, Report report) {
        this.layout = layout;
        this.hashSlotNum = hashSlotNum;
        this.indexNum = indexNum;
        this.delays = delays;
        this.report = report;
    }

    /** Walks the store; returns the figures line (stats, the valid end, queue max offsets) for the report. */
    public String run() {
        cl = new CommitLog(layout);
        long end;
        String dledgerDir = layout.dledgerDir();       // verify walks local stores: a path
        DLedgerChecks dledger = dledgerDir == null ? null : new DLedgerChecks(new File(dledgerDir), report);
        TopicIds topics = new TopicIds();
        Window w = new Window();
        UnitMatching units = new UnitMatching(layout, report, topics, w);
        CommitLogWalk walk;
        long clMin;
        try {
            clMin = cl.minOffset();
            checkSegmentFiles();
            units.open(hashSlotNum, indexNum, clMin);
            walk = new CommitLogWalk(cl, clMin, delays, report, topics, units, w, dledger);
            end = walk.walk();
            if (!cl.isDLedger()) end = Math.min(end, walk.invalidAt);     // DLedger recovery checks entry headers only
            units.drainCursors(end);
        } finally {
            cl.segments.close();
            if (dledger != null) dledger.close();
        }
        if (dledger != null) dledger.finish();
        units.reportUnmatchedRecords();
        long cqUnits = 0;
        long cqExpired = 0;
        for (UnitCursor q : units.queues) {
            cqUnits += q.units;
            cqExpired += q.expired;
        }
        StringBuilder maxOffsets = new StringBuilder();
        for (Map.Entry<QueueKey, Long> e : queueMaxOffsets(units).entrySet()) {
            maxOffsets.append(maxOffsets.length() == 0 ? "" : ",").append('[').append(JsonText.str(e.getKey().topic))
                    .append(',').append(e.getKey().queueId).append(',').append(e.getValue()).append(']');
        }
        return "{\"stats\":{" + (units.indexChecked ? "\"indexEntries\":" + units.indexEntries[0] + "," : "")
                + "\"records\":" + walk.records + ",\"commitLogMinOffset\":" + clMin + ",\"commitLogEnd\":" + end
                + ",\"segments\":" + cl.list().size() + ",\"queues\":" + units.queues.size() + ",\"cqUnits\":" + cqUnits
                + ",\"cqUnitsExpired\":" + cqExpired + ",\"indexFiles\":" + units.indexFileCount + "},\"maxStoreTimestamp\":"
                + walk.maxStoreTs + ",\"queueMaxOffsets\":[" + maxOffsets + "]}";
    }

    /**
     * Each queue's max offset, for the committed offsets: its files' end, or for RocksDB queues the readers' (the
     * database's units, then those the broker's recovery dispatches from the CommitLog).
     */
    private Map<QueueKey, Long> queueMaxOffsets(UnitMatching units) {
        Map<QueueKey, Long> out = new LinkedHashMap<>();
        if (units.rocksDb != null) {
            RocksDbQueues.Queues view = units.rocksDb.at(layout, delays);
            for (QueueKey k : view.listQueues()) out.put(k, view.queue(k.topic, k.queueId, 1).maxOffset());
            return out;
        }
        for (UnitCursor q : units.queues) out.put(new QueueKey(q.topic, q.queueId), q.maxOffset);
        return out;
    }

    private void checkSegmentFiles() {
        long z = cl.segmentSize();
        List<Segment> segs = cl.list();
        for (int i = 1; i < segs.size(); i++) {
            Segment prev = segs.get(i - 1);
            Segment seg = segs.get(i);
            if (seg.startOffset != prev.startOffset + z) {
                report.add("commitlog", "segment-missing", report.rel(seg.path), -1,
                        "CommitLog segments are not consecutive (a segment in between is missing)",
                        String.format("%020d", prev.startOffset + z), new File(seg.path).getName());
            }
        }
        for (Segment seg : segs) {
            if (seg.sizeBytes != z) {
                report.add("commitlog", "segment-size", report.rel(seg.path), 0, "CommitLog segments differ in size",
                        Long.toString(z), Long.toString(seg.sizeBytes));
            }
            if (z != 0 && seg.startOffset % z != 0) {
                report.add("commitlog", "segment-name", report.rel(seg.path), -1,
                        "segment start offset is not a multiple of the segment size", "a multiple of " + z,
                        Long.toString(seg.startOffset));
            }
        }
    }
}
