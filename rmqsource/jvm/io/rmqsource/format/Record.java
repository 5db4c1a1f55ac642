package io.rmqsource.format;

import java.nio.ByteBuffer;
import java.util.zip.CRC32;

/**
 * CommitLog message record (spec section 2), the Java twin of rmqsource/format/record.py.
 *
 * <pre>
 *  0  TOTALSIZE int32        28 PHYSICALOFFSET int64     48+B  STORETIMESTAMP int64
 *  4  MAGICCODE int32        36 SYSFLAG int32            56+B  STOREHOST S
 *  8  BODYCRC int32          40 BORNTIMESTAMP int64      56+B+S RECONSUMETIMES int32
 *  12 QUEUEID int32          48 BORNHOST B               60+B+S PREPAREDTRANSACTIONOFFSET int64
 *  16 FLAG int32                                         68+B+S BODYLENGTH int32, BODY
 *  20 QUEUEOFFSET int64      then TOPICLENGTH (1 byte v1, 2 bytes v2), TOPIC, PROPERTIESLENGTH int16, PROPERTIES
 * </pre>
 *
 * An instance is a reusable cursor: {@link #decode} fills the fields of the record at a
 * position of a big-endian buffer, with exactly the checks of the Python decode_headers.
 */
public final class Record {
    public static final int MAGIC_V1 = 0xDAA320A7;
    public static final int MAGIC_V2 = 0xDAA320AB;
    public static final int BLANK_MAGIC = 0xCBD43194;

    public static final int COMPRESSED_FLAG = 0x1;
    public static final int TRANSACTION_MASK = 0xC;
    public static final int TRANSACTION_PREPARED_TYPE = 0x4;
    public static final int TRANSACTION_ROLLBACK_TYPE = 0xC;
    public static final int BORNHOST_V6_FLAG = 0x10;
    public static final int STOREHOST_V6_FLAG = 0x20;

    public static final int MIN_RECORD_BYTES = 91;
    public static final int MAX_RECORD_BYTES_READ = 1 << 30;

    public static final String[] TRANSACTION_TYPE_NAMES = {"NOT_TYPE", "PREPARED_TYPE", "COMMIT_TYPE", "ROLLBACK_TYPE"};

    // Kinds returned by check(): what decode_record calls MESSAGE / BLANK / END / CORRUPT.
    public static final int MESSAGE = 0;
    public static final int BLANK = 1;
    public static final int END = 2;
    public static final int CORRUPT = 3;

    public int pos;
    public int totalSize;
    public int magic;
    public int bodyCrc;
    public int queueId;
    public int flag;
    public long queueOffset;
    public long phyOffset;
    public int sysFlag;
    public long bornTimestamp;
    public int bornHostPos;
    public long storeTimestamp;
    public int storeHostPos;
    public int reconsumeTimes;
    public long preparedTransactionOffset;
    public int bodyPos;
    public int bodyLen;
    public int topicPos;
    public int topicLen;
    public int propsPos;
    public int propsLen;
    /**
     * A topic known to be valid (a reader's queue topic, checked once): a record naming exactly
     * it skips the per-record topic check, and {@link #trustedTopicMatched} says so.
     */
    public byte[] trustedTopic;
    public boolean trustedTopicMatched;
    /** Hash of the decoded record's topic bytes ({@link #topicHash}): readers key their topic caches by it. */
    public long topicHash;
    /**
     * Topics that passed {@link #topicProblem} in this Record's earlier decodes, direct-mapped by hash: a whole
     * CommitLog walk meets few topics, and the byte check was an eighth of its decode time.
     */
    private final byte[][] checkedTopics = new byte[64][];        // slot: 6 bits of the topic's hash

