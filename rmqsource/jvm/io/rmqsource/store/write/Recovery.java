package io.rmqsource.store.write;

import io.rmqsource.format.Checkpoint;
import io.rmqsource.format.Properties;
import io.rmqsource.format.Record;
import io.rmqsource.format.TagsCode;
import io.rmqsource.store.CommitLog;
import io.rmqsource.store.Segment;
import io.rmqsource.store.StoreConfig;
import io.rmqsource.store.StoreLayout;
import io.rmqsource.store.StoreReader;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

/**
 * Recovery at open (twin of rmqsource/store/recovery.py, spec 7.3), run once under the writer lock
 * before anything is appended:
 * <ol>
 * <li>after an abnormal shutdown ({@code abort} present) IndexFiles newer than the checkpoint's index
 * timestamp are deleted (rebuilt below);</li>
 * <li>the CommitLog's valid end is found: normal recovery trusts the ConsumeQueues, abnormal recovery
 * scans (with CRC) from the last segment older than the checkpoint and re-dispatches what it passes;</li>
 * <li>segments after the end are deleted and the torn or garbage tail of the last one zero-filled;</li>
 * <li>ConsumeQueue units past the end are trimmed;</li>
 * <li>dispatch catches up from where the ConsumeQueues (and the IndexFiles) end.</li>
 * </ol>
 */
final class Recovery {
    private static final int ZERO_CHUNK_BYTES = 1 << 20;

    private Recovery() {
    }

    /** Recovers the store; returns the CommitLog's valid end. */
    static long recover(StoreLayout layout, StoreConfig config, Dispatcher dispatcher, Checkpoint checkpoint,
                        boolean abort) throws IOException {
        if (abort && dispatcher.index != null) dispatcher.index.deleteFilesAfter(checkpoint.indexMsgTimestampMs);
        long end;
        CommitLog commitLog = new CommitLog(layout);
        try {
            if (commitLog.list().isEmpty()) {
                dispatcher.deleteAll();
                end = 0;
            } else {
                if (abort) {
                    long minTs = config.messageIndexEnable() && config.messageIndexSafe()
                            ? checkpoint.minTimestampIndexMs() : checkpoint.minTimestampMs();
                    int startIndex = commitLog.abnormalRecoveryStartIndex(minTs);
                    end = walkAndDispatch(commitLog, dispatcher, commitLog.list().get(startIndex).startOffset, config);
                } else {
                    // Normal recovery trusts the ConsumeQueues: validate from their last record on.
                    try (StoreReader reader = new StoreReader(layout.root, config, null)) {
                        end = reader.commitLogMaxOffset();
                    }
                }
                truncateCommitLog(commitLog, end, abort);
            }
        } finally {
            commitLog.segments.close();
        }
        dispatcher.truncateDirty(end);
        // Catch-up dispatch (reput): from where the ConsumeQueues end to the CommitLog end.
        commitLog = new CommitLog(layout);
        try {
            long resume = dispatcher.maxPhysicOffset();
            if (dispatcher.index != null && abort) {
                // IndexFiles may lag the ConsumeQueues (deleted after a crash): catch them up too;
                // units and entries already present are skipped by dispatch's duplicate rules. After a
                // clean shutdown they do not lag, and a store whose messages carry no keys has no
                // IndexFile at all: no walk of its whole CommitLog at every open.
                IndexWriter.Idx last = dispatcher.index.last();
                resume = Math.min(resume, last != null ? last.endPhyOffset : 0);
            }
            resume = Math.max(resume, commitLog.minOffset());
            if (!commitLog.list().isEmpty() && resume < end) dispatchFrom(commitLog, dispatcher, resume, end, config);
            dispatcher.sync();
        } finally {
            commitLog.segments.close();
        }
        return end;
    }

