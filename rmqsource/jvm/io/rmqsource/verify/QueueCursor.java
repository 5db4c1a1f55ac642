package io.rmqsource.verify;

import io.rmqsource.format.ConsumeQueue;
import io.rmqsource.store.Segment;
import io.rmqsource.store.Segments;
import java.io.File;
import java.nio.ByteBuffer;
import java.util.List;

/**
 * Valid units of one ConsumeQueue in order, block by block (twin of QueueCursor in
 * rmqsource/store/verify_cursors.py).  File problems met on the way (sizes, a unit going back in
 * the CommitLog, bytes after the last unit, a hole) go straight into the report.
 */
final class QueueCursor {
    static final int BLOCK_UNITS = 16384;
    static final int ORDER_PROBLEMS_PER_BLOCK = 16;
    private static final int UNIT = ConsumeQueue.UNIT_SIZE;

    final String topic;
    final int queueId;
    final String directory;
    int topicId;
    List<Segment> segments;
    long units;
    long expired;
    long maxOffset;
    private final Report report;
    private final long clMin;
    private final long fileSize;
    private final long unitsPerFile;
    private int fileIndex;
    private long filePos;
    private boolean fileEnded;
    private long lastPhy = -1;
    // The current block: kept units (live, not expired), and the read position in it.
    private long[] phy = new long[0];
    private int[] size = new int[0];
    private long[] code = new long[0];
    private long[] qoff = new long[0];
    private int blockLen;
    private int blockPos;

    QueueCursor(String directory, String topic, int queueId, Report report, long clMin) {
        this.directory = directory;
        this.topic = topic;
        this.queueId = queueId;
        this.report = report;
        this.clMin = clMin;
        this.segments = Segments.listDirectory(directory);
        this.fileSize = Segments.commonSize(segments, 0);
        this.unitsPerFile = fileSize / UNIT;
        this.maxOffset = segments.isEmpty() ? 0 : segments.get(0).startOffset / UNIT;
        checkFiles();
    }

    private void checkFiles() {
        if (fileSize % UNIT != 0) {
            report.add("consumequeue", "cq-file-size", report.rel(segments.get(0).path), 0,
                    "ConsumeQueue file size is not a multiple of 20 bytes", "a multiple of 20", Long.toString(fileSize));
            segments = List.of();
            return;
        }
        for (int i = 1; i < segments.size(); i++) {
            Segment prev = segments.get(i - 1);
            Segment seg = segments.get(i);
            if (seg.startOffset != prev.startOffset + fileSize) {
                report.add("consumequeue", "cq-file-missing", report.rel(seg.path), -1,
                        "ConsumeQueue files are not consecutive: the previous file ends at byte "
                                + (prev.startOffset + fileSize),
                        String.format("file %020d", prev.startOffset + fileSize), new File(seg.path).getName());
            }
        }
        for (Segment seg : segments) {
            if (seg.sizeBytes != fileSize) {
                report.add("consumequeue", "cq-file-size", report.rel(seg.path), 0,
                        "ConsumeQueue files of one queue differ in size", Long.toString(fileSize),
                        Long.toString(seg.sizeBytes));
            }
        }
    }

    /** CommitLog offset of the next unit, or -1 at the end of the queue. */
    long nextPhy() {
        if (blockPos >= blockLen && !readBlock()) return -1;
        return phy[blockPos];
    }

    /** Append the units with phyOffset below {@code end} to {@code sink}. */
    void takeBelow(long end, UnitQueue sink, int queueIndex) {
        while (nextPhy() >= 0) {
            int stop = blockPos;
            while (stop < blockLen && phy[stop] < end) stop++;
            if (stop == blockPos) break;
            for (int i = blockPos; i < stop; i++) sink.add(phy[i], size[i], code[i], qoff[i], queueIndex);
            blockPos = stop;
            if (stop < blockLen) break;
        }
    }

    /** (file relative to the root, byte position) of the unit at {@code queueOffset}. */
    Object[] fileAndPosition(long queueOffset) {
        long b = queueOffset * UNIT;
        for (Segment seg : segments) {
            if (seg.startOffset <= b && b < seg.startOffset + fileSize) return new Object[] {report.rel(seg.path), b - seg.startOffset};
        }
        return new Object[] {segments.isEmpty() ? "consumequeue" : report.rel(segments.get(0).path), b};
    }

