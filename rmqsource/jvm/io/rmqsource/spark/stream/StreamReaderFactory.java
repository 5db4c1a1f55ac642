package io.rmqsource.spark.stream;

import io.rmqsource.errors.DataLossError;
import io.rmqsource.io.StoreFiles;
import io.rmqsource.spark.RmqOptions;
import io.rmqsource.spark.read.ConsumeQueueRangeReader;
import io.rmqsource.spark.read.StoreRef;
import io.rmqsource.spark.bodies.BodyDecodingReader;
import io.rmqsource.spark.bodies.BodySpec;
import io.rmqsource.store.CommitLog;
import io.rmqsource.store.Segment;
import io.rmqsource.store.Segments;
import io.rmqsource.store.StoreLayout;
import java.io.IOException;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Task side of a micro-batch (read_stream_range in rmqsource/spark/stream.py): one queue range,
 * read by the batch scan's {@link ConsumeQueueRangeReader}, so rows and columns are exactly those
 * of {@code spark.read.format("rmq")}.  What differs from a batch read is decided here, in the
 * task, against the files as they are now: ConsumeQueue files removed by retention since
 * planning (a data loss, or skipped), and the CommitLog bounds (its whole segments: the driver
 * admitted only units it had checked against their records).
 */
public final class StreamReaderFactory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;

    /** ConsumeQueue offsets [start, end) of one queue in one micro-batch. */
    public static final class StreamRange implements InputPartition {
        private static final long serialVersionUID = 1L;
        public final String topic;
        public final int queueId;
        public final long start;
        public final long end;
        /** The queue appeared after the previous batch: read from its first retained unit, no data loss. */
        public final boolean newQueue;

        StreamRange(String topic, int queueId, long start, long end, boolean newQueue) {
            this.topic = topic;
            this.queueId = queueId;
            this.start = start;
            this.end = end;
            this.newQueue = newQueue;
        }

        @Override
        public String toString() {
            return "StreamRange(" + topic + ":" + queueId + ", [" + start + ", " + end + "))";
        }
    }

    private final RmqStreamOptions opts;
    private final RmqOptions lenient;        // failOnDataLoss=false: new queues
    private final StructType schema;
    private final StoreFiles files;          // the store's files, as the driver's StoreWatcher reads them

    /** Typed bodies (docs/bodies.md), else null; then the message columns read beside the decoded ones. */
    private final BodySpec body;
    private final StructType messages;

    StreamReaderFactory(RmqStreamOptions opts, RmqOptions lenient, StructType schema, StoreFiles files, BodySpec body) {
        this.opts = opts;
        this.lenient = lenient;
        this.schema = schema;
        this.files = files;
        this.body = body;
        this.messages = body == null ? schema : BodyDecodingReader.innerSchema(schema, body);
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
        return true;
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
        StreamRange part = (StreamRange) partition;
        String root = opts.root();
        StoreLayout layout = new StoreLayout(files, root, opts.read.storeConfig);
        long clMin = Long.MAX_VALUE;
        long clEnd = 0;
        for (Segment s : CommitLog.listFiles(layout)) {
            clMin = Math.min(clMin, s.startOffset);
            clEnd = Math.max(clEnd, s.startOffset + s.sizeBytes);
        }
        if (clMin == Long.MAX_VALUE) clMin = 0;
        long first;
        if (layout.rocksDbQueues()) {
            io.rmqsource.store.QueueUnits q = layout.rocksDbQueueStore().queue(part.topic, part.queueId, 300_000);
            first = q == null || q.maxOffset() == 0 ? part.end : q.firstFileStartOffset();
        } else {
            List<Segment> cq = Segments.listDirectory(files, layout.queueDirPath(part.topic, part.queueId));
            first = cq.isEmpty() ? part.end : cq.get(0).startOffset / io.rmqsource.format.ConsumeQueue.UNIT_SIZE;
        }
        long start = part.start;
        if (start < first) {
            // ConsumeQueue files below ``first`` were deleted by retention.
            if (opts.read.failOnDataLoss && !part.newQueue) {
                throw new DataLossError("topic " + part.topic + " queue " + part.queueId + " in " + root
                        + ": messages at queue offsets " + start + ".." + (Math.min(first, part.end) - 1)
                        + " were removed (the ConsumeQueue now starts at offset " + first
                        + "); set failOnDataLoss=false to skip them");
            }
            start = Math.min(first, part.end);
        }
        if (start >= part.end) return new Empty();
        StoreRef store = new StoreRef(0, root, opts.broker(), opts.read.storeConfig, clMin, clEnd, true, files);
        RmqOptions read = part.newQueue ? lenient : opts.read;
        PartitionReader<ColumnarBatch> rows = ConsumeQueueRangeReader.of(store, part.topic, part.queueId, start, part.end,
                messages, opts.subTags, read);
        if (body != null) rows = new BodyDecodingReader(rows, messages, schema, body, read.batchSize);
        return new Named(rows, part);
    }

    /** Rows, should Spark ask for them: the rows of the batches. */
    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
        PartitionReader<ColumnarBatch> batches = createColumnarReader(partition);
        return new PartitionReader<InternalRow>() {
            private Iterator<InternalRow> rows = java.util.Collections.emptyIterator();
            private InternalRow current;

            @Override
            public boolean next() throws IOException {
                while (!rows.hasNext()) {
                    if (!batches.next()) return false;
                    rows = batches.get().rowIterator();
                }
                current = rows.next();
                return true;
            }

            @Override
            public InternalRow get() {
                return current;
            }

            @Override
            public void close() throws IOException {
                batches.close();
            }
        };
    }

    /** Data-loss errors of the range name the queue and the batch's offsets, as in the Python source. */
    private static final class Named implements PartitionReader<ColumnarBatch> {
        private final PartitionReader<ColumnarBatch> inner;
        private final StreamRange part;

        Named(PartitionReader<ColumnarBatch> inner, StreamRange part) {
            this.inner = inner;
            this.part = part;
        }

        @Override
        public boolean next() throws IOException {
            try {
                return inner.next();
            } catch (DataLossError e) {
                throw new DataLossError("topic " + part.topic + " queue " + part.queueId + ", offsets [" + part.start
                        + ", " + part.end + "): " + e.getMessage());
            }
        }

        @Override
        public ColumnarBatch get() {
            return inner.get();
        }

        @Override
        public void close() throws IOException {
            inner.close();
        }

        @Override
        public CustomTaskMetric[] currentMetricsValues() {
            return inner.currentMetricsValues();
        }
    }

    private static final class Empty implements PartitionReader<ColumnarBatch> {
        @Override
        public boolean next() {
            return false;
        }

        @Override
        public ColumnarBatch get() {
            throw new IllegalStateException("no batch");
        }

        @Override
        public void close() {
        }
    }
}
