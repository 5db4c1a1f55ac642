package io.rmqsource.spark.sink;

import io.rmqsource.store.write.MessageStoreWriter;
import io.rmqsource.store.write.PutSummary;
import java.io.IOException;
import java.util.BitSet;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.WriterCommitMessage;

/**
 * One task of a micro-batch: its rows are stamped {@code queryId:batchId} / {@code partition:index};
 * a batch already committed, or whose task finished, is skipped; a task that died half-way resumes
 * after its rows found in the CommitLog (sink/stream.py RmqStreamWriter.write).
 */
final class RmqStreamDataWriter implements DataWriter<InternalRow> {
    private static final String QUERY_ID_PROPERTY = "sql.streaming.queryId";
    private final SinkOptions opts;
    private final SinkSchema schema;
    private final String queryId;
    private final int partition;
    private final long batchId;
    private final TaskRows rows;

    RmqStreamDataWriter(SinkOptions opts, SinkSchema schema, String plannedQueryId, int partition, long batchId) {
        this.opts = opts;
        this.schema = schema;
        TaskContext tc = TaskContext.get();
        String local = tc == null ? null : tc.getLocalProperty(QUERY_ID_PROPERTY);
        this.queryId = local != null && !local.isEmpty() ? local : plannedQueryId;      // the query's id across restarts
        this.partition = partition;
        this.batchId = batchId;
        this.rows = new TaskRows(opts, schema, converter());
    }

    private RowsToMessages converter() {
        return new RowsToMessages(schema, new QueueChooser(opts, partition),
                opts.preserveStoreFields ? null : queryId + ":" + batchId, partition);
    }

    static Map<String, Object> query(Map<String, Object> queries, String id) {
        @SuppressWarnings("unchecked")
        Map<String, Object> q = (Map<String, Object>) queries.get(id);
        if (q == null) {
            q = new LinkedHashMap<>();
            q.put("committedBatch", -1L);
            q.put("tasks", new LinkedHashMap<String, Object>());
            queries.put(id, q);
        }
        return q;
    }

    @Override
    public void write(InternalRow row) throws IOException {
        rows.add(row);
    }

    @Override
    public WriterCommitMessage commit() throws IOException {
        SinkCommitMessage msg = new SinkCommitMessage(partition);
        msg.rows = rows.count();
        msg.batchId = batchId;
        msg.queryId = queryId;
        if (rows.count() == 0) return msg;
        StoreAppend.timedAppend(opts, msg, writer -> {
            append(writer, msg);
            return null;
        });
        return msg;
    }

    @SuppressWarnings("unchecked")
    private void append(MessageStoreWriter writer, SinkCommitMessage msg) throws IOException {
        SinkLog log = new SinkLog(opts.root);
        Map<String, Object> doc = log.load();
        Map<String, Object> q = query(SinkLog.map(doc, "queries"), queryId);
        long n = rows.count();
        if (batchId <= SinkLog.longOf(q, "committedBatch", -1)) {
            msg.skipped = n;
            return;
        }
        Map<String, Object> tasks = SinkLog.map(q, "tasks");
        String key = batchId + ":" + partition;
        Map<String, Object> entry = (Map<String, Object>) tasks.get(key);
        if (entry != null && Boolean.TRUE.equals(entry.get("done"))) {
            msg.skipped = n;
            return;
        }
        BitSet skip = new BitSet();
        if (entry != null) {
            // An earlier attempt died while appending: keep what it wrote.
            long start = SinkLog.longOf(entry, "start", writer.maxPhyOffset());
            skip = opts.preserveStoreFields ? new BitSet() : AppendedRows.stamped(opts, start, writer.maxPhyOffset(),
                    queryId + ":" + batchId, partition);
        } else {
            entry = new LinkedHashMap<>();
            entry.put("start", writer.maxPhyOffset());
            entry.put("done", false);
            entry.put("rows", n);
            tasks.put(key, entry);
            log.save(doc);
        }
        long toAppend = n - skip.cardinality();
        long failAfter = toAppend > 1 && SinkFaults.take(opts.root, "mid-append:" + batchId) ? toAppend / 2 : -1;
        PutSummary a = rows.put(writer, skip, false, failAfter,
                "rmq sink: injected fault: the task died half-way through its append (test hook " + SinkFaults.ENV + ")",
                this::converter);
        entry.put("done", true);
        entry.put("appended", a.count + skip.cardinality());
        log.save(doc);
        msg.appended = a.count;
        msg.skipped = skip.cardinality();
        msg.firstOffset = a.firstOffset;
        msg.endOffset = a.endOffset;
    }

    @Override
    public void abort() {
        rows.close();
    }

    @Override
    public void close() {
        rows.close();
    }
}
