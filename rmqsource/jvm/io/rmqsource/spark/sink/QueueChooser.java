package io.rmqsource.spark.sink;

import io.rmqsource.errors.OptionError;
import java.util.HashMap;

/**
 * queue_select.py QueueChooser: the queueId column, else RocketMQ's SelectMessageQueueByHash on the
 * KEYS string ({@code abs(keys.hashCode() % queueNums)}), else round-robin per topic from {@code seed}.
 */
final class QueueChooser {
    private final SinkOptions opts;
    private final int seed;
    private final HashMap<String, long[]> turns = new HashMap<>();

    QueueChooser(SinkOptions opts, int seed) {
        this.opts = opts;
        this.seed = seed;
    }

    /** {@code queueId} < 0 when the row has none. */
    int choose(String topic, long queueId, boolean hasQueueId, String keys) {
        if (hasQueueId) {
            if (queueId < 0) throw new OptionError("queueId " + queueId + " is negative (topic " + topic + ")");
            return (int) queueId;
        }
        int n = opts.queuesOf(topic);
        if (keys != null) return Math.abs(keys.hashCode() % n);
        long[] next = turns.computeIfAbsent(topic, t -> new long[] {seed});
        return (int) (next[0]++ % n);
    }
}
