package io.rmqsource.io;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.rocksdb.BlockBasedTableConfig;
import org.rocksdb.BloomFilter;
import org.rocksdb.CompressionType;
import org.rocksdb.FlushOptions;
import org.rocksdb.Options;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksDBException;
import org.rocksdb.RocksIterator;
import org.rocksdb.WriteBatch;
import org.rocksdb.WriteOptions;

/**
 * A read-write open of a config-v2 broker's {@code config/rdb/}, default column family only: the twin of
 * WritableRocksDb in rmqsource/io/rocksdb.py. The caller holds the store's lock (no broker runs on it). What it
 * leaves must open in the broker's RocksDB (rocketmq-rocksdb 1.0.2 of 5.3.3 is RocksDB 8.x, older than the
 * rocksdbjni Spark ships): table format_version 5 and no compression, as the broker's ConfigHelper writes, and
 * every batch flushed into a table file before the close.
 */
public final class WritableRocksDb implements AutoCloseable {
    static final int BROKER_TABLE_FORMAT_VERSION = 5;

    public final String folder;
    private final Options options;
    private final RocksDB db;

    public WritableRocksDb(String folder, boolean create) throws RocksDBException {
        this.folder = folder;
        RocksDB.loadLibrary();
        if (create) {
            try {
                Files.createDirectories(Path.of(folder));
            } catch (java.io.IOException e) {
                throw new RocksDBException("cannot create " + folder + ": " + e.getMessage());
            }
        }
        BlockBasedTableConfig table = new BlockBasedTableConfig().setFormatVersion(BROKER_TABLE_FORMAT_VERSION)
                .setBlockSize(32 * 1024).setFilterPolicy(new BloomFilter(16, false));
        Options opts = new Options().setCreateIfMissing(create).setCompressionType(CompressionType.NO_COMPRESSION)
                .setTableFormatConfig(table).setInplaceUpdateSupport(true).setAllowConcurrentMemtableWrite(false);
        try {
            this.db = RocksDB.open(opts, folder);
        } catch (RocksDBException | RuntimeException e) {
            opts.close();
            throw e;
        }
        this.options = opts;
    }

    public byte[] get(byte[] key) throws RocksDBException {
        return db.get(key);
    }

    /** (key, value) of every key starting with prefix, in key order; RocksDBException past limit. */
    public List<byte[][]> prefixed(byte[] prefix, int limit) throws RocksDBException {
        List<byte[][]> out = new ArrayList<>();
        try (RocksIterator it = db.newIterator()) {
            for (it.seek(prefix); it.isValid(); it.next()) {
                byte[] k = it.key();
                if (k.length < prefix.length || !Arrays.equals(k, 0, prefix.length, prefix, 0, prefix.length)) break;
                if (out.size() >= limit) throw new RocksDBException("more than " + limit + " records in " + folder);
                out.add(new byte[][] {k, it.value()});
            }
            it.status();
        }
        return out;
    }

    /** One atomic batch of puts, then a flush into a table file (durable when it returns). */
    public void write(List<Map.Entry<byte[], byte[]>> puts) throws RocksDBException {
        try (WriteBatch batch = new WriteBatch(); WriteOptions wo = new WriteOptions().setSync(true);
             FlushOptions fo = new FlushOptions().setWaitForFlush(true)) {
            for (Map.Entry<byte[], byte[]> p : puts) batch.put(p.getKey(), p.getValue());
            db.write(wo, batch);
            db.flush(fo);
        }
    }

    @Override
    public void close() {
        db.close();
        options.close();
    }
}
