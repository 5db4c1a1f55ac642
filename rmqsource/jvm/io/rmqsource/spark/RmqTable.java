package io.rmqsource.spark;

import io.rmqsource.spark.read.RmqScanBuilder;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.Column;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.ReportsSinkMetrics;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The {@code rmq} table, native on every supported Spark: batch and micro-batch reads on the JVM scan
 * and stream, batch and streaming writes on the JVM sinks ({@code io.rmqsource.spark.sink}). Nothing
 * goes through a Python worker, so the jar serves {@code rmq} alone where the executors' Python lacks
 * rmqsource, and on Spark 3.5, which has no Python data sources.
 *
 * <p>A catalog table ({@code CREATE TABLE t USING rmq OPTIONS (path ...)} or {@code LOCATION ...})
 * keeps its options in the catalog, and Spark hands them to {@link RmqDataSource#getTable} only:
 * scans and writes of {@code t} receive the query's own options. So every scan, stream and write
 * here reads with the table's options under the query's ({@link #withTableOptions}). For
 * {@code load()} and {@code save()} both are the same options.
 */
final class RmqTable implements SupportsRead, SupportsWrite, ReportsSinkMetrics {
  // TableCatalog's property names (constants, inlined at compile time: the same in every Spark 4)
  private static final String PROP_PROVIDER = TableCatalog.PROP_PROVIDER;
  private static final String PROP_LOCATION = TableCatalog.PROP_LOCATION;
  private static final String OPTION_PREFIX = TableCatalog.OPTION_PREFIX;
  /** Those of the Python source's table, so both modes accept the same queries (overwrite is refused by the sink). */
  private static final Set<TableCapability> CAPABILITIES = Set.copyOf(EnumSet.of(TableCapability.BATCH_READ,
      TableCapability.MICRO_BATCH_READ, TableCapability.BATCH_WRITE, TableCapability.STREAMING_WRITE,
      TableCapability.TRUNCATE));
  private final StructType schema;
  private final Map<String, String> tableOptions;
  private final io.rmqsource.spark.sink.SinkMetrics sinkMetrics = new io.rmqsource.spark.sink.SinkMetrics();

  /** {@code schema}: what Spark passed to getTable (the read schema, or a write's DataFrame schema). */
  RmqTable(StructType schema, Map<String, String> tableOptions) {
    this.schema = schema == null ? Contract.SCHEMA : schema;
    this.tableOptions = tableOptions == null ? Map.of() : new HashMap<>(tableOptions);
  }

  private StructType readSchema;

  /**
   * The read's columns: with option bodyFormat (docs/bodies.md), the message columns then the decoded ones
   * (the provider infers the message columns only); else the schema given.
   */
  private StructType readSchema() {
    if (readSchema == null) {
      StructType s = schema;
      if (s.equals(Contract.SCHEMA)) {
        io.rmqsource.spark.bodies.BodySpec body = io.rmqsource.spark.bodies.BodySpec.parse(tableOptions);
        if (body != null) s = body.tableSchema();
      }
      readSchema = s;
    }
    return readSchema;
  }

  /**
   * The data source options among the properties Spark passes to {@code getTable}. For
   * {@code load()} / {@code save()} those are the options. For a catalog table Spark passes the
   * table's properties: reserved ones ({@code provider}, {@code owner}, {@code location} ...),
   * TBLPROPERTIES, the OPTIONS clause twice (as given and under {@code option.}) and the path or
   * LOCATION as {@code path}; its options are the {@code option.} entries and the path, as for
   * Spark's own file sources (TBLPROPERTIES describe the table, they are no read options).
   */
  static Map<String, String> optionsOf(Map<String, String> properties) {
    if (properties == null) return Map.of();
    boolean catalogTable = properties.containsKey(PROP_PROVIDER);
    for (String key : properties.keySet()) catalogTable |= key.startsWith(OPTION_PREFIX);
    if (!catalogTable) return properties;
    Map<String, String> options = new HashMap<>();
    for (Map.Entry<String, String> e : properties.entrySet()) {
      if (e.getKey().startsWith(OPTION_PREFIX)) options.put(e.getKey().substring(OPTION_PREFIX.length()), e.getValue());
    }
    String path = properties.getOrDefault("path", properties.get(PROP_LOCATION));
    if (path != null) options.put("path", path);
    return options;
  }

  /** The table's options with the query's on top (a query option of the same name, any case, wins). */
  CaseInsensitiveStringMap withTableOptions(CaseInsensitiveStringMap queryOptions) {
    if (tableOptions.isEmpty()) return queryOptions;
    Map<String, String> merged = new HashMap<>();
    for (Map.Entry<String, String> e : tableOptions.entrySet()) {
      if (!queryOptions.containsKey(e.getKey())) merged.put(e.getKey(), e.getValue());
    }
    merged.putAll(queryOptions.asCaseSensitiveMap());
    return new CaseInsensitiveStringMap(merged);
  }

  @Override
  public String name() {
    return RmqDataSource.SHORT_NAME;
  }

  @Override
  public Column[] columns() {
    return SupportsRead.super.columns();
  }

  @Override
  @SuppressWarnings("deprecation")   // Spark still asks for schema(); columns() is its successor
  public StructType schema() {
    return readSchema();
  }

  @Override
  public Transform[] partitioning() {
    return new Transform[0];
  }

  @Override
  public Map<String, String> properties() {
    return Map.of();
  }

  @Override
  public Set<TableCapability> capabilities() {
    return CAPABILITIES;
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    // The JVM scan; its Scan's micro-batch stream is the native RmqMicroBatchStream (the table's schema:
    // Spark prunes no columns of a stream).
    return new RmqScanBuilder(withTableOptions(options), schema());
  }

  @Override
  public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
    return new io.rmqsource.spark.sink.RmqWriteBuilder(info, withTableOptions(info.options()), sinkMetrics);
  }

  /** The streaming sink's last micro-batch (Spark's progress shows it as sink.metrics). */
  @Override
  public Map<String, String> metrics() {
    return sinkMetrics.asMap();
  }
}
