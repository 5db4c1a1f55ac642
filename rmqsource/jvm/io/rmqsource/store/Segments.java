package io.rmqsource.store;

import io.rmqsource.errors.CorruptRecordError;
import io.rmqsource.errors.FormatError;
import io.rmqsource.io.StoreFiles;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * A list of equal-sized segment files (RocketMQ's MappedFileQueue, read side), twin of
 * rmqsource/io/segments.py: lookup by offset, and the files' bytes: whole files (read-only maps of
 * local files, ConsumeQueue files read whole elsewhere) and {@link Window}s of CommitLog segments.
 */
public final class Segments {
    public static final int MAX_SEGMENTS = 1_000_000;
    private static final Pattern NAME = Pattern.compile("\\d{20}");

    public final List<Segment> list;
    public final long segmentSize;
    private final long[] starts;
    private final Map<String, ByteBuffer> maps = new HashMap<>();
    public final StoreFiles files;
    private Window last;

    public Segments(List<Segment> segments, long configuredSize) {
        this(StoreFiles.LOCAL, segments, configuredSize);
    }

    public Segments(StoreFiles files, List<Segment> segments, long configuredSize) {
        this.files = files;
        this.list = segments;
        this.segmentSize = commonSize(segments, configuredSize);
        this.starts = new long[segments.size()];
        for (int i = 0; i < starts.length; i++) starts[i] = segments.get(i).startOffset;
    }

    /**
     * The configured size, else the longest file's length or, when smaller, the smallest distance
     * between the start offsets of consecutive files (twin of common_segment_size): files are
     * created at their full size, so this holds even when the first was cut short or one is
     * missing, and a file grown past its size is the one found at fault, not its neighbours.
     */
    public static long commonSize(List<Segment> segments, long configuredSize) {
        if (configuredSize > 0) return configuredSize;
        long size = 0;
        for (Segment s : segments) size = Math.max(size, s.sizeBytes);
        for (int i = 0; i + 1 < segments.size(); i++) {
            long gap = segments.get(i + 1).startOffset - segments.get(i).startOffset;
            if (gap > 0 && gap < size) size = gap;
        }
        return size;
    }

    /** Sorted segments of one directory; zero-length files and other names are skipped. */
    public static List<Segment> listDirectory(String directory) {
        return listDirectory(StoreFiles.LOCAL, directory, false);
    }

    /** The same, each segment marked as a DLedger data file or not. */
    public static List<Segment> listDirectory(String directory, boolean dledger) {
        return listDirectory(StoreFiles.LOCAL, directory, dledger);
    }

    /** The same from one listing of {@code directory} (names and sizes; no request per file). */
    public static List<Segment> listDirectory(StoreFiles files, String directory) {
        return listDirectory(files, directory, false);
    }

    public static List<Segment> listDirectory(StoreFiles files, String directory, boolean dledger) {
        return fromEntries(files.list(directory), directory, dledger);
    }

    /** The same from entries of {@code directory} already listed (null: no such directory). */
    public static List<Segment> fromEntries(List<StoreFiles.Entry> entries, String directory, boolean dledger) {
        List<Segment> out = new ArrayList<>();
        if (entries == null) return out;
        for (StoreFiles.Entry f : entries) {
            String name = f.name;
            if (!NAME.matcher(name).matches() || f.directory) continue;
            long size = f.size;
            if (size == 0) continue;
            String path = StoreFiles.child(directory, name);
            long start;
            try {
                start = Long.parseLong(name);
            } catch (NumberFormatException e) {     // the broker parses names as a long (spec 1.1)
                throw new FormatError("segment file name is past the int64 range", path, -1);
            }
            out.add(new Segment(start, path, size, dledger, f.modified));
            if (out.size() > MAX_SEGMENTS) {
                throw new FormatError("more than " + MAX_SEGMENTS + " segment files", directory, -1);
            }
        }
        out.sort(Segment.BY_START_OFFSET);
        return out;
    }

    public long minOffset() {
        return list.isEmpty() ? 0 : list.get(0).startOffset;
    }

