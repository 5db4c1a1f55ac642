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
}
