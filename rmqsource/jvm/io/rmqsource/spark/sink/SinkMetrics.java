package io.rmqsource.spark.sink;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.sql.connector.write.WriterCommitMessage;

/**
 * The streaming sink's figures for its last micro-batch, shown by Spark as {@code sink.metrics} in the
 * query's progress (the table reports them): messages appended, and skipped because an earlier attempt
 * appended them; each task's time holding the store lock to append, and waiting for it; the driver's
 * commit. Values are strings, as Spark's progress keeps them.
 */
public final class SinkMetrics {
    private volatile Map<String, String> last = Map.of();

    void batch(long batchId, WriterCommitMessage[] messages, long commitMs) {
        long rows = 0, appended = 0, skipped = 0, appendMax = 0, appendSum = 0, waitMax = 0, waitSum = 0;
        int tasks = 0;
        for (WriterCommitMessage m : messages) {
            if (!(m instanceof SinkCommitMessage c)) continue;
            tasks++;
            rows += c.rows;
            appended += c.appended;
            skipped += c.skipped;
            appendMax = Math.max(appendMax, c.appendMs);
            appendSum += c.appendMs;
            waitMax = Math.max(waitMax, c.lockWaitMs);
            waitSum += c.lockWaitMs;
        }
        Map<String, String> out = new LinkedHashMap<>();
        out.put("batchId", Long.toString(batchId));
        out.put("tasks", Integer.toString(tasks));
        out.put("rows", Long.toString(rows));
        out.put("appendedMessages", Long.toString(appended));
        out.put("skippedMessages", Long.toString(skipped));
        out.put("appendMsMax", Long.toString(appendMax));
        out.put("appendMsTotal", Long.toString(appendSum));
        out.put("lockWaitMsMax", Long.toString(waitMax));
        out.put("lockWaitMsTotal", Long.toString(waitSum));
        out.put("commitMs", Long.toString(commitMs));
        last = Collections.unmodifiableMap(out);
    }

    /** The last batch's figures (empty before the first). */
    public Map<String, String> asMap() {
        return last;
    }
}
