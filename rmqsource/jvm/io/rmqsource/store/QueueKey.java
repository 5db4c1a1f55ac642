package io.rmqsource.store;

import java.io.Serializable;
import java.util.Objects;

/** (topic, queueId), ordered as the Python reader sorts queue keys. */
public final class QueueKey implements Comparable<QueueKey>, Serializable {
    private static final long serialVersionUID = 1L;
    public final String topic;
    public final int queueId;

    public QueueKey(String topic, int queueId) {
        this.topic = topic;
        this.queueId = queueId;
    }

    @Override
    public int compareTo(QueueKey o) {
        int c = topic.compareTo(o.topic);
        return c != 0 ? c : Integer.compare(queueId, o.queueId);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof QueueKey && ((QueueKey) o).topic.equals(topic) && ((QueueKey) o).queueId == queueId;
    }

    @Override
    public int hashCode() {
        return Objects.hash(topic, queueId);
    }

    @Override
    public String toString() {
        return topic + ":" + queueId;
    }
}