    /** Abnormal recovery scan: re-dispatch every valid record (CRC checked when configured); the valid end. */
    private static long walkAndDispatch(CommitLog commitLog, Dispatcher dispatcher, long start, StoreConfig config)
            throws IOException {
        long[] end = {start};
        Segment last = commitLog.list().get(commitLog.list().size() - 1);
        Record r = new Record();
        Properties props = new Properties();
        long at;
        try {
            at = commitLog.walk(start, config.checkCrcOnRecover(), (kind, seg, b, pos, offset, size) -> {
            if (kind == Record.MESSAGE) {
                dispatchRecord(dispatcher, r, props, b, pos, size, config.messageDelayLevelsMs());
                end[0] = offset + size;
            } else {
                end[0] = seg == last ? offset : seg.startOffset + commitLog.segments.lengthOf(seg);
            }
            return true;
        }, null);
        } catch (java.io.UncheckedIOException e) {
            throw e.getCause();
        }
        if (at >= 0) end[0] = at;
        dispatcher.writePending();
        return end[0];
    }

    /** dispatch_from_commitlog: every record from {@code from} up to {@code stop}, without CRC checks. */
    private static void dispatchFrom(CommitLog commitLog, Dispatcher dispatcher, long from, long stop, StoreConfig config)
            throws IOException {
        Record r = new Record();
        Properties props = new Properties();
        try {
            commitLog.walk(from, false, (kind, seg, b, pos, offset, size) -> {
                if (offset >= stop) return false;
                if (kind == Record.MESSAGE) dispatchRecord(dispatcher, r, props, b, pos, size, config.messageDelayLevelsMs());
                return true;
            }, null);
        } catch (java.io.UncheckedIOException e) {
            throw e.getCause();
        }
        dispatcher.writePending();
    }

    /** request_from_record, dispatched. */
    private static void dispatchRecord(Dispatcher dispatcher, Record r, Properties props, ByteBuffer b, int pos, long size,
                                       long[] delayLevels) {
        if (++dispatcher.sinceWrite >= 4096) {
            dispatcher.sinceWrite = 0;
            try {
                dispatcher.writePending();       // bounded memory: units go out in batches
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
        r.decode(b, pos, size, -1);
        byte[] tb = new byte[r.topicLen];
        b.get(r.topicPos, tb, 0, tb.length);
        String topic = new String(tb, StandardCharsets.UTF_8);
        props.parse(b, r.propsPos, r.propsLen);
        String tags = value(props, Properties.TAGS);
        String delay = value(props, Properties.DELAY);
        long code = TagsCode.consumeQueueTagsCode(topic, tags, delay, r.storeTimestamp, delayLevels);
        dispatcher.dispatch(null, topic, r.queueId, r.phyOffset, r.totalSize, code, r.storeTimestamp, r.queueOffset,
                r.sysFlag, value(props, Properties.KEYS), value(props, Properties.UNIQ_KEY));
    }

    private static String value(Properties props, byte[] name) {
        int e = props.find(name);
        return e < 0 ? null : props.valueString(e);
    }

    /** Deletes segments after {@code end} and zeroes the invalid tail of the segment holding it. */
    private static void truncateCommitLog(CommitLog commitLog, long end, boolean fullCheck) throws IOException {
        List<Path> deleted = new ArrayList<>();
        for (Segment seg : commitLog.list()) if (seg.startOffset > end) deleted.add(Path.of(seg.path));
        for (Path p : deleted) Files.delete(p);
        if (!deleted.isEmpty()) WriteFiles.fsyncDir(deleted.get(0).getParent());
        Segment seg = commitLog.segments.find(end);
        if (seg == null) return;
        long pos = end - seg.startOffset;
        long size = commitLog.segments.lengthOf(seg);
        Path path = Path.of(seg.path);
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            if (tailIsZero(ch, pos, size, fullCheck)) return;
            ByteBuffer zeros = ByteBuffer.allocate((int) Math.min(ZERO_CHUNK_BYTES, size - pos));
            for (long at = pos; at < size; ) {
                zeros.clear().limit((int) Math.min(zeros.capacity(), size - at));
                at += WriteFiles.writeFully(ch, path, zeros, at);
            }
            ch.force(true);
        }
    }

    private static boolean tailIsZero(FileChannel ch, long pos, long size, boolean fullCheck) throws IOException {
        ByteBuffer b = ByteBuffer.allocate((int) Math.min(fullCheck ? ZERO_CHUNK_BYTES : 8, Math.max(0, size - pos)));
        for (long at = pos; at < size; ) {
            b.clear();
            int n = ch.read(b, at);
            if (n <= 0) return true;
            for (int i = 0; i < n; i++) if (b.get(i) != 0) return false;
            if (!fullCheck) return true;
            at += n;
        }
        return true;
    }
}
