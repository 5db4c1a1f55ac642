package io.rmqsource.format;

import java.nio.ByteBuffer;

/**
 * The checkpoint file (spec 7.1): int64 physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp,
 * then (5.x) masterFlushedOffset and confirmPhyOffset; zero-padded to 4096 bytes.
 */
public final class Checkpoint {
    public static final int FILE_SIZE = 4096;
    public final long physicMsgTimestampMs;
    public final long logicsMsgTimestampMs;
    public final long indexMsgTimestampMs;
    public final long masterFlushedOffset;
    public final long confirmPhyOffset;

    public Checkpoint(long physic, long logics, long index) {
        this(physic, logics, index, 0, 0);
    }

    public Checkpoint(long physic, long logics, long index, long masterFlushedOffset, long confirmPhyOffset) {
        physicMsgTimestampMs = physic;
        logicsMsgTimestampMs = logics;
        indexMsgTimestampMs = index;
        this.masterFlushedOffset = masterFlushedOffset;
        this.confirmPhyOffset = confirmPhyOffset;
    }

    public static Checkpoint decode(byte[] data) {
        ByteBuffer b = ByteBuffer.wrap(java.util.Arrays.copyOf(data, Math.max(40, data.length)));
        return new Checkpoint(b.getLong(0), b.getLong(8), b.getLong(16), b.getLong(24), b.getLong(32));
    }

    /** The file's 4096 bytes (a 4.x engine writes zeros where 5.x keeps its two offsets). */
    public byte[] encode(boolean v5) {
        ByteBuffer b = ByteBuffer.allocate(FILE_SIZE);
        b.putLong(0, physicMsgTimestampMs).putLong(8, logicsMsgTimestampMs).putLong(16, indexMsgTimestampMs);
        if (v5) b.putLong(24, masterFlushedOffset).putLong(32, confirmPhyOffset);
        return b.array();
    }

    /** Start bound of abnormal recovery: max(0, min(physic, logics) - 3000). */
    public long minTimestampMs() {
        return Math.max(0, Math.min(physicMsgTimestampMs, logicsMsgTimestampMs) - 3000);
    }

    public long minTimestampIndexMs() {
        return Math.min(minTimestampMs(), indexMsgTimestampMs);
    }
}
