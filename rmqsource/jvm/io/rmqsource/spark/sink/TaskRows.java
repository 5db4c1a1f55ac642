package io.rmqsource.spark.sink;

import io.rmqsource.store.write.Message;
import io.rmqsource.store.write.MessageStoreWriter;
import io.rmqsource.store.write.PutSummary;
import io.rmqsource.store.write.PutResult;
import io.rmqsource.store.write.StagedPuts;
import java.io.IOException;
import java.nio.file.Path;
import java.util.BitSet;
import java.util.function.Supplier;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;

/**
 * A task's rows, held until the task has them all (an upstream error appends nothing, and the store
 * lock is taken only for the append). As they arrive they become messages, checked and encoded for the
 * store ({@link StagedPuts}: the tasks do that work in parallel, the append under the lock is a copy),
 * in the task's execution memory while Spark grants it, else spilled to its local directory;
 * a message the put checks refuse fails the task before anything is appended. With
 * preserveStoreFields the rows themselves are kept ({@link RowSpill}): a retry compares them with what
 * an earlier attempt wrote.
 */
final class TaskRows implements AutoCloseable {
    private final RowsToMessages intake;
    private final RowSpill rows;
    private final StagedPuts staged;
    private final Message message = new Message();
    private long count;
    private StagingMemory consumer;

    TaskRows(SinkOptions opts, SinkSchema schema, RowsToMessages intake) {
        if (opts.preserveStoreFields) {
            this.intake = intake;
            rows = new RowSpill(schema.schema);
            staged = null;
        } else {
            this.intake = intake.reusingBuffers();
            rows = null;
            staged = new StagedPuts(opts.config, memory(), Path.of(RowSpill.localDir()));
            if (consumer != null) consumer.of(staged);
        }
    }

    /** The task's execution memory (on a Spark executor), else RowSpill's fixed allowance. */
    private StagedPuts.MemoryBudget memory() {
        TaskContext task = TaskContext.get();
        if (task == null) return StagedPuts.fixed(RowSpill.MEMORY_BYTES);
        consumer = new StagingMemory(task.taskMemoryManager());
        return consumer;
    }

    long count() {
        return count;
    }

    /** The rows as given (preserveStoreFields only). */
    RowSpill rows() {
        return rows;
    }

    void add(InternalRow row) throws IOException {
        intake.check(row, count);
        if (staged != null) {
            PutResult refused = staged.stage(intake.fillChoosingQueue(message, row, count));
            if (refused != null) throw StoreAppend.refused(refused);
        } else {
            rows.add(row);
        }
        count++;
    }

    /**
     * Puts the rows not in {@code present} (StoreAppend.putStaged / putRows); {@code converter} gives
     * the row converter of a put from kept rows.
     */
    PutSummary put(MessageStoreWriter writer, BitSet present, boolean chooseSkipped, long failAfter,
                             String fault, Supplier<RowsToMessages> converter) throws IOException {
        if (staged != null) return StoreAppend.putStaged(writer, staged, present, failAfter, fault);
        return StoreAppend.putRows(writer, rows, converter.get(), present, chooseSkipped, failAfter, fault);
    }

    @Override
    public void close() {
        if (rows != null) rows.close();
        if (staged != null) staged.close();
    }
}
