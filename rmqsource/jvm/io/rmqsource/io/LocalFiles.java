package io.rmqsource.io;

import io.rmqsource.errors.CorruptRecordError;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** Local files: listings by java.io.File, whole files by shared read-only maps ({@link MappedFiles}). */
final class LocalFiles extends StoreFiles {
    private static final long serialVersionUID = 1L;

    @Override
    public boolean mapped() {
        return true;
    }

    @Override
    public List<Entry> list(String dir) {
        File[] entries = new File(dir).listFiles();
        if (entries == null) return null;
        List<Entry> out = new ArrayList<>(entries.length);
        for (File f : entries) {
            boolean d = f.isDirectory();
            if (d || f.isFile()) out.add(new Entry(f.getName(), d ? 0 : f.length(), d));
        }
        return out;
    }

    @Override
    public boolean isDirectory(String path) {
        return new File(path).isDirectory();
    }

    @Override
    public boolean isFile(String path) {
        return new File(path).isFile();
    }

    @Override
    public long length(String path) {
        File f = new File(path);
        return f.isFile() ? f.length() : -1;
    }

    @Override
    public ByteBuffer whole(String path, long listedLength) {
        return MappedFiles.get(path);
    }

    @Override
    public ByteBuffer read(String path, long pos, int len) {
        ByteBuffer map = MappedFiles.get(path);
        int from = (int) Math.min(pos, map.capacity());
        int n = (int) Math.min(len, map.capacity() - from);
        ByteBuffer out = ByteBuffer.allocate(n);
        map.get(from, out.array(), 0, n);
        return out;
    }

    @Override
    public byte[] readSmall(String path, long maxBytes) {
        Path p = Path.of(path);
        try {
            long size = Files.size(p);
            if (size > maxBytes) {
                throw new CorruptRecordError("file is " + size + " bytes, more than the " + maxBytes + "-byte limit",
                        path, 0);
            }
            return Files.readAllBytes(p);
        } catch (NoSuchFileException e) {
            return null;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public Path localPath(String path) {
        return Path.of(path);
    }
}