    private boolean readBlock() {
        while (fileIndex < segments.size()) {
            Segment seg = segments.get(fileIndex);
            if (fileEnded || filePos >= unitsPerFile) {
                fileIndex++;
                filePos = 0;
                fileEnded = false;
                continue;
            }
            int n = (int) Math.min(BLOCK_UNITS, unitsPerFile - filePos);
            long at = filePos * UNIT;
            // read(2), not the map: past the last unit a sparse file's pages may be holes (see FileReads)
            ByteBuffer raw = FileReads.read(seg.path, at, n * UNIT);
            int got = raw.limit() / UNIT;
            long firstUnit = seg.startOffset / UNIT + filePos;
            int k = 0;
            while (k < got && raw.getLong(k * UNIT) >= 0 && raw.getInt(k * UNIT + 8) > 0) k++;
            if (k < got || got < n) {
                fileEnded = true;
                checkRestIsZero(seg, filePos + k);
            }
            filePos += k;
            if (k == 0) continue;
            units += k;
            maxOffset = firstUnit + k;
            decodeUnits(raw, k, firstUnit, seg);
            if (blockLen > 0) {
                int[] order = PhyOrder.of(phy, blockLen);
                if (order != null) {
                    phy = PhyOrder.apply(phy, order);
                    size = PhyOrder.apply(size, order);
                    code = PhyOrder.apply(code, order);
                    qoff = PhyOrder.apply(qoff, order);
                }
                return true;
            }
        }
        blockLen = 0;
        blockPos = 0;
        return false;
    }

    /** The block's units in queue order: pre-blank units skipped, expired ones counted, order checked. */
    private void decodeUnits(ByteBuffer raw, int k, long firstUnit, Segment seg) {
        ensure(k);
        blockLen = 0;
        blockPos = 0;
        int orderProblems = 0;
        for (int i = 0; i < k; i++) {
            long p = raw.getLong(i * UNIT);
            int s = raw.getInt(i * UNIT + 8);
            if (s == ConsumeQueue.PRE_BLANK_SIZE) continue;
            if (p <= lastPhy && orderProblems++ < ORDER_PROBLEMS_PER_BLOCK) orderProblem(seg, firstUnit + i, p);
            lastPhy = p;
            if (p < clMin) {
                expired++;
                continue;
            }
            phy[blockLen] = p;
            size[blockLen] = s;
            code[blockLen] = raw.getLong(i * UNIT + 12);
            qoff[blockLen] = firstUnit + i;
            blockLen++;
        }
    }

    private void orderProblem(Segment seg, long q, long p) {
        report.add("consumequeue", "cq-order", report.rel(seg.path), q * UNIT - seg.startOffset, "unit " + q + " of "
                + topic + "/" + queueId + " does not follow the previous unit in the CommitLog", "phyOffset > " + lastPhy,
                Long.toString(p));
    }

    private void ensure(int k) {
        if (phy.length < k) {
            phy = new long[k];
            size = new int[k];
            code = new long[k];
            qoff = new long[k];
        }
    }

    /** After a queue's last valid unit its file holds zeros; a later file means a hole. */
    private void checkRestIsZero(Segment seg, long unitPos) {
        long start = unitPos * UNIT;
        long nonZero = FileReads.firstNonZero(seg.path, start, fileSize);
        if (nonZero >= 0) {
            report.add("consumequeue", "cq-garbage", report.rel(seg.path), nonZero - nonZero % UNIT,
                    "non-zero bytes after the last valid unit of " + topic + "/" + queueId + " (the unit at " + start
                            + " is not valid)", "zeros", "non-zero bytes");
            return;
        }
        if (seg != segments.get(segments.size() - 1)) {
            report.add("consumequeue", "cq-hole", report.rel(seg.path), start,
                    topic + "/" + queueId + ": units end inside a file that is not the queue's last",
                    unitsPerFile + " units", unitPos + " units");
        }
    }
}
