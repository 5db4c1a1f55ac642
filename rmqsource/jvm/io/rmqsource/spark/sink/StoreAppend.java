package io.rmqsource.spark.sink;

import io.rmqsource.errors.StoreError;
import io.rmqsource.errors.StoreLockedError;
import io.rmqsource.store.write.Message;
import io.rmqsource.store.write.MessageStoreWriter;
import io.rmqsource.store.write.PutResult;
import io.rmqsource.store.write.PutSummary;
import io.rmqsource.store.write.StagedPuts;
import io.rmqsource.store.write.WriteFailedError;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;

/**
 * One task's append under the store lock (sink/append.py open_store_writer, appending, put_all): the writer
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

    /** Run {@code body} with the store's writer, then close it (appending() in sink/append.py). */
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

    /** A task's append: {@code body} with the store's writer, its lock wait and append time noted in {@code msg}. */
    static void timedAppend(SinkOptions o, SinkCommitMessage msg, Body<Void> body) throws IOException {
        long t0 = System.nanoTime();
        long[] locked = {t0};
        appending(o, writer -> {
            locked[0] = System.nanoTime();
            return body.run(writer);
        });
        msg.lockWaitMs = (locked[0] - t0) / 1_000_000;
        msg.appendMs = (System.nanoTime() - locked[0]) / 1_000_000;
    }

    /** Thrown by a fault of the test seam after part of the rows were put. */
    static final class InjectedFault extends StoreError {
        InjectedFault(String message) {
            super(message);
        }
    }

    /**
     * Put the kept rows (preserveStoreFields) not in {@code present}, in order. {@code chooseSkipped}: the round-robin turns also
     * pass over skipped rows (a batch task chose every row's queue as it took it in). After
     * {@code failAfter} rows (>= 0) the test seam's fault {@code fault} is thrown, the writer let go as by
     * a process that died there (abort stays, the next open recovers).
     *
     * <p>Rows become messages on a second thread, a chunk ahead of the puts, so the lock is held for
     * about the writer's own time.
     */
    static PutSummary putRows(MessageStoreWriter writer, RowSpill rows, RowsToMessages conv, BitSet present,
                            boolean chooseSkipped, long failAfter, String fault) throws IOException {
        PutSummary out = new PutSummary();
        ChunkConverter converter = new ChunkConverter(rows, conv, present, chooseSkipped);
        converter.start();
        try {
            for (List<Message> chunk = converter.next(); chunk != null; chunk = converter.next()) {
                if (failAfter >= 0 && out.count + chunk.size() >= Math.max(failAfter, 1)) {
                    put(writer, new ArrayList<>(chunk.subList(0, (int) (Math.max(failAfter, 1) - out.count))), out);
                    writer.abandon();
                    throw new InjectedFault(fault);
                }
                put(writer, chunk, out);
                converter.recycle(chunk);
            }
        } finally {
            converter.finish();
        }
        writer.flush();           // durable before the sink log says done
        return out;
    }

    /**
     * Put the staged messages not in {@code present}, in order; after {@code failAfter} of them (>= 0)
     * the test seam's fault, as in {@link #putRows}.
     */
    static PutSummary putStaged(MessageStoreWriter writer, StagedPuts staged, BitSet present, long failAfter,
                              String fault) throws IOException {
        long limit = failAfter >= 0 ? Math.max(failAfter, 1) : -1;
        PutSummary s;
        try {
            s = writer.putStaged(staged, present, limit, null);
        } catch (WriteFailedError e) {
            PutSummary d = e.summary();
            String to = d != null && d.stoppedTopic != null ? d.stoppedTopic + ":" + d.stoppedQueueId : "the store";
            throw caused(new StoreError("rmq sink: put of a message to " + to + " failed: " + e.getMessage()), e);
        }
        if (limit >= 0 && s.count >= limit) {
            writer.abandon();
            throw new InjectedFault(fault);
        }
        writer.flush();           // durable before the sink log says done
        return s;
    }

    /** The error of a put the checks refused. */
    static StoreError refused(PutResult r) {
        return new StoreError("rmq sink: put of a message to " + r.topic + ":" + r.queueId + " failed with "
                + r.status + ": " + (r.reason.isEmpty() ? String.valueOf(r.appendStatus) : r.reason));
    }

    /** Fills chunks of messages from the rows on its own thread; two chunk lists in flight. */
    private static final class ChunkConverter extends Thread {
        private static final List<Message> END = new ArrayList<>();
        private final java.util.concurrent.BlockingQueue<List<Message>> full =
                new java.util.concurrent.ArrayBlockingQueue<>(3);
        private final java.util.concurrent.BlockingQueue<List<Message>> free =
                new java.util.concurrent.ArrayBlockingQueue<>(3);
        private final RowSpill rows;
        private final RowsToMessages conv;
        private final BitSet present;
        private final boolean chooseSkipped;
        private volatile boolean stopped;
        private volatile Throwable error;

        ChunkConverter(RowSpill rows, RowsToMessages conv, BitSet present, boolean chooseSkipped) {
            super("rmq-sink-rows");
            setDaemon(true);
            this.rows = rows;
            this.conv = conv;
            this.present = present;
            this.chooseSkipped = chooseSkipped;
            free.add(new ArrayList<>(CHUNK_ROWS));
            free.add(new ArrayList<>(CHUNK_ROWS));
        }

        @Override
        public void run() {
            try {
                @SuppressWarnings("unchecked")
                List<Message>[] chunk = new List[] {take()};
                long[] bytes = {0};
                rows.forEach((row, seq) -> {
                    if (present != null && seq <= Integer.MAX_VALUE && present.get((int) seq)) {
                        if (chooseSkipped) conv.queueOf(row);
                        return;
                    }
                    List<Message> c = chunk[0];
                    Message m = conv.fillChoosingQueue(new Message(), row, seq);
                    c.add(m);
                    bytes[0] += m.body.length;
                    if (c.size() >= CHUNK_ROWS || bytes[0] >= CHUNK_BYTES) {
                        hand(c);
                        chunk[0] = take();
                        bytes[0] = 0;
                    }
                });
                if (!chunk[0].isEmpty()) hand(chunk[0]);
            } catch (Throwable e) {
                error = e;
            } finally {
                if (!stopped) full.offer(END);
            }
        }

        private List<Message> take() throws IOException {
            try {
                List<Message> c = free.take();
                if (stopped) throw new IOException("rmq sink: the append stopped");
                return c;
            } catch (InterruptedException e) {
                throw new IOException("rmq sink: interrupted while converting rows", e);
            }
        }

        private void hand(List<Message> c) throws IOException {
            try {
                full.put(c);
            } catch (InterruptedException e) {
                throw new IOException("rmq sink: interrupted while converting rows", e);
            }
        }

        /** The next chunk, null after the last; the converter's error, if it failed. */
        List<Message> next() throws IOException {
            List<Message> c;
            try {
                c = full.take();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("rmq sink: interrupted while appending", e);
            }
            if (c != END) return c;
            Throwable e = error;
            if (e instanceof IOException) throw (IOException) e;
            if (e instanceof RuntimeException) throw (RuntimeException) e;
            if (e instanceof Error) throw (Error) e;
            return null;
        }

        void recycle(List<Message> c) {
            c.clear();
            free.offer(c);
        }

        void finish() {
            stopped = true;
            free.offer(new ArrayList<>(0));        // wakes a converter waiting for a chunk
            interrupt();
            try {
                join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private static void put(MessageStoreWriter writer, List<Message> chunk, PutSummary out) {
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
            if (!r.ok()) throw refused(r);
        }
        if (out.firstOffset < 0) out.firstOffset = results[0].commitLogOffset;
        PutResult last = results[results.length - 1];
        out.endOffset = last.commitLogOffset + last.size;
        out.count += results.length;
        chunk.clear();
    }
}
