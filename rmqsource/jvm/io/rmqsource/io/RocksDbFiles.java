package io.rmqsource.io;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * What can be known of a RocksDB database without rocksdbjni: whether a folder holds one, whether the library is on
 * the classpath. A class of its own that names no org.rocksdb type, because the classes that open a database
 * (ReadOnlyRocksDb, WritableRocksDb) cannot even be loaded without rocksdbjni: the JVM's verifier loads the
 * RocksDBException they catch or throw. Every writer asks {@link #isRocksDb} of config/rdb/, in Spark (which ships
 * rocksdbjni) or not (the Python twin: rmqsource/io/rocksdb.py, is_rocksdb and rocksdict_available).
 */
public final class RocksDbFiles {
    private RocksDbFiles() {
    }

    /** rocksdbjni on the classpath (Spark ships it in its jars/). */
    public static boolean available() {
        try {
            Class.forName("org.rocksdb.RocksDB");
            return true;
        } catch (ClassNotFoundException | LinkageError e) {
            return false;
        }
    }

    /** A folder holding a RocksDB database (its CURRENT file). */
    public static boolean isRocksDb(Path folder) {
        return Files.isRegularFile(folder.resolve("CURRENT"));
    }
}
