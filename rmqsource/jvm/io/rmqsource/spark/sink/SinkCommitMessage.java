package io.rmqsource.spark.sink;

import org.apache.spark.sql.connector.write.WriterCommitMessage;

/** What one task reports to the driver (sink/batch.py SinkCommitMessage). */
public final class SinkCommitMessage implements WriterCommitMessage {
    private static final long serialVersionUID = 1L;
    public int partitionId = -1;
    public long rows;
    public long appended;
    public long skipped;
    public long firstOffset = -1;
    public long endOffset = -1;
    public long batchId = -1;
    public String queryId;
    public long lockWaitMs;
    public long appendMs;

    SinkCommitMessage(int partitionId) {
        this.partitionId = partitionId;
    }

    @Override
    public String toString() {
        return "SinkCommitMessage(partition=" + partitionId + ", rows=" + rows + ", appended=" + appended
                + ", skipped=" + skipped + ", offsets=[" + firstOffset + ", " + endOffset + "))";
    }
}
