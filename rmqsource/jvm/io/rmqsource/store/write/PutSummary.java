package io.rmqsource.store.write;

/**
 * What {@link MessageStoreWriter#putStaged} acknowledged: how many messages, the CommitLog range they
 * took; after a failure, the topic and queue of the first message it could not acknowledge.
 */
public final class PutSummary {
    public long count;
    public long firstOffset = -1;
    public long endOffset = -1;
    /** Set when the put stopped on a failure (null otherwise). */
    public String stoppedTopic;
    public int stoppedQueueId = -1;

    void acknowledged(long phyOffset, int size) {
        if (firstOffset < 0) firstOffset = phyOffset;
        endOffset = phyOffset + size;
        count++;
    }

    void stoppedAt(Prepared p) {
        if (stoppedTopic == null && p != null) {
            stoppedTopic = p.topic;
            stoppedQueueId = p.queueId;
        }
    }
}
