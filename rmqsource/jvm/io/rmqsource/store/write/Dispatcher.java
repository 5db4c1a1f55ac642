package io.rmqsource.store.write;

import io.rmqsource.format.Record;
import io.rmqsource.store.StoreLayout;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * Dispatch ("reput", spec 7.5), twin of rmqsource/store/dispatch.py: CommitLog records to
 * ConsumeQueue units and IndexFile keys, in CommitLog order.  The writer dispatches the records it
 * has just appended (no re-read); recovery dispatches records it walks.  Queues are kept by
 * (topic, queueId) with a reusable probe key, so a put looks its queue up without allocating.
 */
final class Dispatcher {
    final Path root;
    final Path cqDir;
    private final long cqFileSize;
    final IndexWriter index;
    private final Map<QueueKey, QueueState> queues = new HashMap<>();
    private final QueueKey probe = new QueueKey("", 0);
    private final List<ConsumeQueueWriter> touched = new ArrayList<>();
    long logicsMsgTimestampMs;
    /** Records dispatched by recovery since its last writePending. */
    int sinceWrite;

    Dispatcher(Path root, long cqFileSize, IndexWriter index) {
        this.root = root;
        this.cqDir = root.resolve("consumequeue");
        this.cqFileSize = cqFileSize;
        this.index = index;
    }

    /** The state of (topic, queueId), made (and its ConsumeQueue loaded) on first use. */
    QueueState queue(String topic, int queueId) {
        probe.topic = topic;
        probe.queueId = queueId;
        QueueState q = queues.get(probe);
        if (q == null) {
            if (!StoreLayout.isSafeDirName(topic)) {
                throw new io.rmqsource.errors.OptionError("unsafe path component "
                        + io.rmqsource.errors.Repr.of(topic));
            }
            q = new QueueState(topic, queueId);
            q.cq = new ConsumeQueueWriter(cqDir.resolve(topic).resolve(Integer.toString(queueId)), topic, queueId,
                    cqFileSize);
            q.nextOffset = q.cq.maxOffset();
            queues.put(new QueueKey(topic, queueId), q);
        }
        return q;
    }

    /** (topic, queueId) of every queue directory on disk, sorted. */
    List<Object[]> existingQueues() {
        List<Object[]> out = new ArrayList<>();
        if (!Files.isDirectory(cqDir)) return out;
        try (Stream<Path> topics = Files.list(cqDir)) {
            for (Path t : (Iterable<Path>) topics.sorted()::iterator) {
                if (!Files.isDirectory(t)) continue;
                try (Stream<Path> qs = Files.list(t)) {
                    for (Path q : (Iterable<Path>) qs.sorted()::iterator) {
                        String n = q.getFileName().toString();
                        if (!n.isEmpty() && n.length() < 10 && n.chars().allMatch(Character::isDigit) && Files.isDirectory(q)) {
                            out.add(new Object[] {t.getFileName().toString(), Integer.parseInt(n)});
                        }
                    }
                }
            }
        } catch (IOException e) {
            throw new io.rmqsource.errors.StoreError("cannot list " + cqDir + ": " + e);
        }
        return out;
    }

    void loadExisting() {
        for (Object[] k : existingQueues()) queue((String) k[0], (Integer) k[1]);
    }

    Iterable<QueueState> states() {
        return queues.values();
    }

    /** How many queues there are (only ever more: a routing of topics.json counts them). */
    int queueCount() {
        return queues.size();
    }

    /** Largest record end any ConsumeQueue points at (reput resumes there). */
    long maxPhysicOffset() {
        loadExisting();
        long m = 0;
        for (QueueState q : queues.values()) m = Math.max(m, q.cq.maxPhysicOffset);
        return m;
    }

    /** CommitLogDispatcherBuildConsumeQueue then ...BuildIndex for one record. */
    void dispatch(QueueState q, String topic, int queueId, long phy, int size, long tagsCode, long storeTs,
                  long queueOffset, int sysFlag, String keys, String uniqKey) {
        int tran = sysFlag & Record.TRANSACTION_MASK;
        if (tran == PutChecks.TRANSACTION_NOT_TYPE || tran == PutChecks.TRANSACTION_COMMIT_TYPE) {
            if (q == null) q = queue(topic, queueId);
            if (q.cq.put(phy, size, tagsCode, queueOffset)) {
                if (!q.cq.touched) {
                    q.cq.touched = true;
                    touched.add(q.cq);
                }
                logicsMsgTimestampMs = storeTs;
            }
        }
        if (index != null) index.putKeys(topic, phy, storeTs, sysFlag, uniqKey, keys);
    }

    void writePending() throws IOException {
        try {
            for (ConsumeQueueWriter c : touched) c.writePending();
        } finally {
            for (ConsumeQueueWriter c : touched) c.touched = false;
            touched.clear();
        }
    }

    /** truncateDirtyLogicFiles: every queue forgets units past the CommitLog end. */
    void truncateDirty(long commitLogEnd) throws IOException {
        loadExisting();
        for (QueueState q : queues.values()) {
            if (q.cq.maxPhysicOffset > commitLogEnd) q.cq.truncateFromPhy(commitLogEnd);
            q.nextOffset = q.cq.maxOffset();
        }
    }

    /** Removes every ConsumeQueue and IndexFile (a store without CommitLog). */
    void deleteAll() throws IOException {
        for (QueueState q : queues.values()) q.cq.close();
        queues.clear();
        touched.clear();
        if (Files.isDirectory(cqDir)) {
            try (Stream<Path> s = Files.walk(cqDir)) {
                for (Path p : (Iterable<Path>) s.sorted(Comparator.reverseOrder())::iterator) Files.delete(p);
            }
        }
        if (index != null) index.deleteAll();
    }

    void sync() throws IOException {
        for (QueueState q : queues.values()) q.cq.sync();
        if (index != null) index.sync();
    }

    void release() {
        for (QueueState q : queues.values()) q.cq.release();
        queues.clear();
        touched.clear();
        if (index != null) index.release();
    }

    void close() throws IOException {
        IOException first = null;
        for (QueueState q : queues.values()) {
            try {
                q.cq.close();
            } catch (IOException e) {
                if (first == null) first = e;
            }
        }
        queues.clear();
        if (index != null) index.close();
        if (first != null) throw first;
    }
}
