package io.rmqsource.io;

import io.rmqsource.errors.CorruptRecordError;
import io.rmqsource.errors.DataLossError;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * Read-only maps of store files shared by the tasks of one JVM (an LRU of at most MAX_FILES).
 *
 * A map is reused only while the path names the same file with the same length (inode and size
 * checked on every lookup, one stat); otherwise the file is mapped again.  Stores are read, never
 * written, through these maps; readers use absolute gets only, so one map serves many threads.
 */
public final class MappedFiles {
    static final int MAX_FILES = 512;

    private static final class Entry {
        final Object fileKey;
        final long size;
        final ByteBuffer map;

        Entry(Object fileKey, long size, ByteBuffer map) {
            this.fileKey = fileKey;
            this.size = size;
            this.map = map;
        }
    }

    private static final Map<String, Entry> CACHE = new LinkedHashMap<>(64, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Entry> eldest) {
            return size() > MAX_FILES;
        }
    };

    private MappedFiles() {
    }

    public static ByteBuffer get(String path) {
        Path p = Path.of(path);
        BasicFileAttributes attrs;
        try {
            attrs = Files.readAttributes(p, BasicFileAttributes.class);
        } catch (NoSuchFileException e) {
            throw new DataLossError("segment file " + path + " is gone (deleted while the query ran?)");
        } catch (IOException e) {
            throw new CorruptRecordError("cannot read file attributes: " + e, path, 0);
        }
        synchronized (CACHE) {
            Entry e = CACHE.get(path);
            if (e != null && e.size == attrs.size() && Objects.equals(e.fileKey, attrs.fileKey())) return e.map;
        }
        ByteBuffer map = map(p, path);
        synchronized (CACHE) {
            CACHE.put(path, new Entry(attrs.fileKey(), map.capacity(), map));
        }
        return map;
    }

    private static ByteBuffer map(Path p, String path) {
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ)) {
            long size = ch.size();
            if (size > Integer.MAX_VALUE) {
                throw new CorruptRecordError("file is " + size + " bytes; segments over 2 GiB are not read", path, 0);
            }
            return ch.map(FileChannel.MapMode.READ_ONLY, 0, size);
        } catch (NoSuchFileException e) {
            throw new DataLossError("segment file " + path + " is gone (deleted while the query ran?)");
        } catch (IOException e) {
            throw new CorruptRecordError("cannot map file: " + e, path, 0);
        }
    }
}
