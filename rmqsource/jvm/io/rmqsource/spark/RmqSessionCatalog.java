package io.rmqsource.spark;

import java.util.Map;
import org.apache.spark.sql.catalyst.analysis.NoSuchTableException;
import org.apache.spark.sql.connector.catalog.DelegatingCatalogExtension;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The session catalog with {@code USING rmq} tables served as the rmq DataSource V2 table, for Spark 3.5:
 * {@code spark.sql.catalog.spark_catalog=io.rmqsource.spark.RmqSessionCatalog}.
 *
 * <p>Spark 3.5's session catalog loads every table as a V1 table, which Spark then reads through the V1
 * data source API (a V2-only provider fails there: "rmq is not a valid Spark SQL Data Source"). Spark 4
 * loads a table whose provider is a TableProvider through the provider itself and needs none of this.
 * Everything else (create, drop, other tables) is the built-in catalog's, as with Delta's DeltaCatalog.
 */
public final class RmqSessionCatalog extends DelegatingCatalogExtension {
    @Override
    public Table loadTable(Identifier ident) throws NoSuchTableException {
        Table table = super.loadTable(ident);
        Map<String, String> properties = table.properties();
        String provider = properties.get(TableCatalog.PROP_PROVIDER);
        if (!RmqDataSource.SHORT_NAME.equalsIgnoreCase(provider) && !RmqDataSource.class.getName().equals(provider)) {
            return table;
        }
        // The catalog's properties (TBLPROPERTIES, OPTIONS as option.*, provider, location ...): RmqTable.optionsOf
        // takes the read options from them as it does from Spark 4's.
        // A table created without a schema (the usual case) keeps an empty one: the provider's schema then.
        @SuppressWarnings("deprecation")   // the catalog's table has no columns() of its own before 4.0
        StructType schema = table.schema();
        RmqDataSource source = new RmqDataSource();
        if (schema.isEmpty()) schema = source.inferSchema(new CaseInsensitiveStringMap(properties));
        return source.getTable(schema, table.partitioning(), properties);
    }
}
