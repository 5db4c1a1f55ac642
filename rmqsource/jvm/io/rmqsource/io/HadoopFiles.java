package io.rmqsource.io;

import io.rmqsource.errors.CorruptRecordError;
import io.rmqsource.errors.DataLossError;
import io.rmqsource.errors.StoreError;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.Serializable;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Files on any Hadoop FileSystem, read by positioned reads (FSDataInputStream.read(position, ...)):
 * no request per record, no whole CommitLog segment in memory.  The FileSystem comes from
 * {@code Path.getFileSystem(conf)} with the session's configuration (on executors from a {@link ConfSource});
 * plain local paths go through Hadoop's raw local file system, so the same code reads a local
 * store when positioned reads are forced.
 *
 * Errors name the file's URI: a file that vanished is a DataLossError (as for mapped files), any
 * other failure (a missing bucket, a permission) a StoreError of one line.
 */
public final class HadoopFiles extends StoreFiles {
    private static final long serialVersionUID = 1L;
    /** 16x RocketMQ's default maxMessageSize (4 MiB): a longer record is refused, not allocated. */
    static final int MAX_RECORD_BYTES = 64 << 20;
    /** Whole files (ConsumeQueues) kept per JVM, by bytes. */
    static final long MAX_CACHED_BYTES = 256L << 20;
    private static final Map<String, ByteBuffer> WHOLE = new LinkedHashMap<>(64, 0.75f, true);
    private static long cachedBytes;

    private final ConfSource shared;
    private final int windowBytes;
    private transient Configuration conf;
    private transient Map<String, FSDataInputStream> streams;

    /**
     * Where a deserialized copy (an executor's) gets its Configuration, which is not Serializable: the
     * Spark side hands the value of a broadcast {@link HadoopConf}.
     */
    public interface ConfSource extends Serializable {
        Configuration get();
    }

    /** On the driver: {@code conf} used here; {@code shared} (may be null) is what executors get. */
    public HadoopFiles(Configuration conf, ConfSource shared, int windowBytes) {
        this.conf = conf;
        this.shared = shared;
        this.windowBytes = windowBytes;
    }

    @Override
    public boolean mapped() {
        return false;
    }

    @Override
    public int maxRecordBytes() {
        return MAX_RECORD_BYTES;
    }

    @Override
    public int windowBytes() {
        return windowBytes;
    }

    private Configuration conf() {
        if (conf == null) conf = shared != null ? shared.get() : new Configuration();
        return conf;
    }

    private Path hadoopPath(String path) {
        return isUri(path) ? new Path(path) : new Path(new java.io.File(path).toURI());
    }

    private FileSystem fs(Path p) throws IOException {
        if (!isUri(p.toString()) || "file".equals(p.toUri().getScheme())) {
            return FileSystem.getLocal(conf()).getRawFileSystem();     // no .crc side files in a store
        }
        try {
            return p.getFileSystem(conf());
        } catch (RuntimeException e) {
            if (!(e.getCause() instanceof ClassNotFoundException)) throw e;
            StoreError err = new StoreError("cannot read " + p + ": the Hadoop FileSystem for " + p.toUri().getScheme()
                    + ": is not on the classpath (" + e.getCause().getMessage() + "); put its jars on spark.jars");
            err.initCause(e);
            throw err;
        }
    }

    /** One line naming the URI, for anything but a missing file. */
    static StoreError failure(String path, IOException e) {
        String m = String.valueOf(e.getMessage());
        int nl = m.indexOf('\n');
        if (nl >= 0) m = m.substring(0, nl);
        StoreError err = new StoreError("cannot read " + path + ": " + e.getClass().getSimpleName() + ": " + m);
        err.initCause(e);
        return err;
    }

    private static DataLossError gone(String path) {
        return new DataLossError("segment file " + path + " is gone (deleted while the query ran?)");
    }

