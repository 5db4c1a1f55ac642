package io.rmqsource.spark;

import org.apache.spark.sql.SparkSessionExtensions;
import scala.Function1;
import scala.runtime.BoxedUnit;

/**
 * The rmq session extension ({@code spark.sql.extensions=io.rmqsource.spark.RmqExtensions}, set by the
 * {@code spark_conf/} presets): its optimizer rule {@link KeyLookupRule} turns array filters on {@code keys}
 * ({@code array_contains}, {@code arrays_overlap}, ORs of them) into the scan's option {@code keys}, answered
 * through the IndexFiles (docs/reading.md, Lookups by key).  A Function1 as Delta's and Iceberg's extensions are.
 */
public final class RmqExtensions implements Function1<SparkSessionExtensions, BoxedUnit> {
    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        extensions.injectOptimizerRule(session -> new KeyLookupRule());
        return BoxedUnit.UNIT;
    }
}
