package io.rmqsource.format;

import java.nio.ByteBuffer;
import java.util.zip.CRC32;

/**
 * Encoding side of {@link Record} (spec 2), twin of encode_record in rmqsource/format/record.py:
 * pure writes into a big-endian buffer, no I/O.  A record is head (TOTALSIZE .. BODYLENGTH), body,
 * topic length (1 byte; 2 with magic v2), topic, int16 properties length, properties.  With the
 * 5.2+ {@code __CRC32#} property the last 20 bytes of the properties are {@link #CRC_PLACEHOLDER},
 * whose 10 digits {@link #sealCrcProperty} fills with the CRC-32 of the record before them.
 */
public final class RecordEncoder {
    /** {@code __CRC32#} 0x01 ten digits 0x02: the entry the 5.2+ engine appends (digits filled later). */
    public static final byte[] CRC_PLACEHOLDER = "__CRC32#\u00010000000000\u0002".getBytes(
            java.nio.charset.StandardCharsets.US_ASCII);
    public static final int BLANK_HEADER_BYTES = 8;

    private RecordEncoder() {
    }

    /** Bytes of a record: 60 fixed + born host + store host + 12 + body + topic field + 2 + properties. */
    public static int recordSize(boolean bornV6, boolean storeV6, int bodyLen, boolean magicV2, int topicLen,
                                 int propsLen) {
        return 60 + (bornV6 ? 20 : 8) + (storeV6 ? 20 : 8) + 12 + bodyLen + (magicV2 ? 2 : 1) + topicLen + 2 + propsLen;
    }

    /**
     * Fills the position fields of the record at {@code pos} (QUEUEOFFSET, PHYSICALOFFSET, STORETIMESTAMP),
     * the rest of it encoded already; its SYSFLAG says where the store timestamp is.
     */
    public static void putPosition(ByteBuffer b, int pos, long queueOffset, long phyOffset, long storeTimestamp) {
        b.putLong(pos + 20, queueOffset);
        b.putLong(pos + 28, phyOffset);
        boolean bornV6 = (b.getInt(pos + 36) & Record.BORNHOST_V6_FLAG) != 0;
        b.putLong(pos + 48 + (bornV6 ? 20 : 8), storeTimestamp);
    }

    /**
     * Writes the head of a record at {@code pos} (TOTALSIZE .. BODYLENGTH); returns the position of the body.
     * {@code sysFlag} must carry the host v6 bits matching the address lengths.
     */
    public static int putHead(ByteBuffer b, int pos, int totalSize, int magic, int bodyCrc, int queueId, int flag,
                              long queueOffset, long phyOffset, int sysFlag, long bornTimestamp, byte[] bornAddr,
                              int bornPort, long storeTimestamp, byte[] storeAddr, int storePort, int reconsumeTimes,
                              long preparedTransactionOffset, int bodyLen) {
        b.putInt(pos, totalSize);
        b.putInt(pos + 4, magic);
        b.putInt(pos + 8, bodyCrc);
        b.putInt(pos + 12, queueId);
        b.putInt(pos + 16, flag);
        b.putLong(pos + 20, queueOffset);
        b.putLong(pos + 28, phyOffset);
        b.putInt(pos + 36, sysFlag);
        b.putLong(pos + 40, bornTimestamp);
        int p = pos + 48;
        p = putAddr(b, p, bornAddr);
        b.putInt(p, bornPort);
        p += 4;
        b.putLong(p, storeTimestamp);
        p += 8;
        p = putAddr(b, p, storeAddr);
        b.putInt(p, storePort);
        p += 4;
        b.putInt(p, reconsumeTimes);
        b.putLong(p + 4, preparedTransactionOffset);
        b.putInt(p + 12, bodyLen);
        return p + 16;
    }

    /**
     * An address's bytes at {@code p}; returns the position after them.  IPv4 as one int: a direct
     * buffer's bulk put of a few bytes goes byte by byte, each with its checks.
     */
    private static int putAddr(ByteBuffer b, int p, byte[] addr) {
        if (addr.length == 4) {
            b.putInt(p, (addr[0] << 24) | ((addr[1] & 0xFF) << 16) | ((addr[2] & 0xFF) << 8) | (addr[3] & 0xFF));
            return p + 4;
        }
        b.put(p, addr);
        return p + addr.length;
    }

    /** Writes the topic field and the properties field at {@code pos}; returns the end position. */
    public static int putTail(ByteBuffer b, int pos, boolean magicV2, byte[] topic, byte[] props) {
        return putTail(b, pos, magicV2, topic, props, props.length);
    }

    /** The same with the properties in {@code props[0, propsLen)}. */
    public static int putTail(ByteBuffer b, int pos, boolean magicV2, byte[] topic, byte[] props, int propsLen) {
        int p = pos;
        if (magicV2) {
            b.putShort(p, (short) topic.length);
            p += 2;
        } else {
            b.put(p, (byte) topic.length);
            p += 1;
        }
        b.put(p, topic);
        p += topic.length;
        b.putShort(p, (short) propsLen);
        p += 2;
        b.put(p, props, 0, propsLen);
        return p + propsLen;
    }

    /**
     * Fills the {@code __CRC32#} digits of the record at {@code pos} of {@code totalSize} bytes: CRC-32
     * (top bit cleared) of its first totalSize - 20 bytes, 10 ASCII digits least significant first.
     */
    public static void sealCrcProperty(ByteBuffer b, int pos, int totalSize, CRC32 crc) {
        crc.reset();
        ByteBuffer view = b.duplicate();
        view.limit(pos + totalSize - 20).position(pos);
        crc.update(view);
        long v = crc.getValue() & 0x7FFFFFFFL;
        int d = pos + totalSize - 11;
        for (int k = 0; k < 10; k++) {
            b.put(d + k, (byte) ('0' + (int) (v % 10)));
            v /= 10;
        }
    }

    /** The END_OF_FILE blank at {@code pos}: int32 remaining bytes, int32 BLANK_MAGIC. */
    public static void putBlank(ByteBuffer b, int pos, int remaining) {
        b.putInt(pos, remaining);
        b.putInt(pos + 4, Record.BLANK_MAGIC);
    }

    /**
     * UTF-8 bytes of {@code s} (as Python's str.encode), or null when it holds a lone surrogate
     * (not text any encoder would store).
     */
    public static byte[] utf8(String s) {
        int n = s.length();
        int bytes = 0;
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            if (c < 0x80) {
                bytes += 1;
            } else if (c < 0x800) {
                bytes += 2;
            } else if (Character.isHighSurrogate(c)) {
                if (i + 1 >= n || !Character.isLowSurrogate(s.charAt(i + 1))) return null;
                bytes += 4;
                i++;
            } else if (Character.isLowSurrogate(c)) {
                return null;
            } else {
                bytes += 3;
            }
        }
        if (bytes == n) return s.getBytes(java.nio.charset.StandardCharsets.ISO_8859_1);
        return s.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }

    /** Index of the first lone surrogate of {@code s}, or -1. */
    public static int loneSurrogate(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (Character.isHighSurrogate(c)) {
                if (i + 1 >= s.length() || !Character.isLowSurrogate(s.charAt(i + 1))) return i;
                i++;
            } else if (Character.isLowSurrogate(c)) {
                return i;
            }
        }
        return -1;
    }
}
