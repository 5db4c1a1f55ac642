package io.rmqsource.spark.sink;

import io.rmqsource.spark.errors.StoreError;
import io.rmqsource.spark.errors.StoreLockedError;
import io.rmqsource.spark.store.write.Message;
import io.rmqsource.spark.store.write.MessageStoreWriter;
import io.rmqsource.spark.store.write.PutResult;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;

/**
 * One task's append under the store lock (sink.py open_store_writer, appending, _put_all): the writer
 * opened with a clear error when another process keeps the lock, the rows put in chunks, the writer
 * closed; one typed error for whatever fails, the first one.
 */
final class StoreAppend {
    static final int CHUNK_ROWS = 8192;
    static final long CHUNK_BYTES = 8L << 20;

    private StoreAppend() {
    }

    private static StoreError caused(StoreError error, Throwable cause) {
        error.initCause(cause);
        return error;
    }

    interface Body<T> {
        T run(MessageStoreWriter writer) throws IOException;
    }

    static MessageStoreWriter open(SinkOptions o) {
        new File(o.root).mkdirs();
        try {
            return MessageStoreWriter.open(o.root, o.config, o.lockTimeoutMs);
        } catch (StoreLockedError e) {
            throw new StoreLockedError("rmq sink: could not lock the store " + o.root + " within " + o.lockTimeoutText()
                    + " s (option lockTimeout): another process - a broker or another writer - holds "
                    + new File(o.root, "lock") + ". (" + e.getMessage() + ")");
        } catch (UncheckedIOException e) {
            throw caused(new StoreError("rmq sink: could not open the store " + o.root + " for writing: " + e.getCause()), e);
        }
    }

    /** Run {@code body} with the store's writer, then close it (appending() in sink.py). */
    static <T> T appending(SinkOptions o, Body<T> body) throws IOException {
        MessageStoreWriter writer = open(o);
        T result;
        try {
            result = body.run(writer);
        } catch (Throwable e) {
            try {
                writer.close();
            } catch (RuntimeException ignored) {
                // the first error explains; the next writer's open recovers the store
            }
            if (e instanceof IOException || e instanceof UncheckedIOException) {
                throw caused(new StoreError("rmq sink: writing to the store " + o.root + " failed: " + e.getMessage()), e);
            }
            throw e;
        }
        try {
            writer.close();
        } catch (StoreError | UncheckedIOException e) {
            throw caused(new StoreError("rmq sink: the store " + o.root + " could not be closed cleanly (" + e.getMessage()
                    + "); the appended messages are in its CommitLog and its next writer recovers it"), e);
        }
        return result;
    }

    /** What a put pass did: rows appended, the CommitLog range they took. */
    static final class Appended {
        long count;
        long firstOffset = -1;
        long endOffset = -1;
    }

    /** Thrown by a fault of the test seam after part of the rows were put. */
    static final class InjectedFault extends StoreError {
        InjectedFault(String message) {
            super(message);
        }
    }

    /**
     * Put the rows not in {@code present}, in order. {@code chooseSkipped}: the round-robin turns also
     * pass over skipped rows (a batch task chose every row's queue as it took it in). After
     * {@code failAfter} rows (>= 0) the test seam's fault {@code fault} is thrown, the writer let go as by
     * a process that died there (abort stays, the next open recovers).
     */
    static Appended putRows(MessageStoreWriter writer, RowSpill rows, RowsToMessages conv, BitSet present,
                            boolean chooseSkipped, long failAfter, String fault) throws IOException {
        Appended out = new Appended();
        List<Message> chunk = new ArrayList<>(CHUNK_ROWS);
        List<Message> pool = new ArrayList<>(CHUNK_ROWS);
        long[] bytes = {0};
        rows.forEach((row, seq) -> {
            boolean skip = present != null && seq <= Integer.MAX_VALUE && present.get((int) seq);
            if (skip) {
                if (chooseSkipped) conv.queueOf(row);
                return;
            }
            int queue = conv.queueOf(row);
            Message m = chunk.size() < pool.size() ? pool.get(chunk.size()) : null;
            if (m == null) {
                m = new Message();
                pool.add(m);
            }
            chunk.add(conv.fill(m, row, seq, queue));
            bytes[0] += m.body.length;
            if (failAfter >= 0 && out.count + chunk.size() >= Math.max(failAfter, 1)) {
                put(writer, chunk, out);
                writer.abandon();
                throw new InjectedFault(fault);
            }
            if (chunk.size() >= CHUNK_ROWS || bytes[0] >= CHUNK_BYTES) {
                put(writer, chunk, out);
                bytes[0] = 0;
            }
        });
        if (!chunk.isEmpty()) put(writer, chunk, out);
        writer.flush();           // durable before the sink log says done
        return out;
    }

    private static void put(MessageStoreWriter writer, List<Message> chunk, Appended out) {
        PutResult[] results;
        try {
            results = writer.putAll(chunk);
        } catch (StoreError e) {
            Message m = chunk.get(0);
            throw caused(new StoreError("rmq sink: put of a message to " + m.topic + ":" + m.queueId + " failed: "
                    + e.getMessage()), e);
        }
        for (int i = 0; i < results.length; i++) {
            PutResult r = results[i];
            if (!r.ok()) {
                throw new StoreError("rmq sink: put of a message to " + r.topic + ":" + r.queueId + " failed with "
                        + r.status + ": " + (r.reason.isEmpty() ? String.valueOf(r.appendStatus) : r.reason));
            }
        }
        if (out.firstOffset < 0) out.firstOffset = results[0].commitLogOffset;
        PutResult last = results[results.length - 1];
        out.endOffset = last.commitLogOffset + last.size;
        out.count += results.length;
        chunk.clear();
    }
}
