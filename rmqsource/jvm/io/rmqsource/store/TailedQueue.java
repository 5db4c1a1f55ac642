package io.rmqsource.store;

/**
 * A queue's file units followed by its units dispatched from the CommitLog past every queue (a stopped store
 * whose writer died between its CommitLog write and its dispatch: {@link StoreReader}'s undispatched tail);
 * a queue only the tail holds has no files ({@code files} null).  With files, the tail is asked for only when a
 * question reaches past them (a read inside them, as a planned range's task makes, never walks the CommitLog);
 * null there means the files alone.  Units are served while they run without a gap.  Twin of TailedConsumeQueue (and, tail only, InMemoryConsumeQueue) in rmqsource/store/consumequeue.py.
 */
final class TailedQueue extends QueueUnits {
    private final QueueUnits files;                 // the queue's files, or null
    private final java.util.function.Supplier<RocksDbTail.Frozen> tailOf;
    private RocksDbTail.Frozen tail;
    private boolean tailKnown;
    private final int unitsPerFile;

    TailedQueue(String topic, int queueId, QueueUnits files, java.util.function.Supplier<RocksDbTail.Frozen> tail,
                int unitsPerFile) {
        super(topic, queueId);
        this.files = files;
        this.tailOf = tail;
        this.unitsPerFile = files != null ? files.unitsPerFile() : unitsPerFile;
    }

    /** The tail's units (asked once), or null: none. */
    private RocksDbTail.Frozen tail() {
        if (!tailKnown) {
            RocksDbTail.Frozen t = tailOf.get();
            tail = t != null && t.count > 0 ? t : null;
            tailKnown = true;
        }
        return tail;
    }

    @Override
    public long maxOffset() {
        RocksDbTail.Frozen tail = tail();
        if (tail == null) return files == null ? 0 : files.maxOffset();
        return files == null ? tail.endOffset() : Math.max(files.maxOffset(), tail.endOffset());
    }

    @Override
    public long maxPhysicOffset() {
        RocksDbTail.Frozen tail = tail();
        if (tail == null) return files == null ? -1 : files.maxPhysicOffset();
        return tail.phy[tail.count - 1] + tail.size[tail.count - 1];
    }

    @Override
    public long firstFileStartOffset() {
        RocksDbTail.Frozen tail = tail();
        if (tail == null) return files == null ? 0 : files.firstFileStartOffset();
        if (files == null) return tail.firstOffset;
        if (files.maxOffset() <= files.firstFileStartOffset()) {
            return Math.min(files.firstFileStartOffset(), tail.firstOffset);
        }
        return files.firstFileStartOffset();
    }

    @Override
    public void requireContiguous() {
        if (files != null) files.requireContiguous();
    }

    @Override
    public int unitsPerFile() {
        return unitsPerFile;
    }

    @Override
    public String where() {
        return files != null ? files.where() : topic + "/" + queueId + " (dispatched from the CommitLog)";
    }

    @Override
    public String fileOf(long offset) {
        return files != null ? files.fileOf(offset) : where();
    }

    @Override
    public long positionOf(long offset) {
        return files != null ? files.positionOf(offset) : super.positionOf(offset);
    }

    @Override
    public boolean hasFileFor(long offset) {
        if (files == null) return true;
        RocksDbTail.Frozen tail = tail();
        return (tail != null && offset >= tail.firstOffset) || files.hasFileFor(offset);
    }

    @Override
    public int read(long start, int count, long[] phy, int[] size, long[] code) {
        if (files != null && start >= 0 && start + count <= files.maxOffset()) {
            return files.read(start, count, phy, size, code);       // inside the files: the tail is not asked
        }
        RocksDbTail.Frozen tail = tail();
        if (tail == null) return files == null ? 0 : files.read(start, count, phy, size, code);
        long s = Math.max(0, start);
        long e = Math.min(maxOffset(), start + Math.max(0, count));
        if (e <= s) return 0;
        long filesEnd = files == null ? 0 : files.maxOffset();
        int n = s < filesEnd ? files.read(s, (int) (Math.min(e, filesEnd) - s), phy, size, code) : 0;
        return tail.readAfter(s, e, n, phy, size, code);
    }
}
