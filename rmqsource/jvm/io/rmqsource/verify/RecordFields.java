package io.rmqsource.verify;

import io.rmqsource.format.Record;
import java.nio.ByteBuffer;

/**
 * The fields of one record whose size the chain walk has proven, decoded with the length checks
 * (and the reasons) of decode_record in rmqsource/format/record.py.  The topic bytes
 * (Record.topicProblem) and the CRCs are the caller's.
 */
final class RecordFields {
    int magic;
    int bodyCrc;
    int queueId;
    long queueOffset;
    long phyOffset;
    int sysFlag;
    long storeTimestamp;
    int bodyPos;
    int bodyLen;
    int topicPos;
    int topicLen;
    int propsPos;
    int propsLen;

    /**
     * Decode the record of {@code total} bytes at {@code pos}; bytes up to {@code limit} may be
     * read (the window).  Returns null when its lengths add up, else why not.
     */
    String decode(ByteBuffer b, int pos, int total, int limit) {
        int end = pos + total;
        magic = b.getInt(pos + 4);
        bodyCrc = b.getInt(pos + 8);
        queueId = b.getInt(pos + 12);
        queueOffset = b.getLong(pos + 20);
        phyOffset = b.getLong(pos + 28);
        sysFlag = b.getInt(pos + 36);
        long p = pos + 48 + ((sysFlag & Record.BORNHOST_V6_FLAG) != 0 ? 16 : 4) + 4;
        if (p + 8 > limit) return "truncated record";
        storeTimestamp = b.getLong((int) p);
        p += 8 + ((sysFlag & Record.STOREHOST_V6_FLAG) != 0 ? 16 : 4) + 4;
        if (p + 16 > limit) return "truncated record";
        bodyLen = b.getInt((int) p + 12);
        p += 16;
        if (bodyLen < 0 || p + bodyLen > end) return "body length " + bodyLen + " runs past the record end";
        bodyPos = (int) p;
        p += bodyLen;
        if (magic == Record.MAGIC_V2) {
            if (p + 2 > end) return "record ends inside the topic length";
            topicLen = b.getShort((int) p);
            p += 2;
        } else {
            if (p + 1 > end) return "record ends inside the topic length";
            topicLen = b.get((int) p);
            p += 1;
        }
        if (topicLen < 0 || p + topicLen > end) return "topic length " + topicLen + " runs past the record end";
        topicPos = (int) p;
        p += topicLen;
        if (p + 2 > end) return "record ends inside the properties length";
        propsLen = b.getShort((int) p);
        p += 2;
        if (propsLen < 0 || p + propsLen > end) return "properties length " + propsLen + " runs past the record end";
        propsPos = (int) p;
        p += propsLen;
        if (p != end) return "totalSize " + total + " but fields add up to " + (p - pos);
        return null;
    }

    boolean isPreparedOrRollback() {
        int tx = sysFlag & Record.TRANSACTION_MASK;
        return tx == Record.TRANSACTION_PREPARED_TYPE || tx == Record.TRANSACTION_ROLLBACK_TYPE;
    }
}
