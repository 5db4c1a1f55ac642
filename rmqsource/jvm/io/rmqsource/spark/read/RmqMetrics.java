package io.rmqsource.spark.read;

import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomSumMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;

/** Source metrics shown in the Spark UI on the scan node (summed over tasks). */
public final class RmqMetrics {
    static final String RECORDS_READ = "recordsRead";
    static final String BYTES_READ = "commitLogBytesRead";
    static final String UNITS_SKIPPED = "unitsSkippedByTag";

    private RmqMetrics() {
    }

    /** Records decoded from the CommitLog. */
    public static final class RecordsRead extends CustomSumMetric {
        @Override
        public String name() {
            return RECORDS_READ;
        }

        @Override
        public String description() {
            return "CommitLog records decoded";
        }
    }

    /** Bytes of the records decoded (their totalSize). */
    public static final class BytesRead extends CustomSumMetric {
        @Override
        public String name() {
            return BYTES_READ;
        }

        @Override
        public String description() {
            return "CommitLog bytes decoded";
        }
    }

    /** ConsumeQueue units whose tagsCode could not match the tag filter (their records were never read). */
    public static final class UnitsSkipped extends CustomSumMetric {
        @Override
        public String name() {
            return UNITS_SKIPPED;
        }

        @Override
        public String description() {
            return "ConsumeQueue units skipped by the tag filter";
        }
    }

    /** Rows whose body could not be decoded, dropped under onBadRecord=skip (typed bodies, docs/bodies.md). */
    public static final class BadRecordsSkipped extends CustomSumMetric {
        @Override
        public String name() {
            return io.rmqsource.spark.bodies.BodyDecodingReader.SKIPPED;
        }

        @Override
        public String description() {
            return "bad records skipped";
        }
    }

    static CustomMetric[] all() {
        return new CustomMetric[] {new RecordsRead(), new BytesRead(), new UnitsSkipped(), new BadRecordsSkipped()};
    }

    private static CustomTaskMetric value(String name, long v) {
        return new CustomTaskMetric() {
            @Override
            public String name() {
                return name;
            }

            @Override
            public long value() {
                return v;
            }
        };
    }

    static CustomTaskMetric[] taskValues(long records, long bytes, long skipped) {
        return new CustomTaskMetric[] {value(RECORDS_READ, records), value(BYTES_READ, bytes),
            value(UNITS_SKIPPED, skipped)};
    }
}
