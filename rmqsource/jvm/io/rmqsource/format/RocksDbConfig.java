package io.rmqsource.format;

import io.rmqsource.errors.FormatError;
import io.rmqsource.errors.Repr;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Configs the broker keeps in RocksDB: key/value codecs, pure (the twin of
 * rmqsource/format/rocksdb_config.py, whose docstring states the layouts).
 *
 * <p>Config v2 ({@code config/rdb/}, column family {@code default}): keys
 * {@code [1 u8][table-id u16][record u8]...}; offsets (table 1 CONSUMER_OFFSET, 2 PULL_OFFSET, record 2 DATA)
 * {@code [group-len u16][group][0x01][topic-len u16][topic][0x01][queue-id i32]} -> {@code [offset i64]};
 * data version (record 1) {@code "data_version"} -> {@code [state i64][timestamp i64][counter i64]}; all
 * big-endian. Config v1 in RocksDB ({@code config/consumerOffsets/}, {@code config/metadata/}): key
 * {@code topic@group}, value {@code {"offsetTable":{queueId:offset}}}; version column family
 * {@code kvDataVersion}, key {@code kvDataVersionKey}, value the DataVersion JSON.
 */
public final class RocksDbConfig {
    private RocksDbConfig() {}

    public static final int TABLE_PREFIX = 1;
    public static final int CTRL_1 = 1;
    public static final int CTRL_2 = 2;
    public static final short TABLE_CONSUMER_OFFSET = 1;
    public static final short TABLE_PULL_OFFSET = 2;
    public static final short TABLE_TOPIC = 3;
    public static final short TABLE_SUBSCRIPTION_GROUP = 4;
    public static final int RECORD_DATA_VERSION = 1;
    public static final int RECORD_DATA = 2;
    public static final int SERIALIZATION_JSON = 1;
    public static final byte[] DATA_VERSION_KEY = "data_version".getBytes(StandardCharsets.US_ASCII);
    public static final int MAX_NAME_BYTES = 0x7FFF;
    public static final String V1_DATA_VERSION_CF = "kvDataVersion";
    public static final byte[] V1_DATA_VERSION_KEY = "kvDataVersionKey".getBytes(StandardCharsets.US_ASCII);
    public static final String V1_SINGLE_DB_OFFSET_CF = "consumerOffset";
    public static final String V1_SINGLE_DB_VERSION_CF = "consumerOffsetVersion";

    /** One table-1/2 key: group, topic, queue id. */
    public static final class OffsetKey {
        public final short table;
        public final String group;
        public final String topic;
        public final int queueId;

        OffsetKey(short table, String group, String topic, int queueId) {
            this.table = table;
            this.group = group;
            this.topic = topic;
            this.queueId = queueId;
        }
    }

    /** The 4-byte prefix of every key of {@code table}'s {@code record} kind. */
    public static byte[] tablePrefix(short table, int record) {
        return new byte[] {(byte) TABLE_PREFIX, (byte) (table >> 8), (byte) table, (byte) record};
    }

    private static String hex(byte[] key) {
        return HexFormat.of().formatHex(key, 0, Math.min(key.length, 120));
    }

