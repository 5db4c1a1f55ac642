package io.rmqsource.spark;

import io.rmqsource.format.SystemTopics;
import io.rmqsource.io.StoreFiles;
import io.rmqsource.store.MappedFaults;
import io.rmqsource.store.StoreMetadata;
import io.rmqsource.store.StoreReader;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.catalyst.analysis.NoSuchNamespaceException;
import org.apache.spark.sql.catalyst.analysis.NoSuchTableException;
import org.apache.spark.sql.connector.catalog.Column;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.NamespaceChange;
import org.apache.spark.sql.connector.catalog.SupportsNamespaces;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.connector.catalog.TableChange;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A Spark catalog of RocketMQ stores (docs/catalog.md): {@code spark.sql.catalog.rmq=io.rmqsource.spark.RmqCatalog}
 * with {@code spark.sql.catalog.rmq.stores=NAME:PATH,...}. Each store is a namespace, each of its topics a table
 * ({@code rmq.<store>.<topic>}: the rmq table of {@code option("topics", topic)} on that store, batch and stream),
 * its metadata tables are tables too ({@code rmq.<store>.segments}, {@code rmq.<store>.<topic>.queues}).
 *
 * <p>Tables are looked up in the store's ConsumeQueue listing, read on the driver and reused for two seconds (a
 * live store's new topics show then); the tables read the store as {@code load(path)} does. Read-only: every create, drop, alter and rename is refused.
 */
public final class RmqCatalog implements TableCatalog, SupportsNamespaces {
    /** The tables of one topic ({@code rmq.<store>.<topic>.<table>}): its rows of those metadata tables. */
    static final List<String> TOPIC_TABLES = List.of("queues", "groups");

    /** TableCatalog.PROP_TABLE_TYPE of Spark 4 (a property name: harmless where Spark does not read it). */
    private static final String TABLE_TYPE = "table_type";
    /**
     * How long a store's topic listing serves table loads and listings: Spark loads a table several times while
     * it plans one query, and once per table when it lists a namespace with their types (Spark 4).
     */
    private static final long TOPICS_FRESH_NANOS = 2_000_000_000L;

    private String name;
    private CatalogConfig config;
    private final Map<String, Listing> listings = new java.util.concurrent.ConcurrentHashMap<>();

    /** A store's topics as read at {@code at} (System.nanoTime). */
    private record Listing(long at, List<String> topics) {
    }

    @Override
    public void initialize(String name, CaseInsensitiveStringMap options) {
        this.name = name;
        this.config = CatalogConfig.parse(name, options.asCaseSensitiveMap());
    }

    @Override
    public String name() {
        return name;
    }

    // ---- namespaces: the configured stores ----

    @Override
    public String[][] listNamespaces() {
        List<String> names = config.names();
        String[][] out = new String[names.size()][];
        for (int i = 0; i < out.length; i++) out[i] = new String[] {names.get(i)};
        return out;
    }

    @Override
    public String[][] listNamespaces(String[] namespace) throws NoSuchNamespaceException {
        if (namespace.length == 0) return listNamespaces();
        store(namespace);
        return new String[0][];
    }

    @Override
    public boolean namespaceExists(String[] namespace) {
        return namespace.length == 1 && config.stores.containsKey(namespace[0]);
    }

    /** The store's path ({@code location}, as DESCRIBE NAMESPACE shows it) and its read options. */
    @Override
    public Map<String, String> loadNamespaceMetadata(String[] namespace) throws NoSuchNamespaceException {
        CatalogConfig.Store store = store(namespace);
        Map<String, String> out = new LinkedHashMap<>(store.options);
        out.put(SupportsNamespaces.PROP_LOCATION, store.path);
        return out;
    }

    @Override
    public void createNamespace(String[] namespace, Map<String, String> metadata) {
        throw readOnly();
    }

    @Override
    public void alterNamespace(String[] namespace, NamespaceChange... changes) {
        throw readOnly();
    }

    @Override
    public boolean dropNamespace(String[] namespace, boolean cascade) {
        throw readOnly();
    }

    // ---- tables: the topics, and metadata tables ----

    @Override
    public Identifier[] listTables(String[] namespace) throws NoSuchNamespaceException {
        if (namespace.length == 0) return new Identifier[0];
        CatalogConfig.Store store = store(namespace);
        List<Identifier> out = new ArrayList<>();
        for (String topic : topicsNow(store)) {
            if (config.includeInternalTopics || !SystemTopics.isInternal(topic)) out.add(Identifier.of(namespace, topic));
        }
        return out.toArray(new Identifier[0]);
    }

    @Override
    public Table loadTable(Identifier ident) throws NoSuchTableException {
        String[] ns = ident.namespace();
        if (ns.length == 0 || ns.length > 2 || !config.stores.containsKey(ns[0])) {
            throw new NoSuchTable(ident, ns.length == 0 || ns.length > 2
                    ? "tables of the rmq catalog are " + name + ".<store>.<topic> and " + name + ".<store>.<topic>.<"
                    + String.join("|", TOPIC_TABLES) + ">"
                    : "no store " + ns[0] + " in the rmq catalog " + name + "; its stores are "
                    + String.join(", ", config.names()));
        }
        CatalogConfig.Store store = config.stores.get(ns[0]);
        List<String> topics = topicsNow(store);
        if (ns.length == 1) {
            String topic = ident.name();
            if (topics.contains(topic)) {
                return new CatalogTable(quoted(ns[0], topic), Contract.SCHEMA, store.topicOptions(topic), null, true,
                        properties(store, Map.of("topic", topic)));
            }
            if (StoreMetadata.TABLES.contains(topic)) return metadataTable(store, topic, null);
            throw new NoSuchTable(ident, "store " + store.name + " (" + store.path + ") has no topic " + topic
                    + " (its topics: SHOW TABLES IN " + name + "." + store.name + "; metadata tables: "
                    + String.join(", ", StoreMetadata.TABLES) + ")");
        }
        String topic = ns[1];
        if (!topics.contains(topic)) {
            throw new NoSuchTable(ident, "store " + store.name + " (" + store.path + ") has no topic " + topic);
        }
        if (!TOPIC_TABLES.contains(ident.name())) {
            throw new NoSuchTable(ident, "a topic's tables are " + String.join(", ", TOPIC_TABLES) + ", not "
                    + ident.name());
        }
        return metadataTable(store, ident.name(), topic);
    }

