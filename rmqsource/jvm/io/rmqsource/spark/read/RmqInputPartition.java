package io.rmqsource.spark.read;

import java.util.List;
import java.util.Map;
import org.apache.spark.sql.connector.read.InputPartition;

/**
 * The units of work (twin of the partitions in rmqsource/spark/partitions.py): plain values, no
 * open handles.  One of CommitLog range, ConsumeQueue ranges, point lookups, or ConsumeQueue
 * counts (aggregate pushdown).
 */
public abstract class RmqInputPartition implements InputPartition {
    private static final long serialVersionUID = 1L;
    public final StoreRef store;

    protected RmqInputPartition(StoreRef store) {
        this.store = store;
    }

    /** A byte range [start, end) of one CommitLog segment, starting at a record boundary. */
    public static final class CommitLogRange extends RmqInputPartition {
        private static final long serialVersionUID = 1L;
        public final long start;
        public final long end;
        public final long segmentStart;
        /** Hosts holding the range's bytes (HDFS blocks); none elsewhere. */
        private final String[] hosts;

        public CommitLogRange(StoreRef store, long start, long end, long segmentStart) {
            this(store, start, end, segmentStart, new String[0]);
        }

        public CommitLogRange(StoreRef store, long start, long end, long segmentStart, String[] hosts) {
            super(store);
            this.start = start;
            this.end = end;
            this.segmentStart = segmentStart;
            this.hosts = hosts;
        }

        @Override
        public String[] preferredLocations() {
            return hosts.clone();
        }

        @Override
        public String toString() {
            return "CommitLogRange(" + store.broker + ", [" + start + ", " + end + "))";
        }
    }

    /** ConsumeQueue offsets [start, end) of one queue. */
    public static final class QueueRange implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        public final String topic;
        public final int queueId;
        public final long start;
        public final long end;

        public QueueRange(String topic, int queueId, long start, long end) {
            this.topic = topic;
            this.queueId = queueId;
            this.start = start;
            this.end = end;
        }

        public long size() {
            return end - start;
        }

        @Override
        public String toString() {
            return topic + "/" + queueId + " [" + start + ", " + end + ")";
        }
    }

    /** One or several queue ranges read one after the other by one task. */
    public static final class QueueRanges extends RmqInputPartition {
        private static final long serialVersionUID = 1L;
        public final List<QueueRange> ranges;
        /** Hosts holding the CommitLog span whose records the ranges select (HDFS blocks); none elsewhere. */
        private final String[] hosts;

        public QueueRanges(StoreRef store, List<QueueRange> ranges) {
            this(store, ranges, new String[0]);
        }

        public QueueRanges(StoreRef store, List<QueueRange> ranges, String[] hosts) {
            super(store);
            this.ranges = ranges;
            this.hosts = hosts;
        }

        @Override
        public String[] preferredLocations() {
            return hosts.clone();
        }

        @Override
        public String toString() {
            return "QueueRanges(" + store.broker + ", " + ranges + ")";
        }
    }

    /** Point reads at CommitLog offsets; {@code queues} restricts rows to planned queue ranges (topic reads). */
    public static final class Lookup extends RmqInputPartition {
        private static final long serialVersionUID = 1L;
        public final long[] offsets;
        public final Map<String, long[]> queues;      // "topic\0queueId" -> [start, end), or null

        public Lookup(StoreRef store, long[] offsets, Map<String, long[]> queues) {
            super(store);
            this.offsets = offsets;
            this.queues = queues;
        }

        @Override
        public String toString() {
            return "Lookup(" + store.broker + ", " + offsets.length + " offsets)";
        }
    }

    /** Messages per queue range counted from ConsumeQueue units (count(*) pushdown). */
    public static final class QueueCounts extends RmqInputPartition {
        private static final long serialVersionUID = 1L;
        public final List<QueueRange> ranges;

        public QueueCounts(StoreRef store, List<QueueRange> ranges) {
            super(store);
            this.ranges = ranges;
        }
    }
}
