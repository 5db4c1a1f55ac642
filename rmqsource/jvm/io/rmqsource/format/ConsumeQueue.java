package io.rmqsource.format;

import java.nio.ByteBuffer;

/** ConsumeQueue units: 20 bytes int64 phyOffset, int32 size, int64 tagsCode (spec 3); twin of consumequeue.py. */
public final class ConsumeQueue {
    public static final int UNIT_SIZE = 20;
    /** Pre-blank unit: fills slots before a queue's first offset in its first file. */
    public static final int PRE_BLANK_SIZE = 0x7FFFFFFF;

    private ConsumeQueue() {
    }

    public static long phyOffset(ByteBuffer b, int pos) {
        return b.getLong(pos);
    }

    public static int size(ByteBuffer b, int pos) {
        return b.getInt(pos + 8);
    }

    public static long tagsCode(ByteBuffer b, int pos) {
        return b.getLong(pos + 12);
    }

    /** The broker's validity test: phyOffset >= 0 and size > 0 (pre-blank units pass). */
    public static boolean valid(ByteBuffer b, int pos) {
        return b.getLong(pos) >= 0 && b.getInt(pos + 8) > 0;
    }

    /** RocketMQ's store-level tag check compares tagsCode.intValue() with the tag hash. */
    public static boolean tagMatches(long tagsCode, int[] sortedHashes) {
        return java.util.Arrays.binarySearch(sortedHashes, (int) tagsCode) >= 0;
    }

    /** Writes one unit at {@code pos} (encode_unit). */
    public static void putUnit(ByteBuffer b, int pos, long phyOffset, int size, long tagsCode) {
        b.putLong(pos, phyOffset);
        b.putInt(pos + 8, size);
        b.putLong(pos + 12, tagsCode);
    }
}
