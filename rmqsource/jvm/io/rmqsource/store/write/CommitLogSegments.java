package io.rmqsource.store.write;

import io.rmqsource.errors.StoreError;
import io.rmqsource.store.Segment;
import io.rmqsource.store.Segments;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

/**
 * The writer's CommitLog segments (twin of the segment half of rmqsource/store/commitlog_append.py):
 * reopened after recovery, rolled (the segment after the current one pre-allocated, as
 * AllocateMappedFileService does), chunks written so that a failure leaves nothing recovery accepts.
 * Segments are full-size sparse files written with positioned writes.  Not thread-safe: the writer's
 * put lock guards it (the flush thread reads {@link #list} under that lock).
 */
final class CommitLogSegments {
    final Path dir;
    final long segmentSize;
    final List<CommitLogFile> list = new ArrayList<>();
    /** The segment being appended to, or null (none yet, or the last one is full). */
    CommitLogFile current;
    CommitLogFile prealloc;
    long nextStart;

    CommitLogSegments(Path dir, long segmentSize) {
        this.dir = dir;
        this.segmentSize = segmentSize;
    }

    /** Reopens the segments for appending after recovery ({@code end} = the valid end). */
    void open(long end) throws IOException {
        List<Segment> segs = Segments.listDirectory(dir.toString());
        if (segs.isEmpty()) {
            nextStart = 0;
            return;
        }
        for (int i = 0; i < segs.size(); i++) {
            Segment s = segs.get(i);
            long wrote = Math.min(Math.max(end - s.startOffset, 0), segmentSize);
            // Only the last two are kept open (older ones are complete and not written again).
            FileChannel ch = i >= segs.size() - 2
                    ? FileChannel.open(Path.of(s.path), StandardOpenOption.READ, StandardOpenOption.WRITE) : null;
            list.add(new CommitLogFile(s.startOffset, Path.of(s.path), ch, wrote));
        }
        CommitLogFile last = list.get(list.size() - 1);
        if (last.start <= end && end < last.start + segmentSize) current = last;
        nextStart = last.start + segmentSize;
    }

    /** End of the written CommitLog. */
    long maxPhyOffset() {
        if (current != null) return current.start + current.wrote;
        if (list.isEmpty()) return 0;
        CommitLogFile last = list.get(list.size() - 1);
        return last.start + last.wrote;
    }

    Path nextPath() {
        return dir.resolve(WriteFiles.offsetName(nextStart));
    }

    private CommitLogFile create(long start) throws IOException {
        Path path = dir.resolve(WriteFiles.offsetName(start));
        FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE, StandardOpenOption.CREATE);
        long size = -1;
        try {
            size = ch.size();
            if (size == 0) {
                // Full size, sparse: written with positioned writes, so a full disk is an IOException from
                // that write (never a fault in a map), and an unused segment costs no space.
                try (RandomAccessFile raf = new RandomAccessFile(path.toFile(), "rw")) {
                    raf.setLength(segmentSize);
                }
            } else if (size != segmentSize) {
                throw new StoreError("CommitLog segment " + path + " exists with " + size + " bytes");
            }
        } catch (IOException | RuntimeException e) {
            WriteFiles.closeQuietly(ch);
            if (size == 0) Files.deleteIfExists(path);
            throw e;
        }
        return new CommitLogFile(start, path, ch, 0);
    }

    /** Next segment (the pre-allocated one when present), and pre-allocate the one after. */
    CommitLogFile roll() throws IOException {
        long start = nextStart;
        CommitLogFile seg = prealloc != null && prealloc.start == start ? prealloc : null;
        if (seg == null) seg = create(start);
        prealloc = null;
        list.add(seg);
        current = seg;
        nextStart = start + segmentSize;
        try {   // the next-next file; a failure only delays it to the next roll
            prealloc = create(nextStart);
        } catch (IOException | StoreError e) {
            prealloc = null;
        }
        retireOld();
        return seg;
    }

    /** Closes the channels of older segments once fsynced (keeps the current and the previous one). */
    void retireOld() {
        for (int i = 0; i < list.size() - 2; i++) {
            CommitLogFile s = list.get(i);
            if (s.channel != null && !s.dirty && !s.flushing) {
                WriteFiles.closeQuietly(s.channel);
                s.channel = null;
            }
        }
    }

    /** The written bytes of a failed chunk could not be zeroed again: the writer must stop. */
    static final class ChunkNotZeroed extends IOException {
        private static final long serialVersionUID = 1L;

        ChunkNotZeroed(IOException cause) {
            super(cause.getMessage(), cause);
        }
    }

    /**
     * Writes a chunk so that a failure leaves nothing recovery accepts: the first 4 bytes (the first
     * record's TOTALSIZE) go last; on an error the bytes that did reach the file are zeroed again
     * (their blocks exist, so that needs no new space) and the IOException is thrown -- a
     * {@link ChunkNotZeroed} when even that failed.
     */
    static void writeChunk(CommitLogFile seg, ByteBuffer chunk, long pos) throws IOException {
        int len = chunk.limit();
        int k = Math.min(4, len);
        long[][] written = new long[2][];
        int nw = 0;
        try {
            ByteBuffer rest = chunk.duplicate();
            rest.limit(len).position(k);
            try {
                WriteFiles.writeFully(seg.channel, seg.path, rest, pos + k);
            } catch (IOException e) {
                written[nw++] = new long[] {pos + k, WriteFiles.Partial.of(e)};
                throw e;
            }
            written[nw++] = new long[] {pos + k, len - k};
            ByteBuffer head = chunk.duplicate();
            head.limit(k).position(0);
            try {
                WriteFiles.writeFully(seg.channel, seg.path, head, pos);
            } catch (IOException e) {
                written[nw++] = new long[] {pos, WriteFiles.Partial.of(e)};
                throw e;
            }
        } catch (IOException e) {
            try {
                for (int w = 0; w < nw; w++) {
                    long at = written[w][0];
                    long n = written[w][1];
                    for (long done = 0; done < n; ) {
                        int step = (int) Math.min(n - done, 1 << 20);
                        ByteBuffer zeros = ByteBuffer.allocate(step);
                        while (zeros.hasRemaining()) seg.channel.write(zeros, at + done + zeros.position());
                        done += step;
                    }
                }
            } catch (IOException e2) {
                e.addSuppressed(e2);
                throw new ChunkNotZeroed(e);
            }
            throw e;
        }
    }

    /** fsyncs the segments written since their last fsync (close). */
    void forceDirty() throws IOException {
        for (CommitLogFile s : list) {
            if (s.channel != null && s.dirty) {
                s.channel.force(true);
                s.dirty = false;
            }
        }
    }

    /** Closes and deletes the unused pre-allocated segment (a clean shutdown leaves none). */
    void dropPrealloc() throws IOException {
        if (prealloc == null) return;
        CommitLogFile p = prealloc;
        prealloc = null;
        p.channel.close();
        Files.delete(p.path);
    }

    void closeChannels() {
        for (CommitLogFile s : list) {
            WriteFiles.closeQuietly(s.channel);
            s.channel = null;
        }
        if (prealloc != null) {
            WriteFiles.closeQuietly(prealloc.channel);
            prealloc.channel = null;
        }
    }
}
