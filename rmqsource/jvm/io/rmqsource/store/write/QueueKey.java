package io.rmqsource.store.write;

/** A (topic, queueId) map key; a mutable probe instance looks a queue up without allocating. */
final class QueueKey {
    String topic;
    int queueId;

    QueueKey(String topic, int queueId) {
        this.topic = topic;
        this.queueId = queueId;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof QueueKey && ((QueueKey) o).queueId == queueId && ((QueueKey) o).topic.equals(topic);
    }

    @Override
    public int hashCode() {
        return topic.hashCode() * 31 + queueId;
    }
}
