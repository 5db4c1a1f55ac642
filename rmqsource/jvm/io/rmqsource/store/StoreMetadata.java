package io.rmqsource.store;

import io.rmqsource.format.ConsumeQueue;
import io.rmqsource.format.IndexFile;
import io.rmqsource.format.SystemTopics;
import io.rmqsource.io.StoreFiles;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A store's structure as tables ({@code option("metadata", ...)}, docs/metadata.md; twin of
 * rmqsource/store/metadata.py): its queues, topics, consumer groups, CommitLog segments and IndexFiles, answered
 * from ConsumeQueues, configs, file lengths and IndexFile headers, never from a CommitLog record.
 *
 * <p>Each table is a list of rows keyed by the table's column names (contract.json metadataColumns), in the
 * Python rows' order; the {@code broker} and {@code storePath} columns are the caller's. Values: String, Integer,
 * Long, Boolean, a List of Integer ({@code queueIds}), timestamps as epoch milliseconds (Long), null.
 */
public final class StoreMetadata {
    public static final List<String> TABLES = List.of("queues", "topics", "groups", "segments", "indexes");

    private StoreMetadata() {
    }

    /** The rows of table {@code table} of the store at {@code root} ({@code commitLogEnd}: pinned, or null). */
    public static List<Map<String, Object>> rows(String table, StoreFiles files, String root, StoreConfig config,
                                                 Long commitLogEnd) {
        if (table.equals("groups")) return groupRows(files, root, config);
        try (StoreReader reader = new StoreReader(files, root, config, commitLogEnd)) {
            switch (table) {
                case "queues": return queueRows(reader);
                case "topics": return topicRows(reader);
                case "segments": return segmentRows(reader);
                case "indexes": return indexRows(reader);
                default: throw new IllegalArgumentException("no metadata table " + table);
            }
        }
    }

    /**
     * One row per queue ({@code rmq queues}, mqadmin topicStatus): min / max offsets, and the CommitLog end of its
     * last unit ({@code cqMaxPhysicOffset}; -1 when it has none).
     */
    public static List<Map<String, Object>> queueRows(StoreReader reader) {
        List<QueueKey> keys = new ArrayList<>(reader.queueKeys());
        keys.sort(null);
        List<Map<String, Object>> out = new ArrayList<>();
        long[] p = new long[1];
        int[] s = new int[1];
        long[] c = new long[1];
        for (QueueKey k : keys) {
            QueueUnits q = reader.consumeQueue(k.topic, k.queueId);
            long mx = reader.queueMaxOffset(q);
            long mn = reader.queueMinOffset(q, mx);
            long lastEnd = -1;
            if (mx > q.firstFileStartOffset() && q.unit(mx - 1, p, s, c) && s[0] != ConsumeQueue.PRE_BLANK_SIZE) {
                lastEnd = p[0] + s[0];
            }
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("topic", k.topic);
            r.put("queueId", k.queueId);
            r.put("minOffset", mn);
            r.put("maxOffset", mx);
            r.put("messages", mx - mn);
            r.put("cqMaxPhysicOffset", lastEnd);
            r.put("internal", SystemTopics.isInternal(k.topic));
            out.add(r);
        }
        return out;
    }

    /** One row per topic ({@code rmq topics}): its queue ids, messages, lowest min and highest max offset. */
    public static List<Map<String, Object>> topicRows(StoreReader reader) {
        TreeMap<String, List<Map<String, Object>>> perTopic = new TreeMap<>();
        for (Map<String, Object> q : queueRows(reader)) {
            perTopic.computeIfAbsent((String) q.get("topic"), t -> new ArrayList<>()).add(q);
        }
        List<Map<String, Object>> out = new ArrayList<>();
        for (Map.Entry<String, List<Map<String, Object>>> e : perTopic.entrySet()) {
            List<Integer> ids = new ArrayList<>();
            long messages = 0;
            long min = Long.MAX_VALUE;
            long max = Long.MIN_VALUE;
            for (Map<String, Object> q : e.getValue()) {
                ids.add((Integer) q.get("queueId"));
                messages += (Long) q.get("messages");
                min = Math.min(min, (Long) q.get("minOffset"));
                max = Math.max(max, (Long) q.get("maxOffset"));
            }
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("topic", e.getKey());
            r.put("queueIds", ids);
            r.put("queues", ids.size());
            r.put("messages", messages);
            r.put("minOffset", min);
            r.put("maxOffset", max);
            r.put("internal", SystemTopics.isInternal(e.getKey()));
            out.add(r);
        }
        return out;
    }

