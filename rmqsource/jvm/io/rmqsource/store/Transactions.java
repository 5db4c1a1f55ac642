package io.rmqsource.store;

import io.rmqsource.format.Properties;
import io.rmqsource.format.Record;
import io.rmqsource.format.SystemTopics;
import io.rmqsource.format.TagsCode;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * Transactional messages: what the broker kept of each, and how it ended (twin of
 * rmqsource/store/transactions.py, whose docstring explains the broker's records).  Half copies in
 * {@code RMQ_SYS_TRANS_HALF_TOPIC} are grouped into one message by (real topic, real queue, UNIQ_KEY, else
 * {@code __transactionId__}, else the half record's offset); op records of {@code RMQ_SYS_TRANS_OP_HALF_TOPIC}
 * name the half queue offsets they removed; {@code TRANS_CHECK_MAX_TIME_TOPIC} holds the discarded ones; commits
 * are the records of the real queues whose preparedTransactionOffset is a half copy's, found from each real
 * queue's first unit stored at or after the earliest half of that queue.
 */
public final class Transactions {
    public static final String HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC";
    public static final String OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
    public static final String CHECK_MAX_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC";
    public static final String REMOVE_TAG = "d";                       // TransactionalMessageUtil.REMOVE_TAG
    public static final String COMMITTED = "committed";
    public static final String ROLLED_BACK = "rolled_back";
    public static final String DISCARDED = "discarded";
    public static final String PENDING = "pending";
    static final int TRANSACTION_COMMIT_TYPE = 0x8;
    static final byte[] CHECK_TIMES = "TRANSACTION_CHECK_TIMES".getBytes(StandardCharsets.US_ASCII);
    static final byte[] TRANSACTION_ID = "__transactionId__".getBytes(StandardCharsets.US_ASCII);
    static final byte[] PRODUCER_GROUP = "PGROUP".getBytes(StandardCharsets.US_ASCII);
    static final byte[] REAL_TOPIC = Properties.REAL_TOPIC_NAME.getBytes(StandardCharsets.US_ASCII);
    static final byte[] REAL_QID = Properties.REAL_QID_NAME.getBytes(StandardCharsets.US_ASCII);

    /** One transactional message (fields as TransactionEntry in transactions.py). */
    public static final class Entry {
        public String realTopic;
        public int realQueueId;
        public String uniqKey;
        public String transactionId;
        public String producerGroup;
        public String state;
        public int checkTimes;
        public int halfCopies;
        public int commits;
        public Long resolvedTimeMs;
        public boolean open;
        /** The record the row shows: the first commit, else the first half record. */
        public long phyOffset;
        public int size;
        /** The first commit's unit in the real queue; null when never committed. */
        public Long queueOffset;
        public Long tagsCode;
        /** The first half record's CommitLog offset. */
        public long halfOffset;
    }

    /** A half record of a message. */
    private static final class Copy {
        long phy;
        int size;
        long storeTimestamp;
        int halfQueueId;
        long halfQueueOffset;
        String uniqKey;
        String transactionId;
        String producerGroup;
        Integer checkTimes;
    }

    private static final class Commit {
        long phy;
        int size;
        long storeTimestamp;
        long queueOffset;
        long tagsCode;
    }

    private static final class Message {
        String realTopic;
        int realQid;
        final List<Copy> copies = new ArrayList<>();
        final List<Commit> commits = new ArrayList<>();
    }

    private final StoreReader reader;
    private final RecordWalk walk;

    private Transactions(StoreReader reader) {
        this.reader = reader;
        this.walk = new RecordWalk(reader);
    }

    /** Every transactional message (real topics restricted to {@code realTopics} unless null), sorted as in Python. */
    public static List<Entry> entries(StoreReader reader, Set<String> realTopics) {
        return entries(reader, realTopics, false);
    }

    /** {@code excludeInternal}: none whose real topic is RocketMQ's own ({@link SystemTopics#isInternal}). */
    public static List<Entry> entries(StoreReader reader, Set<String> realTopics, boolean excludeInternal) {
        return new Transactions(reader).run(realTopics, excludeInternal);
    }

    /** Python's {@code a or b} of two optional strings: a unless it is None or empty. */
    private static String or(String a, String b) {
        return a != null && !a.isEmpty() ? a : b;
    }

    private static String slot(int queueId, long offset) {
        return queueId + ":" + offset;
    }

    /** (half queue id, half queue offset) -> store time of the first op record removing it. */
    private Map<String, Long> ops() {
        Map<String, Long> removed = new HashMap<>();
        for (QueueKey k : reader.queueKeys()) {
            if (!k.topic.equals(OP_TOPIC)) continue;
            walk.units(k.topic, k.queueId, -1, (qoff, phy, size, code) -> {
                if (!walk.load(phy, size) || !walk.topic().equals(OP_TOPIC)) return true;
                if (!REMOVE_TAG.equals(walk.prop(Properties.TAGS)) || walk.rec.bodyLen == 0) return true;
                String body = new String(walk.body(), StandardCharsets.US_ASCII);
                long ts = walk.rec.storeTimestamp;
                for (String item : body.split(",", -1)) {
                    String t = item.strip();
                    Integer off = t.isEmpty() ? null : TagsCode.javaParseInt(t);
                    if (off != null) removed.putIfAbsent(slot(k.queueId, off), ts);
                }
                return true;
            });
        }
        return removed;
    }

    /** The UNIQ_KEY (else transaction id) of every record of a topic; null stands for neither. */
    private Set<String> keysIn(String topic) {
        Set<String> out = new HashSet<>();
        for (QueueKey k : reader.queueKeys()) {
            if (!k.topic.equals(topic)) continue;
            walk.units(k.topic, k.queueId, -1, (qoff, phy, size, code) -> {
                if (walk.load(phy, size) && walk.topic().equals(topic)) {
                    out.add(or(walk.prop(Properties.UNIQ_KEY), walk.prop(TRANSACTION_ID)));
                }
                return true;
            });
        }
        return out;
    }

    private List<Entry> run(Set<String> realTopics, boolean excludeInternal) {
        Map<String, Message> messages = new LinkedHashMap<>();       // identity -> message, as first seen
        List<QueueKey> halfQueues = new ArrayList<>();
        for (QueueKey k : reader.queueKeys()) if (k.topic.equals(HALF_TOPIC)) halfQueues.add(k);
        halfQueues.sort(null);
        for (QueueKey k : halfQueues) {
            walk.units(k.topic, k.queueId, -1, (qoff, phy, size, code) -> {
                if (!walk.load(phy, size) || !walk.topic().equals(HALF_TOPIC)) return true;
                String real = walk.prop(REAL_TOPIC);
                Integer realQid = TagsCode.javaParseInt(walk.prop(REAL_QID));
                if (real == null || realQid == null || (realTopics != null && !realTopics.contains(real))) return true;
                if (excludeInternal && SystemTopics.isInternal(real)) return true;
                Copy c = new Copy();
                c.phy = phy;
                c.size = size;
                c.storeTimestamp = walk.rec.storeTimestamp;
                c.halfQueueId = k.queueId;
                c.halfQueueOffset = qoff;
                c.uniqKey = walk.prop(Properties.UNIQ_KEY);
                c.transactionId = walk.prop(TRANSACTION_ID);
                c.producerGroup = walk.prop(PRODUCER_GROUP);
                c.checkTimes = TagsCode.javaParseInt(walk.prop(CHECK_TIMES));
                String key = or(c.uniqKey, c.transactionId);
                String ident = real + "\0" + realQid + "\0" + (key != null && !key.isEmpty() ? "k" + key : "p" + phy);
                Message m = messages.get(ident);
                if (m == null) {
                    m = new Message();
                    m.realTopic = real;
                    m.realQid = realQid;
                    messages.put(ident, m);
                }
                m.copies.add(c);
                return true;
            });
        }
        Map<String, Long> removed = ops();
        Set<String> discarded = keysIn(CHECK_MAX_TOPIC);
        // commits: records of the real queues whose preparedTransactionOffset is a half copy's offset
        Map<Long, Message> owner = new HashMap<>();
        TreeMap<QueueKey, Long> perQueue = new TreeMap<>();
        for (Message m : messages.values()) {
            for (Copy c : m.copies) owner.put(c.phy, m);
            long first = m.copies.get(0).storeTimestamp;
            perQueue.merge(new QueueKey(m.realTopic, m.realQid), first, Math::min);
        }
        Set<QueueKey> onDisk = new HashSet<>(reader.queueKeys());
        for (Map.Entry<QueueKey, Long> e : perQueue.entrySet()) {
            QueueKey qk = e.getKey();
            if (!onDisk.contains(qk)) continue;
            long start = walk.firstAtOrAfter(qk.topic, qk.queueId, e.getValue());
            walk.units(qk.topic, qk.queueId, start, (qoff, phy, size, code) -> {
                if (!walk.load(phy, size) || !walk.topic().equals(qk.topic)) return true;
                if ((walk.rec.sysFlag & Record.TRANSACTION_MASK) != TRANSACTION_COMMIT_TYPE) return true;
                Message m = owner.get(walk.rec.preparedTransactionOffset);
                if (m != null && m.realTopic.equals(qk.topic) && m.realQid == qk.queueId) {
                    Commit c = new Commit();
                    c.phy = walk.rec.phyOffset;
                    c.size = size;
                    c.storeTimestamp = walk.rec.storeTimestamp;
                    c.queueOffset = qoff;
                    c.tagsCode = code;
                    m.commits.add(c);
                }
                return true;
            });
        }
        List<Entry> out = new ArrayList<>();
        for (Message m : messages.values()) {
            Copy first = m.copies.get(0);
            Long done = null;
            for (Copy c : m.copies) {
                Long t = removed.get(slot(c.halfQueueId, c.halfQueueOffset));
                if (t != null && (done == null || t < done)) done = t;
            }
            String key = or(first.uniqKey, first.transactionId);
            Entry en = new Entry();
            if (!m.commits.isEmpty()) {
                en.state = COMMITTED;
                en.resolvedTimeMs = m.commits.get(0).storeTimestamp;
            } else if (done != null) {
                en.state = ROLLED_BACK;
                en.resolvedTimeMs = done;
            } else if (key != null && discarded.contains(key)) {
                en.state = DISCARDED;
            } else {
                en.state = PENDING;
            }
            Copy newest = m.copies.get(m.copies.size() - 1);
            int checks = Integer.MIN_VALUE;
            for (Copy c : m.copies) checks = Math.max(checks, c.checkTimes == null ? 0 : c.checkTimes);
            en.realTopic = m.realTopic;
            en.realQueueId = m.realQid;
            en.uniqKey = first.uniqKey;
            en.transactionId = first.transactionId;
            en.producerGroup = first.producerGroup;
            en.checkTimes = checks;
            en.halfCopies = m.copies.size();
            en.commits = m.commits.size();
            en.open = !removed.containsKey(slot(newest.halfQueueId, newest.halfQueueOffset)) && !DISCARDED.equals(en.state);
            if (!m.commits.isEmpty()) {
                Commit c = m.commits.get(0);
                en.phyOffset = c.phy;
                en.size = c.size;
                en.queueOffset = c.queueOffset;
                en.tagsCode = c.tagsCode;
            } else {
                en.phyOffset = first.phy;
                en.size = first.size;
            }
            en.halfOffset = first.phy;
            out.add(en);
        }
        out.sort(Comparator.comparing((Entry x) -> x.realTopic).thenComparingInt(x -> x.realQueueId)
                .thenComparingLong(x -> x.phyOffset));
        return out;
    }
}
