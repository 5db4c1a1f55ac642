package io.rmqsource.spark.store;

import io.rmqsource.spark.errors.FormatError;
import java.io.File;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * A list of equal-sized segment files (RocketMQ's MappedFileQueue, read side), twin of
 * rmqsource/io/segments.py: lookup by offset, and read-only memory maps of the files.
 */
public final class Segments {
    public static final int MAX_SEGMENTS = 1_000_000;
    private static final Pattern NAME = Pattern.compile("\\d{20}");

    public final List<Segment> list;
    public final long segmentSize;
    private final long[] starts;
    private final Map<String, ByteBuffer> maps = new HashMap<>();

    public Segments(List<Segment> segments, long configuredSize) {
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
        return listDirectory(directory, false);
    }

    /** The same, each segment marked as a DLedger data file or not. */
    public static List<Segment> listDirectory(String directory, boolean dledger) {
        File d = new File(directory);
        List<Segment> out = new ArrayList<>();
        File[] entries = d.listFiles();
        if (entries == null) return out;
        for (File f : entries) {
            String name = f.getName();
            if (!NAME.matcher(name).matches() || !f.isFile()) continue;
            long size = f.length();
            if (size == 0) continue;
            long start;
            try {
                start = Long.parseLong(name);
            } catch (NumberFormatException e) {     // the broker parses names as a long (spec 1.1)
                throw new FormatError("segment file name is past the int64 range", f.getPath(), -1);
            }
            out.add(new Segment(start, f.getPath(), size, dledger));
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
     * The whole file mapped read-only (its current length; bytes past it are absent).  A file
     * that vanished is a DataLossError, as in the Python reader.
     */
    public ByteBuffer map(Segment seg) {
        MappedFaults.mapped(seg.path);
        ByteBuffer b = maps.get(seg.path);
        if (b == null) {
            b = mapFile(seg.path);
            maps.put(seg.path, b);
        }
        return b;
    }

    /**
     * The file mapped read-only, shared by every task of this JVM while the file stays the same
     * (same inode and length): a long-lived executor maps and faults in each segment once, not once
     * per task.  A file that vanished is a DataLossError, as in the Python reader.
     */
    public static ByteBuffer mapFile(String path) {
        return MappedFiles.get(path);
    }

    public void close() {
        maps.clear();
    }
}
