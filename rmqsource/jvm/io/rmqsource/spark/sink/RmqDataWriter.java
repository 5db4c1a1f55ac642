package io.rmqsource.spark.sink;

import io.rmqsource.store.write.MessageStoreWriter;
import io.rmqsource.store.write.PutSummary;
import java.io.IOException;
import java.util.BitSet;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.WriterCommitMessage;

/**
 * One batch task: takes in all its rows (an upstream error appends nothing), then, under the store
 * lock, appends those no earlier attempt of this write appended (sink/batch.py RmqBatchWriter.write/_append).
 */
final class RmqDataWriter implements DataWriter<InternalRow> {
    private final SinkOptions opts;
    private final SinkSchema schema;
    private final String writeKey;
    private final int partition;
    private final TaskRows rows;

    RmqDataWriter(SinkOptions opts, SinkSchema schema, String writeKey, int partition) {
        this.opts = opts;
        this.schema = schema;
        this.writeKey = writeKey;
        this.partition = partition;
        this.rows = new TaskRows(opts, schema, converter());
    }

    private RowsToMessages converter() {
        return new RowsToMessages(schema, new QueueChooser(opts, partition), opts.preserveStoreFields ? null : writeKey,
                partition);
    }

    @Override
    public void write(InternalRow row) throws IOException {
        rows.add(row);
    }

    @Override
    public WriterCommitMessage commit() throws IOException {
        SinkCommitMessage msg = new SinkCommitMessage(partition);
        msg.rows = rows.count();
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
        Map<String, Object> writes = SinkLog.map(doc, "writes");
        long now = System.currentTimeMillis();
        writes.entrySet().removeIf(e -> e.getKey().startsWith("job:") && e.getValue() instanceof Map
                && now - SinkLog.longOf((Map<String, Object>) e.getValue(), "startedMs", now) > RmqBatchWrite.ANONYMOUS_ENTRY_MS);
        if (!writes.containsKey(writeKey)) {
            Map<String, Object> w = new LinkedHashMap<>();
            w.put("tasks", new LinkedHashMap<String, Object>());
            w.put("startedMs", now);
            writes.put(writeKey, w);
        }
        Map<String, Object> tasks = SinkLog.map((Map<String, Object>) writes.get(writeKey), "tasks");
        Map<String, Object> entry = (Map<String, Object>) tasks.get(Integer.toString(partition));
        long n = rows.count();
        BitSet present = new BitSet();
        long end = writer.maxPhyOffset();
        if (entry == null) {
            entry = newEntry(end, 0, n);
        } else if (Boolean.TRUE.equals(entry.get("done"))) {
            if (n <= SinkLog.longOf(entry, "rows", 0)) {
                msg.skipped = n;
                return;
            }
            entry = newEntry(end, SinkLog.longOf(entry, "rows", 0), n);       // a re-run with more rows
        } else {
            // An earlier attempt died while appending: keep what it wrote.
            long start = SinkLog.longOf(entry, "start", end);
            present = opts.preserveStoreFields ? matching(start, end, (int) Math.min(n, SinkLog.longOf(entry, "below", 0)))
                    : AppendedRows.stamped(opts, start, end, writeKey, partition);
            if (present.length() > n) present.clear((int) n, present.length());
        }
        present.set(0, (int) Math.min(SinkLog.longOf(entry, "below", 0), n));
        tasks.put(Integer.toString(partition), entry);
        log.save(doc);
        msg.skipped = present.cardinality();
        long killAt = SinkFaults.take(opts.root, "kill:" + partition) ? n / 2
                : SinkFaults.take(opts.root, "disk-full:" + partition) ? n / 2 : -1;
        PutSummary a = rows.put(writer, present, true, killAt,
                "rmq sink: injected fault: the task died half-way through its append (test hook " + SinkFaults.ENV + ")",
                this::converter);
        entry.put("done", true);
        entry.put("rows", Math.max(n, SinkLog.longOf(entry, "rows", 0)));
        log.save(doc);
        msg.appended = a.count;
        msg.firstOffset = a.firstOffset;
        msg.endOffset = a.endOffset;
    }

    private static Map<String, Object> newEntry(long start, long below, long rows) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("start", start);
        e.put("below", below);
        e.put("done", false);
        e.put("rows", rows);
        return e;
    }

    /** preserveStoreFields: the rows (from {@code below} on) an earlier attempt put from {@code start}, in order. */
    private BitSet matching(long start, long end, int below) throws IOException {
        java.util.List<AppendedRows.Written> written = AppendedRows.records(opts, start, end);
        BitSet out = new BitSet();
        RowsToMessages conv = converter();
        io.rmqsource.store.write.Message m = new io.rmqsource.store.write.Message();
        int[] next = {0};
        rows.rows().forEach((row, seq) -> {
            int queue = conv.queueOf(row);
            if (seq < below || next[0] < 0 || next[0] >= written.size()) return;
            if (written.get(next[0]).matches(conv.fill(m, row, seq, queue))) {
                out.set((int) seq);
                next[0]++;
            } else {
                next[0] = -1;       // the attempt's records end here (later ones are other tasks')
            }
        });
        return out;
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