    private FileStatus status(String path) {
        Path p = hadoopPath(path);
        try {
            return fs(p).getFileStatus(p);
        } catch (FileNotFoundException e) {
            return null;
        } catch (IOException e) {
            throw failure(path, e);
        }
    }

    @Override
    public List<Entry> list(String dir) {
        Path p = hadoopPath(dir);
        FileStatus[] st;
        try {
            st = fs(p).listStatus(p);
        } catch (FileNotFoundException e) {
            return null;
        } catch (IOException e) {
            throw failure(dir, e);
        }
        List<Entry> out = new ArrayList<>(st.length);
        String self = p.getName();
        for (FileStatus s : st) {
            String name = s.getPath().getName();
            if (st.length == 1 && s.isFile() && name.equals(self) && isFile(dir)) return null;   // dir is a file
            out.add(new Entry(name, s.isDirectory() ? 0 : s.getLen(), s.isDirectory(), s.getModificationTime()));
        }
        return out;
    }

    /** Object stores, whose recursive listing is one paged request for the whole tree (HDFS walks it). */
    private static final java.util.Set<String> FLAT_LISTING_SCHEMES = java.util.Set.of("s3a", "s3", "s3n", "gs", "abfs",
            "abfss", "wasb", "wasbs", "oss", "cosn");

    @Override
    public Map<String, List<Entry>> listTree(String dir) {
        Path p = hadoopPath(dir);
        if (!FLAT_LISTING_SCHEMES.contains(String.valueOf(p.toUri().getScheme()))) return null;
        String base = p.toUri().getPath();
        if (!base.endsWith("/")) base += "/";
        Map<String, List<Entry>> out = new HashMap<>();
        java.util.Set<String> dirsSeen = new java.util.HashSet<>();
        try {
            org.apache.hadoop.fs.RemoteIterator<org.apache.hadoop.fs.LocatedFileStatus> it = fs(p).listFiles(p, true);
            while (it.hasNext()) {
                org.apache.hadoop.fs.LocatedFileStatus s = it.next();
                String key = s.getPath().toUri().getPath();
                if (!key.startsWith(base)) continue;
                String[] parts = key.substring(base.length()).split("/");
                String at = dir;
                for (int i = 0; i < parts.length; i++) {      // each folder on the way is an entry of its parent
                    boolean last = i == parts.length - 1;
                    String child = child(at, parts[i]);
                    if (last || dirsSeen.add(child)) {
                        out.computeIfAbsent(at, k -> new ArrayList<>()).add(last
                                ? new Entry(parts[i], s.getLen(), false, s.getModificationTime())
                                : new Entry(parts[i], 0, true));
                    }
                    at = child;
                }
            }
        } catch (FileNotFoundException e) {
            return new HashMap<>();
        } catch (IOException e) {
            throw failure(dir, e);
        }
        return out;
    }

    @Override
    public boolean isDirectory(String path) {
        FileStatus s = status(path);
        return s != null && s.isDirectory();
    }

    @Override
    public boolean isFile(String path) {
        FileStatus s = status(path);
        return s != null && s.isFile();
    }

    @Override
    public long length(String path) {
        FileStatus s = status(path);
        return s != null && s.isFile() ? s.getLen() : -1;
    }

