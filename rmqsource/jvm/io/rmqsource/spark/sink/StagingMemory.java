package io.rmqsource.spark.sink;

import io.rmqsource.store.write.StagedPuts;
import java.io.IOException;
import org.apache.spark.memory.MemoryConsumer;
import org.apache.spark.memory.MemoryMode;
import org.apache.spark.memory.TaskMemoryManager;

/**
 * A sink task's staged messages as a consumer of the task's execution memory: staging holds them in
 * memory while Spark grants it, and spills them to Spark's local directory when it does not, or when
 * another consumer of the task needs the memory (as Spark's sorters do).
 */
final class StagingMemory extends MemoryConsumer implements StagedPuts.MemoryBudget {
    private final Thread owner = Thread.currentThread();
    private StagedPuts staged;
    private long held;

    StagingMemory(TaskMemoryManager manager) {
        super(manager, manager.pageSizeBytes(), MemoryMode.ON_HEAP);
    }

    void of(StagedPuts staged) {
        this.staged = staged;
    }

    @Override
    public boolean reserve(long bytes) {
        long got = acquireMemory(bytes);
        if (got < bytes) {
            if (got > 0) freeMemory(got);
            return false;
        }
        held += got;
        return true;
    }

    @Override
    public void releaseAll() {
        if (held > 0) freeMemory(held);
        held = 0;
    }

    /**
     * Another consumer of the task wants memory: spill. Asked for its own reservation, or from another
     * thread (staging is single-threaded), it spills nothing here: a refused reservation spills anyway.
     */
    @Override
    public long spill(long size, MemoryConsumer trigger) throws IOException {
        if (trigger == this || staged == null || Thread.currentThread() != owner) return 0;
        return staged.spillNow();
    }
}
