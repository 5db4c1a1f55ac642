/**
 * What differs between the Spark versions the jar runs on (3.5 and 4.0 to 4.3), in one place.
 *
 * <p>The jar is compiled against whichever pyspark is installed and must link on every supported
 * Spark, so the rest of the jar calls only API that all of them have. Where a Spark offers more (or
 * less), the class here looks it up once at class initialisation (feature detection, never version
 * strings) and falls back to what the oldest supported Spark has: {@link ByteSpans} (4.2's
 * putByteArray from a buffer) and {@link ReadLimits} (4.0's ReadMaxBytes).
 */
package io.rmqsource.spark.compat;
