package io.rmqsource.store.write;

import java.nio.channels.FileChannel;
import java.nio.file.Path;

/** One open CommitLog segment of the writer: start offset, channel, bytes written, whether an fsync is owed. */
final class CommitLogFile {
    final long start;
    final Path path;
    FileChannel channel;
    long wrote;
    boolean dirty;
    /** The flush thread is forcing it (not to be closed meanwhile). */
    boolean flushing;

    CommitLogFile(long start, Path path, FileChannel channel, long wrote) {
        this.start = start;
        this.path = path;
        this.channel = channel;
        this.wrote = wrote;
    }
}
