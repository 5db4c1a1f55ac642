package io.rmqsource.spark.read.vector;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A string column whose rows share their values: tags, topic, broker, store path, transaction type,
 * columns with few distinct values in a batch.  A row costs a reference instead of a copy of its
 * bytes, and Spark reading the row (a group-by on tags) gets the same {@link UTF8String} each time
 * instead of a new one per row.  Values are interned in a small direct-mapped table, so a column of
 * many distinct values costs about what copying them would.  The values are never changed once
 * handed out: Spark may keep them past the batch.
 */
final class InternedStringVector extends OneKindVector {
    private static final int SLOT_BITS = 6;
    /** Longer values are not looked up: comparing them would cost what copying them costs. */
    private static final int MAX_INTERNED = 64;

    private final UTF8String[] values;
    private int nulls;
    private final byte[][] spanKeys = new byte[1 << SLOT_BITS][];          // a span's raw bytes
    private final UTF8String[] spanValues = new UTF8String[1 << SLOT_BITS];
    private final byte[][] arrayKeys = new byte[1 << SLOT_BITS][];         // a caller's array, by identity
    private final UTF8String[] arrayValues = new UTF8String[1 << SLOT_BITS];

    InternedStringVector(int capacity) {
        super(DataTypes.StringType, "string values");
        values = new UTF8String[capacity];
    }

    void putNull(int row) {
        values[row] = null;
        nulls++;
    }

    /** The UTF-8 span {@code [pos, pos + len)} of {@code b}; invalid UTF-8 is replaced as RecordColumns.putString does. */
    void putSpan(int row, ByteBuffer b, int pos, int len) {
        if (len > MAX_INTERNED) {
            values[row] = decode(b, pos, len);
            return;
        }
        int h = len;
        if (len > 0) h = ((h * 31 + b.get(pos)) * 31 + b.get(pos + len - 1)) * 31 + b.get(pos + (len >> 1));
        int slot = (h * 0x9E3779B9) >>> (32 - SLOT_BITS);
        byte[] key = spanKeys[slot];
        if (key == null || !sameBytes(key, b, pos, len)) {
            key = new byte[len];
            b.get(pos, key, 0, len);
            spanKeys[slot] = key;
            spanValues[slot] = UTF8String.fromBytes(valid(key));
        }
        values[row] = spanValues[slot];
    }

    /** {@code utf8}, valid UTF-8 its owner keeps unchanged (a topic's bytes, a constant); interned by identity. */
    void putBytes(int row, byte[] utf8) {
        int slot = (System.identityHashCode(utf8) * 0x9E3779B9) >>> (32 - SLOT_BITS);
        if (arrayKeys[slot] != utf8) {
            arrayKeys[slot] = utf8;
            arrayValues[slot] = UTF8String.fromBytes(utf8.clone());
        }
        values[row] = arrayValues[slot];
    }

    void reset() {
        nulls = 0;
    }

    private static boolean sameBytes(byte[] key, ByteBuffer b, int pos, int len) {
        if (key.length != len) return false;
        for (int i = 0; i < len; i++) if (key[i] != b.get(pos + i)) return false;
        return true;
    }

    private static UTF8String decode(ByteBuffer b, int pos, int len) {
        byte[] raw = new byte[len];
        b.get(pos, raw, 0, len);
        return UTF8String.fromBytes(valid(raw));
    }

    private static byte[] valid(byte[] raw) {
        for (byte x : raw) {
            if (x < 0) return new String(raw, StandardCharsets.UTF_8).getBytes(StandardCharsets.UTF_8);
        }
        return raw;
    }

    @Override
    public UTF8String getUTF8String(int rowId) {
        return values[rowId];
    }

    @Override
    public boolean hasNull() {
        return nulls > 0;
    }

    @Override
    public int numNulls() {
        return nulls;
    }

    @Override
    public boolean isNullAt(int rowId) {
        return values[rowId] == null;
    }
}