    private static String name(ByteBuffer b, byte[] key, String what, String file) {
        if (b.remaining() < 2) {
            throw new FormatError("offset key " + hex(key) + ": " + what + " length past the key's end", file, b.position());
        }
        int n = b.getShort() & 0xFFFF;
        if (n == 0 || n > MAX_NAME_BYTES || n > b.remaining()) {
            throw new FormatError("offset key " + hex(key) + ": " + what + " length " + n + " does not fit the "
                    + key.length + "-byte key", file, b.position() - 2);
        }
        byte[] bytes = new byte[n];
        b.get(bytes);
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(bytes)).toString();
        } catch (CharacterCodingException e) {
            throw new FormatError("offset key " + hex(key) + ": " + what + " is not UTF-8", file, b.position() - n);
        }
    }

    /** A consumer-offset or pull-offset key (table 1 or 2); FormatError for anything else. */
    public static OffsetKey decodeOffsetKey(byte[] key, String file) {
        if (key.length < 4 + 2 + 1 + 1 + 2 + 1 + 1 + 4) {
            throw new FormatError("offset key " + hex(key) + " is " + key.length
                    + " bytes, shorter than any offset key", file, -1);
        }
        ByteBuffer b = ByteBuffer.wrap(key);
        int tp = b.get() & 0xFF;
        short table = b.getShort();
        int record = b.get() & 0xFF;
        if (tp != TABLE_PREFIX || (table != TABLE_CONSUMER_OFFSET && table != TABLE_PULL_OFFSET) || record != RECORD_DATA) {
            throw new FormatError("key " + hex(key) + " is not a consumer/pull offset record (prefix " + tp
                    + ", table " + table + ", record " + record + ")", file, -1);
        }
        String group = name(b, key, "group", file);
        if (!b.hasRemaining() || b.get() != CTRL_1) {
            throw new FormatError("offset key " + hex(key) + ": no CTRL_1 after the group", file, b.position() - 1);
        }
        String topic = name(b, key, "topic", file);
        if (!b.hasRemaining() || b.get() != CTRL_1) {
            throw new FormatError("offset key " + hex(key) + ": no CTRL_1 after the topic", file, b.position() - 1);
        }
        if (b.remaining() != 4) {
            throw new FormatError("offset key " + hex(key) + ": " + b.remaining()
                    + " bytes after the topic, expected a 4-byte queue id", file, b.position());
        }
        int qid = b.getInt();
        if (qid < 0) {
            throw new FormatError("offset key " + hex(key) + ": queue id " + qid + " < 0", file, b.position() - 4);
        }
        return new OffsetKey(table, group, topic, qid);
    }

    /** The start every offset key of {@code group} shares (a prefix scan reads the group's offsets). */
    public static byte[] offsetGroupPrefix(String group, short table) {
        byte[] g = group.getBytes(StandardCharsets.UTF_8);
        return ByteBuffer.allocate(4 + 2 + g.length + 1).put(tablePrefix(table, RECORD_DATA))
                .putShort((short) g.length).put(g).put((byte) CTRL_1).array();
    }

    public static byte[] encodeOffsetKey(String group, String topic, int queueId, short table) {
        byte[] head = offsetGroupPrefix(group, table);
        byte[] t = topic.getBytes(StandardCharsets.UTF_8);
        return ByteBuffer.allocate(head.length + 2 + t.length + 1 + 4).put(head)
                .putShort((short) t.length).put(t).put((byte) CTRL_1).putInt(queueId).array();
    }

    /** An offset record's value: the next queue offset, a big-endian long (encode_v2_offset_value). */
    public static byte[] encodeOffsetValue(long offset) {
        return ByteBuffer.allocate(8).putLong(offset).array();
    }

    public static long decodeOffsetValue(byte[] value, String file) {
        if (value == null || value.length != 8) {
            throw new FormatError("offset value is " + (value == null ? 0 : value.length)
                    + " bytes, expected an 8-byte big-endian long", file, -1);
        }
        return ByteBuffer.wrap(value).getLong();
    }

    /** The 24-byte data-version value: state-machine version, timestamp ms, counter. */
    public static byte[] encodeDataVersion(long stateVersion, long timestampMs, long counter) {
        return ByteBuffer.allocate(24).putLong(stateVersion).putLong(timestampMs).putLong(counter).array();
    }

    /** {state, timestamp, counter} of a data-version value; null when it is not 24 bytes (the broker ignores it). */
    public static long[] decodeDataVersion(byte[] value) {
        if (value == null || value.length != 24) return null;
        ByteBuffer b = ByteBuffer.wrap(value);
        return new long[] {b.getLong(), b.getLong(), b.getLong()};
    }

    /** The data version after {@code records} writes, each stamped as ConfigHelper.stampDataVersion does. */
    public static byte[] nextDataVersion(byte[] current, long records, long nowMs) {
        long[] dv = decodeDataVersion(current);
        return dv == null ? encodeDataVersion(0, nowMs, records) : encodeDataVersion(dv[0], nowMs, dv[2] + records);
    }

    public static byte[] dataVersionKey(short table) {
        return ByteBuffer.allocate(4 + DATA_VERSION_KEY.length).put(tablePrefix(table, RECORD_DATA_VERSION))
                .put(DATA_VERSION_KEY).array();
    }

    /** A topic (table 3) or subscription-group (table 4) key: ConfigHelper.keyBufOf. */
    public static byte[] encodeNameKey(short table, String name) {
        byte[] n = name.getBytes(StandardCharsets.UTF_8);
        if (n.length == 0 || n.length > MAX_NAME_BYTES) {
            throw new FormatError("name " + Repr.of(name) + " is " + n.length + " bytes, not 1.." + MAX_NAME_BYTES, null, -1);
        }
        return ByteBuffer.allocate(4 + 2 + n.length).put(tablePrefix(table, RECORD_DATA)).putShort((short) n.length)
                .put(n).array();
    }

    /** ConfigHelper.valueBufOf(config, JSON): the serialization byte, then fastjson2's compact JSON of the bean. */
    public static byte[] encodeConfigValue(Map<Object, Object> config) {
        StringBuilder sb = new StringBuilder();
        compactJson(sb, config);
        byte[] json = sb.toString().getBytes(StandardCharsets.UTF_8);
        return ByteBuffer.allocate(1 + json.length).put((byte) SERIALIZATION_JSON).put(json).array();
    }

    /** Compact JSON, object keys sorted (fastjson2 writes bean fields by name); Python's json.dumps twin. */
    static void compactJson(StringBuilder sb, Object v) {
        if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : new java.util.TreeMap<Object, Object>((Map<?, ?>) v).entrySet()) {
                if (!first) sb.append(',');
                first = false;
                compactJson(sb, String.valueOf(e.getKey()));
                sb.append(':');
                compactJson(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof java.util.List) {
            sb.append('[');
            boolean first = true;
            for (Object x : (java.util.List<?>) v) {
                if (!first) sb.append(',');
                first = false;
                compactJson(sb, x);
            }
            sb.append(']');
        } else if (v instanceof String) {
            JsonText.quote(sb, (String) v, false);
        } else if (v == null) {
            sb.append("null");
        } else {
            sb.append(v);       // Boolean, Long, BigInteger, Double as Java prints them
        }
    }

    /** The JSON object of a topic or group value; FormatError when it is not one. */
    public static Map<Object, Object> decodeConfigValue(byte[] value, String file) {
        if (value == null || value.length == 0 || value[0] != SERIALIZATION_JSON) {
            throw new FormatError("config value does not start with the JSON serialization byte " + SERIALIZATION_JSON,
                    file, -1);
        }
        return FastJson.parse(java.util.Arrays.copyOfRange(value, 1, value.length), file);
    }

    /** A 5.2-layout record's {queueId: offset} from its wrapper JSON {"offsetTable": {...}}. */
    public static Map<Integer, Long> decodeV1OffsetValue(byte[] key, byte[] value, String file) {
        String topicAtGroup = new String(key, StandardCharsets.UTF_8);
        Map<Object, Object> doc = FastJson.parse(value, file);
        Object table = doc.get("offsetTable");
        if (!(table instanceof Map)) {
            throw new FormatError("consumer offset record " + topicAtGroup + ": value has no offsetTable object", file, -1);
        }
        Map<Integer, Long> out = new LinkedHashMap<>();
        for (Map.Entry<?, ?> e : ((Map<?, ?>) table).entrySet()) {
            try {
                int q = Integer.parseInt(String.valueOf(e.getKey()).strip());
                Object v = e.getValue();
                if (v instanceof Boolean || q < 0) throw new NumberFormatException();
                long off = v instanceof Number ? ((Number) v).longValue() : Long.parseLong(String.valueOf(v).strip());
                out.put(q, off);
            } catch (NumberFormatException ex) {
                throw new FormatError("consumer offset record " + topicAtGroup + ": " + e.getKey() + ": "
                        + e.getValue() + " is not queueId: offset", file, -1);
            }
        }
        return out;
    }

    /** kvDataVersion JSON's counter; 0 when absent or unreadable (the broker's new DataVersion()). */
    public static long decodeV1DataVersionCounter(byte[] value) {
        if (value == null || value.length == 0) return 0;
        try {
            Object c = FastJson.parse(value, "kvDataVersion").get("counter");
            return c instanceof Number && !(c instanceof Boolean) ? ((Number) c).longValue() : 0;
        } catch (RuntimeException e) {
            return 0;
        }
    }
}
