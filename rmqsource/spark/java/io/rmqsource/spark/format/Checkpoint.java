package io.rmqsource.spark.format;

import java.nio.ByteBuffer;

/** The checkpoint file (spec 7.1): int64 physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp. */
public final class Checkpoint {
    public final long physicMsgTimestampMs;
    public final long logicsMsgTimestampMs;
    public final long indexMsgTimestampMs;

    public Checkpoint(long physic, long logics, long index) {
        physicMsgTimestampMs = physic;
        logicsMsgTimestampMs = logics;
        indexMsgTimestampMs = index;
    }

    public static Checkpoint decode(byte[] data) {
        ByteBuffer b = ByteBuffer.wrap(java.util.Arrays.copyOf(data, Math.max(40, data.length)));
        return new Checkpoint(b.getLong(0), b.getLong(8), b.getLong(16));
    }

    /** Start bound of abnormal recovery: max(0, min(physic, logics) - 3000). */
    public long minTimestampMs() {
        return Math.max(0, Math.min(physicMsgTimestampMs, logicsMsgTimestampMs) - 3000);
    }

    public long minTimestampIndexMs() {
        return Math.min(minTimestampMs(), indexMsgTimestampMs);
    }
}