    /**
     * One row per consumer group, topic and queue ({@code rmq lag}, mqadmin consumerProgress): committed offset,
     * the queue's max offset and the lag, wherever the broker keeps the offsets ({@link GroupLag}).
     */
    public static List<Map<String, Object>> groupRows(StoreFiles files, String root, StoreConfig config) {
        GroupLag lag = GroupLag.compute(files, root, config);
        List<Map<String, Object>> out = new ArrayList<>();
        for (GroupLag.Row g : lag.rows) {
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("group", g.group);
            r.put("topic", g.topic);
            r.put("queueId", g.queueId);
            r.put("brokerOffset", g.brokerOffset);
            r.put("consumerOffset", g.consumerOffset);
            r.put("minOffset", g.minOffset);
            r.put("diff", g.diff);
            r.put("requestMode", g.requestMode);
            r.put("offsetSource", lag.source.kind);
            out.add(r);
        }
        return out;
    }

    /** One row per CommitLog file (DLedger: data file): its start, length, and its bytes below the valid end. */
    public static List<Map<String, Object>> segmentRows(StoreReader reader) {
        long end = reader.commitLogMaxOffset();
        List<Map<String, Object>> out = new ArrayList<>();
        for (Segment s : reader.commitLog.list()) {
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("file", s.path);
            r.put("startOffset", s.startOffset);
            r.put("fileSize", s.sizeBytes);
            r.put("validBytes", Math.max(0, Math.min(s.sizeBytes, end - s.startOffset)));
            r.put("dledger", s.dledger);
            out.add(r);
        }
        return out;
    }

    /**
     * One row per IndexFile (17-digit names under index/, oldest first), from its 40-byte big-endian header: the
     * store times and CommitLog offsets it covers; nulls for a file shorter than its header.
     */
    public static List<Map<String, Object>> indexRows(StoreReader reader) {
        StoreFiles files = reader.layout.files;
        String dir = reader.layout.indexDirPath();
        TreeMap<String, Long> sizes = new TreeMap<>();
        List<StoreFiles.Entry> entries = files.list(dir);
        if (entries != null) {
            for (StoreFiles.Entry e : entries) {
                if (!e.directory && e.name.length() == 17 && e.name.chars().allMatch(ch -> ch >= '0' && ch <= '9')) {
                    sizes.put(e.name, e.size);
                }
            }
        }
        List<Map<String, Object>> out = new ArrayList<>();
        for (Map.Entry<String, Long> e : sizes.entrySet()) {
            String path = StoreFiles.child(dir, e.getKey());
            ByteBuffer h = e.getValue() >= IndexFile.HEADER_SIZE
                    ? files.read(path, 0, IndexFile.HEADER_SIZE).duplicate().order(ByteOrder.BIG_ENDIAN) : null;
            if (h != null && h.remaining() < IndexFile.HEADER_SIZE) h = null;
            int at = h == null ? 0 : h.position();
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("file", path);
            r.put("fileSize", e.getValue());
            r.put("beginTimestamp", h == null ? null : h.getLong(at));
            r.put("endTimestamp", h == null ? null : h.getLong(at + 8));
            r.put("beginPhyOffset", h == null ? null : h.getLong(at + 16));
            r.put("endPhyOffset", h == null ? null : h.getLong(at + 24));
            r.put("hashSlotCount", h == null ? null : h.getInt(at + 32));
            // a fresh file holds 0 on disk, which the loader reads as 1; entry 0 is never used
            r.put("entries", h == null ? null : Math.max(h.getInt(at + 36), 1) - 1);
            out.add(r);
        }
        return out;
    }
}
