package io.rmqsource.io;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.rocksdb.ColumnFamilyDescriptor;
import org.rocksdb.ColumnFamilyHandle;
import org.rocksdb.DBOptions;
import org.rocksdb.Options;
import org.rocksdb.ReadOptions;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksDBException;
import org.rocksdb.RocksIterator;
import org.rocksdb.Slice;

/**
 * One read-only open of a broker's RocksDB database, every column family: the ConsumeQueues of
 * storeType=defaultRocksDB ({@code consumequeue/}) and the RocksDB configs holding consumer offsets
 * ({@code config/rdb/}, {@code config/consumerOffsets/}, {@code config/metadata/}).  Twin of
 * rmqsource/io/rocksdb.py.
 *
 * <p>{@code RocksDB.openReadOnly} (rocksdbjni, which Spark ships) writes nothing into the folder: no LOCK, no
 * LOG, no OPTIONS file, and the write-ahead logs are replayed in memory; so the JVM opens the broker's folder in
 * place (Python goes through a shadow folder because its binding writes a file of its own).  A read-only open is
 * a snapshot: {@link #open} is one open the caller closes; {@link #shared} keeps one per folder and process and
 * opens a fresh one when the folder's listing changed (a broker still writing).  Local folders only.
 */
public final class ReadOnlyRocksDb implements AutoCloseable {
    public static final String DEFAULT_CF = "default";
    private static final Map<String, ReadOnlyRocksDb> SHARED = new HashMap<>();

    public final String folder;
    final String signature;
    private final DBOptions options;
    private final RocksDB db;
    private final Map<String, ColumnFamilyHandle> handles;

    private ReadOnlyRocksDb(String folder, String signature) throws RocksDBException {
        this.folder = folder;
        this.signature = signature;
        RocksDB.loadLibrary();
        List<byte[]> names;
        try (Options listOptions = new Options()) {
            names = RocksDB.listColumnFamilies(listOptions, folder);
        }
        List<ColumnFamilyDescriptor> descriptors = new ArrayList<>();
        for (byte[] n : names) descriptors.add(new ColumnFamilyDescriptor(n));
        if (descriptors.isEmpty()) descriptors.add(new ColumnFamilyDescriptor(RocksDB.DEFAULT_COLUMN_FAMILY));
        List<ColumnFamilyHandle> opened = new ArrayList<>();
        DBOptions opts = new DBOptions().setCreateIfMissing(false);
        try {
            this.db = RocksDB.openReadOnly(opts, folder, descriptors, opened, false);
        } catch (RocksDBException | RuntimeException e) {
            opts.close();
            throw e;
        }
        this.options = opts;
        Map<String, ColumnFamilyHandle> byName = new LinkedHashMap<>();
        for (int i = 0; i < descriptors.size(); i++) {
            byName.put(new String(descriptors.get(i).getName(), StandardCharsets.UTF_8), opened.get(i));
        }
        this.handles = Collections.unmodifiableMap(byName);
    }

    /** rocksdbjni on the classpath (RocksDbFiles.available, which loads without it). */
    public static boolean available() {
        return RocksDbFiles.available();
    }

    /** A folder holding a RocksDB database (its CURRENT file; RocksDbFiles.isRocksDb). */
    public static boolean isRocksDb(Path folder) {
        return RocksDbFiles.isRocksDb(folder);
    }

    /** One read-only open of {@code folder}; the caller closes it. */
    public static ReadOnlyRocksDb open(String folder) throws RocksDBException {
        String key = new File(folder).getAbsolutePath();
        return new ReadOnlyRocksDb(key, signature(key));
    }

    /** The process's read-only open of {@code folder}, a new one when its files changed since; never closed by callers. */
    public static ReadOnlyRocksDb shared(String folder) throws RocksDBException {
        String key = new File(folder).getAbsolutePath();
        String sig = signature(key);
        synchronized (SHARED) {
            ReadOnlyRocksDb db = SHARED.get(key);
            if (db == null || !db.signature.equals(sig)) {   // an old snapshot stays open for readers still using it
                db = new ReadOnlyRocksDb(key, sig);
                SHARED.put(key, db);
            }
            return db;
        }
    }

    /** Names, sizes and modification times of the folder's files: what changes when the broker writes. */
    static String signature(String folder) throws RocksDBException {
        File[] files = new File(folder).listFiles();
        if (files == null || !isRocksDb(Paths.get(folder))) throw new RocksDBException("no RocksDB database here (no CURRENT file)");
        Arrays.sort(files);
        StringBuilder sb = new StringBuilder();
        for (File f : files) {
            if (f.isFile()) sb.append(f.getName()).append(':').append(f.length()).append(':').append(f.lastModified()).append(';');
        }
        return sb.toString();
    }

    public boolean hasColumnFamily(String name) {
        return handles.containsKey(name);
    }

    /** The column family's handle, or null when the database has none of that name. */
    public ColumnFamilyHandle columnFamily(String name) {
        return handles.get(name);
    }

    public RocksDB db() {
        return db;
    }

    public byte[] get(String cf, byte[] key) throws RocksDBException {
        ColumnFamilyHandle h = handles.get(cf);
        return h == null ? null : db.get(h, key);
    }

    /** An iterator over a column family (the caller closes it). */
    public RocksIterator newIterator(String cf) {
        return db.newIterator(require(cf));
    }

    /**
     * Reads the column family's keys in [{@code first}, {@code end}) in one iterator pass bounded by {@code end},
     * handing each (key, value) to {@code sink} until it returns false; returns how many it took.
     */
    public int scan(String cf, byte[] first, byte[] end, Sink sink) {
        try (Slice upper = new Slice(end);
             ReadOptions ro = new ReadOptions().setIterateUpperBound(upper);
             RocksIterator it = db.newIterator(require(cf), ro)) {
            int n = 0;
            for (it.seek(first); it.isValid(); it.next()) {
                if (!sink.take(it.key(), it.value())) break;
                n++;
            }
            return n;
        }
    }

    /** What {@link #scan} hands each key and value to. */
    @FunctionalInterface
    public interface Sink {
        boolean take(byte[] key, byte[] value);
    }

    private ColumnFamilyHandle require(String cf) {
        ColumnFamilyHandle h = handles.get(cf);
        if (h == null) throw new IllegalArgumentException(folder + ": the RocksDB database has no column family " + cf);
        return h;
    }

    @Override
    public void close() {
        for (ColumnFamilyHandle h : handles.values()) h.close();
        db.close();
        options.close();
    }
}
