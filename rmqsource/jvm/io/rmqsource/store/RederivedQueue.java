package io.rmqsource.store;

/** Units re-derived from the CommitLog when consumequeue/ holds no queue (twin of InMemoryConsumeQueue). */
public final class RederivedQueue extends QueueUnits {
    private final long firstOffset;
    private final int unitsPerFile;
    long[] phy = new long[16];
    int[] size = new int[16];
    long[] code = new long[16];
    int count;

    RederivedQueue(String topic, int queueId, long firstOffset, int unitsPerFile) {
        super(topic, queueId);
        this.firstOffset = firstOffset;
        this.unitsPerFile = unitsPerFile;
    }

    void add(long p, int s, long c) {
        if (count == phy.length) {
            phy = java.util.Arrays.copyOf(phy, count * 2);
            size = java.util.Arrays.copyOf(size, count * 2);
            code = java.util.Arrays.copyOf(code, count * 2);
        }
        phy[count] = p;
        size[count] = s;
        code[count] = c;
        count++;
    }

    /** Drops the last unit when it points at {@code phyOffset} (a record the tail walk takes back). */
    boolean dropLastIf(long phyOffset) {
        if (count == 0 || phy[count - 1] != phyOffset) return false;
        count--;
        return true;
    }

    @Override
    public long maxOffset() {
        return firstOffset + count;
    }

    @Override
    public long maxPhysicOffset() {
        return count == 0 ? -1 : phy[count - 1] + size[count - 1];
    }

    @Override
    public long firstFileStartOffset() {
        return firstOffset;
    }

    @Override
    public int unitsPerFile() {
        return unitsPerFile;
    }

    @Override
    public String where() {
        return topic + "/" + queueId + " (re-derived from the CommitLog)";
    }

    @Override
    public int read(long start, int n, long[] p, int[] s, long[] c) {
        long i = Math.max(0, start - firstOffset);
        long j = Math.max(0, Math.min(count, start - firstOffset + n));
        int k = 0;
        for (long x = i; x < j; x++) {
            p[k] = phy[(int) x];
            s[k] = size[(int) x];
            c[k] = code[(int) x];
            k++;
        }
        return k;
    }
}
