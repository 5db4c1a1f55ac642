package io.rmqsource.spark.read;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;

/**
 * The exact check of options keys / keysFile on the task side: does a record's KEYS property, split on single
 * spaces (empty items dropped, as the keys column splits it), hold one of the keys?  Keys are compared as UTF-8
 * bytes in an open-addressing table, so thousands of keys cost one hash per item of a record.
 */
final class KeyMatcher {
    private final byte[][] slots;
    private final int mask;

    KeyMatcher(List<String> keys) {
        int cap = Integer.highestOneBit(Math.max(4, keys.size() * 2 + 1) * 2 - 1);
        slots = new byte[cap][];
        mask = cap - 1;
        for (String k : keys) {
            byte[] v = k.getBytes(StandardCharsets.UTF_8);
            if (v.length == 0) continue;              // an empty item is no key of any message
            int i = hash(v, 0, v.length) & mask;
            while (slots[i] != null && !Arrays.equals(slots[i], v)) i = (i + 1) & mask;
            slots[i] = v;
        }
    }

    private static int hash(byte[] v, int from, int to) {
        int h = 0x811C9DC5;
        for (int i = from; i < to; i++) h = (h ^ (v[i] & 0xFF)) * 0x01000193;
        return h ^ (h >>> 16);
    }

    private static int hash(ByteBuffer b, int from, int to) {
        int h = 0x811C9DC5;
        for (int i = from; i < to; i++) h = (h ^ (b.get(i) & 0xFF)) * 0x01000193;
        return h ^ (h >>> 16);
    }

    /** Whether bytes [pos, pos + len) of b, a KEYS value, hold one of the keys as a space-separated item. */
    boolean matches(ByteBuffer b, int pos, int len) {
        int end = pos + len;
        int i = pos;
        while (i < end) {
            int j = i;
            while (j < end && b.get(j) != ' ') j++;
            if (j > i && contains(b, i, j)) return true;
            i = j + 1;
        }
        return false;
    }

    private boolean contains(ByteBuffer b, int from, int to) {
        int n = to - from;
        for (int s = hash(b, from, to) & mask; slots[s] != null; s = (s + 1) & mask) {
            byte[] v = slots[s];
            if (v.length != n) continue;
            boolean same = true;
            for (int k = 0; k < n && same; k++) same = b.get(from + k) == v[k];
            if (same) return true;
        }
        return false;
    }
}
