package io.rmqsource.store;

import io.rmqsource.errors.FormatError;
import io.rmqsource.format.FastJson;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.LongSupplier;

/**
 * What a broker needs in {@code {root}/config/} to serve a store it did not write: the Java twin of
 * rmqsource/store/broker_configs.py. {@code topics.json} (TopicConfigManager: a route for every topic written,
 * queue numbers at least the highest queue id + 1) and {@code subscriptionGroup.json} (SubscriptionGroupManager:
 * the groups the stream commits for), merged with what is there (nothing dropped, queue numbers only grow,
 * dataVersion bumped only on a change), replaced through {@link ConfigFiles#string2File} (NAME.tmp, NAME.bak,
 * rename, fsync). The broker's own topics (SCHEDULE_TOPIC_XXXX, the timer wheel's) are left to the broker.
 * The store writer routes its topics as its messages become durable and at its clean shutdown. Both languages
 * write the same bytes for the same input (tests/jvm/test_broker_configs_twin.py).
 */
public final class BrokerConfigs {
    public static final String TOPICS_FILE_NAME = "topics.json";
    public static final String SUBSCRIPTION_GROUP_FILE_NAME = "subscriptionGroup.json";
    static final String SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX";
    static final String TIMER_TOPIC = "rmq_sys_wheel_timer";

    private BrokerConfigs() {
    }

    /** {topic: highest queue id + 1} of (topic, queueId) pairs, less the broker's own topics. */
    public static TreeMap<String, Integer> queueNums(Iterable<Map.Entry<String, Integer>> queues) {
        TreeMap<String, Integer> out = new TreeMap<>();
        for (Map.Entry<String, Integer> q : queues) {
            String t = q.getKey();
            if (t.equals(SCHEDULE_TOPIC) || t.equals(TIMER_TOPIC)) continue;
            out.merge(t, q.getValue() + 1, Math::max);
        }
        return out;
    }

    private static LinkedHashMap<Object, Object> newDataVersion(boolean v5, long nowMs) {
        LinkedHashMap<Object, Object> dv = new LinkedHashMap<>();
        dv.put("counter", 1L);
        if (v5) dv.put("stateVersion", 0L);
        dv.put("timestamp", nowMs);
        return dv;
    }

    private static void bump(Map<Object, Object> doc, long nowMs) {
        Object dv = doc.get("dataVersion");
        if (dv instanceof Map) {
            LinkedHashMap<Object, Object> b = new LinkedHashMap<>((Map<?, ?>) dv);
            Object c = b.get("counter");
            b.put("counter", c instanceof Long ? (Object) ((Long) c + 1)
                    : c instanceof BigInteger ? ((BigInteger) c).add(BigInteger.ONE) : (Object) 1L);
            b.put("timestamp", nowMs);
            doc.put("dataVersion", b);
        }
    }

    private static LinkedHashMap<Object, Object> table(Map<Object, Object> doc, String key, String file) {
        Object t = doc.get(key);
        if (t == null) return new LinkedHashMap<>();
        if (!(t instanceof Map)) {
            throw new FormatError(key + " is a " + FastJson.pythonType(t) + ", expected an object", file, -1);
        }
        return new LinkedHashMap<>((Map<?, ?>) t);
    }

    private static long count(Object v) {
        return v instanceof Long ? (Long) v : 0L;
    }

    static LinkedHashMap<Object, Object> topicConfig(String name, long nums, boolean v5) {
        LinkedHashMap<Object, Object> e = new LinkedHashMap<>();
        e.put("topicName", name);
        e.put("readQueueNums", nums);
        e.put("writeQueueNums", nums);
        e.put("perm", 6L);
        e.put("topicFilterType", "SINGLE_TAG");
        e.put("topicSysFlag", 0L);
        e.put("order", false);
        if (v5) e.put("attributes", new LinkedHashMap<>());
        return e;
    }

    static LinkedHashMap<Object, Object> groupConfig(String name, boolean v5) {
        LinkedHashMap<Object, Object> e = new LinkedHashMap<>();
        e.put("groupName", name);
        e.put("consumeEnable", true);
        e.put("consumeFromMinEnable", true);
        e.put("consumeBroadcastEnable", true);
        e.put("retryQueueNums", 1L);
        e.put("retryMaxTimes", 16L);
        e.put("brokerId", 0L);
        e.put("whichBrokerWhenConsumeSlowly", 1L);
        e.put("notifyConsumerIdsChangedEnable", true);
        if (v5) {
            e.put("consumeMessageOrderly", false);
            e.put("groupSysFlag", 0L);
            e.put("consumeTimeoutMinute", 15L);
            LinkedHashMap<Object, Object> policy = new LinkedHashMap<>();
            policy.put("type", "CUSTOMIZED");
            e.put("groupRetryPolicy", policy);
            e.put("attributes", new LinkedHashMap<>());
        }
        return e;
    }

