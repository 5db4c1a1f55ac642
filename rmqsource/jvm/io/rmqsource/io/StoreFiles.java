package io.rmqsource.io;

import java.io.File;
import java.io.Serializable;
import java.nio.ByteBuffer;
import java.util.List;

/**
 * Read-only access to a store's files, wherever they are: {@link LocalFiles} maps local files
 * (zero copy), {@link HadoopFiles} reads any Hadoop FileSystem ({@code s3a://}, {@code hdfs://},
 * {@code abfss://}, {@code gs://}, {@code dbfs:/}, {@code file:}) by positioned reads.  Paths are
 * strings: plain paths for local stores, full URIs otherwise; {@link #child} joins them.
 *
 * Nothing here writes: stores on another file system are read-only to this package.
 */
public abstract class StoreFiles implements Serializable {
    private static final long serialVersionUID = 1L;

    /** Local files through read-only memory maps (the default for local paths). */
    public static final StoreFiles LOCAL = new LocalFiles();

    /** A directory entry: its name, length, whether it is a directory and when it was modified. */
    public static final class Entry {
        public final String name;
        public final long size;
        public final boolean directory;
        /** Modification time in ms, 0 when the listing does not give it (local maps need none). */
        public final long modified;

        public Entry(String name, long size, boolean directory) {
            this(name, size, directory, 0);
        }

        public Entry(String name, long size, boolean directory, long modified) {
            this.name = name;
            this.size = size;
            this.directory = directory;
            this.modified = modified;
        }
    }

    /**
     * A file modified less than this long ago may still be written (a broker's files keep their
     * length while units are written into them): a buffer read from it is not kept.
     */
    public static final long SETTLE_MS = 2000;

    /** Whether a file listed as modified at {@code modified} had settled at {@code nowMs} (0: unknown, never). */
    public static boolean settled(long modified, long nowMs) {
        return modified > 0 && modified <= nowMs - SETTLE_MS;
    }

    /** Whether {@link #whole} maps files: then whole files cost nothing and no read needs a window. */
    public abstract boolean mapped();

    /** The entries of {@code dir} (any order), or null when it is not a directory. */
    public abstract List<Entry> list(String dir);

    /**
     * Every directory under {@code dir} that holds files, with its entries (sub-directories
     * included), from one recursive listing; null where that costs a request per directory anyway
     * (local files, HDFS): then callers list each directory.
     */
    public java.util.Map<String, List<Entry>> listTree(String dir) {
        return null;
    }

    public abstract boolean isDirectory(String path);

    public abstract boolean isFile(String path);

    /** Length of the file, -1 when there is none. */
    public abstract long length(String path);

    /**
     * The whole file, read-only: mapped (local) or read whole (ConsumeQueue files, shared by the
     * tasks of a JVM while the file keeps its length; the overload below adds the modification
     * time).  {@code listedLength}: the length a listing gave (-1: unknown), which saves a request
     * per file.  A file that vanished is a DataLossError.
     */
    public abstract ByteBuffer whole(String path, long listedLength);

    /**
     * The same for a file listed with modification time {@code listedModified} (0: unknown): a
     * buffer read before the file was rewritten at the same length (an object replaced, a unit
     * written into a full-size file) is not returned.
     */
    public ByteBuffer whole(String path, long listedLength, long listedModified) {
        return whole(path, listedLength);
    }

    /**
     * The written part of a file of fixed-size units that are written front to back into a file
     * created full of zeros (ConsumeQueue files): off a remote file system, the file's start up to
     * the end of the first read whose last unit is all zeros (reads growing 4x), or the whole file;
     * mapped, the whole file.  Units past the buffer are unwritten: a broker's recovery too stops at
     * the first unit never written.
     */
    public ByteBuffer writtenUnits(String path, long listedLength, long listedModified, int unitBytes) {
        return whole(path, listedLength, listedModified);
    }

    /**
     * A new buffer of the {@code len} bytes at {@code pos}, fewer when the file ends first (one
     * positioned read).  Buffers are never reused: columns of a batch may point into them.
     */
    public abstract ByteBuffer read(String path, long pos, int len);

    /** The whole content of a small file (checkpoint, configs), or null when it does not exist. */
    /**
     * Starts reading ranges [pos[i], pos[i] + len[i]) of {@code path} (sorted, not overlapping, inside the
     * file) together, where the file system fetches several ranges at once (Hadoop's vectored reads):
     * one future per range. Null where it does not (mapped files, older Hadoop clients): read them one by
     * one with {@link #read}.
     */
    public List<java.util.concurrent.CompletableFuture<ByteBuffer>> readRanges(String path, long[] pos, int[] len) {
        return null;
    }

    public abstract byte[] readSmall(String path, long maxBytes);

    /** The path on this machine's file system, or null when the file is elsewhere (lock checks). */
    public abstract java.nio.file.Path localPath(String path);

    /**
     * Most bytes one record may claim and still be read: a positioned read allocates what a record
     * header (or a ConsumeQueue unit) claims, so a hostile one must not make it allocate up to a
     * segment.  Mapped files allocate nothing and take any record the format allows.
     */
    public int maxRecordBytes() {
        return io.rmqsource.format.Record.MAX_RECORD_BYTES_READ;
    }

    /** Bytes a CommitLog window reads at once (positioned reads; mapped files need none). */
    public int windowBytes() {
        return 8 << 20;
    }

    /**
     * Hosts holding most of the bytes [pos, pos + len) of a file, for a task's preferred locations
     * (HDFS reports its blocks' hosts; local and object stores have none: an empty array).
     */
    public String[] hosts(String path, long pos, long len) {
        return new String[0];
    }

    /** Closes open streams of this reader (the file system itself stays cached by Hadoop). */
    public void close() {
    }

    /** {@code dir/name}: a File path for local paths, a URI path otherwise. */
    public static String child(String dir, String name) {
        if (!isUri(dir)) return new File(dir, name).getPath();
        return dir.endsWith("/") ? dir + name : dir + "/" + name;
    }

    /** The last component of a path or URI. */
    public static String name(String path) {
        if (!isUri(path)) return new File(path).getName();
        String p = path.endsWith("/") ? path.substring(0, path.length() - 1) : path;
        return p.substring(p.lastIndexOf('/') + 1);
    }

    /** Whether {@code path} starts with a URI scheme ({@code s3a:}, {@code file:} ...). */
    public static boolean isUri(String path) {
        int colon = path.indexOf(':');
        if (colon < 2) return false;          // (a Windows drive letter is no scheme)
        for (int i = 0; i < colon; i++) {
            char c = path.charAt(i);
            boolean ok = Character.isLetter(c) || (i > 0 && (Character.isDigit(c) || c == '+' || c == '.' || c == '-'));
            if (!ok) return false;
        }
        return true;
    }
}
