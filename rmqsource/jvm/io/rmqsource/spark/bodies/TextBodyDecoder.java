package io.rmqsource.spark.bodies;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.unsafe.types.UTF8String;

/** Text bodies: the body as UTF-8 ({@code bodyText}); a body that is not valid UTF-8 is a bad record. */
final class TextBodyDecoder implements BodyDecoder {
    private final GenericInternalRow row = new GenericInternalRow(1);

    @Override
    public InternalRow decode(byte[] b, int off, int len) {
        int bad = invalidAt(b, off, len);
        if (bad >= 0) {
            throw new Bad("the body is not valid UTF-8 (byte 0x" + Integer.toHexString(b[off + bad] & 0xFF)
                    + " at position " + bad + ")");
        }
        row.update(0, UTF8String.fromBytes(b, off, len));
        return row;
    }

    /** Where the first byte of an invalid UTF-8 sequence is (as Python's strict decoder sees it), or -1. */
    static int invalidAt(byte[] b, int off, int len) {
        int i = off;
        int end = off + len;
        while (i < end) {
            int c = b[i] & 0xFF;
            if (c < 0x80) {
                i++;
                continue;
            }
            int need;
            int min2 = 0x80, max2 = 0xBF;
            if (c >= 0xC2 && c <= 0xDF) {
                need = 1;
            } else if (c >= 0xE0 && c <= 0xEF) {
                need = 2;
                if (c == 0xE0) min2 = 0xA0;
                if (c == 0xED) max2 = 0x9F;          // no surrogates
            } else if (c >= 0xF0 && c <= 0xF4) {
                need = 3;
                if (c == 0xF0) min2 = 0x90;
                if (c == 0xF4) max2 = 0x8F;          // at most U+10FFFF
            } else {
                return i - off;
            }
            if (i + need >= end) return i - off;         // ends early
            int c2 = b[i + 1] & 0xFF;
            if (c2 < min2 || c2 > max2) return i - off;
            for (int k = 2; k <= need; k++) if ((b[i + k] & 0xC0) != 0x80) return i - off;
            i += need + 1;
        }
        return -1;
    }
}