    /** doc (a decoded topics.json or null) with every topic of queueNums routed; null when unchanged. */
    public static Map<Object, Object> mergeTopicConfigs(Map<Object, Object> doc, Map<String, Integer> queueNums,
                                                        boolean v5, long nowMs, String file) {
        boolean fresh = doc == null;
        LinkedHashMap<Object, Object> out = new LinkedHashMap<>();
        if (fresh) out.put("dataVersion", newDataVersion(v5, nowMs));
        else out.putAll(doc);
        LinkedHashMap<Object, Object> table = table(out, "topicConfigTable", file);
        boolean changed = fresh;
        for (Map.Entry<String, Integer> q : new TreeMap<>(queueNums).entrySet()) {
            long nums = q.getValue();
            Object entry = table.get(q.getKey());
            if (!(entry instanceof Map)) {
                table.put(q.getKey(), topicConfig(q.getKey(), nums, v5));
                changed = true;
                continue;
            }
            LinkedHashMap<Object, Object> e = new LinkedHashMap<>((Map<?, ?>) entry);
            for (String key : new String[] {"readQueueNums", "writeQueueNums"}) {
                if (count(e.get(key)) < nums) {
                    e.put(key, nums);
                    changed = true;
                }
            }
            table.put(q.getKey(), e);
        }
        if (!changed) return null;
        out.put("topicConfigTable", table);
        if (!fresh) bump(out, nowMs);
        return out;
    }

    /** doc (a decoded subscriptionGroup.json or null) with group in it; null when it was there. */
    public static Map<Object, Object> mergeSubscriptionGroup(Map<Object, Object> doc, String group, boolean v5,
                                                             long nowMs, String file) {
        boolean fresh = doc == null;
        LinkedHashMap<Object, Object> out = new LinkedHashMap<>();
        if (fresh) {
            out.put("dataVersion", newDataVersion(v5, nowMs));
            if (v5) out.put("forbiddenTable", new LinkedHashMap<>());
        } else {
            out.putAll(doc);
        }
        LinkedHashMap<Object, Object> table = table(out, "subscriptionGroupTable", file);
        if (table.get(group) instanceof Map) return null;
        table.put(group, groupConfig(group, v5));
        out.put("subscriptionGroupTable", table);
        if (!fresh) bump(out, nowMs);
        return out;
    }

    private static Map<Object, Object> decode(byte[] data, String file) {
        return FastJson.parse(data, file);
    }

    private static void replace(Path path, Map<Object, Object> doc) {
        ConfigFiles.string2File(path, FastJson.write(doc).getBytes(StandardCharsets.UTF_8), old -> {
            try {
                decode(old, path.toString());
                return true;
            } catch (FormatError e) {
                return false;
            }
        });
    }

    /** Routes every topic of queues in config/topics.json; true when the file was written (caller holds the store lock). */
    public static boolean recordTopicQueues(Path storeRoot, Iterable<Map.Entry<String, Integer>> queues, boolean v5,
                                            LongSupplier clockMs) {
        TreeMap<String, Integer> nums = queueNums(queues);
        if (nums.isEmpty()) return false;
        Path path = storeRoot.resolve("config").resolve(TOPICS_FILE_NAME);
        Map<Object, Object> current = ConfigFiles.loadWithBak(path, BrokerConfigs::decode);
        Map<Object, Object> merged = mergeTopicConfigs(current, nums, v5, clockMs.getAsLong(), path.toString());
        if (merged == null) return false;
        replace(path, merged);
        return true;
    }

    /** Adds group to config/subscriptionGroup.json; true when the file was written (caller serializes writers). */
    public static boolean recordSubscriptionGroup(Path storeRoot, String group, boolean v5, LongSupplier clockMs) {
        Path path = storeRoot.resolve("config").resolve(SUBSCRIPTION_GROUP_FILE_NAME);
        Map<Object, Object> current = ConfigFiles.loadWithBak(path, BrokerConfigs::decode);
        Map<Object, Object> merged = mergeSubscriptionGroup(current, group, v5, clockMs.getAsLong(), path.toString());
        if (merged == null) return false;
        replace(path, merged);
        return true;
    }
}
