package io.rmqsource.spark;

import io.rmqsource.errors.OptionError;
import io.rmqsource.errors.Repr;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The settings of an {@link RmqCatalog} ({@code spark.sql.catalog.<name>.*}, docs/catalog.md): its stores by name
 * ({@code stores}, {@code storesFile}), each store's read options ({@code store.<NAME>.<option>}) and
 * {@code includeInternalTopics}. Checked once when Spark loads the catalog: a malformed setting fails its first use.
 */
final class CatalogConfig {
    static final Pattern STORE_NAME = Pattern.compile("[A-Za-z0-9_]+");
    /** Options the catalog sets itself (which store, which topic, which table): refused as a store's option. */
    private static final Set<String> CATALOG_SET = Set.of("path", "paths", "topics", "topicpattern", "queues",
            "metadata", "view", "subscribe", "subscribepattern", "assign");
    /** The store options a metadata table and a topic listing take: where and how the store is laid out. */
    private static final Set<String> LAYOUT_OPTIONS = Set.of("config", "brokername");

    /** One configured store: its name, path (as configured) and read options (as given, original case). */
    static final class Store {
        final String name;
        final String path;
        final Map<String, String> options = new LinkedHashMap<>();

        Store(String name, String path) {
            this.name = name;
            this.path = path;
        }

        /** The read options of topic {@code topic}: the store's options, its path and topics=topic. */
        Map<String, String> topicOptions(String topic) {
            Map<String, String> out = new LinkedHashMap<>(options);
            out.put("path", path);
            out.put("topics", topic);
            return out;
        }

        /**
         * The options that say where the store is and how it is laid out ({@code config}, {@code brokerName},
         * MessageStoreConfig keys) with its path: those of a metadata table and of its topic listing (a store's
         * offsets or timestamps are for its topics' reads; metadata refuses them).
         */
        Map<String, String> layoutOptions() {
            Map<String, String> out = new LinkedHashMap<>();
            for (Map.Entry<String, String> e : options.entrySet()) {
                String key = e.getKey().toLowerCase(Locale.ROOT);
                if (LAYOUT_OPTIONS.contains(key) || Contract.STORE_KEYS.containsKey(key)) out.put(e.getKey(), e.getValue());
            }
            out.put("path", path);
            return out;
        }
    }

    final Map<String, Store> stores = new LinkedHashMap<>();
    final boolean includeInternalTopics;

    private CatalogConfig(boolean includeInternalTopics) {
        this.includeInternalTopics = includeInternalTopics;
    }

    /** {@code settings}: the catalog's settings as Spark passes them (prefix removed, keys in their original case). */
    static CatalogConfig parse(String catalog, Map<String, String> settings) {
        String prefix = "spark.sql.catalog." + catalog + ".";
        String stores = null;
        String storesFile = null;
        String internal = null;
        Map<String, String> storeOptions = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : settings.entrySet()) {
            String key = e.getKey();
            String lower = key.toLowerCase(Locale.ROOT);
            String value = e.getValue() == null ? "" : e.getValue();
            if (lower.equals("stores")) stores = value;
            else if (lower.equals("storesfile")) storesFile = value;
            else if (lower.equals("includeinternaltopics")) internal = value;
            else if (lower.startsWith("store.")) storeOptions.put(key.substring("store.".length()), value);
            else {
                throw new OptionError("unknown setting " + prefix + key + "; the rmq catalog's settings are " + prefix
                        + "stores, " + prefix + "storesFile, " + prefix + "includeInternalTopics and " + prefix
                        + "store.<NAME>.<option> (docs/catalog.md)");
            }
        }
        CatalogConfig config = new CatalogConfig(internal != null
                && RmqOptions.parseBool(prefix + "includeInternalTopics", internal));
        if (stores != null) {
            for (String item : stores.split(",")) {
                String pair = item.strip();
                if (pair.isEmpty()) continue;
                int colon = pair.indexOf(':');
                if (colon < 0) {
                    throw new OptionError(prefix + "stores: " + Repr.of(pair) + " is not NAME:PATH (e.g. "
                            + "broker_a:/data/a/store)");
                }
                config.add(prefix + "stores", pair.substring(0, colon).strip(), pair.substring(colon + 1).strip());
            }
        }
        if (storesFile != null && !storesFile.isBlank()) {
            Path file = Paths.get(storesFile.strip());
            List<String> lines;
            try {
                lines = Files.readAllLines(file, StandardCharsets.UTF_8);
            } catch (IOException e) {
                throw new OptionError(prefix + "storesFile: cannot read " + file + ": " + e);
            }
            int number = 0;
            for (String raw : lines) {
                number++;
                String line = raw.strip();
                if (line.isEmpty() || line.startsWith("#")) continue;
                int eq = line.indexOf('=');
                if (eq < 0) {
                    throw new OptionError(prefix + "storesFile " + file + " line " + number + ": " + Repr.of(line)
                            + " is not NAME=PATH");
                }
                config.add(prefix + "storesFile " + file + " line " + number, line.substring(0, eq).strip(),
                        line.substring(eq + 1).strip());
            }
        }
        if (stores == null && storesFile == null) {
            throw new OptionError("the rmq catalog " + catalog + " has no stores: set " + prefix
                    + "stores=NAME:PATH,... or " + prefix + "storesFile (docs/catalog.md)");
        }
        for (Map.Entry<String, String> e : storeOptions.entrySet()) {
            String rest = e.getKey();
            int dot = rest.indexOf('.');
            String name = dot < 0 ? rest : rest.substring(0, dot);
            String option = dot < 0 ? "" : rest.substring(dot + 1);
            String setting = prefix + "store." + rest;
            Store store = config.stores.get(name);
            if (store == null) {
                throw new OptionError(setting + " names no configured store; the stores are "
                        + String.join(", ", config.stores.keySet()) + " (names match exactly)");
            }
            if (option.isEmpty()) throw new OptionError(setting + " names no option: use store." + name + ".<option>");
            String lower = option.toLowerCase(Locale.ROOT);
            if (CATALOG_SET.contains(lower)) {
                throw new OptionError(setting + ": the catalog sets " + option + " itself (a store is a namespace, "
                        + "a topic a table)");
            }
            if (Contract.STREAM_OPTIONS.containsKey(lower) && !Contract.OPTIONS.containsKey(lower)) {
                throw new OptionError(setting + ": " + Contract.STREAM_OPTIONS.get(lower) + " is a stream option; "
                        + "give it to the stream: spark.readStream.option(...).table(...)");
            }
            store.options.put(option, e.getValue());
        }
        return config;
    }

    private void add(String where, String name, String path) {
        if (!STORE_NAME.matcher(name).matches()) {
            throw new OptionError(where + ": store name " + Repr.of(name) + " is not a SQL identifier (letters, "
                    + "digits and _)");
        }
        if (path.isEmpty()) throw new OptionError(where + ": store " + name + " has no path");
        Store before = stores.get(name);
        if (before != null && !before.path.equals(path)) {
            throw new OptionError(where + ": store " + name + " is configured twice, at " + before.path + " and "
                    + path);
        }
        if (before == null) stores.put(name, new Store(name, path));
    }

    /** The configured store names, in order. */
    List<String> names() {
        return new ArrayList<>(stores.keySet());
    }
}
