package io.rmqsource.spark.stream;

import io.rmqsource.format.ConsumeQueue;
import io.rmqsource.format.Record;
import io.rmqsource.format.SystemTopics;
import io.rmqsource.io.StoreFiles;
import io.rmqsource.spark.RmqOptions;
import io.rmqsource.store.CommitLog;
import io.rmqsource.store.DLedgerLog;
import io.rmqsource.store.MappedFaults;
import io.rmqsource.store.QueueKey;
import io.rmqsource.store.QueueTail;
import io.rmqsource.store.Segment;
import io.rmqsource.store.Segments;
import io.rmqsource.store.StoreLayout;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Pattern;

/**
 * Driver-side view of the queues of one store, cheap to refresh between batches (twin of
 * StoreWatcher in rmqsource/spark/store_watcher.py).  It never computes the CommitLog's recovered end:
 * it follows each queue's ConsumeQueue tail instead, and checks the last unit found against the
 * record it points at (size, topic, queueId, queueOffset) before admitting it, so a unit caught
 * half-written is never read.  Files are read through the layout's StoreFiles: local files stay
 * mapped between batches; on another file system the queues' files are re-listed every trigger and
 * read again whole when their length or modification time changed (an object store replaces a
 * file, never appends), and a record is checked by one positioned read.
 */
public final class StoreWatcher implements QueueTail.Verifier {
    private final RmqStreamOptions opts;
    final StoreLayout layout;
    private final Map<QueueKey, QueueTail> tails = new HashMap<>();
    private final Set<String> topics;
    private final Pattern pattern;
    private final Set<QueueKey> queues;
    private CommitLog commitLog;
    private long lastCommitLogMin = -1;
    private CommitLog dledgerEndOf;
    private long dledgerEnd;
    private final Record record = new Record();

    StoreWatcher(RmqStreamOptions opts, StoreFiles files) {
        this.opts = opts;
        this.layout = new StoreLayout(files, opts.root(), opts.read.storeConfig);
        RmqOptions r = opts.read;
        topics = r.topics != null ? new HashSet<>(r.topics) : null;
        pattern = r.topicPattern != null ? Pattern.compile(r.topicPattern) : null;
        if (r.queues != null) {
            queues = new HashSet<>();
            for (String[] tq : r.queues) queues.add(new QueueKey(tq[0], Integer.parseInt(tq[1])));
        } else {
            queues = null;
        }
    }

    // ------------------------------------------------------------------ selection

    /** The selected queues that exist on disk, sorted; only the selected topics' directories are listed. */
    List<QueueKey> keys() {
        layout.checkSupported();        // every trigger: a broker restarted in DLedger mode changes the layout
        if (!layout.files.mapped()) layout.files.close();     // files replaced since the last trigger are opened anew
        TreeSet<QueueKey> out = new TreeSet<>();
        if (layout.rocksDbQueues()) {                       // the database's queues as they are now
            for (QueueKey k : layout.listQueues()) {
                boolean wanted = queues != null ? queues.contains(k)
                        : topics != null ? topics.contains(k.topic)
                        : matchesPattern(k.topic);
                if (wanted) out.add(k);
            }
            return new ArrayList<>(out);
        }
        StoreFiles files = layout.files;
        String cq = layout.pathOf("consumequeue");
        if (queues != null) {
            for (QueueKey k : queues) if (files.isDirectory(layout.queueDirPath(k.topic, k.queueId))) out.add(k);
            return new ArrayList<>(out);
        }
        List<String> names = new ArrayList<>();
        if (topics != null) {
            names.addAll(topics);
        } else {
            List<StoreFiles.Entry> all = files.list(cq);
            if (all != null) {
                for (StoreFiles.Entry t : all) {
                    if (matchesPattern(t.name)) names.add(t.name);
                }
            }
        }
        for (String t : names) {
            if (!StoreLayout.isSafeDirName(t)) continue;
            List<StoreFiles.Entry> qs = files.list(StoreFiles.child(cq, t));
            if (qs == null) continue;
            for (StoreFiles.Entry q : qs) {
                String n = q.name;
                if (!n.isEmpty() && n.length() < 10 && n.chars().allMatch(Character::isDigit) && q.directory) {
                    out.add(new QueueKey(t, Integer.parseInt(n)));
                }
            }
        }
        return new ArrayList<>(out);
    }

    /** A topic the topicPattern subscribes to: RocketMQ's own topics only with excludeInternalTopics=false. */
    private boolean matchesPattern(String topic) {
        return pattern.matcher(topic).matches()
                && !(opts.read.internalTopicsExcluded() && SystemTopics.isInternal(topic));
    }

    QueueTail tail(QueueKey key) {
        QueueTail t = tails.get(key);
        if (t == null) {
            t = layout.rocksDbQueues() ? new QueueTail(layout, key.topic, key.queueId)
                    : new QueueTail(layout.files, layout.queueDirPath(key.topic, key.queueId), key.topic, key.queueId);
            tails.put(key, t);
        }
        return t;
    }

    // ------------------------------------------------------------------ CommitLog

