package io.rmqsource.verify;

import io.rmqsource.format.RocksDbQueue;
import io.rmqsource.store.QueueKey;
import io.rmqsource.store.RocksDbQueues;

/**
 * Units of one queue of the RocksDB ConsumeQueue database (storeType=defaultRocksDB) in order, with {@link
 * QueueCursor}'s interface (twin of RocksDbQueueCursor in rmqsource/store/verify_cursors.py).  Only the database's
 * own units, those below the queue's "max" entry + 1: the broker writes them without a WAL and flushes its column
 * families atomically, so they are what is on disk.  The readers continue a queue from the CommitLog past the
 * database's dispatch checkpoint (RocksDbTail); those units are derived from the CommitLog itself, and checking
 * the CommitLog against them would prove nothing.  The database has no files (file sizes, zeros after the last
 * unit, holes do not apply): a unit is named by its queue and offset in the database folder, and a value of the
 * wrong length is a cq-value-size problem.
 */
final class RocksDbQueueCursor extends UnitCursor {
    private final RocksDbQueues database;
    private final String folder;
    private long nextOffset;
    private final long[] offsets = new long[QueueCursor.BLOCK_UNITS];
    private final byte[][] values = new byte[QueueCursor.BLOCK_UNITS][];

    /** {@code folder}: the database's folder as problems name it (relative to the store root). */
    RocksDbQueueCursor(RocksDbQueues database, String folder, String topic, int queueId, Report report, long clMin) {
        super(topic, queueId, report, clMin);
        this.database = database;
        this.folder = folder;
        long[] last = database.maxEntries().get(new QueueKey(topic, queueId));
        this.maxOffset = last == null ? 0 : last[1] + 1;        // the database's units lie below it
    }

    @Override
    boolean hasUnits() {
        return maxOffset > 0;
    }

    @Override
    String unitName(long queueOffset) {
        return "RocksDB ConsumeQueue " + topic + ":" + queueId + " unit " + queueOffset;
    }

    @Override
    Object[] fileAndPosition(long queueOffset) {
        return new Object[] {folder, -1L};
    }

    /** Loads the next block of units whose values have the unit's length; false at the end of the queue. */
    @Override
    boolean readBlock() {
        while (nextOffset < maxOffset) {
            int n = database.databaseUnits(topic, queueId, nextOffset, maxOffset, offsets, values);
            if (n == 0) break;
            nextOffset = offsets[n - 1] + 1;
            int sound = 0;
            for (int i = 0; i < n; i++) {
                if (values[i].length == RocksDbQueue.CQ_VALUE_SIZE) sound++;
            }
            if (sound < n) reportValueSizes(n);
            startBlock(sound);
            for (int i = 0; i < n; i++) {
                byte[] v = values[i];
                if (v.length != RocksDbQueue.CQ_VALUE_SIZE) continue;
                keep(RocksDbQueue.phyOffset(v), RocksDbQueue.size(v), RocksDbQueue.tagsCode(v), offsets[i]);
            }
            if (endBlock()) return true;
        }
        return ended();
    }

    private void reportValueSizes(int n) {
        for (int i = 0; i < n; i++) {
            int len = values[i].length;
            if (len == RocksDbQueue.CQ_VALUE_SIZE) continue;
            report.add("consumequeue", "cq-value-size", folder, -1, unitName(offsets[i]) + " has a " + len
                    + "-byte value: not a unit, no record is matched to it", RocksDbQueue.CQ_VALUE_SIZE + " bytes",
                    len + " bytes");
        }
    }
}
