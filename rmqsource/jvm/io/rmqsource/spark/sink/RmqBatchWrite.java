package io.rmqsource.spark.sink;

import io.rmqsource.errors.RmqError;
import io.rmqsource.store.write.StoreLock;
import java.io.File;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.Map;
import java.util.UUID;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.WriterCommitMessage;

/**
 * {@code df.write.format("rmq").mode("append")}: each task appends its rows under the store lock, once.
 * {@link #writeKey} names this write in every task attempt ({@code write:<writeId>} across jobs).
 */
final class RmqBatchWrite implements BatchWrite {
    static final long ANONYMOUS_ENTRY_MS = 7L * 86_400_000;
    private final SinkOptions opts;
    private final SinkSchema schema;
    private final String writeKey;

    RmqBatchWrite(SinkOptions opts, SinkSchema schema) {
        this.opts = opts;
        this.schema = schema;
        this.writeKey = opts.writeId != null ? "write:" + opts.writeId
                : "job:" + UUID.randomUUID().toString().replace("-", "");
    }

    @Override
    public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
        return new RmqDataWriterFactory(opts, schema, writeKey);
    }

    @Override
    public void commit(WriterCommitMessage[] messages) {
        // Every task appended and dispatched its rows before reporting success. A write without a
        // writeId forgets its task entries (nothing can run it again); a named write keeps them.
        forgetAnonymous();
    }

    @Override
    public void abort(WriterCommitMessage[] messages) {
        // A message store is append-only: rows of tasks that succeeded stay (running the write again
        // with the same writeId appends only what is missing).
        forgetAnonymous();
    }

    /** Best effort: an entry left behind is dropped by a later write after ANONYMOUS_ENTRY_MS. */
    private void forgetAnonymous() {
        SinkLog log = new SinkLog(opts.root);
        if (opts.writeId != null || !new File(log.path.toString()).isFile()) return;
        try (StoreLock lock = StoreLock.acquire(Path.of(opts.root), opts.lockTimeoutMs)) {
            Map<String, Object> doc = log.load();
            Object writes = doc.get("writes");
            if (writes instanceof Map && ((Map<?, ?>) writes).remove(writeKey) != null) log.save(doc);
        } catch (RmqError | UncheckedIOException e) {
            // must not fail the job or hide its error
        }
    }
}
