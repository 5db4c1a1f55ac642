package io.rmqsource.format;

/** Java String.hashCode and the hashes built on it (twin of rmqsource/format/javahash.py). */
public final class JavaHash {
    private JavaHash() {
    }

    /** tagsCode of a TAGS property value: 0 when absent or empty (spec 4). */
    public static long tagsCode(String tags) {
        if (tags == null || tags.isEmpty()) return 0;
        return tags.hashCode();
    }

    /** IndexFile keyHash: abs(hashCode), and 0 for Integer.MIN_VALUE (spec 5.2). */
    public static int indexKeyHash(String key) {
        int h = key.hashCode();
        return h == Integer.MIN_VALUE ? 0 : Math.abs(h);
    }

    /** indexKeyHash(topic + "#" + key) without building the string. */
    public static int indexKeyHash(String topic, String key) {
        int h = topic.hashCode() * 31 + '#';
        for (int i = 0; i < key.length(); i++) h = 31 * h + key.charAt(i);
        return h == Integer.MIN_VALUE ? 0 : Math.abs(h);
    }

    /** indexKeyHash(topic + "#" + key.substring(from, to)). */
    public static int indexKeyHash(int topicHashPrefix, String key, int from, int to) {
        int h;
        if (from == 0 && to == key.length()) {
            // hash(prefix + key) = hash(prefix) * 31^len(key) + key.hashCode() (mod 2^32); hashCode is cached.
            h = topicHashPrefix * pow31(to) + key.hashCode();
        } else {
            h = topicHashPrefix;
            for (int i = from; i < to; i++) h = 31 * h + key.charAt(i);
        }
        return h == Integer.MIN_VALUE ? 0 : Math.abs(h);
    }

    private static final int[] POW31 = new int[256];

    static {
        int v = 1;
        for (int i = 0; i < POW31.length; i++) {
            POW31[i] = v;
            v *= 31;
        }
    }

    /** 31^n mod 2^32. */
    public static int pow31(int n) {
        if (n < POW31.length) return POW31[n];
        int v = POW31[POW31.length - 1] * 31;
        for (int i = POW31.length; i < n; i++) v *= 31;
        return v;
    }

    /** The hash state after {@code topic + "#"}, for {@link #indexKeyHash(int, String, int, int)}. */
    public static int topicPrefixHash(String topic) {
        return topic.hashCode() * 31 + '#';
    }
}
