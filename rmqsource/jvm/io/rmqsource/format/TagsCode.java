package io.rmqsource.format;

/**
 * The tagsCode a ConsumeQueue unit stores for a record (spec 4), twin of rmqsource/format/tagscode.py.
 *
 * String.hashCode of TAGS, except for records parked in SCHEDULE_TOPIC_XXXX with a positive DELAY
 * level: there it is the deliver time storeTimestamp + delay[min(level, maxLevel)].
 */
public final class TagsCode {
    public static final String SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX";

    private TagsCode() {
    }

    /** Integer.parseInt, or null where Java would throw (the Python java_parse_int). */
    public static Integer javaParseInt(String text) {
        if (text == null || !text.matches("[+-]?[0-9]{1,10}")) return null;
        long v = Long.parseLong(text);
        return v >= Integer.MIN_VALUE && v <= Integer.MAX_VALUE ? (int) v : null;
    }

    public static long consumeQueueTagsCode(String topic, String tags, String delay, long storeTimestampMs,
                                            long[] delayLevelsMs) {
        long code = JavaHash.tagsCode(tags);
        if (SCHEDULE_TOPIC.equals(topic)) {
            Integer level = javaParseInt(delay);
            if (level != null) {
                int maxLevel = delayLevelsMs.length;
                int lv = Math.min(level, maxLevel);
                if (lv > 0) {
                    code = storeTimestampMs + (lv <= maxLevel ? delayLevelsMs[lv - 1] : 1000);
                }
            }
        }
        return code;
    }
}
