package io.rmqsource.spark;

import java.util.Map;

import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code format("rmq")} on the JVM. Loaded through {@code spark.jars}, a JVM provider named
 * {@code rmq} takes precedence over the Python data source of the same name; whatever has no
 * native counterpart yet is handed to that Python data source through Spark's own
 * {@link PythonDataSourceV2}, so one name serves batch reads, streams and sinks.
 *
 * <p>Spark creates one provider per {@code load()} / {@code save()}, so the Python provider held
 * here lives exactly as long as it does when Spark resolves the Python source by itself.
 */
public final class RmqDataSource implements TableProvider, DataSourceRegister {
  public static final String SHORT_NAME = "rmq";

  private PythonDataSourceV2 python;

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
    return new RmqTable(python().getTable(schema, partitioning, properties), RmqTable.optionsOf(properties));
  }

  /** Writes receive the DataFrame's schema instead of the read schema. */
  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  private PythonDataSourceV2 python() {
    if (python == null) {
      SparkSession session = SparkSession.active();
      if (!session.sessionState().dataSourceManager().dataSourceExists(SHORT_NAME)) {
        throw RmqDataSource.<RuntimeException>rethrow(pythonSourceMissing(session));
      }
      PythonDataSourceV2 provider = new PythonDataSourceV2();
      provider.setShortName(SHORT_NAME);
      python = provider;
    }
    return python;
  }

  /** Throws a checked exception (Spark's AnalysisException) from a method that cannot declare it. */
  @SuppressWarnings("unchecked")
  private static <E extends Throwable> E rethrow(Throwable error) throws E {
    throw (E) error;
  }

  /** Spark's Python did not find the package: almost always PYSPARK_PYTHON naming another Python. */
  @SuppressWarnings("unchecked")   // Scala's Map.updated seen from Java
  private static AnalysisException pythonSourceMissing(SparkSession session) {
    String conf = session.sparkContext().getConf().get("spark.pyspark.python", "");
    String env = System.getenv("PYSPARK_PYTHON");
    String python = !conf.isEmpty() ? "spark.pyspark.python=" + conf
        : env != null ? "PYSPARK_PYTHON=" + env : "PYSPARK_PYTHON unset";
    String detail = SHORT_NAME + " (io.rmqsource.spark hands this to the Python data source rmq, which Spark's"
        + " Python (" + python + ") does not find: set PYSPARK_PYTHON to the Python where rmqsource is"
        + " installed)";
    scala.collection.immutable.Map<String, String> params = scala.collection.immutable.Map$.MODULE$.empty();
    return new AnalysisException("DATA_SOURCE_NOT_FOUND", params.updated("provider", detail));
  }
}