    /** The segment holding {@code offset} (spec 1.4), or null. */
    public Segment find(long offset) {
        if (list.isEmpty() || offset < 0) return null;
        long z = segmentSize;
        long first = list.get(0).startOffset;
        if (z > 0) {
            long k = offset / z - first / z;
            if (k >= 0 && k < list.size()) {
                Segment seg = list.get((int) k);
                if (seg.startOffset <= offset && offset < seg.startOffset + z) return seg;
            }
        }
        int i = Arrays.binarySearch(starts, offset);
        if (i < 0) i = -i - 2;
        if (i >= 0) {
            Segment seg = list.get(i);
            if (offset < seg.startOffset + Math.max(seg.sizeBytes, z)) return seg;
        }
        return null;
    }

    public int indexOf(Segment seg) {
        int i = Arrays.binarySearch(starts, seg.startOffset);
        return i >= 0 ? i : -1;
    }

    /** Length of a segment as the format sees it: the common size, or the file when larger. */
    public long lengthOf(Segment seg) {
        return Math.max(seg.sizeBytes, segmentSize);
    }

    /**
     * The whole file read-only (its current length; bytes past it are absent): mapped, or read
     * whole off a remote file system (ConsumeQueue files; CommitLog segments go by {@link #window}).
     * A file that vanished is a DataLossError, as in the Python reader.
     */
    public ByteBuffer map(Segment seg) {
        MappedFaults.mapped(seg.path);
        ByteBuffer b = maps.get(seg.path);
        if (b == null) {
            b = files.whole(seg.path, seg.sizeBytes, seg.modified);
            maps.put(seg.path, b);
        }
        return b;
    }

    /**
     * The written part of a file of {@code unitBytes} units ({@link StoreFiles#writtenUnits}: the whole
     * map, or off a remote file system its start up to the first unwritten unit), kept as {@link #map} is.
     */
    public ByteBuffer mapWrittenUnits(Segment seg, int unitBytes) {
        MappedFaults.mapped(seg.path);
        ByteBuffer b = maps.get(seg.path);
        if (b == null) {
            b = files.writtenUnits(seg.path, seg.sizeBytes, seg.modified, unitBytes);
            maps.put(seg.path, b);
        }
        return b;
    }

    /** The whole file as one window ({@link #map}: mapped, or one read off a remote file system). */
    public Window whole(Segment seg) {
        ByteBuffer b = map(seg);
        return new Window(b, 0, b.capacity());
    }

    /**
     * Bytes of a segment file around a position: {@code buf} index i is file position {@code base + i};
     * {@code fileLength} is how long the file is (bytes past it are absent).
     */
    public static final class Window {
        public final ByteBuffer buf;
        public final long base;
        public final long fileLength;

        Window(ByteBuffer buf, long base, long fileLength) {
            this.buf = buf;
            this.base = base;
            this.fileLength = fileLength;
        }

        /** Index in {@link #buf} of file position {@code pos}. */
        public int at(long pos) {
            return (int) (pos - base);
        }

        /** Whether file positions [pos, pos + len) are in the window, or it holds all the file has of them. */
        public boolean covers(long pos, long len) {
            long end = base + buf.capacity();
            return base <= pos && (pos + len <= end || end >= fileLength);
        }
    }

    /**
     * A window of {@code seg} holding file positions [pos, pos + need) (or up to the file's end):
     * the whole map of a mapped file, else the last window when it covers them, else a new read of
     * max(need, {@link StoreFiles#windowBytes}) bytes from {@code pos}.  A record straddling a
     * window's end is read again from its start by the next window.
     */
    public Window window(Segment seg, long pos, long need) {
        if (files.mapped()) {
            ByteBuffer b = map(seg);
            if (last == null || last.buf != b) last = new Window(b, 0, b.capacity());
            return last;
        }
        if (last != null && last.fileLength >= 0 && seg.path.equals(lastPath) && last.covers(pos, need)) return last;
        return readWindow(seg, pos, Math.max(need, files.windowBytes()));
    }

    /** The error for a record claiming more than {@link StoreFiles#maxRecordBytes} (checked before reading it). */
    public static CorruptRecordError tooLong(Segment seg, long pos, long claimed, StoreFiles files) {
        return new CorruptRecordError("record of " + claimed + " bytes claimed at CommitLog offset " + (seg.startOffset + pos)
                + ": more than the " + files.maxRecordBytes() + " bytes one record may have when read off "
                + (files.mapped() ? "a mapped file" : "a remote file system (16x RocketMQ's default maxMessageSize)"),
                seg.path, pos);
    }

    /** Bytes a look at one record reads off a remote file: its header and properties fit more often than not. */
    public static final int LOOK_BYTES = 4096;

