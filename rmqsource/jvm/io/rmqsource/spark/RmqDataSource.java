package io.rmqsource.spark;

import java.util.Map;

import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code format("rmq")} on the JVM. Loaded through {@code spark.jars}, a JVM provider named
 * {@code rmq} takes precedence over the Python data source of the same name; its table
 * ({@link RmqTable}) reads, streams and writes natively, the same on Spark 3.5 and 4.x.
 */
public final class RmqDataSource implements TableProvider, DataSourceRegister {
  public static final String SHORT_NAME = "rmq";

  @Override
  public String shortName() {
    return SHORT_NAME;
  }

  /**
   * The fixed schema (contract.json, equal to the Python source's): the columns of option metadata's table, those of
   * option view, or the message columns.
   */
  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return io.rmqsource.spark.read.RmqViewScan.tableSchema(options);
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new RmqTable(schema, RmqTable.optionsOf(properties));
  }

  /** Writes receive the DataFrame's schema instead of the read schema. */
  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }
}
