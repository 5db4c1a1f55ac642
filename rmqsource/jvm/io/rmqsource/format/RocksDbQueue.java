package io.rmqsource.format;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * RocksDB ConsumeQueues (storeType=defaultRocksDB, RocketMQ 5.2+): keys and values; twin of
 * rmqsource/format/rocksdb_queue.py, whose docstring states the layout (RocketMQ's
 * RocksDBConsumeQueueTable and RocksDBConsumeQueueOffsetTable).  Big-endian; topic UTF-8; separators
 * CTRL_1 = 0x01.
 * <pre>
 * column family "default", one entry per unit:
 *   key   = int32 topicLen | 0x01 | topic | 0x01 | int32 queueId | 0x01 | int64 queueOffset
 *   value = int64 commitLogOffset | int32 size | int64 tagsCode | int64 storeTimestamp   (28 bytes)
 * column family "offset", per queue:
 *   key   = int32 topicLen | 0x01 | topic | 0x01 | "max" or "min" | 0x01 | int32 queueId
 *   value = int64 commitLogOffset | int64 queueOffset                                   (16 bytes)
 *   max = the last unit (queue max offset = queueOffset + 1); min = a lazily written hint;
 *   topic CHECKPOINT_TOPIC, "max", queue 0: 8 bytes, the CommitLog offset dispatch reached.
 * </pre>
 * Pure codecs, no I/O.
 */
public final class RocksDbQueue {
    public static final String DEFAULT_CF = "default";
    public static final String OFFSET_CF = "offset";
    public static final byte CTRL_0 = 0;
    public static final byte CTRL_1 = 1;
    public static final byte CTRL_2 = 2;
    public static final String CHECKPOINT_TOPIC = "CHECKPOINT_TOPIC";
    public static final int CQ_VALUE_SIZE = 28;
    public static final int CQ_KEY_FIXED_BYTES = 4 + 1 + 1 + 4 + 1 + 8;
    public static final int OFFSET_KEY_FIXED_BYTES = 4 + 1 + 1 + 3 + 1 + 4;
    public static final int OFFSET_VALUE_SIZE = 16;
    private static final byte[] MAX_TAG = "max".getBytes(StandardCharsets.UTF_8);
    private static final byte[] MIN_TAG = "min".getBytes(StandardCharsets.UTF_8);

    private RocksDbQueue() {
    }

    /** The bytes every unit key of (topic, queueId) starts with (up to the separator before the offset). */
    public static byte[] cqQueuePrefix(String topic, int queueId) {
        byte[] t = topic.getBytes(StandardCharsets.UTF_8);
        ByteBuffer b = ByteBuffer.allocate(CQ_KEY_FIXED_BYTES - 8 + t.length);
        b.putInt(t.length).put(CTRL_1).put(t).put(CTRL_1).putInt(queueId).put(CTRL_1);
        return b.array();
    }

    public static byte[] cqKey(String topic, int queueId, long queueOffset) {
        return cqKey(cqQueuePrefix(topic, queueId), queueOffset);
    }

    /** The key of unit {@code queueOffset} from the queue's prefix. */
    public static byte[] cqKey(byte[] prefix, long queueOffset) {
        byte[] k = java.util.Arrays.copyOf(prefix, prefix.length + 8);
        ByteBuffer.wrap(k).putLong(prefix.length, queueOffset);
        return k;
    }

    /** Whether {@code key} is a unit key of the queue with this prefix. */
    public static boolean isCqKeyOf(byte[] key, byte[] prefix) {
        if (key.length != prefix.length + 8) return false;
        for (int i = 0; i < prefix.length; i++) if (key[i] != prefix[i]) return false;
        return true;
    }

    /** The queue offset (the last 8 bytes) of a unit key. */
    public static long queueOffsetOfCqKey(byte[] key) {
        return ByteBuffer.wrap(key).getLong(key.length - 8);
    }

    public static long phyOffset(byte[] value) {
        return ByteBuffer.wrap(value).getLong(0);
    }

    public static int size(byte[] value) {
        return ByteBuffer.wrap(value).getInt(8);
    }

    public static long tagsCode(byte[] value) {
        return ByteBuffer.wrap(value).getLong(12);
    }

    public static long storeTimestamp(byte[] value) {
        return ByteBuffer.wrap(value).getLong(20);
    }

    public static byte[] cqValue(long phyOffset, int size, long tagsCode, long storeTimestamp) {
        return ByteBuffer.allocate(CQ_VALUE_SIZE).putLong(phyOffset).putInt(size).putLong(tagsCode)
                .putLong(storeTimestamp).array();
    }

    public static byte[] offsetKey(String topic, int queueId, boolean max) {
        byte[] t = topic.getBytes(StandardCharsets.UTF_8);
        ByteBuffer b = ByteBuffer.allocate(OFFSET_KEY_FIXED_BYTES + t.length);
        b.putInt(t.length).put(CTRL_1).put(t).put(CTRL_1).put(max ? MAX_TAG : MIN_TAG).put(CTRL_1).putInt(queueId);
        return b.array();
    }

    /** A decoded "offset" key. */
    public static final class OffsetKey {
        public final String topic;
        public final int queueId;
        public final boolean max;

        OffsetKey(String topic, int queueId, boolean max) {
            this.topic = topic;
            this.queueId = queueId;
            this.max = max;
        }
    }

    /** The (topic, queueId, max or min) of an "offset" key; null when the bytes are not one. */
    public static OffsetKey decodeOffsetKey(byte[] key) {
        if (key.length < OFFSET_KEY_FIXED_BYTES) return null;
        ByteBuffer b = ByteBuffer.wrap(key);
        int n = b.getInt(0);
        if (n < 0 || key.length != OFFSET_KEY_FIXED_BYTES + n || key[4] != CTRL_1 || key[5 + n] != CTRL_1
                || key[9 + n] != CTRL_1) {
            return null;
        }
        boolean max = key[6 + n] == 'm' && key[7 + n] == 'a' && key[8 + n] == 'x';
        boolean min = key[6 + n] == 'm' && key[7 + n] == 'i' && key[8 + n] == 'n';
        if (!max && !min) return null;
        java.nio.charset.CharsetDecoder dec = StandardCharsets.UTF_8.newDecoder();
        String topic;
        try {
            topic = dec.decode(ByteBuffer.wrap(key, 5, n)).toString();
        } catch (java.nio.charset.CharacterCodingException e) {
            return null;
        }
        return new OffsetKey(topic, b.getInt(10 + n), max);
    }

    /** {commitLogOffset, queueOffset} of a 16-byte "offset" value; null for another length. */
    public static long[] decodeOffsetValue(byte[] value) {
        if (value == null || value.length != OFFSET_VALUE_SIZE) return null;
        ByteBuffer b = ByteBuffer.wrap(value);
        return new long[] {b.getLong(0), b.getLong(8)};
    }
}
