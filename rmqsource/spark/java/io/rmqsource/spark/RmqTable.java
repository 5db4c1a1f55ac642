package io.rmqsource.spark;

import java.util.EnumSet;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.Column;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The {@code rmq} table: batch reads on the JVM, everything else (micro-batch reads, batch and
 * streaming writes) forwarded to the Python data source's table, which Spark built for the same
 * options and schema.
 */
final class RmqTable implements SupportsRead, SupportsWrite {
  private final Table python;

  RmqTable(Table python) {
    if (!(python instanceof SupportsRead) || !(python instanceof SupportsWrite)) {
      throw new IllegalStateException("Spark's Python table for rmq reads and writes, got " + python.getClass());
    }
    this.python = python;
  }

  @Override
  public String name() {
    return python.name();
  }

  @Override
  public Column[] columns() {
    return python.columns();
  }

  @Override
  @SuppressWarnings("deprecation")   // Spark still asks for schema(); columns() is its successor
  public StructType schema() {
    return python.schema();
  }

  @Override
  public Transform[] partitioning() {
    return python.partitioning();
  }

  @Override
  public Map<String, String> properties() {
    return python.properties();
  }

  @Override
  public Set<TableCapability> capabilities() {
    EnumSet<TableCapability> caps = EnumSet.of(TableCapability.BATCH_READ);
    caps.addAll(python.capabilities());
    return caps;
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    // The JVM scan; its Scan's micro-batch stream is the native RmqMicroBatchStream.
    return new RmqScanBuilder(options, () -> ((SupportsRead) python).newScanBuilder(options));
  }

  @Override
  public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
    return ((SupportsWrite) python).newWriteBuilder(info);
  }
}
