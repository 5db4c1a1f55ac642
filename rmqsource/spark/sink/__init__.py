"""Write side of the ``rmq`` source: batch sink and idempotent streaming sink.

``df.write.format("rmq").mode("append").save("/path/to/store")`` appends one
message per row through the store writer
(:class:`rmqsource.store.writer.MessageStoreWriter`), which dispatches the
ConsumeQueues and IndexFile before a put returns, so a message is readable
(and visible to a broker opening the store) once its task has finished.

Columns: ``topic`` (string, required), ``body`` (binary or string, required),
and optionally ``queueId`` (int), ``tags`` (string), ``keys`` (string, or
array of strings joined by spaces), ``properties`` (map<string,string>; a
wire-form string with ``preserveStoreFields``, see below),
``flag`` (int), ``bornTimestamp`` (timestamp or epoch ms), ``bornHost``
(string).  The other columns of the rmq read schema (queueOffset, msgId ...)
are ignored, so a DataFrame read from one store can be appended to another;
any other column is refused.

Queue choice, per row: ``queueId`` when set; else, when the row has keys,
``hash(keys) % queueNums`` (RocketMQ's SelectMessageQueueByHash on the KEYS
string); else round-robin over the topic's queues.  ``queueNums`` (option)
defaults to the topic's ``writeQueueNums`` in ``config/topics.json``, else 4.

Concurrency: a task first takes in all its rows (:class:`~rmqsource.spark.spill.RowSpill`:
in memory up to a budget, the rest spilled to local disk, so an upstream
error appends nothing and a task's memory stays bounded), then opens the
writer, which takes the store's exclusive ``lock`` (waiting up to
``lockTimeout``, default 120s), appends, and closes it (clean shutdown:
flushed, checkpoint written).  Tasks of one job, or of concurrent jobs on one
machine, therefore append one after the other and never interleave partial
records; a broker or another writer holding the lock longer than the timeout
makes the task fail with a clear :class:`~rmqsource.errors.StoreLockedError`.

Batch writes are retry-safe: each message carries ``__RMQSOURCE_BATCH`` =
``write:<writeId>`` (option ``writeId``) or ``job:<id of this write>``, and
``__RMQSOURCE_SEQ`` = ``partitionId:rowIndex``; the sink log records, per
write and partition, where the append started and whether it finished.  A
retried task skips the rows its earlier attempts appended (found in the
CommitLog by those properties); with a ``writeId`` the entries outlive the job,
so running the same write again appends only the partitions, and rows, that
are missing.  An error while appending (a full disk) is one
:class:`~rmqsource.errors.StoreError` naming the file; a failing close does
not hide the error that came first.

Streaming (``writeStream.format("rmq")``) is exactly-once into the store: each
message carries ``__RMQSOURCE_BATCH`` = ``queryId:batchId`` and
``__RMQSOURCE_SEQ`` = ``partitionId:rowIndex``, and the sink log
``{root}/config/rmqsourceSinkLog.json`` (written with the crash-safe
``string2file`` protocol, always under the store lock) records, per query,
the last committed batch and, per task, where its append started and whether
it finished.  A replayed batch (query restarted after a failure between the
appends and Spark's commit) is skipped when it was committed or its task
finished; a task that died in the middle of its append resumes after the
rows found in the CommitLog with its own batch/partition tag.

``preserveStoreFields`` (option, default false) replays messages as they were: the columns
storeTimestamp, storeHost, sysFlag, reconsumeTimes and preparedTransactionOffset (otherwise
ignored) are written as given, the properties map in its order, and no stamps are added (a golden
corpus written through the sink gives the engine's bytes).  A retried task then finds what an
earlier attempt appended by comparing the records from that attempt's logged start offset, in
order, with its own rows: the attempt held the lock for its whole append, so they are contiguous.
With preserveStoreFields, ``properties`` may be a string in RocketMQ's wire form
(``name\\x01value\\x02...``), written verbatim (duplicate or empty keys, junk entries stay as given);
TAGS and KEYS are inside it, so the ``tags`` / ``keys`` columns are refused with it, and without
preserveStoreFields a string ``properties`` column is refused (texts: :data:`SINK_ERRORS`).
"""

from __future__ import annotations

from ..compat import require_python_data_source

require_python_data_source()     # pyspark 3.5: one line saying the jar is required there

# One module per JVM twin in io/rmqsource/spark/sink/; the names below are this package's API.
from ...store.queue_select import QueueChooser  # noqa: E402,F401
from .append import PUT_CHUNK, appending, open_store_writer, put_all, refuse_unsupported_layout  # noqa: E402,F401
from .appended import appended_seqs, find_appended, rows_put_from, same_verbatim  # noqa: E402,F401
from .batch import ANONYMOUS_ENTRY_DAYS, RmqBatchWriter, SinkCommitMessage  # noqa: E402,F401
from .faults import FAULT_ENV  # noqa: E402,F401
from .log import SINK_LOG_NAME, SinkLog, parse_sink_log  # noqa: E402,F401
from .options import (DEFAULT_LOCK_TIMEOUT_S, MAX_WRITE_ID_CHARS, SINK_OPTIONS, SPARK_SINK_OPTIONS,  # noqa: E402,F401
                      SinkOptions, parse_sink_options)
from .rows import (BATCH_PROPERTY, MESSAGE_SCHEMA, SEQ_PROPERTY, STORE_FIELDS_SCHEMA,  # noqa: E402,F401
                   STORE_FIELDS_STRING_SCHEMA, table_from_batch)
from .schema import READ_ONLY_COLUMNS, SINK_ERRORS, STORE_FIELD_COLUMNS, WRITABLE_COLUMNS, check_schema  # noqa: E402,F401
from .stream import RmqStreamWriter  # noqa: E402,F401