    /** Metadata table {@code table} of the store, or of its topic {@code topic} (its rows of that topic). */
    private Table metadataTable(CatalogConfig.Store store, String table, String topic) {
        Map<String, String> options = store.layoutOptions();
        options.put("metadata", table);
        Map<String, String> props = new LinkedHashMap<>();
        props.put("metadata", table);
        if (topic != null) props.put("topic", topic);
        String tableName = topic == null ? quoted(store.name, table) : quoted(store.name, topic) + "." + table;
        return new CatalogTable(tableName, Contract.metadataSchema(table), options, topic, false,
                properties(store, props));
    }

    /** DESCRIBE TABLE EXTENDED's properties of a table of {@code store}. */
    private static Map<String, String> properties(CatalogConfig.Store store, Map<String, String> own) {
        Map<String, String> out = new LinkedHashMap<>(own);
        out.put(TableCatalog.PROP_PROVIDER, RmqDataSource.SHORT_NAME);
        out.put(TableCatalog.PROP_LOCATION, store.path);
        out.put(TABLE_TYPE, "EXTERNAL");     // the store's, not the catalog's: DESCRIBE and listings say EXTERNAL
        return out;
    }

    private String quoted(String store, String table) {
        return name + "." + store + "." + (CatalogConfig.STORE_NAME.matcher(table).matches() ? table
                : "`" + table.replace("`", "``") + "`");
    }

    /** The store's topics, read again unless read within the last {@link #TOPICS_FRESH_NANOS}. */
    private List<String> topicsNow(CatalogConfig.Store store) {
        Listing last = listings.get(store.name);
        long now = System.nanoTime();
        if (last != null && now - last.at() < TOPICS_FRESH_NANOS) return last.topics();
        List<String> topics = List.copyOf(topics(store));
        listings.put(store.name, new Listing(now, topics));
        return topics;
    }

    /**
     * The store's topics, from its ConsumeQueues (the ones a read of the store finds), read now. A path that is
     * no store fails as a read of it does.
     */
    static List<String> topics(CatalogConfig.Store store) {
        RmqOptions opts = RmqOptions.parse(store.layoutOptions());
        String root = opts.paths.get(0);
        StoreFiles files = StoreAccess.forStream(root);
        return MappedFaults.guard(() -> {
            try (StoreReader reader = new StoreReader(files, root, opts.storeConfig, null)) {
                return reader.topics();
            }
        });
    }

    private CatalogConfig.Store store(String[] namespace) throws NoSuchNamespaceException {
        CatalogConfig.Store store = namespace.length == 1 ? config.stores.get(namespace[0]) : null;
        if (store == null) {
            throw new NoSuchStore(namespace, "no store " + String.join(".", namespace) + " in the rmq catalog " + name
                    + "; its stores are " + String.join(", ", config.names())
                    + " (spark.sql.catalog." + name + ".stores / storesFile)");
        }
        return store;
    }

    // ---- read-only ----

    private static UnsupportedOperationException readOnly() {
        return new UnsupportedOperationException(CatalogTable.READ_ONLY);
    }

    @Override
    @SuppressWarnings("deprecation")    // Spark 3.5 may still call the StructType form
    public Table createTable(Identifier ident, StructType schema, Transform[] partitions,
                             Map<String, String> properties) {
        throw readOnly();
    }

    @Override
    public Table createTable(Identifier ident, Column[] columns, Transform[] partitions,
                             Map<String, String> properties) {
        throw readOnly();
    }

    @Override
    public Table alterTable(Identifier ident, TableChange... changes) {
        throw readOnly();
    }

    @Override
    public boolean dropTable(Identifier ident) {
        throw readOnly();
    }

    @Override
    public boolean purgeTable(Identifier ident) {
        throw readOnly();
    }

    @Override
    public void renameTable(Identifier oldIdent, Identifier newIdent) {
        throw readOnly();
    }

    /** Spark's not-found error of a table, saying what is missing ({@code getMessage}: Spark's line, then ours). */
    static final class NoSuchTable extends NoSuchTableException {
        private static final long serialVersionUID = 1L;
        private final String detail;

        NoSuchTable(Identifier ident, String detail) {
            super(ident);
            this.detail = detail;
        }

        @Override
        public String getMessage() {
            return super.getMessage() + "\n" + detail;
        }
    }

    /** Spark's not-found error of a namespace, naming the configured stores. */
    static final class NoSuchStore extends NoSuchNamespaceException {
        private static final long serialVersionUID = 1L;
        private final String detail;

        NoSuchStore(String[] namespace, String detail) {
            super(namespace);
            this.detail = detail;
        }

        @Override
        public String getMessage() {
            return super.getMessage() + "\n" + detail;
        }
    }
}
