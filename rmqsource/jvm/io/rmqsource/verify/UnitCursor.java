package io.rmqsource.verify;

import io.rmqsource.format.ConsumeQueue;

/**
 * What the queue cursors share (twin of _UnitCursor in rmqsource/store/verify_cursors.py): a queue's units handed
 * out in CommitLog order, block by block.  A subclass reads the next block in queue order ({@link #readBlock}:
 * {@link #startBlock}, {@link #keep} for each unit, {@link #endBlock}), names a unit ({@link #unitName}) and says
 * where it is ({@link #fileAndPosition}).
 */
abstract class UnitCursor {
    static final int ORDER_PROBLEMS_PER_BLOCK = 16;
    /** What {@link #nextPhy} answers at the end of the queue (a RocksDB unit may hold a negative phyOffset). */
    static final long END = Long.MIN_VALUE;

    final String topic;
    final int queueId;
    int topicId;
    long units;              // valid units seen (pre-blank and expired included)
    long expired;
    long maxOffset;
    final Report report;
    private final long clMin;
    private long lastPhy = -1;
    private int orderProblems;
    // The current block: kept units (live, not expired), and the read position in it.
    private long[] phy = new long[0];
    private int[] size = new int[0];
    private long[] code = new long[0];
    private long[] qoff = new long[0];
    private int blockLen;
    private int blockPos;

    UnitCursor(String topic, int queueId, Report report, long clMin) {
        this.topic = topic;
        this.queueId = queueId;
        this.report = report;
        this.clMin = clMin;
    }

    /** Whether the queue has units to check (files, or units in the database). */
    abstract boolean hasUnits();

    /** (file relative to the root, byte position or -1) of the unit at {@code queueOffset}. */
    abstract Object[] fileAndPosition(long queueOffset);

    /** Loads the next block of units; false at the end of the queue. */
    abstract boolean readBlock();

    String unitName(long queueOffset) {
        return "unit " + queueOffset + " of " + topic + "/" + queueId;
    }

    /** Where a unit of the block being read is, for its order problem (the file cursor knows its file). */
    Object[] placeInBlock(long queueOffset) {
        return fileAndPosition(queueOffset);
    }

    /** A new block of {@code k} units. */
    void startBlock(int k) {
        units += k;
        if (phy.length < k) {
            phy = new long[k];
            size = new int[k];
            code = new long[k];
            qoff = new long[k];
        }
        blockLen = 0;
        blockPos = 0;
        orderProblems = 0;
    }

    /** The block's next unit in queue order: a pre-blank one skipped, an expired one counted, its order checked. */
    void keep(long p, int s, long c, long q) {
        if (s == ConsumeQueue.PRE_BLANK_SIZE) return;
        if (p <= lastPhy && orderProblems++ < ORDER_PROBLEMS_PER_BLOCK) orderProblem(q, p);
        lastPhy = p;
        // A negative phyOffset is no expired unit: it is matched, and points at no record.
        if (p >= 0 && p < clMin) {
            expired++;
            return;
        }
        phy[blockLen] = p;
        size[blockLen] = s;
        code[blockLen] = c;
        qoff[blockLen] = q;
        blockLen++;
    }

    /** The block's kept units in CommitLog order; true when some are left to hand out. */
    boolean endBlock() {
        if (blockLen == 0) return false;
        int[] order = PhyOrder.of(phy, blockLen);
        if (order != null) {
            phy = PhyOrder.apply(phy, order);
            size = PhyOrder.apply(size, order);
            code = PhyOrder.apply(code, order);
            qoff = PhyOrder.apply(qoff, order);
        }
        return true;
    }

    /** No block left. */
    boolean ended() {
        blockLen = 0;
        blockPos = 0;
        return false;
    }

    private void orderProblem(long q, long p) {
        Object[] where = placeInBlock(q);
        report.add("consumequeue", "cq-order", (String) where[0], (Long) where[1], unitName(q)
                + " does not follow the previous unit in the CommitLog", "phyOffset > " + lastPhy, Long.toString(p));
    }

    /** CommitLog offset of the next unit, or {@link #END} at the end of the queue. */
    long nextPhy() {
        if (blockPos >= blockLen && !readBlock()) return END;
        return phy[blockPos];
    }

    /** Append the units with phyOffset below {@code end} to {@code sink}. */
    void takeBelow(long end, UnitQueue sink, int queueIndex) {
        while (nextPhy() != END) {
            int stop = blockPos;
            while (stop < blockLen && phy[stop] < end) stop++;
            if (stop == blockPos) break;
            for (int i = blockPos; i < stop; i++) sink.add(phy[i], size[i], code[i], qoff[i], queueIndex);
            blockPos = stop;
            if (stop < blockLen) break;
        }
    }
}
