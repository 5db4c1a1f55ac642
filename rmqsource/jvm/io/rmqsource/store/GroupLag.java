package io.rmqsource.store;

import io.rmqsource.errors.OptionError;
import io.rmqsource.io.StoreFiles;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Consumer-group lag per queue: committed offset vs the queue's max offset (twin of group_lag_with_source in
 * rmqsource/store/lag.py, its default reading: max offsets straight from the ConsumeQueues, no recovery rule).
 *
 * <p>Like RocketMQ's {@code mqadmin consumerProgress}: for every committed {@code (group, topic)} wherever the
 * broker keeps them ({@link ConsumerOffsetSource}), one row per queue of that topic present in the store or in the
 * offsets. {@code brokerOffset} is the queue's max offset, {@code consumerOffset} the committed next offset (null
 * when the group has none for that queue), {@code diff = brokerOffset - max(consumerOffset, minOffset)}, never
 * negative (messages removed by retention are not lag). {@code requestMode} is {@code POP} for the (topic, group)
 * pairs {@code config/messageRequestMode.json} names with mode POP and their POP retry topics, else {@code PULL}.
 * An entry whose topic cannot be a queue folder of this store gets no rows (as lag.py's, which reports it aside).
 */
public final class GroupLag {
    /** One row. */
    public static final class Row {
        public final String group;
        public final String topic;
        public final int queueId;
        public final long brokerOffset;
        public final Long consumerOffset;
        public final long minOffset;
        public final long diff;
        public final String requestMode;

        Row(String group, String topic, int queueId, long brokerOffset, Long consumerOffset, long minOffset, long diff,
            String requestMode) {
            this.group = group;
            this.topic = topic;
            this.queueId = queueId;
            this.brokerOffset = brokerOffset;
            this.consumerOffset = consumerOffset;
            this.minOffset = minOffset;
            this.diff = diff;
            this.requestMode = requestMode;
        }
    }

    /** The rows, sorted by group, topic, queueId, and the source of the committed offsets they used. */
    public final List<Row> rows;
    public final ConsumerOffsetSource source;

    private GroupLag(List<Row> rows, ConsumerOffsetSource source) {
        this.rows = rows;
        this.source = source;
    }

    /** The lag of every committed (group, topic) of the store at {@code root} (a local store: configs are files). */
    public static GroupLag compute(StoreFiles files, String root, StoreConfig config) {
        ConsumerOffsetSource source = ConsumerOffsetSource.locate(root);
        List<ConsumerOffsetSource.Entry> entries = source.load();   // before the queues: an unreadable source says so first
        StoreLayout layout = new StoreLayout(files, root, config);
        layout.checkIsStore();
        Set<String> pops = ConsumerOffsetSource.popPairs(root);
        TreeMap<String, TreeMap<String, Map<Integer, Long>>> committed = new TreeMap<>();   // group -> topic -> offsets
        for (ConsumerOffsetSource.Entry e : entries) {
            committed.computeIfAbsent(e.group, g -> new TreeMap<>()).computeIfAbsent(e.topic, t -> new HashMap<>())
                    .put(e.queueId, e.offset);
        }
        Map<String, Set<Integer>> onDisk = new HashMap<>();
        for (QueueKey k : layout.listQueues()) onDisk.computeIfAbsent(k.topic, t -> new TreeSet<>()).add(k.queueId);
        long clMin = new CommitLog(layout).minOffset();
        Bounds bounds = new Bounds(layout, config, clMin);
        List<Row> rows = new ArrayList<>();
        for (Map.Entry<String, TreeMap<String, Map<Integer, Long>>> g : committed.entrySet()) {
            for (Map.Entry<String, Map<Integer, Long>> t : g.getValue().entrySet()) {
                String topic = t.getKey();
                Map<Integer, Long> offsets = t.getValue();
                TreeSet<Integer> qids = new TreeSet<>(offsets.keySet());
                qids.addAll(onDisk.getOrDefault(topic, Set.of()));
                Map<Integer, long[]> of = new TreeMap<>();
                try {
                    for (int qid : qids) of.put(qid, bounds.of(topic, qid));
                } catch (OptionError notAQueueName) {        // not a topic name this store can hold
                    continue;
                }
                String mode = requestMode(topic, g.getKey(), pops);
                for (Map.Entry<Integer, long[]> q : of.entrySet()) {
                    long mn = q.getValue()[0];
                    long mx = q.getValue()[1];
                    Long off = offsets.get(q.getKey());
                    long base = off == null ? mn : Math.max(off, mn);
                    rows.add(new Row(g.getKey(), topic, q.getKey(), mx, off, mn, Math.max(0, mx - base), mode));
                }
            }
        }
        return new GroupLag(rows, source);
    }

    /** {min, max} of a queue, (0, 0) when it has no ConsumeQueue; each queue opened once (_queue_bounds). */
    private static final class Bounds {
        private final StoreLayout layout;
        private final StoreConfig config;
        private final long clMin;
        private final Map<QueueKey, long[]> known = new HashMap<>();
        private RocksDbQueues.Queues rocks;

        Bounds(StoreLayout layout, StoreConfig config, long clMin) {
            this.layout = layout;
            this.config = config;
            this.clMin = clMin;
        }

        long[] of(String topic, int qid) {
            QueueKey key = new QueueKey(topic, qid);
            long[] b = known.get(key);
            if (b != null) return b;
            QueueUnits q;
            if (layout.rocksDbQueues()) {
                if (rocks == null) rocks = layout.rocksDbQueueStore();
                q = rocks.queue(topic, qid, config.consumeQueueUnitsPerFile());
            } else {
                String dir = layout.queueDirPath(topic, qid);
                q = layout.files.isDirectory(dir) ? new ConsumeQueueFiles(layout.files, dir, topic, qid) : null;
            }
            if (q == null) {
                b = new long[] {0, 0};
            } else {
                long mx = q.maxOffset();
                long mn = q.minOffset(clMin, config.isV5(), mx);
                b = new long[] {Math.min(mn, mx), mx};
            }
            known.put(key, b);
            return b;
        }
    }

    /**
     * {@code POP} for a (topic, group) pair consumed by POP, and for that pair's POP retry topic
     * ({@code %RETRY%group_topic}, 5.x {@code %RETRY%group+topic}); {@code PULL} otherwise (request_mode).
     */
    public static String requestMode(String topic, String group, Set<String> pops) {
        if (pops.contains(topic + "\u0000" + group)) return "POP";
        String retry = "%RETRY%" + group;
        for (String pair : pops) {
            int sep = pair.indexOf('\u0000');
            String t = pair.substring(0, sep);
            String g = pair.substring(sep + 1);
            if (g.equals(group) && (topic.equals(retry + "_" + t) || topic.equals(retry + "+" + t))) return "POP";
        }
        return "PULL";
    }
}
