package io.rmqsource.store;

import io.rmqsource.format.ConsumeQueue;

/**
 * Units of one (topic, queueId), twin of ConsumeQueueBase in rmqsource/store/consumequeue.py:
 * over the queue's files, or re-derived from the CommitLog when consumequeue/ is missing.
 */
public abstract class QueueUnits {
    public final String topic;
    public final int queueId;

    protected QueueUnits(String topic, int queueId) {
        this.topic = topic;
        this.queueId = queueId;
    }

    public abstract long maxOffset();

    /** Throws CorruptRecordError where the queue's files leave a gap (units in memory have none). */
    public void requireContiguous() {
    }

    /** End (phyOffset + size) of the last valid unit's record; -1 when empty. */
    public abstract long maxPhysicOffset();

    public abstract long firstFileStartOffset();

    public abstract int unitsPerFile();

    /** Where errors point: the queue's directory. */
    public abstract String where();

    /** The file that holds (or would hold) unit {@code offset}: errors name it; a re-derived queue has none. */
    public String fileOf(long offset) {
        return where();
    }

    /** Byte position of unit {@code offset} in {@link #fileOf}. */
    public long positionOf(long offset) {
        return offset * ConsumeQueue.UNIT_SIZE;
    }

    /** The ConsumeQueue file of unit {@code offset} for queues kept in files of {@link #unitsPerFile} units. */
    protected final String queueFileOf(long offset) {
        long start = Math.floorDiv(offset, (long) unitsPerFile()) * unitsPerFile();
        return io.rmqsource.io.StoreFiles.child(where(), String.format("%020d", start * ConsumeQueue.UNIT_SIZE));
    }

    /** Byte position of unit {@code offset} in {@link #queueFileOf}. */
    protected final long positionInQueueFile(long offset) {
        return Math.floorMod(offset, (long) unitsPerFile()) * ConsumeQueue.UNIT_SIZE;
    }

    /** Units [start, start + count) clipped to [0, maxOffset); returns how many were read. */
    public abstract int read(long start, int count, long[] phy, int[] size, long[] code);

    private final long[] p1 = new long[1];
    private final int[] s1 = new int[1];
    private final long[] c1 = new long[1];

    /** Unit i as {phy, size, code} in the holders, or false when there is none. */
    public boolean unit(long i, long[] phy, int[] size, long[] code) {
        return read(i, 1, phy, size, code) == 1;
    }

    public boolean hasFileFor(long offset) {
        return true;
    }

    /** Max offset ignoring units at or past the CommitLog's valid end (truncateDirtyLogicFiles). */
    public long cappedMaxOffset(long commitLogEnd) {
        long hi = maxOffset();
        long lo = firstFileStartOffset();
        if (hi <= lo || maxPhysicOffset() <= commitLogEnd) return hi;
        while (lo < hi) {
            long mid = (lo + hi) >>> 1;
            boolean found = unit(mid, p1, s1, c1);          // (a missing unit counts as below the end)
            if (found && s1[0] != ConsumeQueue.PRE_BLANK_SIZE && p1[0] >= commitLogEnd) hi = mid;
            else lo = mid + 1;
        }
        return lo;
    }

    /** The broker's minLogicOffset (spec 3.4), per engine generation (see consumequeue.py). */
    public long minOffset(long commitLogMinOffset, boolean v5, long maxOff) {
        long first = firstFileStartOffset();
        if (maxOff <= first) return v5 ? maxOff : first;
        long lo;
        long hi;
        if (v5) {
            if (unit(maxOff - 1, p1, s1, c1) && p1[0] < commitLogMinOffset && s1[0] != ConsumeQueue.PRE_BLANK_SIZE) {
                return maxOff;
            }
            lo = first;
            hi = maxOff;
        } else {
            lo = first;
            hi = Math.min(maxOff, first + unitsPerFile());
        }
        long endOfScan = hi;
        while (lo < hi) {
            long mid = (lo + hi) >>> 1;
            boolean live = unit(mid, p1, s1, c1)             // (a missing unit counts as expired)
                    && s1[0] != ConsumeQueue.PRE_BLANK_SIZE && p1[0] >= commitLogMinOffset;
            if (live) hi = mid;
            else lo = mid + 1;
        }
        if (lo >= endOfScan) return v5 ? maxOff : first;
        return lo;
    }
}