    private synchronized FSDataInputStream stream(String path) {
        if (streams == null) streams = new HashMap<>();
        FSDataInputStream in = streams.get(path);
        if (in != null) return in;
        Path p = hadoopPath(path);
        try {
            // Random-access read policy: every positioned read is one GET bounded to what it asks for
            // (the default sequential policy opens each GET to the end of the object, so a read per
            // record would fetch the rest of the segment each time). Unknown options are ignored.
            in = fs(p).openFile(p)
                    .opt("fs.option.openfile.read.policy", "random")
                    .opt("fs.s3a.experimental.input.fadvise", "random")
                    .build().get();
        } catch (FileNotFoundException e) {
            throw gone(path);
        } catch (IOException e) {
            throw failure(path, e);
        } catch (java.util.concurrent.ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof FileNotFoundException) throw gone(path);
            throw failure(path, cause instanceof IOException ? (IOException) cause : new IOException(cause));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw failure(path, new java.io.InterruptedIOException("interrupted opening " + path));
        }
        streams.put(path, in);
        return in;
    }

    /** Closes the open stream of {@code path}, if any: the next read opens the file as it is now. */
    private synchronized void forget(String path) {
        FSDataInputStream in = streams == null ? null : streams.remove(path);
        if (in == null) return;
        try {
            in.close();
        } catch (IOException e) {
            // read-only stream: nothing is lost
        }
    }

    /** Up to {@code len} bytes at {@code pos} into {@code into}; how many were read (fewer at the end). */
    private int readInto(String path, long pos, byte[] into, int len) {
        return readInto(path, pos, into, 0, len);
    }

    /** The same into {@code into} from index {@code at}. */
    private int readInto(String path, long pos, byte[] into, int at, int len) {
        FSDataInputStream in = stream(path);
        int got = 0;
        try {
            while (got < len) {
                int n = in.read(pos + got, into, at + got, len - got);
                if (n < 0) break;
                got += n;
            }
        } catch (FileNotFoundException e) {
            throw gone(path);
        } catch (java.io.EOFException e) {
            return got;
        } catch (IOException e) {
            throw failure(path, e);
        }
        return got;
    }

    @Override
    public ByteBuffer read(String path, long pos, int len) {
        byte[] buf = new byte[Math.max(0, len)];
        int got = readInto(path, pos, buf, buf.length);
        return ByteBuffer.wrap(buf, 0, got).slice();
    }

    /** Through {@link VectoredReads} where this Hadoop client has them; null (read one by one) where not or where they fail to start. */
    @Override
    public List<java.util.concurrent.CompletableFuture<ByteBuffer>> readRanges(String path, long[] pos, int[] len) {
        if (!VectoredReads.available() || pos.length == 0) return null;
        try {
            return VectoredReads.start(stream(path), pos, len);
        } catch (IOException | RuntimeException e) {
            return null;                    // the reads one by one report what is wrong, with their errors
        }
    }

    @Override
    public ByteBuffer whole(String path, long listedLength) {
        return whole(path, listedLength, 0);
    }

    /** Kept per JVM by path, length and modification time, once the file has {@link #settled}. */
    @Override
    public ByteBuffer whole(String path, long listedLength, long listedModified) {
        long len = listedLength >= 0 ? listedLength : length(path);
        if (len < 0) throw gone(path);
        if (len > Integer.MAX_VALUE) {
            throw new CorruptRecordError("file is " + len + " bytes; files over 2 GiB are not read whole", path, 0);
        }
        String key = path + "\0" + len + "\0" + listedModified;
        ByteBuffer b = cached(key);
        if (b != null) return b;
        forget(path);                   // an object replaced since it was opened is read from a new stream
        b = read(path, 0, (int) len);
        return keep(key, b, b.capacity() < len, listedModified);
    }

    /** First read of {@link #writtenUnits}: most queues of a store hold fewer units than this. */
    static final int FIRST_UNITS_READ_BYTES = 64 << 10;

    /** Kept per JVM as {@link #whole} buffers are, beside them. */
    @Override
    public ByteBuffer writtenUnits(String path, long listedLength, long listedModified, int unitBytes) {
        long len = listedLength >= 0 ? listedLength : length(path);
        if (len < 0) throw gone(path);
        if (len > Integer.MAX_VALUE) {
            throw new CorruptRecordError("file is " + len + " bytes; files over 2 GiB are not read whole", path, 0);
        }
        String key = path + "\0" + len + "\0" + listedModified + "\0written";
        ByteBuffer cachedPart = cached(key);
        if (cachedPart != null) return cachedPart;
        forget(path);
        byte[] out = new byte[(int) Math.min(len, FIRST_UNITS_READ_BYTES)];
        int have = 0;
        long next = FIRST_UNITS_READ_BYTES;
        boolean cut = false;
        while (have < len) {
            int n = (int) Math.min(next, len - have);
            if (out.length < have + n) out = java.util.Arrays.copyOf(out, have + n);
            int got = readInto(path, have, out, have, n);
            have += got;
            if (got < n) {
                cut = true;                 // cut short since listed
                break;
            }
            if (unwrittenUnitEnds(out, have, unitBytes)) break;
            next *= 4;
        }
        return keep(key, ByteBuffer.wrap(out, 0, have).slice(), cut, listedModified);
    }

    /** Whether the last whole unit of {@code b}'s first {@code have} bytes is all zeros. */
    private static boolean unwrittenUnitEnds(byte[] b, int have, int unitBytes) {
        int start = (have / unitBytes - 1) * unitBytes;
        if (start < 0) return false;
        for (int i = start; i < start + unitBytes; i++) if (b[i] != 0) return false;
        return true;
    }

    private static ByteBuffer cached(String key) {
        synchronized (WHOLE) {
            return WHOLE.get(key);
        }
    }

    /** {@code b}, kept under {@code key} unless cut short since listed or maybe still written. */
    private static ByteBuffer keep(String key, ByteBuffer b, boolean cut, long listedModified) {
        boolean writing = listedModified != 0 && !settled(listedModified, System.currentTimeMillis());
        if (cut || writing) return b;
        synchronized (WHOLE) {
            if (WHOLE.put(key, b) == null) cachedBytes += b.capacity();
            var it = WHOLE.entrySet().iterator();
            while (cachedBytes > MAX_CACHED_BYTES && WHOLE.size() > 1 && it.hasNext()) {
                cachedBytes -= it.next().getValue().capacity();
                it.remove();
            }
        }
        return b;
    }

    @Override
    public byte[] readSmall(String path, long maxBytes) {
        long len = length(path);
        if (len < 0) return null;
        if (len > maxBytes) {
            throw new CorruptRecordError("file is " + len + " bytes, more than the " + maxBytes + "-byte limit", path, 0);
        }
        byte[] out = new byte[(int) len];
        int got = readInto(path, 0, out, out.length);
        return got == out.length ? out : java.util.Arrays.copyOf(out, got);
    }

    /** File systems whose block locations name real hosts (others report "localhost" or cost a request). */
    private static final java.util.Set<String> BLOCK_HOST_SCHEMES = java.util.Set.of("hdfs", "viewfs", "webhdfs",
            "swebhdfs");

    @Override
    public String[] hosts(String path, long pos, long len) {
        Path p = hadoopPath(path);
        if (!BLOCK_HOST_SCHEMES.contains(String.valueOf(p.toUri().getScheme()))) return new String[0];
        try {
            org.apache.hadoop.fs.BlockLocation best = null;
            long bestOverlap = 0;
            for (org.apache.hadoop.fs.BlockLocation b : fs(p).getFileBlockLocations(p, pos, len)) {
                long overlap = Math.min(pos + len, b.getOffset() + b.getLength()) - Math.max(pos, b.getOffset());
                if (overlap > bestOverlap) {
                    best = b;
                    bestOverlap = overlap;
                }
            }
            return best == null ? new String[0] : best.getHosts();
        } catch (IOException e) {
            return new String[0];              // a hint only: the read reports what is wrong
        }
    }

    @Override
    public java.nio.file.Path localPath(String path) {
        Path p = hadoopPath(path);
        String scheme = p.toUri().getScheme();
        return scheme == null || scheme.equals("file") ? java.nio.file.Path.of(p.toUri().getPath()) : null;
    }

    @Override
    public synchronized void close() {
        if (streams == null) return;
        for (FSDataInputStream in : streams.values()) {
            try {
                in.close();
            } catch (IOException e) {
                // read-only streams: nothing is lost
            }
        }
        streams.clear();
    }
}
