package io.rmqsource.spark;

import io.rmqsource.spark.compat.PythonDataSources;
import java.util.Map;

import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code format("rmq")} on the JVM. Loaded through {@code spark.jars}, a JVM provider named
 * {@code rmq} takes precedence over the Python data source of the same name. Batch reads and streams
 * are native; on a Spark with Python data sources (4.0+) whatever has no native counterpart yet (the
 * sinks) is handed to that Python data source through Spark's own {@code PythonDataSourceV2}, so one
 * name serves reads, streams and sinks. Spark 3.5 has no Python data sources: there the table is
 * native only ({@link PythonDataSources}).
 *
 * <p>Spark creates one provider per {@code load()} / {@code save()}, so the Python provider held
 * here lives exactly as long as it does when Spark resolves the Python source by itself.
 */
public final class RmqDataSource implements TableProvider, DataSourceRegister {
  public static final String SHORT_NAME = "rmq";

  private TableProvider python;

  @Override
  public String shortName() {
    return SHORT_NAME;
  }

  /** The fixed schema (contract.json, equal to the Python source's): no Python worker per load(). */
  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return Contract.SCHEMA;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    Table pythonTable = PythonDataSources.available() ? python().getTable(schema, partitioning, properties) : null;
    return new RmqTable(pythonTable, schema, RmqTable.optionsOf(properties));
  }

  /** Writes receive the DataFrame's schema instead of the read schema. */
  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  private TableProvider python() {
    if (python == null) {
      SparkSession session = SparkSession.active();
      if (!PythonDataSources.exists(session, SHORT_NAME)) {
        throw RmqDataSource.<RuntimeException>rethrow(pythonSourceMissing(session));
      }
      python = PythonDataSources.provider(SHORT_NAME);
    }
    return python;
  }

  /** Throws a checked exception (Spark's AnalysisException) from a method that cannot declare it. */
  @SuppressWarnings("unchecked")
  private static <E extends Throwable> E rethrow(Throwable error) throws E {
    throw (E) error;
  }

  /** Spark's Python did not find the package: almost always PYSPARK_PYTHON naming another Python. */
  private static AnalysisException pythonSourceMissing(SparkSession session) {
    String conf = session.sparkContext().getConf().get("spark.pyspark.python", "");
    String env = System.getenv("PYSPARK_PYTHON");
    String python = !conf.isEmpty() ? "spark.pyspark.python=" + conf
        : env != null ? "PYSPARK_PYTHON=" + env : "PYSPARK_PYTHON unset";
    String detail = SHORT_NAME + " (io.rmqsource.spark hands this to the Python data source rmq, which Spark's"
        + " Python (" + python + ") does not find: set PYSPARK_PYTHON to the Python where rmqsource is"
        + " installed)";
    // Map1's constructor is the same in Scala 2.12 and 2.13 (Map.updated's erasure is not).
    return new AnalysisException("DATA_SOURCE_NOT_FOUND",
        new scala.collection.immutable.Map.Map1<String, String>("provider", detail));
  }
}
