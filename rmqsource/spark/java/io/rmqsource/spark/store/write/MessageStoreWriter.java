package io.rmqsource.spark.store.write;

import io.rmqsource.spark.errors.StoreError;
import io.rmqsource.spark.store.StoreConfig;
import java.util.List;
import java.util.function.LongSupplier;

/**
 * Exclusive writer of one store root: RocketMQ's DefaultMessageStore.putMessage over the file store,
 * byte for byte like the engine generation named by the config's engineVersion (the twin of
 * rmqsource/store/writer.py MessageStoreWriter). close() is a clean shutdown.
 */
public final class MessageStoreWriter implements AutoCloseable {
    private final String root;

    private MessageStoreWriter(String root) {
        this.root = root;
    }

    /**
     * Takes {root}/lock (waiting up to lockTimeoutMs; StoreLockedError naming the lock file otherwise),
     * refuses a store a broker holds, a DLedger or other unwritable layout, recovers a store that was
     * not shut down cleanly, writes the abort file while open.
     */
    public static MessageStoreWriter open(String root, StoreConfig config, long lockTimeoutMs) {
        return open(root, config, lockTimeoutMs, System::currentTimeMillis);
    }

    /** As {@link #open(String, StoreConfig, long)} with the store clock (ms) injected. */
    public static MessageStoreWriter open(String root, StoreConfig config, long lockTimeoutMs, LongSupplier clockMs) {
        throw new StoreError("MessageStoreWriter is not implemented yet: " + root);
    }

    public PutResult put(Message m) {
        return putAll(List.of(m))[0];
    }

    /**
     * Puts in order (encode into one buffer per segment, one write, then dispatch); results[i] for
     * batch.get(i). A put refused by the checks gets its status and takes no bytes; an I/O failure
     * throws StoreError naming the file after the results of what was written are final.
     */
    public PutResult[] putAll(List<Message> batch) {
        throw new StoreError("MessageStoreWriter is not implemented yet: " + root);
    }

    /** End of the written CommitLog. */
    public long maxPhyOffset() {
        return 0;
    }

    public String root() {
        return root;
    }

    /** Clean shutdown: flush, checkpoint, abort file removed, lock released. */
    @Override
    public void close() {
    }
}
