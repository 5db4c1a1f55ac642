package io.rmqsource.spark.sink;

import io.rmqsource.errors.StoreError;
import io.rmqsource.errors.StoreLockedError;
import io.rmqsource.store.write.StoreLock;
import java.io.File;
import java.nio.file.Path;
import java.util.Map;
import java.util.TreeSet;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;

/**
 * {@code writeStream.format("rmq")}: exactly-once appends per micro-batch (sink/stream.py RmqStreamWriter). A
 * batch's commit records it in the sink log, so a replayed batch appends nothing.
 */
final class RmqStreamingWrite implements StreamingWrite {
    private final SinkOptions opts;
    private final SinkSchema schema;
    private final String queryId;
    private final SinkMetrics metrics;

    RmqStreamingWrite(SinkOptions opts, SinkSchema schema, String queryId, SinkMetrics metrics) {
        this.opts = opts;
        this.schema = schema;
        this.queryId = queryId;
        this.metrics = metrics;
    }

    @Override
    public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
        return new RmqStreamingWriterFactory(opts, schema, queryId);
    }

    /** Record the batch as committed and forget its task entries (under the store lock). */
    @Override
    @SuppressWarnings("unchecked")
    public void commit(long batchId, WriterCommitMessage[] messages) {
        long t0 = System.nanoTime();
        recordInSinkLog(batchId, messages);
        metrics.batch(batchId, messages, (System.nanoTime() - t0) / 1_000_000);
    }

    private void recordInSinkLog(long batchId, WriterCommitMessage[] messages) {
        TreeSet<String> queryIds = new TreeSet<>();
        for (WriterCommitMessage m : messages) {
            if (m instanceof SinkCommitMessage && ((SinkCommitMessage) m).queryId != null) {
                queryIds.add(((SinkCommitMessage) m).queryId);
            }
        }
        if (queryIds.isEmpty() || !new File(opts.root).isDirectory()) return;
        if (SinkFaults.take(opts.root, "commit:" + batchId)) {
            throw new StoreError("injected fault before committing batch " + batchId + " (test hook " + SinkFaults.ENV + ")");
        }
        StoreLock lock;
        try {
            lock = StoreLock.acquire(Path.of(opts.root), opts.lockTimeoutMs);
        } catch (StoreLockedError e) {
            throw new StoreLockedError("rmq sink: could not lock the store " + opts.root + " to commit batch " + batchId
                    + " within " + opts.lockTimeoutText() + " s: " + e.getMessage());
        }
        try (lock) {
            SinkLog log = new SinkLog(opts.root);
            Map<String, Object> doc = log.load();
            Map<String, Object> queries = SinkLog.map(doc, "queries");
            for (String id : queryIds) {
                Map<String, Object> q = RmqStreamDataWriter.query(queries, id);
                q.put("committedBatch", Math.max(SinkLog.longOf(q, "committedBatch", -1), batchId));
                Map<String, Object> tasks = SinkLog.map(q, "tasks");
                tasks.keySet().removeIf(k -> Long.parseLong(k.substring(0, k.indexOf(':'))) <= batchId);
            }
            log.save(doc);
        }
    }

    @Override
    public void abort(long batchId, WriterCommitMessage[] messages) {
        // Nothing to undo: finished tasks are recorded as done and are skipped when the batch is retried.
    }
}
