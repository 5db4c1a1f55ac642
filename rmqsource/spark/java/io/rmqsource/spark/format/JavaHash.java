package io.rmqsource.spark.format;

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
        int h = topicHashPrefix;
        for (int i = from; i < to; i++) h = 31 * h + key.charAt(i);
        return h == Integer.MIN_VALUE ? 0 : Math.abs(h);
    }

    /** The hash state after {@code topic + "#"}, for {@link #indexKeyHash(int, String, int, int)}. */
    public static int topicPrefixHash(String topic) {
        return topic.hashCode() * 31 + '#';
    }
}
