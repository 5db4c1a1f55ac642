package io.rmqsource.spark.sink;

import io.rmqsource.errors.StoreError;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;

/**
 * spill.py RowSpill on the JVM: a task's rows, held until the task has them all (an upstream error
 * appends nothing, and the store lock is taken only for the append). Rows are kept as UnsafeRow bytes
 * in memory up to {@link #MEMORY_BYTES}, then all of them in one file in Spark's local directory, read
 * back in order one row at a time.
 */
final class RowSpill implements AutoCloseable {
    static final long MEMORY_BYTES = 64L << 20;
    private static final int CHUNK_BYTES = 4 << 20;

    private final int fields;
    private final UnsafeProjection project;
    private final List<byte[]> chunks = new ArrayList<>();
    private final List<Integer> chunkEnds = new ArrayList<>();
    private final byte[] writeBuffer = new byte[4096];
    private byte[] chunk;
    private int chunkUsed;
    private long memoryBytes;
    private File file;
    private DataOutputStream out;
    private long rows;

    RowSpill(StructType schema) {
        this.fields = schema.length();
        this.project = UnsafeProjection.create(schema);
    }

    long rows() {
        return rows;
    }

    boolean spilled() {
        return file != null;
    }

    void add(InternalRow row) throws IOException {
        UnsafeRow u = row instanceof UnsafeRow ? (UnsafeRow) row : project.apply(row);
        int size = u.getSizeInBytes();
        rows++;
        if (out == null && memoryBytes + size + 4 <= MEMORY_BYTES) {
            if (chunk == null || chunkUsed + 4 + size > chunk.length) newChunk(size + 4);
            putSize(chunk, chunkUsed, size);
            Platform.copyMemory(u.getBaseObject(), u.getBaseOffset(), chunk,
                    Platform.BYTE_ARRAY_OFFSET + chunkUsed + 4, size);
            chunkUsed += 4 + size;
            memoryBytes += 4 + size;
            return;
        }
        if (out == null) spillMemory();
        out.writeInt(size);
        u.writeToStream(out, writeBuffer);
    }

    // Sizes are big-endian in memory as in the file (DataOutputStream), since memory is copied there as is.
    private static void putSize(byte[] b, int at, int size) {
        b[at] = (byte) (size >>> 24);
        b[at + 1] = (byte) (size >>> 16);
        b[at + 2] = (byte) (size >>> 8);
        b[at + 3] = (byte) size;
    }

    private static int getSize(byte[] b, int at) {
        return (b[at] & 0xff) << 24 | (b[at + 1] & 0xff) << 16 | (b[at + 2] & 0xff) << 8 | (b[at + 3] & 0xff);
    }

    private void newChunk(int need) {
        if (chunk != null) chunkEnds.add(chunkUsed);
        chunk = new byte[Math.max(CHUNK_BYTES, need)];
        chunks.add(chunk);
        chunkUsed = 0;
    }

    private void spillMemory() throws IOException {
        file = File.createTempFile("rmq-sink-", ".rows", new File(localDir()));
        out = new DataOutputStream(new BufferedOutputStream(new FileOutputStream(file), 1 << 20));
        if (chunk != null) chunkEnds.add(chunkUsed);
        for (int i = 0; i < chunks.size(); i++) out.write(chunks.get(i), 0, chunkEnds.get(i));
        chunks.clear();
        chunkEnds.clear();
        chunk = null;
        memoryBytes = 0;
    }

    /** Spark's local directory of this executor (SPARK_LOCAL_DIRS), else the temp dir. */
    static String localDir() {
        String dirs = System.getenv("SPARK_LOCAL_DIRS");
        if (dirs != null) {
            for (String d : dirs.split(",")) if (!d.isEmpty() && new File(d).isDirectory()) return d;
        }
        return System.getProperty("java.io.tmpdir");
    }

    /** Called for every row, in order, with its index; the row is valid only during the call. */
    interface RowVisitor {
        void row(UnsafeRow row, long seq) throws IOException;
    }

    void forEach(RowVisitor visitor) throws IOException {
        UnsafeRow row = new UnsafeRow(fields);
        long seq = 0;
        if (out == null) {
            for (int i = 0; i < chunks.size(); i++) {
                byte[] c = chunks.get(i);
                int end = c == chunk ? chunkUsed : chunkEnds.get(i);
                int pos = 0;
                while (pos < end) {
                    int size = getSize(c, pos);
                    row.pointTo(c, Platform.BYTE_ARRAY_OFFSET + pos + 4, size);
                    visitor.row(row, seq++);
                    pos += 4 + size;
                }
            }
            return;
        }
        out.flush();
        byte[] buf = new byte[1024];
        try (DataInputStream in = new DataInputStream(new BufferedInputStream(new FileInputStream(file), 1 << 20))) {
            for (long i = 0; i < rows; i++) {
                int size;
                try {
                    size = in.readInt();
                    if (size > buf.length) buf = new byte[Math.max(size, 2 * buf.length)];
                    in.readFully(buf, 0, size);
                } catch (EOFException e) {
                    throw new StoreError("rmq sink: spill file " + file + " ends after " + i + " of " + rows + " rows");
                }
                row.pointTo(buf, Platform.BYTE_ARRAY_OFFSET, size);
                visitor.row(row, seq++);
            }
        }
    }

    /** Drop the rows (remove the spill file). */
    @Override
    public void close() {
        chunks.clear();
        chunkEnds.clear();
        chunk = null;
        try {
            if (out != null) out.close();
        } catch (IOException ignored) {
            // the file goes next
        }
        out = null;
        if (file != null) {
            try {
                Files.deleteIfExists(file.toPath());
            } catch (IOException ignored) {
                // Spark's local dir is removed with the executor
            }
        }
    }
}
