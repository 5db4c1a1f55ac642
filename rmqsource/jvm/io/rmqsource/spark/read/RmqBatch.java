package io.rmqsource.spark.read;

import io.rmqsource.store.MappedFaults;
import java.util.List;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;

/** The planned batch read: input partitions from {@link RmqPlanner}, readers from the factory. */
final class RmqBatch implements Batch {
    private final ReadSpec spec;
    private final String[] groupBy;
    private final io.rmqsource.spark.bodies.BodySpec body;
    private InputPartition[] partitions;

    RmqBatch(ReadSpec spec, String[] groupBy) {
        this(spec, groupBy, null);
    }

    RmqBatch(ReadSpec spec, String[] groupBy, io.rmqsource.spark.bodies.BodySpec body) {
        this.spec = spec;
        this.groupBy = groupBy;
        this.body = body;
    }

    static int defaultParallelism() {
        return SparkSession.getActiveSession().isDefined()
                ? SparkSession.getActiveSession().get().sparkContext().defaultParallelism()
                : Runtime.getRuntime().availableProcessors();
    }

    @Override
    public InputPartition[] planInputPartitions() {
        if (partitions == null) {
            List<RmqInputPartition> planned = MappedFaults.guard(() ->
                    new RmqPlanner(spec.options, spec.pushed, defaultParallelism()).plan(groupBy != null));
            partitions = planned.toArray(new InputPartition[0]);
        }
        return partitions;
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new RmqPartitionReaderFactory(spec, groupBy, body);
    }
}
