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
final class QueueCursor extends UnitCursor {
    static final int BLOCK_UNITS = 16384;
    private static final int UNIT = ConsumeQueue.UNIT_SIZE;

    final String directory;
    List<Segment> segments;
    private final long fileSize;
    private final long unitsPerFile;
    private int fileIndex;
    private long filePos;
    private boolean fileEnded;
    private Segment blockSegment;       // the file of the block being read

    QueueCursor(String directory, String topic, int queueId, Report report, long clMin) {
        super(topic, queueId, report, clMin);
        this.directory = directory;
        this.segments = Segments.listDirectory(directory);
        this.fileSize = Segments.commonSize(segments, 0);
        this.unitsPerFile = fileSize / UNIT;
        this.maxOffset = segments.isEmpty() ? 0 : segments.get(0).startOffset / UNIT;
        checkFiles();
    }

    @Override
    boolean hasUnits() {
        return !segments.isEmpty();
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

    /** (file relative to the root, byte position) of the unit at {@code queueOffset}. */
    @Override
    Object[] fileAndPosition(long queueOffset) {
        long b = queueOffset * UNIT;
        for (Segment seg : segments) {
            if (seg.startOffset <= b && b < seg.startOffset + fileSize) return new Object[] {report.rel(seg.path), b - seg.startOffset};
        }
        return new Object[] {segments.isEmpty() ? "consumequeue" : report.rel(segments.get(0).path), b};
    }

    @Override
    boolean readBlock() {
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
            maxOffset = firstUnit + k;
            blockSegment = seg;
            startBlock(k);
            for (int i = 0; i < k; i++) {
                keep(raw.getLong(i * UNIT), raw.getInt(i * UNIT + 8), raw.getLong(i * UNIT + 12), firstUnit + i);
            }
            if (endBlock()) return true;
        }
        return ended();
    }

    @Override
    Object[] placeInBlock(long q) {
        return new Object[] {report.rel(blockSegment.path), q * UNIT - blockSegment.startOffset};
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
