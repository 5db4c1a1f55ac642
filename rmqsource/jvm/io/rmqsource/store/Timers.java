package io.rmqsource.store;

import io.rmqsource.format.Properties;
import io.rmqsource.format.Record;
import io.rmqsource.format.SystemTopics;
import io.rmqsource.format.TagsCode;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * Timer and delay messages: what is parked, when it is due, and where the broker delivered it (twin of
 * rmqsource/store/timers.py, whose docstring explains the broker's records).  Parked copies are read through
 * the ConsumeQueues of {@code rmq_sys_wheel_timer} and {@code SCHEDULE_TOPIC_XXXX}; one message is (real
 * topic, UNIQ_KEY, reconsumeTimes) whatever the number of re-parked copies; delivered copies are looked for in
 * the real queues only, from the first unit stored at or after the earliest parked copy of that queue. Recall
 * markers (wheel records with {@code TIMER_DEL_UNIQKEY}) are no rows: an undelivered wheel message a marker of
 * its slot names is {@code recalled}.
 */
public final class Timers {
    public static final String TIMER_TOPIC = "rmq_sys_wheel_timer";
    public static final String PENDING = "pending";
    public static final String DELIVERED = "delivered";
    public static final String RECALLED = "recalled";
    static final byte[] TIMER_OUT_MS = "TIMER_OUT_MS".getBytes(StandardCharsets.US_ASCII);
    static final byte[] TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS".getBytes(StandardCharsets.US_ASCII);
    static final byte[] TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY".getBytes(StandardCharsets.US_ASCII);
    static final byte[] REAL_TOPIC = Properties.REAL_TOPIC_NAME.getBytes(StandardCharsets.US_ASCII);
    static final byte[] REAL_QID = Properties.REAL_QID_NAME.getBytes(StandardCharsets.US_ASCII);

    /** One message sent with a delivery time or delay level (fields as TimerEntry in timers.py). */
    public static final class Entry {
        public String realTopic;
        public int realQueueId;
        public String uniqKey;
        public int reconsumeTimes;
        public Long deliverTimeMs;
        public Integer delayLevel;
        public String state;
        /** The record the row shows: the delivered copy, else the newest parked copy. */
        public long phyOffset;
        public int size;
        public Long queueOffset;
        public Long tagsCode;
        public long parkedOffset;
        public long parkedStoreTimestampMs;
    }

    private static final class Parked {
        String realTopic;
        int realQid;
        String uniqKey;
        int reconsumeTimes;
        long phy;
        int size;
        long storeTimestamp;
        Long due;
        Integer level;
        boolean wheel;
        Entry delivered;
    }

    private final StoreReader reader;
    private final RecordWalk walk;
    private final Record rec;
    private final Properties props;

    private Timers(StoreReader reader) {
        this.reader = reader;
        this.walk = new RecordWalk(reader);
        this.rec = walk.rec;
        this.props = walk.props;
    }

    /** Every parked message (real topics restricted to {@code realTopics} unless null), sorted as in Python. */
    public static List<Entry> entries(StoreReader reader, Set<String> realTopics) {
        return entries(reader, realTopics, false);
    }

    /** {@code excludeInternal}: none whose real topic is RocketMQ's own ({@link SystemTopics#isInternal}). */
    public static List<Entry> entries(StoreReader reader, Set<String> realTopics, boolean excludeInternal) {
        return new Timers(reader).run(realTopics, excludeInternal);
    }

    private boolean load(long phy, int size) {
        return walk.load(phy, size);
    }

    private String topic() {
        return walk.topic();
    }

    private String prop(byte[] name) {
        return walk.prop(name);
    }

    static Long parseLong(String text) {
        if (text == null || !text.matches("[+-]?[0-9]{1,19}")) return null;
        try {
            return Long.parseLong(text);
        } catch (NumberFormatException e) {
            return null;
        }
    }

    private void units(String topic, int queueId, long start, RecordWalk.UnitVisitor v) {
        walk.units(topic, queueId, start, v);
    }

    private long firstAtOrAfter(String topic, int queueId, long ts) {
        return walk.firstAtOrAfter(topic, queueId, ts);
    }

    /**
     * Whether a recall marker of the message's wheel slot names it: the broker's {@code buildDeleteKey} is the
     * UNIQ_KEY, or {@code <real topic>+<UNIQ_KEY>} with {@code appendTopicForTimerDeleteKey}.
     */
    private static boolean recalled(Parked pk, Set<String> recalls) {
        if (!pk.wheel || pk.uniqKey == null) return false;
        String slot = pk.due + "\0";
        return recalls.contains(slot + pk.uniqKey) || recalls.contains(slot + pk.realTopic + "+" + pk.uniqKey);
    }

    private List<Entry> run(Set<String> realTopics, boolean excludeInternal) {
        long[] delays = reader.config.messageDelayLevelsMs();
        boolean ext = reader.config.enableConsumeQueueExt();
        Map<String, Parked> parked = new LinkedHashMap<>();
        Set<String> recalls = new java.util.HashSet<>();          // TIMER_OUT_MS + "\0" + TIMER_DEL_UNIQKEY
        for (String parkedTopic : new String[] {TIMER_TOPIC, TagsCode.SCHEDULE_TOPIC}) {
            for (QueueKey k : reader.queueKeys()) {
                if (!k.topic.equals(parkedTopic)) continue;
                boolean wheel = parkedTopic.equals(TIMER_TOPIC);
                units(k.topic, k.queueId, -1, (qoff, phy, size, code) -> {
                    if (!load(phy, size) || !topic().equals(parkedTopic)) return true;
                    if (wheel && props.find(TIMER_DEL_UNIQKEY) >= 0) {
                        recalls.add(parseLong(prop(TIMER_OUT_MS)) + "\0" + prop(TIMER_DEL_UNIQKEY));
                        return true;
                    }
                    String real = prop(REAL_TOPIC);
                    Integer realQid = TagsCode.javaParseInt(prop(REAL_QID));
                    if (real == null || realQid == null || (realTopics != null && !realTopics.contains(real))) return true;
                    if (excludeInternal && SystemTopics.isInternal(real)) return true;
                    Integer level = TagsCode.javaParseInt(prop(Properties.DELAY));
                    if (level != null && level <= 0) level = null;
                    Long due;
                    if (wheel) due = parseLong(prop(TIMER_OUT_MS));
                    else if (code > 0 && !ext) due = code;
                    else due = TagsCode.consumeQueueTagsCode(parkedTopic, prop(Properties.TAGS),
                            prop(Properties.DELAY), rec.storeTimestamp, delays);
                    String uniq = prop(Properties.UNIQ_KEY);
                    // wheel copies of one message (re-parked) share the key; every schedule copy is its own message
                    String key = real + "\0" + realQid + "\0" + uniq + "\0" + rec.reconsumeTimes
                            + (wheel && uniq != null ? "" : "\0" + phy);
                    Parked prev = parked.get(key);
                    if (prev == null || prev.phy < phy) {
                        Parked pk = new Parked();
                        pk.realTopic = real;
                        pk.realQid = realQid;
                        pk.uniqKey = uniq;
                        pk.reconsumeTimes = rec.reconsumeTimes;
                        pk.phy = phy;
                        pk.size = size;
                        pk.storeTimestamp = rec.storeTimestamp;
                        pk.due = due;
                        pk.level = level;
                        pk.wheel = wheel;
                        parked.put(key, pk);
                    }
                    return true;
                });
            }
        }
        // Per real queue: the parked messages waiting for a delivered copy, by (UNIQ_KEY, reconsumeTimes), oldest first.
        List<Parked> byPhy = new ArrayList<>(parked.values());
        byPhy.sort(Comparator.comparingLong(x -> x.phy));
        TreeMap<QueueKey, Map<String, List<Parked>>> perQueue = new TreeMap<>();
        for (Parked pk : byPhy) {
            if (pk.uniqKey == null) continue;
            perQueue.computeIfAbsent(new QueueKey(pk.realTopic, pk.realQid), x -> new HashMap<>())
                    .computeIfAbsent(pk.uniqKey + "\0" + pk.reconsumeTimes, x -> new ArrayList<>()).add(pk);
        }
        Set<QueueKey> onDisk = new java.util.HashSet<>(reader.queueKeys());
        for (Map.Entry<QueueKey, Map<String, List<Parked>>> e : perQueue.entrySet()) {
            QueueKey qk = e.getKey();
            Map<String, List<Parked>> waiting = e.getValue();
            if (!onDisk.contains(qk)) continue;
            long since = Long.MAX_VALUE;
            int total = 0;
            for (List<Parked> l : waiting.values()) {
                total += l.size();
                for (Parked pk : l) since = Math.min(since, pk.storeTimestamp);
            }
            long start = firstAtOrAfter(qk.topic, qk.queueId, since);
            int[] left = {total};
            units(qk.topic, qk.queueId, start, (qoff, phy, size, code) -> {
                if (!load(phy, size) || rec.queueId != qk.queueId || !topic().equals(qk.topic)) return true;
                List<Parked> keys = waiting.get(prop(Properties.UNIQ_KEY) + "\0" + rec.reconsumeTimes);
                if (keys == null) return true;
                Parked hit = null;
                for (Parked pk : keys) {
                    if (pk.delivered == null && props.find(pk.wheel ? TIMER_DEQUEUE_MS : Properties.DELAY) >= 0
                            && pk.storeTimestamp <= rec.storeTimestamp) {
                        hit = pk;
                        break;
                    }
                }
                if (hit == null) return true;
                Entry d = new Entry();
                d.phyOffset = phy;
                d.size = size;
                d.queueOffset = qoff;
                d.tagsCode = code;
                hit.delivered = d;
                return --left[0] > 0;
            });
        }
        List<Entry> out = new ArrayList<>();
        for (Parked pk : parked.values()) {
            Entry en = pk.delivered != null ? pk.delivered : new Entry();
            en.realTopic = pk.realTopic;
            en.realQueueId = pk.realQid;
            en.uniqKey = pk.uniqKey;
            en.reconsumeTimes = pk.reconsumeTimes;
            en.deliverTimeMs = pk.due;
            en.delayLevel = pk.level;
            en.parkedOffset = pk.phy;
            en.parkedStoreTimestampMs = pk.storeTimestamp;
            if (pk.delivered != null) {
                en.state = DELIVERED;
            } else {
                en.state = recalled(pk, recalls) ? RECALLED : PENDING;
                en.phyOffset = pk.phy;
                en.size = pk.size;
            }
            out.add(en);
        }
        out.sort(Comparator.comparing((Entry x) -> x.realTopic).thenComparingInt(x -> x.realQueueId)
                .thenComparingLong(x -> x.parkedOffset));
        return out;
    }
}
