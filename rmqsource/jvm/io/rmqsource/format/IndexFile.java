package io.rmqsource.format;

/**
 * IndexFile: 40-byte header, H int32 hash slots, N 20-byte entries (spec 5); twin of indexfile.py.
 *
 * Header: int64 beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset; int32 hashSlotCount,
 * indexCount.  Entry e at 40 + H*4 + e*20: int32 keyHash, int64 phyOffset, int32 timeDiff (s),
 * int32 previous entry of the slot's chain.
 */
public final class IndexFile {
    public static final int HEADER_SIZE = 40;
    public static final int HASH_SLOT_SIZE = 4;
    public static final int ENTRY_SIZE = 20;

    private IndexFile() {
    }

    public static long fileSize(long hashSlotNum, long indexNum) {
        return HEADER_SIZE + hashSlotNum * HASH_SLOT_SIZE + indexNum * ENTRY_SIZE;
    }

    public static long slotPosition(long slot) {
        return HEADER_SIZE + slot * HASH_SLOT_SIZE;
    }

    public static long entryPosition(long hashSlotNum, long entryNo) {
        return HEADER_SIZE + hashSlotNum * HASH_SLOT_SIZE + entryNo * ENTRY_SIZE;
    }

    public static String indexKey(String topic, String key) {
        return topic + "#" + key;
    }
}