    /**
     * Decode and validate the record at {@code pos}; {@code available} bytes of the buffer from
     * {@code pos} on may belong to it.  Returns null when it holds together, else the reason
     * (the caller names file and offset).  {@code expectedSize} (a ConsumeQueue size, or -1) must
     * equal totalSize.
     */
    public String decode(ByteBuffer b, int pos, long available, int expectedSize) {
        this.pos = pos;
        if (available < 8) {
            return "record header outside the buffer";
        }
        int total = b.getInt(pos);
        int mg = b.getInt(pos + 4);
        if (mg != MAGIC_V1 && mg != MAGIC_V2) {
            return String.format("no message record here: magic code 0x%08X", mg);
        }
        if (total < MIN_RECORD_BYTES || total > available) {
            return "totalSize " + total + " outside [" + MIN_RECORD_BYTES + ", " + available + "]";
        }
        if (expectedSize >= 0 && total != expectedSize) {
            return "ConsumeQueue says " + expectedSize + " bytes but the record's totalSize is " + total;
        }
        totalSize = total;
        magic = mg;
        int end = pos + total;
        bodyCrc = b.getInt(pos + 8);
        queueId = b.getInt(pos + 12);
        flag = b.getInt(pos + 16);
        queueOffset = b.getLong(pos + 20);
        phyOffset = b.getLong(pos + 28);
        sysFlag = b.getInt(pos + 36);
        bornTimestamp = b.getLong(pos + 40);
        bornHostPos = pos + 48;
        int bornLen = (sysFlag & BORNHOST_V6_FLAG) != 0 ? 20 : 8;
        int storeLen = (sysFlag & STOREHOST_V6_FLAG) != 0 ? 20 : 8;
        int storeTsPos = bornHostPos + bornLen;
        storeHostPos = storeTsPos + 8;
        int tail = storeHostPos + storeLen;
        int tlenWidth = mg == MAGIC_V2 ? 2 : 1;
        if ((long) tail + 16 + tlenWidth + 2 > end) {
            return "totalSize " + total + " is smaller than the fixed fields";
        }
        storeTimestamp = b.getLong(storeTsPos);
        reconsumeTimes = b.getInt(tail);
        preparedTransactionOffset = b.getLong(tail + 4);
        bodyLen = b.getInt(tail + 12);
        bodyPos = tail + 16;
        if (bodyLen < 0 || (long) bodyPos + bodyLen + tlenWidth > end) {
            return "body length " + bodyLen + " runs past the record end";
        }
        int tlPos = bodyPos + bodyLen;
        topicLen = mg == MAGIC_V2 ? b.getShort(tlPos) : b.get(tlPos);
        topicPos = tlPos + tlenWidth;
        if (topicLen < 0 || (long) topicPos + topicLen + 2 > end) {
            return "topic length " + topicLen + " runs past the record end";
        }
        trustedTopicMatched = trustedTopic != null && topicEquals(b, trustedTopic);
        topicHash = topicHash(b, topicPos, topicLen);
        if (!trustedTopicMatched) {
            int slot = slot(topicHash, 6);
            byte[] checked = checkedTopics[slot];
            if (checked == null || !topicEquals(b, checked)) {
                String notTopic = topicProblem(b, topicPos, topicLen);
                if (notTopic != null) {
                    return "not a topic: " + notTopic;
                }
                checked = new byte[topicLen];
                b.get(topicPos, checked, 0, topicLen);
                checkedTopics[slot] = checked;
            }
        }
        int plPos = topicPos + topicLen;
        propsLen = b.getShort(plPos);
        propsPos = plPos + 2;
        if (propsLen < 0 || (long) propsPos + propsLen > end) {
            return "properties length " + propsLen + " runs past the record end";
        }
        if (propsPos + propsLen != end) {
            return "totalSize " + total + " but fields add up to " + (propsPos + propsLen - pos);
        }
        return null;
    }

    public boolean isPreparedOrRollback() {
        int tx = sysFlag & TRANSACTION_MASK;
        return tx == TRANSACTION_PREPARED_TYPE || tx == TRANSACTION_ROLLBACK_TYPE;
    }

    public boolean storeHostV6() {
        return (sysFlag & STOREHOST_V6_FLAG) != 0;
    }

    public boolean bornHostV6() {
        return (sysFlag & BORNHOST_V6_FLAG) != 0;
    }

    /** Whether the topic bytes equal {@code topic} (ASCII/UTF-8 bytes). */
    /** A hash of topic bytes (two longs of them, or each byte of a short one): cheap, for direct-mapped caches. */
    public static long topicHash(ByteBuffer b, int pos, int len) {
        long h = len;
        if (len >= 8) {
            h = h * 31 + b.getLong(pos);
            h = h * 31 + b.getLong(pos + len - 8);
        } else {
            for (int i = 0; i < len; i++) h = h * 31 + b.get(pos + i);
        }
        return h;
    }

    /** The slot of a {@link #topicHash} in a direct-mapped cache of {@code 1 << bits} entries. */
    public static int slot(long hash, int bits) {
        return (int) ((hash * 0x9E3779B97F4A7C15L) >>> (64 - bits));
    }

