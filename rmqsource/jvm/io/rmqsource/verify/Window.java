package io.rmqsource.verify;

import java.util.Arrays;

/** The valid records of one CommitLog window, in CommitLog order: what units and entries are matched against. */
final class Window {
    long[] phy = new long[4096];
    int[] size = new int[4096];
    int[] topic = new int[4096];
    int[] queueId = new int[4096];
    long[] queueOffset = new long[4096];
    long[] code = new long[4096];
    boolean[] eligible = new boolean[4096];       // NOT / COMMIT records: dispatch gives them a unit
    boolean[] matched = new boolean[4096];        // a unit of their own queue position points at them
    int n;
    // The copies the records' multi-dispatch gives (LMQ), by row ascending: {queue, queueId, queueOffset}.
    private int[] copyRow = new int[16];
    private String[] copyQueue = new String[16];
    private int[] copyQueueId = new int[16];
    private long[] copyOffset = new long[16];
    private int copies;

    void clear() {
        n = 0;
        copies = 0;
        indexed = -1;
    }

    /** A copy of record {@code row} in another queue (rows come in ascending order). */
    void addCopy(int row, String queue, int queueId, long queueOffset) {
        if (copies == copyRow.length) {
            int m = copies * 2;
            copyRow = Arrays.copyOf(copyRow, m);
            copyQueue = Arrays.copyOf(copyQueue, m);
            copyQueueId = Arrays.copyOf(copyQueueId, m);
            copyOffset = Arrays.copyOf(copyOffset, m);
        }
        copyRow[copies] = row;
        copyQueue[copies] = queue;
        copyQueueId[copies] = queueId;
        copyOffset[copies] = queueOffset;
        copies++;
    }

    /** Whether record {@code row}'s multi-dispatch gives a unit at (queue, queueId, queueOffset). */
    boolean isCopy(int row, String queue, int queueId, long queueOffset) {
        int lo = 0;
        int hi = copies;
        while (lo < hi) {                          // the first copy of the row
            int mid = (lo + hi) >>> 1;
            if (copyRow[mid] < row) lo = mid + 1;
            else hi = mid;
        }
        for (int i = lo; i < copies && copyRow[i] == row; i++) {
            if (copyQueueId[i] == queueId && copyOffset[i] == queueOffset && copyQueue[i].equals(queue)) return true;
        }
        return false;
    }

    void add(long p, int total, int topicId, int qid, long qoff, long tagsCode, boolean needsUnit) {
        if (n == phy.length) {
            int m = n * 2;
            phy = Arrays.copyOf(phy, m);
            size = Arrays.copyOf(size, m);
            topic = Arrays.copyOf(topic, m);
            queueId = Arrays.copyOf(queueId, m);
            queueOffset = Arrays.copyOf(queueOffset, m);
            code = Arrays.copyOf(code, m);
            eligible = Arrays.copyOf(eligible, m);
            matched = Arrays.copyOf(matched, m);
        }
        phy[n] = p;
        size[n] = total;
        topic[n] = topicId;
        queueId[n] = qid;
        queueOffset[n] = qoff;
        code[n] = tagsCode;
        eligible[n] = needsUnit;
        matched[n] = false;
        n++;
    }

    // Row of the record starting in each 64-byte block of the window (a record is longer than 64
    // bytes, so a block holds at most one start): a lookup is one load and one compare.
    private static final int BLOCK_SHIFT = 6;
    private int[] blocks = new int[0];
    private long base;
    private int indexed = -1;
    private int blockCount;

    /** Row of the record starting at CommitLog offset {@code offset}, or -1. */
    int find(long offset) {
        if (n == 0) return -1;
        if (indexed != n) index();
        long b = (offset - base) >> BLOCK_SHIFT;
        if (b < 0 || b >= blockCount) return -1;
        int r = blocks[(int) b];
        return r >= 0 && phy[r] == offset ? r : -1;
    }

    private void index() {
        base = phy[0];
        int len = (int) (((phy[n - 1] - base) >> BLOCK_SHIFT) + 1);
        if (blocks.length < len) blocks = new int[Math.max(len, blocks.length * 2)];
        blockCount = len;
        Arrays.fill(blocks, 0, len, -1);
        for (int i = 0; i < n; i++) blocks[(int) ((phy[i] - base) >> BLOCK_SHIFT)] = i;
        indexed = n;
    }
}
