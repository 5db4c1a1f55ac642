package io.rmqsource.store;

import io.rmqsource.errors.CorruptRecordError;
import io.rmqsource.format.ConsumeQueue;
import io.rmqsource.io.StoreFiles;
import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * One queue followed by a stream's driver (the tail part of StoreWatcher in
 * rmqsource/spark/store_watcher.py): local files stay mapped between batches, and the tail moves forward
 * over units written since the last look, never backwards.  Off a mapped file system the files are
 * re-listed at each {@link #advance}, and a file is read whole again unless its listed length and
 * modification time are those it had, settled, when last read (a sync job re-uploads a longer
 * object: object stores replace, never append).  {@link #maxOffset()} is the verified tail, so
 * the inherited helpers (min offset, unit reads) see exactly what a batch may admit.
 */
public final class QueueTail extends QueueUnits {
    /** Checks the unit about to become the last admitted one against the record it points at. */
    public interface Verifier {
        boolean verify(QueueTail queue, long offset, long phy, int size);
    }

    private final StoreFiles storeFiles;
    private final String directory;
    private List<Segment> files = List.of();
    private long fileSize;
    private int unitsPerFile = 1;
    private final Map<String, ByteBuffer> maps = new HashMap<>();
    /** Off a mapped file system: the listing of each file read whole after it had settled (kept while it holds). */
    private final Map<String, Segment> settled = new HashMap<>();
    private long tail;

    /** The queue's units in a RocksDB database (storeType=defaultRocksDB): null for queues kept in files. */
    private final StoreLayout rocksLayout;
    private QueueUnits rocks;

    public QueueTail(StoreFiles files, String directory, String topic, int queueId) {
        super(topic, queueId);
        this.storeFiles = files;
        this.directory = directory;
        this.rocksLayout = null;
        relist();
    }

    /**
     * A queue of the layout's RocksDB ConsumeQueues: each {@link #advance} looks at the database as it is
     * then (a new read-only snapshot when its files changed), the max entry written with the units.
     */
    public QueueTail(StoreLayout layout, String topic, int queueId) {
        super(topic, queueId);
        this.storeFiles = layout.files;
        this.directory = StoreFiles.child(layout.root, "consumequeue");
        this.rocksLayout = layout;
        relist();
    }

    /** Re-reads the directory: new files, files removed by retention. */
    public void relist() {
        if (rocksLayout != null) {
            rocks = rocksLayout.rocksDbQueueStore().queue(topic, queueId, 300_000);
            return;
        }
        List<Segment> segs = Segments.listDirectory(storeFiles, directory);
        Map<String, ByteBuffer> keep = new HashMap<>();
        for (Segment s : segs) {
            ByteBuffer b = maps.get(s.path);
            Segment read = settled.get(s.path);
            boolean same = storeFiles.mapped() ? b != null && b.capacity() >= s.sizeBytes
                    : b != null && read != null && read.sizeBytes == s.sizeBytes && read.modified == s.modified;
            if (same) keep.put(s.path, b);
        }
        settled.keySet().retainAll(keep.keySet());
        maps.clear();
        maps.putAll(keep);
        files = segs;
        long common = Segments.commonSize(segs, 0);
        if (common > 0 && common % ConsumeQueue.UNIT_SIZE == 0) {
            fileSize = common;
            unitsPerFile = (int) Math.max(1, Math.min(Integer.MAX_VALUE, fileSize / ConsumeQueue.UNIT_SIZE));
        } else {
            fileSize = 0;           // no files, or a size that is no ConsumeQueue: nothing is followed
        }
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
        if (rocksLayout != null) return rocks != null ? rocks.unitsPerFile() : 300_000;
        return unitsPerFile;
    }

    @Override
    public long firstFileStartOffset() {
        if (rocksLayout != null) return rocks != null ? rocks.firstFileStartOffset() : 0;
        return files.isEmpty() ? 0 : files.get(0).startOffset / ConsumeQueue.UNIT_SIZE;
    }

    public boolean hasFiles() {
        if (rocksLayout != null) return rocks != null;
        return !files.isEmpty();
    }

    /** The verified tail: queue offset after the last admitted unit. */
    @Override
    public long maxOffset() {
        return tail;
    }

    @Override
    public long maxPhysicOffset() {
        return -1;
    }

    /** The mapped file holding unit {@code offset}, or null. */
    private ByteBuffer fileFor(long offset, long[] fileStartUnit) {
        if (fileSize == 0) return null;
        long start = (offset / unitsPerFile) * unitsPerFile;
        long startByte = start * ConsumeQueue.UNIT_SIZE;
        for (int pass = 0; pass < 2; pass++) {
            for (Segment s : files) {
                if (s.startOffset == startByte) {
                    ByteBuffer b = maps.get(s.path);
                    if (b == null || (storeFiles.mapped() && b.capacity() < fileSize)) {
                        // A mapped file may still be growing; a file read whole is read again at the next relist.
                        b = storeFiles.mapped() ? Segments.mapFile(s.path)
                                : storeFiles.whole(s.path, s.sizeBytes, s.modified);
                        maps.put(s.path, b);
                        if (!storeFiles.mapped() && StoreFiles.settled(s.modified, System.currentTimeMillis())) {
                            settled.put(s.path, s);
                        }
                    }
                    fileStartUnit[0] = start;
                    return b;
                }
            }
            if (pass == 0) relist();
        }
        return null;
    }

    /**
     * Moves the tail over the units written since the last call (valid: phyOffset >= 0 and size >
     * 0); the last one is admitted only when {@code verifier} accepts it (a unit caught half-written
     * is left for the next call; units pointing past the valid CommitLog end are never admitted).
     * Returns the tail.
     */
    public long advance(Verifier verifier) {
        if (rocksLayout != null) return advanceRocks(verifier);
        if (!storeFiles.mapped()) relist();          // lengths as they are now: one listing per trigger
        long off = Math.max(tail, firstFileStartOffset());
        long lastPhy = -1;
        int lastSize = 0;
        long[] fs = new long[1];
        while (true) {
            ByteBuffer b = fileFor(off, fs);
            if (b == null) {
                if (storeFiles.mapped() && hasFileAfter(off)) {
                    ConsumeQueueFiles.requireContiguous(files, fileSize, topic, queueId, directory);
                }
                break;
            }
            long limit = Math.min(unitsPerFile, b.capacity() / ConsumeQueue.UNIT_SIZE);
            long i = off - fs[0];
            boolean stopped = false;
            for (; i < limit; i++) {
                int p = (int) (i * ConsumeQueue.UNIT_SIZE);
                long phy = b.getLong(p);
                int size = b.getInt(p + 8);
                if (phy < 0 || size <= 0) {
                    stopped = true;
                    break;
                }
                lastPhy = phy;
                lastSize = size;
            }
            off = fs[0] + i;
            if (!stopped && i < unitsPerFile && storeFiles.mapped() && hasFileAfter(off)) {
                throw new CorruptRecordError("ConsumeQueue " + topic + ":" + queueId + " ends at unit " + off + ", "
                        + b.capacity() + " of its file's " + fileSize + " bytes, and later files follow: the units "
                        + "between are missing", queueFileOf(off), b.capacity());
            }
            if (stopped || i < unitsPerFile) break;
        }
        if (off > tail && lastSize != 0 && !verifier.verify(this, off - 1, lastPhy, lastSize)) {
            off = firstUnverified(verifier, tail, off - 1);
        }
        if (off > tail) tail = off;
        return tail;
    }

    private long advanceRocks(Verifier verifier) {
        relist();
        if (rocks == null) return tail;
        long off = rocks.maxOffset();
        long[] p = new long[1];
        int[] s = new int[1];
        long[] c = new long[1];
        if (off > tail) {
            boolean ok = rocks.read(off - 1, 1, p, s, c) == 1 && p[0] >= 0 && s[0] > 0
                    && verifier.verify(this, off - 1, p[0], s[0]);
            if (!ok) {
                long a = tail;
                long b = off - 1;
                while (a < b) {
                    long mid = (a + b) >>> 1;
                    boolean good = rocks.read(mid, 1, p, s, c) == 1 && p[0] >= 0 && s[0] > 0
                            && verifier.verify(this, mid, p[0], s[0]);
                    if (good) a = mid + 1;
                    else b = mid;
                }
                off = a;
            }
        }
        if (off > tail) tail = off;
        return tail;
    }

    /**
     * Whether a file starts past the one that would hold unit {@code offset}.  Local files are written in
     * order, so a file missing or cut short before it is damage (an error, not a stream that stops there);
     * an object store's sync job may upload out of order, so there the stream waits for the next listing.
     */
    private boolean hasFileAfter(long offset) {
        long fileStartByte = (offset / unitsPerFile) * unitsPerFile * ConsumeQueue.UNIT_SIZE;
        return !files.isEmpty() && files.get(files.size() - 1).startOffset > fileStartByte;
    }

    /**
     * The first unit in [lo, bad] that its record does not confirm, given that unit {@code bad}
     * fails: a unit caught half-written is only the last one, but after a crash every unit past the
     * valid CommitLog end fails (a suffix of the queue, as units follow the CommitLog), and none of
     * them may be admitted; a binary search, as the batch read's cap on such units.
     */
    private long firstUnverified(Verifier verifier, long lo, long bad) {
        long[] fs = new long[1];
        long a = lo;
        long b = bad;
        while (a < b) {
            long mid = (a + b) >>> 1;
            ByteBuffer buf = fileFor(mid, fs);
            boolean ok = false;
            if (buf != null) {
                int p = (int) ((mid - fs[0]) * ConsumeQueue.UNIT_SIZE);
                if (p + ConsumeQueue.UNIT_SIZE <= buf.capacity()) {
                    long phy = buf.getLong(p);
                    int size = buf.getInt(p + 8);
                    ok = phy >= 0 && size > 0 && verifier.verify(this, mid, phy, size);
                }
            }
            if (ok) a = mid + 1;
            else b = mid;
        }
        return a;
    }

    @Override
    public int read(long start, int count, long[] phy, int[] size, long[] code) {
        long e = Math.min(tail, start + Math.max(0, count));
        if (rocksLayout != null) {
            return rocks == null || e <= start ? 0 : rocks.read(start, (int) (e - Math.max(0, start)), phy, size, code);
        }
        int n = 0;
        long offset = Math.max(0, start);
        long[] fs = new long[1];
        while (offset < e) {
            ByteBuffer b = fileFor(offset, fs);
            if (b == null) break;
            long inFile = Math.min(e, fs[0] + Math.min(unitsPerFile, b.capacity() / ConsumeQueue.UNIT_SIZE));
            if (inFile <= offset) break;
            for (; offset < inFile; offset++) {
                int p = (int) ((offset - fs[0]) * ConsumeQueue.UNIT_SIZE);
                phy[n] = b.getLong(p);
                size[n] = b.getInt(p + 8);
                code[n] = b.getLong(p + 12);
                n++;
            }
        }
        return n;
    }

    /**
     * Sum of the record sizes of units [start, end) (pre-blank units count 0), or -1 when some of
     * them cannot be read (removed by retention, not written); chunked, no allocation per unit.
     */
    public long bytesBetween(long start, long end) {
        long total = 0;
        int chunk = 8192;
        long[] p = new long[chunk];
        int[] s = new int[chunk];
        long[] c = new long[chunk];
        for (long off = start; off < end; ) {
            int n = read(off, (int) Math.min(chunk, end - off), p, s, c);
            if (n == 0) return -1;
            for (int i = 0; i < n; i++) if (s[i] != ConsumeQueue.PRE_BLANK_SIZE) total += s[i];
            off += n;
        }
        return total;
    }
}
