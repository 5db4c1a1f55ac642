package io.rmqsource.format;

import java.nio.ByteBuffer;
import java.util.Arrays;

/**
 * Message properties {@code name 0x01 value 0x02 ...} (spec 2.8), twin of rmqsource/format/properties.py.
 *
 * RocketMQ's parsing rules on the bytes (0x01/0x02 never occur inside a UTF-8 sequence, so
 * splitting bytes equals splitting the decoded text): pieces between 0x02; a piece is kept when
 * its first 0x01 leaves a non-empty key and a non-empty value; a later duplicate key wins.
 * A reusable cursor: {@link #parse} fills entry spans (absolute buffer positions).
 */
public final class Properties {
    public static final byte NAME_VALUE_SEPARATOR = 1;
    public static final byte PROPERTY_SEPARATOR = 2;
    public static final byte[] TAGS = {'T', 'A', 'G', 'S'};
    public static final byte[] KEYS = {'K', 'E', 'Y', 'S'};
    public static final byte[] UNIQ_KEY = {'U', 'N', 'I', 'Q', '_', 'K', 'E', 'Y'};
    public static final byte[] DELAY = {'D', 'E', 'L', 'A', 'Y'};

    /** Entry i: key [keyStart, sep), value [sep + 1, end). */
    public int[] keyStart = new int[16];
    public int[] sep = new int[16];
    public int[] end = new int[16];
    public int count;
    private ByteBuffer buf;

    public Properties parse(ByteBuffer b, int pos, int len) {
        buf = b;
        count = 0;
        int stop = pos + len;
        int i = pos;
        while (i < stop) {
            int k = -1;
            int j = i;
            while (j < stop) {
                byte c = b.get(j);
                if (c == PROPERTY_SEPARATOR) break;
                if (c == NAME_VALUE_SEPARATOR && k < 0) k = j;
                j++;
            }
            if (k > i && k < j - 1) {
                if (count == keyStart.length) {
                    keyStart = Arrays.copyOf(keyStart, count * 2);
                    sep = Arrays.copyOf(sep, count * 2);
                    end = Arrays.copyOf(end, count * 2);
                }
                keyStart[count] = i;
                sep[count] = k;
                end[count] = j;
                count++;
            }
            i = j + 1;
        }
        return this;
    }

    public int keyLength(int e) {
        return sep[e] - keyStart[e];
    }

    public int valueStart(int e) {
        return sep[e] + 1;
    }

    public int valueLength(int e) {
        return end[e] - sep[e] - 1;
    }

    public boolean keyEquals(int e, byte[] name) {
        if (keyLength(e) != name.length) return false;
        int s = keyStart[e];
        for (int i = 0; i < name.length; i++) {
            if (buf.get(s + i) != name[i]) return false;
        }
        return true;
    }

    private boolean sameKey(int a, int b) {
        int n = keyLength(a);
        if (n != keyLength(b)) return false;
        int sa = keyStart[a];
        int sb = keyStart[b];
        for (int i = 0; i < n; i++) {
            if (buf.get(sa + i) != buf.get(sb + i)) return false;
        }
        return true;
    }

    /** The entry a later-wins map lookup of {@code name} returns (the last one), or -1. */
    public int find(byte[] name) {
        for (int e = count - 1; e >= 0; e--) {
            if (keyEquals(e, name)) return e;
        }
        return -1;
    }

    /** Whether entry e is overridden by a later entry with the same key (dropped from the map). */
    public boolean overridden(int e) {
        for (int f = e + 1; f < count; f++) {
            if (sameKey(e, f)) return true;
        }
        return false;
    }

    /** Whether the value of entry e equals {@code value}. */
    public boolean valueEquals(int e, byte[] value) {
        if (valueLength(e) != value.length) return false;
        int s = valueStart(e);
        for (int i = 0; i < value.length; i++) {
            if (buf.get(s + i) != value[i]) return false;
        }
        return true;
    }

    /** Java/Python string of the value (invalid UTF-8 replaced). */
    public String valueString(int e) {
        byte[] out = new byte[valueLength(e)];
        buf.get(valueStart(e), out, 0, out.length);
        return new String(out, java.nio.charset.StandardCharsets.UTF_8);
    }

    public static final String TAGS_NAME = "TAGS";
    public static final String KEYS_NAME = "KEYS";
    public static final String UNIQ_KEY_NAME = "UNIQ_KEY";
    public static final String DELAY_NAME = "DELAY";
    public static final String CRC32_NAME = "__CRC32#";
    public static final String REAL_TOPIC_NAME = "REAL_TOPIC";
    public static final String REAL_QID_NAME = "REAL_QID";

    /** parse_properties of a decoded string: RocketMQ's rules, a later duplicate's value wins in place. */
    public static java.util.LinkedHashMap<String, String> parseString(String text) {
        java.util.LinkedHashMap<String, String> out = new java.util.LinkedHashMap<>();
        int n = text.length();
        int i = 0;
        while (i < n) {
            int j = text.indexOf(PROPERTY_SEPARATOR, i);
            if (j < 0) j = n;
            if (j - i >= 3) {
                int k = text.indexOf(NAME_VALUE_SEPARATOR, i);
                if (i < k && k < j - 1) out.put(text.substring(i, k), text.substring(k + 1, j));
            }
            i = j + 1;
        }
        return out;
    }

    /** MessageUtils.deleteProperty: drops every {@code name 0x01 value 0x02} entry (delete_property). */
    public static String deleteProperty(String properties, String name) {
        if (properties.indexOf(name) < 0) return properties;
        StringBuilder out = new StringBuilder(properties.length());
        int idx0 = 0;
        int n = properties.length();
        for (int round = 0; round <= n; round++) {
            int idx1 = -1;
            int start = idx0;
            for (int r = 0; r <= n; r++) {
                idx1 = properties.indexOf(name, start);
                if (idx1 == -1) break;
                start = idx1 + name.length();
                if ((idx1 == 0 || properties.charAt(idx1 - 1) == PROPERTY_SEPARATOR)
                        && n > idx1 + name.length() && properties.charAt(idx1 + name.length()) == NAME_VALUE_SEPARATOR) {
                    break;
                }
            }
            if (idx1 == -1) {
                out.append(properties, idx0, n);
                break;
            }
            out.append(properties, idx0, idx1);
            int idx2 = properties.indexOf(PROPERTY_SEPARATOR, idx1 + name.length() + 1);
            if (idx2 == -1) break;
            idx0 = idx2 + 1;
        }
        return out.toString();
    }
}