    /**
     * A window holding file positions [pos, pos + need) for a look at a record or a few: the whole
     * map of a mapped file, the last window when it covers them, else a read of max(need, readBytes)
     * bytes from pos (where {@link #window} would read a whole window for a few bytes).
     */
    public Window look(Segment seg, long pos, long need, long readBytes) {
        if (files.mapped()) return window(seg, pos, need);
        if (last != null && seg.path.equals(lastPath) && last.covers(pos, need)) return last;
        return readWindow(seg, pos, Math.max(need, readBytes));
    }

    /** A new window of exactly [pos, pos + len) (fewer at the file's end): coalesced reads of a few records. */
    public Window readWindow(Segment seg, long pos, long len) {
        if (files.mapped()) return window(seg, pos, len);
        long fileLen = seg.sizeBytes;
        int n = (int) Math.max(0, Math.min(len, Integer.MAX_VALUE - 16));
        Window ahead = fromPrefetch(seg, pos, n);
        if (ahead != null) return ahead;
        ByteBuffer b = files.read(seg.path, Math.max(0, pos), n);
        if (b.capacity() < n && pos + b.capacity() < fileLen) fileLen = pos + b.capacity();   // cut short since listed
        last = new Window(b, pos, fileLen);
        lastPath = seg.path;
        return last;
    }

    /**
     * A window of {@code seg} from bytes already read at file position {@code pos} (a vectored read of
     * [pos, pos + b.capacity())), kept as the last window as {@link #readWindow} keeps its own.
     */
    public Window windowOf(Segment seg, long pos, ByteBuffer b) {
        last = new Window(b, pos, seg.sizeBytes);
        lastPath = seg.path;
        return last;
    }

    private String lastPath;
    private java.util.concurrent.Future<ByteBuffer> pending;     // a read ahead of the last window
    private String pendingPath;
    private long pendingStart;

    /** Reads ahead on a daemon thread of the JVM (positioned reads only), while the caller decodes. */
    private static final java.util.concurrent.ExecutorService READ_AHEAD =
            java.util.concurrent.Executors.newCachedThreadPool(r -> {
                Thread t = new Thread(r, "rmq-read-ahead");
                t.setDaemon(true);
                return t;
            });

    /**
     * Starts reading [pos, pos + len) of {@code seg} in the background: the next {@link #readWindow}
     * that the last window and these bytes cover together takes them instead of reading (a failed or
     * short read ahead is dropped, and the window read as without it, with its errors).
     */
    public void prefetch(Segment seg, long pos, long len) {
        if (files.mapped() || len <= 0 || pending != null) return;
        int n = (int) Math.min(len, Integer.MAX_VALUE - 16);
        String path = seg.path;
        pendingPath = path;
        pendingStart = pos;
        pending = READ_AHEAD.submit(() -> files.read(path, pos, n));
    }

    /** The window [pos, pos + len) from the last window's tail and the bytes read ahead, or null. */
    private Window fromPrefetch(Segment seg, long pos, int len) {
        java.util.concurrent.Future<ByteBuffer> f = pending;
        if (f == null) return null;
        pending = null;
        ByteBuffer ahead;
        try {
            ahead = f.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        } catch (java.util.concurrent.ExecutionException e) {
            return null;
        }
        long start = pendingStart;
        Window prev = last;
        boolean joins = seg.path.equals(pendingPath) && seg.path.equals(lastPath) && prev != null
                && prev.base <= pos && pos <= start && prev.base + prev.buf.capacity() >= start;
        if (!joins || start + ahead.capacity() < Math.min(pos + len, seg.sizeBytes)) return null;
        int head = (int) (start - pos);
        ByteBuffer b = ByteBuffer.allocate(head + ahead.capacity());
        b.put(0, prev.buf, prev.at(pos), head);
        b.put(head, ahead, 0, ahead.capacity());
        last = new Window(b, pos, seg.sizeBytes);
        return last;
    }

    /**
     * The file mapped read-only, shared by every task of this JVM while the file stays the same
     * (same inode and length): a long-lived executor maps and faults in each segment once, not once
     * per task.  A file that vanished is a DataLossError, as in the Python reader.
     */
    public static ByteBuffer mapFile(String path) {
        MappedFaults.mapped(path);
        return StoreFiles.LOCAL.whole(path, -1);
    }

    public void close() {
        maps.clear();
        last = null;
        if (pending != null) pending.cancel(false);
        pending = null;
        files.close();
    }
}