    public boolean topicEquals(ByteBuffer b, byte[] topic) {
        if (topic.length != topicLen) return false;
        for (int i = 0; i < topicLen; i++) {
            if (b.get(topicPos + i) != topic[i]) return false;
        }
        return true;
    }

    /** Result of {@link #check}: kind and the bytes the entry spans. */
    public static final class Check {
        public int kind;
        public long size;
        public long storeTimestamp;
        public String reason = "";
    }

    /**
     * decode_record: what is at {@code pos} when {@code limit - pos} bytes of its segment remain
     * (CommitLog.checkMessageAndReturnSize, spec 2.13).  With {@code checkCrc} the body CRC must hold.
     */
    public static Check check(ByteBuffer b, int pos, long limit, boolean checkCrc, Check out) {
        long remaining = limit - pos;
        out.size = 0;
        if (remaining < 8) {
            out.kind = END;
            out.reason = "only " + remaining + " bytes left in the segment";
            return out;
        }
        int total = b.getInt(pos);
        int mg = b.getInt(pos + 4);
        if (mg == BLANK_MAGIC) {
            out.kind = BLANK;
            out.size = remaining;
            out.reason = "end-of-segment blank record";
            return out;
        }
        if (mg != MAGIC_V1 && mg != MAGIC_V2) {
            out.kind = END;
            out.reason = total == 0 && mg == 0 ? "no record (zero bytes)"
                    : String.format("unknown magic code 0x%08X", mg);
            return out;
        }
        if (total < MIN_RECORD_BYTES || total > remaining || total > MAX_RECORD_BYTES_READ) {
            out.kind = CORRUPT;
            out.reason = "totalSize " + total + " outside [" + MIN_RECORD_BYTES + ", "
                    + Math.min(remaining, MAX_RECORD_BYTES_READ) + "]";
            return out;
        }
        Record r = new Record();
        String reason = r.decode(b, pos, total, -1);
        if (reason != null) {
            out.kind = CORRUPT;
            out.size = total;
            out.reason = reason.startsWith("not a topic: ") ? reason.substring(13) : reason;
            return out;
        }
        if (checkCrc) {
            int crc = bodyCrc(b, r.bodyPos, r.bodyLen);
            if (crc != r.bodyCrc) {
                out.kind = CORRUPT;
                out.size = total;
                out.reason = String.format("body CRC 0x%08X does not match stored 0x%08X", crc, r.bodyCrc);
                return out;
            }
        }
        out.kind = MESSAGE;
        out.size = total;
        out.storeTimestamp = r.storeTimestamp;
        return out;
    }

    /**
     * Why stored topic bytes cannot come from a broker (then the record is corrupt), or null
     * (topic_bytes_problem): empty, a control byte, DEL, '/' or '\\', "." / "..", or invalid UTF-8.
     */
    public static String topicProblem(ByteBuffer b, int pos, int len) {
        if (len == 0) return "empty topic";
        boolean ascii = true;
        for (int i = 0; i < len; i++) {
            int c = b.get(pos + i) & 0xFF;
            if (c < 0x20 || c == 0x7F || c == '/' || c == '\\') {
                return String.format("topic byte 0x%02X at topic position %d", c, i);
            }
            ascii &= c < 0x80;
        }
        if (b.get(pos) == '.' && (len == 1 || (len == 2 && b.get(pos + 1) == '.'))) {
            return "topic '" + (len == 1 ? "." : "..") + "'";
        }
        if (!ascii) {
            byte[] raw = new byte[len];
            b.get(pos, raw, 0, len);
            java.nio.charset.CharsetDecoder d = java.nio.charset.StandardCharsets.UTF_8.newDecoder();
            java.nio.ByteBuffer in = java.nio.ByteBuffer.wrap(raw);
            java.nio.charset.CoderResult res = d.decode(in, java.nio.CharBuffer.allocate(len), true);
            if (res.isError()) return "topic bytes are not UTF-8 at topic position " + in.position();
        }
        return null;
    }

    /** BODYCRC: CRC-32 of the stored body with the top bit cleared. */
    public static int bodyCrc(ByteBuffer b, int pos, int len) {
        CRC32 crc = new CRC32();
        ByteBuffer slice = b.duplicate();
        slice.limit(pos + len).position(pos);
        crc.update(slice);
        return (int) (crc.getValue() & 0x7FFFFFFFL);
    }
}
