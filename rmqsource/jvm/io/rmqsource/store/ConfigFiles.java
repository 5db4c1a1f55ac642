package io.rmqsource.store;

import io.rmqsource.errors.FormatError;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.function.BiFunction;
import java.util.function.Predicate;

/**
 * RocketMQ's config files ({@code {root}/config/*.json}), written and read the way
 * rmqsource/io/durable.py does (the same file names and crash safety as MixAll.string2File /
 * ConfigManager.load, plus fsyncs): {@code NAME.tmp} written and fsynced, the current {@code NAME}
 * copied to {@code NAME.bak} when it is non-empty (and valid), {@code NAME.tmp} renamed over
 * {@code NAME}, the directory fsynced.  Reads fall back to {@code NAME.bak}.
 */
public final class ConfigFiles {
    /** Config files are read whole; anything bigger is refused as hostile. */
    public static final long MAX_CONFIG_BYTES = 512L * 1024 * 1024;

    private ConfigFiles() {
    }

    /** Whole content of {@code path}, or null when it does not exist. */
    public static byte[] readBytes(Path path) {
        try {
            if (Files.isDirectory(path)) throw new FormatError("expected a file, found a directory", path.toString(), 0);
            long size = Files.size(path);
            if (size > MAX_CONFIG_BYTES) {
                throw new FormatError("file is " + size + " bytes, more than the " + MAX_CONFIG_BYTES
                        + "-byte limit for config files", path.toString(), 0);
            }
            return Files.readAllBytes(path);
        } catch (NoSuchFileException e) {
            return null;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** ConfigManager.load: parse NAME, else NAME.bak; null when neither has content (load_with_bak). */
    public static <T> T loadWithBak(Path path, BiFunction<byte[], String, T> parse) {
        FormatError primary = null;
        try {
            byte[] data = readBytes(path);
            if (data != null && data.length > 0) return parse.apply(data, path.toString());
        } catch (FormatError e) {
            primary = e;
        }
        Path bak = Path.of(path + ".bak");
        try {
            byte[] data = readBytes(bak);
            if (data != null && data.length > 0) return parse.apply(data, bak.toString());
        } catch (FormatError e) {
            if (primary != null) throw primary;
            throw e;
        }
        if (primary != null) throw primary;
        return null;
    }

    /** Crash-safe MixAll.string2File (string2file): NAME.tmp, NAME.bak, rename, directory fsync. */
    public static void string2File(Path path, byte[] content, Predicate<byte[]> previousIsValid) {
        Path tmp = Path.of(path + ".tmp");
        Path bak = Path.of(path + ".bak");
        Path parent = path.toAbsolutePath().getParent();
        try {
            ensureParent(parent);
            try {
                writeAllFsync(tmp, content);
                byte[] previous = readBytes(path);
                if (previous != null && previous.length > 0 && (previousIsValid == null || previousIsValid.test(previous))) {
                    writeAllFsync(bak, previous);
                }
                Files.move(tmp, path, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (IOException | RuntimeException e) {
                Files.deleteIfExists(tmp);
                throw e;
            }
            fsyncDir(parent);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void writeAllFsync(Path path, byte[] data) throws IOException {
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.WRITE, StandardOpenOption.CREATE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            ByteBuffer b = ByteBuffer.wrap(data);
            while (b.hasRemaining()) ch.write(b);
            ch.force(true);
        }
    }

    /** Creates the missing directories (File.getParentFile().mkdirs()), each made durable in its parent. */
    private static void ensureParent(Path parent) throws IOException {
        if (Files.isDirectory(parent)) return;
        Path probe = parent;
        java.util.ArrayDeque<Path> missing = new java.util.ArrayDeque<>();
        for (int i = 0; i < 256 && probe != null && !Files.isDirectory(probe); i++) {
            missing.push(probe);
            probe = probe.getParent();
        }
        Files.createDirectories(parent);
        for (Path created : missing) fsyncDir(created.getParent());
    }

    static void fsyncDir(Path dir) throws IOException {
        try (FileChannel ch = FileChannel.open(dir, StandardOpenOption.READ)) {
            ch.force(true);
        } catch (AccessDeniedException e) {
            // some file systems refuse to open directories; the rename is still atomic
        }
    }
}
