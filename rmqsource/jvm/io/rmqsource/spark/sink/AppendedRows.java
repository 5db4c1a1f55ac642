package io.rmqsource.spark.sink;

import io.rmqsource.format.Properties;
import io.rmqsource.format.Record;
import io.rmqsource.store.CommitLog;
import io.rmqsource.store.StoreLayout;
import io.rmqsource.store.write.Message;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.Map;

/**
 * The rows of a task that an earlier attempt already appended, found in the CommitLog range it wrote
 * (from the sink log's start offset to the current end): by their stamps (sink/appended.py appended_seqs), or,
 * with preserveStoreFields (no stamps), by comparing the records from that offset in order with the
 * task's rows: the earlier attempt held the lock for its whole append, so its records are contiguous.
 */
final class AppendedRows {
    private AppendedRows() {
    }

    interface RecordVisitor {
        /** Return false to stop. */
        boolean record(ByteBuffer b, Record r);
    }

    static void walk(SinkOptions o, long start, long end, RecordVisitor visitor) {
        CommitLog cl = new CommitLog(new StoreLayout(o.root, o.config));
        try {
            long from = Math.max(start, cl.minOffset());
            if (from >= end) return;
            Record r = new Record();
            cl.walk(from, false, (kind, seg, b, pos, offset, size) -> {
                if (offset >= end) return false;
                if (kind != Record.MESSAGE) return true;
                if (r.decode(b, pos, size, -1) != null) return false;
                return visitor.record(b, r);
            }, null);
        } finally {
            cl.segments.close();
        }
    }

    /** Row indexes of {@code partition} in [start, end) stamped {@code __RMQSOURCE_BATCH == tag}. */
    static BitSet stamped(SinkOptions o, long start, long end, String tag, int partition) {
        BitSet out = new BitSet();
        byte[] tagBytes = tag.getBytes(StandardCharsets.UTF_8);
        byte[] batchKey = RowsToMessages.BATCH_PROPERTY.getBytes(StandardCharsets.UTF_8);
        byte[] seqKey = RowsToMessages.SEQ_PROPERTY.getBytes(StandardCharsets.UTF_8);
        String prefix = partition + ":";
        Properties p = new Properties();
        walk(o, start, end, (b, r) -> {
            p.parse(b, r.propsPos, r.propsLen);
            int e = p.find(batchKey);
            if (e < 0 || !p.valueEquals(e, tagBytes)) return true;
            int s = p.find(seqKey);
            if (s < 0) return true;
            String seq = p.valueString(s);
            if (seq.startsWith(prefix) && seq.length() > prefix.length() && seq.length() - prefix.length() <= 10) {
                String digits = seq.substring(prefix.length());
                boolean ok = true;
                for (int i = 0; i < digits.length(); i++) ok &= digits.charAt(i) >= '0' && digits.charAt(i) <= '9';
                if (ok) {
                    long v = Long.parseLong(digits);
                    if (v <= Integer.MAX_VALUE) out.set((int) v);
                }
            }
            return true;
        });
        return out;
    }

    /** What a record holds that a row gives: compared in order against the rows (preserveStoreFields). */
    static final class Written {
        final long core;
        final long storeTimestamp;
        final String properties;

        Written(long core, long storeTimestamp, String properties) {
            this.core = core;
            this.storeTimestamp = storeTimestamp;
            this.properties = properties;
        }

        /** Whether {@code m}, put, would have written this record. */
        boolean matches(Message m) {
            if (core != core(m.topic.getBytes(StandardCharsets.UTF_8), m.queueId, m.body, 0, m.body.length, m.flag,
                    m.bornTimestampMs)) {
                return false;
            }
            if (m.storeTimestampMs != null && m.storeTimestampMs != storeTimestamp) return false;
            if (m.propertiesString != null) return sameVerbatim(properties, m.propertiesString);
            Map<String, String> props = parseProperties(properties);
            if (m.tags != null && !m.tags.equals(props.get("TAGS"))) return false;
            if (m.keys != null && !m.keys.equals(props.get("KEYS"))) return false;
            if (m.properties != null) {
                for (Map.Entry<String, String> e : m.properties.entrySet()) {
                    if (!e.getValue().equals(props.get(e.getKey()))) return false;
                }
            }
            return true;
        }
    }

    // The entry a store with enabledAppendPropCRC appends: __CRC32#\u0001 and ten digits, then \u0002.
    private static final int CRC_ENTRY_CHARS = 20;

    /**
     * sink/appended.py same_verbatim: whether a verbatim properties string {@code given}, put, was stored as
     * {@code stored}: as given, or with the CRC entry appended (after the 0x02 the writer adds when
     * {@code given} does not end with one).
     */
    static boolean sameVerbatim(String stored, String given) {
        if (stored.equals(given)) return true;
        int n = stored.length() - CRC_ENTRY_CHARS;
        if (n < 0 || !stored.startsWith("__CRC32#\u0001", n) || !stored.endsWith("\u0002")) return false;
        String head = stored.substring(0, n);
        return head.equals(given) || (!given.isEmpty() && !given.endsWith("\u0002") && head.equals(given + "\u0002"));
    }

    /** The records of [start, end) in order (preserveStoreFields retries). */
    static List<Written> records(SinkOptions o, long start, long end) {
        List<Written> out = new ArrayList<>();
        walk(o, start, end, (b, r) -> {
            byte[] topic = new byte[r.topicLen];
            b.get(r.topicPos, topic);
            byte[] body = new byte[r.bodyLen];
            b.get(r.bodyPos, body);
            byte[] props = new byte[r.propsLen];
            b.get(r.propsPos, props);
            out.add(new Written(core(topic, r.queueId, body, 0, body.length, r.flag, r.bornTimestamp),
                    r.storeTimestamp, new String(props, StandardCharsets.UTF_8)));
            return true;
        });
        return out;
    }

    static Map<String, String> parseProperties(String s) {
        Map<String, String> out = new java.util.HashMap<>();
        for (String entry : s.split("\u0002")) {
            int k = entry.indexOf('\u0001');
            if (k > 0) out.put(entry.substring(0, k), entry.substring(k + 1));
        }
        return out;
    }

    /** A 64-bit fingerprint of topic, queueId, body, flag and bornTimestamp. */
    private static long core(byte[] topic, int queueId, byte[] body, int off, int len, int flag, long born) {
        long h = 0xcbf29ce484222325L;
        for (byte x : topic) h = (h ^ (x & 0xff)) * 0x100000001b3L;
        h = mix(h, queueId);
        h = mix(h, len);
        for (int i = off; i < off + len; i++) h = (h ^ (body[i] & 0xff)) * 0x100000001b3L;
        h = mix(h, flag);
        return mix(h, born);
    }

    private static long mix(long h, long v) {
        h ^= v;
        h *= 0x9E3779B97F4A7C15L;
        return h ^ (h >>> 29);
    }
}
