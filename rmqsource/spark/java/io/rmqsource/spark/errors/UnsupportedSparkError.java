package io.rmqsource.spark.errors;

/** The running Spark lacks what an operation needs (mirrors rmqsource.spark.compat.UnsupportedSparkError). */
public class UnsupportedSparkError extends RmqError {
    public UnsupportedSparkError(String message) {
        super(message);
    }
}
