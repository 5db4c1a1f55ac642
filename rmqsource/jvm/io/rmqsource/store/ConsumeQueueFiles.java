package io.rmqsource.store;

import io.rmqsource.errors.CorruptRecordError;
import io.rmqsource.format.ConsumeQueue;
import io.rmqsource.io.StoreFiles;
import java.nio.ByteBuffer;
import java.util.List;

/** One queue's files under consumequeue/{topic}/{queueId}/ (twin of ConsumeQueue in consumequeue.py). */
public final class ConsumeQueueFiles extends QueueUnits {
    private static final long DEFAULT_FILE_SIZE = 300_000L * ConsumeQueue.UNIT_SIZE;
    private final String directory;
    private final Segments files;
    private final long fileSize;
    private final int unitsPerFile;
    private long maxOffset = -1;
    private long maxPhysicOffset;

    public ConsumeQueueFiles(String directory, String topic, int queueId) {
        this(StoreFiles.LOCAL, directory, topic, queueId);
    }

    /** The queue's files under {@code directory}, read through {@code storeFiles} (each file's written units). */
    public ConsumeQueueFiles(StoreFiles storeFiles, String directory, String topic, int queueId) {
        this(storeFiles, directory, storeFiles.list(directory), topic, queueId);
    }

    /** The same from the entries of {@code directory} already listed. */
    public ConsumeQueueFiles(StoreFiles storeFiles, String directory, List<StoreFiles.Entry> entries, String topic,
                             int queueId) {
        super(topic, queueId);
        this.directory = directory;
        List<Segment> segs = Segments.fromEntries(entries, directory, false);
        long size = segs.isEmpty() ? DEFAULT_FILE_SIZE : Segments.commonSize(segs, 0);
        if (size % ConsumeQueue.UNIT_SIZE != 0) {
            throw new CorruptRecordError("ConsumeQueue file size " + size + " is not a multiple of "
                    + ConsumeQueue.UNIT_SIZE, segs.isEmpty() ? directory : segs.get(0).path, 0);
        }
        this.fileSize = size;
        this.unitsPerFile = (int) Math.min(Integer.MAX_VALUE, size / ConsumeQueue.UNIT_SIZE);
        this.files = new Segments(storeFiles, segs, size);
    }

    @Override
    public String where() {
        return directory;
    }

    @Override
    public String fileOf(long offset) {
        return queueFileOf(offset);
    }

    @Override
    public long positionOf(long offset) {
        return positionInQueueFile(offset);
    }

    @Override
    public int unitsPerFile() {
        return unitsPerFile;
    }

    @Override
    public long firstFileStartOffset() {
        return files.list.isEmpty() ? 0 : files.list.get(0).startOffset / ConsumeQueue.UNIT_SIZE;
    }

    /**
     * A gap between the queue's files is corruption (spec section 3): the error names the missing
     * file.  Checked from the file names alone, so a file named far past the others (a range of
     * ~1e17 units) is refused at once, never walked unit by unit.
     */
    @Override
    public void requireContiguous() {
        requireContiguous(files.list, fileSize, topic, queueId, directory);
    }

    /** The gap check of one queue's file listing (also a stream's tail, which keeps its own listing). */
    static void requireContiguous(List<Segment> segs, long fileSize, String topic, int queueId, String directory) {
        for (int i = 0; i + 1 < segs.size(); i++) {
            long expected = segs.get(i).startOffset + fileSize;
            if (segs.get(i + 1).startOffset != expected) {
                throw new CorruptRecordError("ConsumeQueue " + topic + ":" + queueId + " has a gap: file "
                        + StoreFiles.name(segs.get(i).path) + " is followed by "
                        + StoreFiles.name(segs.get(i + 1).path) + ", not " + String.format("%020d", expected),
                        StoreFiles.child(directory, String.format("%020d", expected)), 0);
            }
        }
    }

    private void tail() {
        if (maxOffset >= 0) return;
        List<Segment> segs = files.list;
        if (segs.isEmpty()) {
            maxOffset = 0;
            maxPhysicOffset = -1;
            return;
        }
        // Backwards over at most the last three files, as recovery does.
        for (int i = segs.size() - 1; i >= Math.max(0, segs.size() - 3); i--) {
            Segment seg = segs.get(i);
            ByteBuffer b = files.mapWrittenUnits(seg, ConsumeQueue.UNIT_SIZE);
            int n = validPrefixUnits(b);
            if (n > 0) {
                int p = (n - 1) * ConsumeQueue.UNIT_SIZE;
                int size = ConsumeQueue.size(b, p);
                maxOffset = seg.startOffset / ConsumeQueue.UNIT_SIZE + n;
                maxPhysicOffset = size != ConsumeQueue.PRE_BLANK_SIZE ? ConsumeQueue.phyOffset(b, p) + size : -1;
                return;
            }
        }
        maxOffset = segs.get(segs.size() - 1).startOffset / ConsumeQueue.UNIT_SIZE;
        maxPhysicOffset = -1;
    }

    /** Units before the first invalid one: a binary search, units are written front to back. */
    private int validPrefixUnits(ByteBuffer b) {
        int lo = 0;
        int hi = Math.min(unitsPerFile, b.capacity() / ConsumeQueue.UNIT_SIZE);
        if (hi > 0 && ConsumeQueue.valid(b, (hi - 1) * ConsumeQueue.UNIT_SIZE)) return hi;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (ConsumeQueue.valid(b, mid * ConsumeQueue.UNIT_SIZE)) lo = mid + 1;
            else hi = mid;
        }
        return lo;
    }

    @Override
    public long maxOffset() {
        tail();
        return maxOffset;
    }

    @Override
    public long maxPhysicOffset() {
        tail();
        return maxPhysicOffset;
    }

    @Override
    public boolean hasFileFor(long offset) {
        return files.find(offset * ConsumeQueue.UNIT_SIZE) != null;
    }

    @Override
    public int read(long start, int count, long[] phy, int[] size, long[] code) {
        long s = Math.max(0, start);
        long e = Math.min(maxOffset(), start + Math.max(0, count));
        int n = 0;
        long offset = s;
        while (offset < e) {
            long byteOffset = offset * ConsumeQueue.UNIT_SIZE;
            Segment seg = files.find(byteOffset);
            if (seg == null) break;
            ByteBuffer b = files.mapWrittenUnits(seg, ConsumeQueue.UNIT_SIZE);
            long pos = byteOffset - seg.startOffset;
            long inFile = Math.min(e - offset, (fileSize - pos) / ConsumeQueue.UNIT_SIZE);
            if (inFile <= 0) break;
            long avail = Math.max(0, (b.capacity() - pos) / ConsumeQueue.UNIT_SIZE);
            long take = Math.min(inFile, avail);
            for (long k = 0; k < take; k++) {
                int p = (int) (pos + k * ConsumeQueue.UNIT_SIZE);
                phy[n] = b.getLong(p);
                size[n] = b.getInt(p + 8);
                code[n] = b.getLong(p + 12);
                n++;
            }
            offset += take;
            if (take < inFile || take == 0) break;
        }
        return n;
    }
}
