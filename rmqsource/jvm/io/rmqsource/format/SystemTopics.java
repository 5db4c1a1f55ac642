package io.rmqsource.format;

import java.util.Set;

/**
 * RocketMQ's own topics: what a whole-store read leaves out unless excludeInternalTopics=false,
 * twin of rmqsource/format/system_topics.py.
 *
 * The names are RocketMQ's: the system topics of TopicValidator (SYSTEM_TOPIC_SET and
 * SYSTEM_TOPIC_PREFIX; SCHEDULE_TOPIC_XXXX_V2 is in 4.9.x's set, CHECKPOINT_TOPIC in 5.x's, both kept)
 * and MixAll's retry and dead-letter group topic prefixes.
 */
public final class SystemTopics {
    /** TopicValidator.SYSTEM_TOPIC_SET, in its order (union of the 4.9 and 5.x sets). */
    public static final String[] SYSTEM_TOPICS = {
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "BenchmarkTest",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "CHECKPOINT_TOPIC",
        "SCHEDULE_TOPIC_XXXX_V2",
    };
    /** TopicValidator.SYSTEM_TOPIC_PREFIX: every topic starting with it is a system topic. */
    public static final String SYSTEM_TOPIC_PREFIX = "rmq_sys_";
    public static final String RETRY_GROUP_TOPIC_PREFIX = "%RETRY%";
    public static final String DLQ_GROUP_TOPIC_PREFIX = "%DLQ%";
    /** Topic names that start with one of these are RocketMQ's own. */
    public static final String[] INTERNAL_TOPIC_PREFIXES = {"rmq_sys_", "%RETRY%", "%DLQ%"};

    private static final Set<String> SYSTEM_TOPIC_SET = Set.of(SYSTEM_TOPICS);

    private SystemTopics() {
    }

    /** A topic RocketMQ writes for itself: a TopicValidator system topic, a retry or a dead-letter topic. */
    public static boolean isInternal(String topic) {
        if (SYSTEM_TOPIC_SET.contains(topic)) return true;
        for (String p : INTERNAL_TOPIC_PREFIXES) if (topic.startsWith(p)) return true;
        return false;
    }
}