    /** First CommitLog offset still on disk; when retention moved it, every queue re-lists its files. */
    long commitLogMin() {
        long min = Long.MAX_VALUE;
        for (Segment s : CommitLog.listFiles(layout)) min = Math.min(min, s.startOffset);
        if (min == Long.MAX_VALUE) min = 0;
        if (lastCommitLogMin >= 0 && min != lastCommitLogMin) {
            for (QueueTail t : tails.values()) t.relist();
            commitLog = null;
        }
        lastCommitLogMin = min;
        return min;
    }

    /** The DLedger data's valid end (DLedger recovery's), once per CommitLog listing. */
    private long dledgerEnd(CommitLog cl) {
        if (dledgerEndOf != cl) {
            dledgerEnd = DLedgerLog.validEnd(cl);
            dledgerEndOf = cl;
        }
        return dledgerEnd;
    }

    private CommitLog commitLog(boolean refresh) {
        if (commitLog == null || refresh) {
            if (commitLog != null) commitLog.segments.close();
            commitLog = new CommitLog(layout);
        }
        return commitLog;
    }

    void close() {
        if (commitLog != null) commitLog.segments.close();
        commitLog = null;
        tails.clear();
    }

    // ------------------------------------------------------------------ queues

    /** Queue offset after the last unit that is written and verified (forward-only). */
    long maxOffset(QueueKey key) {
        return MappedFaults.guard(() -> tail(key).advance(this));
    }

    @Override
    public boolean verify(QueueTail queue, long offset, long phy, int size) {
        if (size == ConsumeQueue.PRE_BLANK_SIZE) return true;
        for (int pass = 0; pass < 2; pass++) {
            CommitLog cl = commitLog(pass == 1);
            Segment seg = cl.segments.find(phy);
            if (seg == null) continue;
            long pos = phy - seg.startOffset;
            // Mapped files and DLedger data files whole (as the batch read); else one read of the record.
            boolean whole = cl.segments.files.mapped() || seg.dledger;
            Segments.Window w = whole ? cl.segments.whole(seg) : cl.segments.readWindow(seg, pos, size);
            ByteBuffer b = w.buf;
            long at = pos - w.base;
            if (at + size > b.capacity()) continue;           // read before the file grew (or was re-uploaded): again
            if (seg.dledger) {
                if (phy >= dledgerEnd(cl)) continue;           // past the DLedger data's valid end: look again
                if (!DLedgerLog.entryHoldsRecord(b, pos, seg.startOffset, size)) return false;
            }
            if (record.decode(b, (int) at, b.capacity() - at, size) != null) {
                // A whole DLedger entry whose record is damaged stays below DLedger's end: admitted, and reading
                // it fails with the typed error a batch read gives (never skipped in silence).
                int magic = b.getInt((int) at + 4);
                return seg.dledger && b.getInt((int) at) == size && (magic == Record.MAGIC_V1 || magic == Record.MAGIC_V2);
            }
            if (queue.topic.startsWith("%LMQ%")) return true;
            byte[] t = queue.topic.getBytes(StandardCharsets.UTF_8);
            return record.queueId == queue.queueId && record.queueOffset == offset && record.topicLen == t.length
                    && record.topicEquals(b, t);
        }
        return false;
    }

    /** The broker's min offset of a queue (min_offset): the first unit whose record is still on disk. */
    long minOffset(QueueKey key, long maxOffset, long commitLogMin) {
        QueueTail q = tail(key);
        if (!q.hasFiles()) return maxOffset;
        long[] p = new long[1];
        int[] s = new int[1];
        long[] c = new long[1];
        if (commitLogMin == 0 && q.firstFileStartOffset() == 0 && q.unit(0, p, s, c)
                && s[0] != ConsumeQueue.PRE_BLANK_SIZE) {
            return 0;
        }
        return Math.min(maxOffset, q.minOffset(commitLogMin, opts.read.storeConfig.isV5(), maxOffset));
    }

    /**
     * Units from {@code start} (at most {@code cap}) whose record sizes (pre-blank units: 0) add up
     * to at most {@code budget}: read in chunks, so a large budget needs no large buffer.
     */
    long unitsFitting(QueueKey key, long start, long cap, long budget) {
        QueueTail q = tail(key);
        int chunk = (int) Math.min(cap, 8192);
        long[] p = new long[chunk];
        int[] s = new int[chunk];
        long[] c = new long[chunk];
        long sum = 0;
        long fits = 0;
        while (fits < cap) {
            int n = q.read(start + fits, (int) Math.min(chunk, cap - fits), p, s, c);
            if (n == 0) break;
            for (int i = 0; i < n; i++) {
                sum += s[i] == ConsumeQueue.PRE_BLANK_SIZE ? 0 : s[i];
                if (sum > budget) return fits;
                fits++;
            }
        }
        return fits;
    }

    /** First offset in [lo, hi) whose record's storeTimestamp >= ts (hi if none); getOffsetInQueueByTime. */
    long offsetByTime(QueueKey key, long lo, long hi, long ts) {
        QueueTail q = tail(key);
        CommitLog cl = commitLog(true);
        long[] p = new long[1];
        int[] s = new int[1];
        long[] c = new long[1];
        long a = lo;
        long b = hi;
        while (a < b) {
            long mid = (a + b) >>> 1;
            Long t = null;
            if (q.unit(mid, p, s, c) && s[0] != ConsumeQueue.PRE_BLANK_SIZE) t = cl.storeTimestampAt(p[0]);
            if (t != null && t >= ts) b = mid;
            else a = mid + 1;
        }
        return a;
    }
}
