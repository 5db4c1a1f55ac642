package io.rmqsource.store.write;

/**
 * One {@code topic-queueId}: the next queue offset the writer assigns (the topicQueueTable entry),
 * the offsets handed out in the chunk being encoded, and the queue's ConsumeQueue writer.
 */
final class QueueState {
    final String topic;
    final int queueId;
    /** Next queue offset of acknowledged puts. */
    long nextOffset;
    /** Next queue offset including the chunk being encoded (valid while inChunk). */
    long pendingOffset;
    boolean inChunk;
    ConsumeQueueWriter cq;

    QueueState(String topic, int queueId) {
        this.topic = topic;
        this.queueId = queueId;
    }
}
