"""Write side of the ``rmq`` source: batch sink and idempotent streaming sink.

``df.write.format("rmq").mode("append").save("/path/to/store")`` appends one
message per row through the store writer
(:class:`rmqsource.store.writer.MessageStoreWriter`), which dispatches the
ConsumeQueues and IndexFile before a put returns, so a message is readable
(and visible to a broker opening the store) once its task has finished.

Columns: ``topic`` (string, required), ``body`` (binary or string, required),
and optionally ``queueId`` (int), ``tags`` (string), ``keys`` (string, or
array of strings joined by spaces), ``properties`` (map<string,string>),
``flag`` (int), ``bornTimestamp`` (timestamp or epoch ms), ``bornHost``
(string).  The other columns of the rmq read schema (queueOffset, msgId ...)
are ignored, so a DataFrame read from one store can be appended to another;
any other column is refused.

Queue choice, per row: ``queueId`` when set; else, when the row has keys,
``hash(keys) % queueNums`` (RocketMQ's SelectMessageQueueByHash on the KEYS
string); else round-robin over the topic's queues.  ``queueNums`` (option)
defaults to the topic's ``writeQueueNums`` in ``config/topics.json``, else 4.

Concurrency: a task first buffers its rows (Arrow batches), then opens the
writer, which takes the store's exclusive ``lock`` (waiting up to
``lockTimeout``, default 120s), appends, and closes it (clean shutdown:
flushed, checkpoint written).  Tasks of one job, or of concurrent jobs on one
machine, therefore append one after the other and never interleave partial
records; a broker or another writer holding the lock longer than the timeout
makes the task fail with a clear :class:`~rmqsource.errors.StoreLockedError`.

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
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Optional

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from ..errors import FormatError, OptionError, RmqError, StoreError, StoreLockedError
from ..format.configjson import loads_fastjson
from ..format.record import Kind
from ..io.durable import load_with_bak, string2file
from ..io.lock import StoreLock
from ..store.config import StoreConfig
from ..store.file_sizes import fit_config_to_files, given_keys
from ..store.queue_select import DEFAULT_QUEUE_NUMS, QueueChooser, keys_string, read_topic_queue_nums
from .compat import DataSourceStreamArrowWriter
from .options import SQL_TABLE_HINT, store_path

BATCH_PROPERTY = "__RMQSOURCE_BATCH"
SEQ_PROPERTY = "__RMQSOURCE_SEQ"
SINK_LOG_NAME = "rmqsourceSinkLog.json"
# Fault injection for the replay tests, outside the store: only when this environment variable names a
# file (test code sets it before Spark starts its workers) holding "<point> <store root>", where point is
# "mid-append:<batchId>" or "commit:<batchId>", does that step fail once (the file is removed first).
# Nothing in a store can trigger it.
FAULT_ENV = "RMQSOURCE_TEST_SINK_FAULT_FILE"
DEFAULT_LOCK_TIMEOUT_S = 120.0
PUT_CHUNK = 65536

# Columns of the read schema that a sink ignores (the store assigns them).
READ_ONLY_COLUMNS = frozenset({
    "queueOffset", "commitLogOffset", "msgId", "uniqKey", "storeTimestamp", "storeHost", "sysFlag",
    "reconsumeTimes", "bodyCRC", "preparedTransactionOffset", "transactionType", "storeSize", "tagsCode",
    "broker", "storePath",
})
WRITABLE_COLUMNS = ("topic", "body", "queueId", "tags", "keys", "properties", "flag", "bornTimestamp", "bornHost")

SINK_OPTIONS = {
    "path": "path",
    "config": "config",
    "queuenums": "queueNums",
    "locktimeout": "lockTimeout",
    "checkpointlocation": "checkpointLocation",
}


# --------------------------------------------------------------------------- options

@dataclass(frozen=True)
class SinkOptions:
    root: str
    config: StoreConfig
    queue_nums: Optional[int] = None                  # None: topics.json, else DEFAULT_QUEUE_NUMS
    topic_queue_nums: Mapping[str, int] = field(default_factory=dict)
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S

    def queues_of(self, topic: str) -> int:
        if self.queue_nums is not None:
            return self.queue_nums
        return self.topic_queue_nums.get(topic, DEFAULT_QUEUE_NUMS)


def _duration_s(name: str, value: str) -> float:
    from .stream import parse_duration_ms
    return parse_duration_ms(name, value) / 1000.0


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    from .options import _STORE_KEYS
    opts = {str(k).lower(): ("" if v is None else str(v)) for k, v in dict(options).items()}
    overrides = {}
    for key, value in opts.items():
        if key in SINK_OPTIONS:
            continue
        if key in _STORE_KEYS:
            overrides[_STORE_KEYS[key]] = value
            continue
        raise OptionError(f"unknown option {key!r} for the rmq sink; options are: "
                          f"{', '.join(sorted(SINK_OPTIONS.values()))}, plus RocketMQ MessageStoreConfig keys")
    root = opts.get("path", "").strip()
    if not root:
        raise OptionError("no store path: use df.write.format('rmq').mode('append').save('/path/to/store')"
                          + SQL_TABLE_HINT)
    if "," in root:
        raise OptionError(f"the rmq sink writes one store; got {root!r}")
    root = store_path(root)                  # plain path or file:// URI
    if opts.get("config"):
        if not os.path.isfile(opts["config"]):
            raise OptionError(f"option config: {opts['config']} is not a file")
        config = StoreConfig.from_properties_file(opts["config"], overrides or None)
    else:
        config = StoreConfig().with_overrides(overrides)
    # An existing store's segment sizes unless given (a given size that differs from the files fails).
    config = fit_config_to_files(config, root, given_keys(opts.get("config"), overrides))
    queue_nums = None
    if opts.get("queuenums"):
        try:
            queue_nums = int(opts["queuenums"])
        except ValueError:
            raise OptionError(f"option queueNums must be a positive integer, got {opts['queuenums']!r}") from None
        if not 1 <= queue_nums <= 65535:
            raise OptionError(f"option queueNums must be in [1, 65535], got {queue_nums}")
    lock_timeout = DEFAULT_LOCK_TIMEOUT_S
    if opts.get("locktimeout"):
        lock_timeout = _duration_s("lockTimeout", opts["locktimeout"])
    if os.path.exists(root) and not os.path.isdir(root):
        raise OptionError(f"store path {root} exists and is not a directory")
    return SinkOptions(root=root, config=config, queue_nums=queue_nums,
                       topic_queue_nums=read_topic_queue_nums(root), lock_timeout_s=lock_timeout)


def check_schema(schema) -> tuple[str, ...]:
    """The writable columns present in ``schema``; OptionError for missing / unknown ones."""
    from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, MapType, ShortType, StringType,
                                   TimestampNTZType, TimestampType, ByteType)
    fields = {f.name: f.dataType for f in schema.fields}
    for required in ("topic", "body"):
        if required not in fields:
            raise OptionError(f"the rmq sink needs a column {required!r}; columns are: {', '.join(fields)}")
    ints = (IntegerType, LongType, ShortType, ByteType)
    allowed = {
        "topic": (StringType,), "body": (BinaryType, StringType), "queueId": ints, "tags": (StringType,),
        "keys": (StringType, ArrayType), "properties": (MapType,), "flag": ints,
        "bornTimestamp": (TimestampType, TimestampNTZType) + ints, "bornHost": (StringType,),
    }
    for name, dt in fields.items():
        if name in READ_ONLY_COLUMNS:
            continue
        if name not in allowed:
            raise OptionError(f"the rmq sink does not know column {name!r}; writable columns are: "
                              f"{', '.join(WRITABLE_COLUMNS)}")
        if not isinstance(dt, allowed[name]):
            raise OptionError(f"column {name!r} has type {dt.simpleString()}, which the rmq sink cannot write")
        if name == "keys" and isinstance(dt, ArrayType) and not isinstance(dt.elementType, StringType):
            raise OptionError("column 'keys' must be a string or an array of strings")
        if name == "properties" and not (isinstance(dt.keyType, StringType) and isinstance(dt.valueType, StringType)):
            raise OptionError("column 'properties' must be a map<string,string>")
    return tuple(c for c in WRITABLE_COLUMNS if c in fields)


# --------------------------------------------------------------------------- rows -> messages

def _ms(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    import datetime as dt
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return int(value.timestamp() * 1000)
    return int(value)


def table_from_batch(batch: pa.RecordBatch, chooser: QueueChooser, *, extra_props=None,
                     seq_start: int = 0, skip=None) -> pa.Table:
    """The rows as the writer's input columns; ``extra_props(i)`` adds properties to row ``seq_start + i``.

    Per row only what needs it runs in Python (queue choice, property merges);
    the table goes straight to the writer's columnar path.
    """
    names = batch.schema.names
    n = batch.num_rows

    def col(name):
        if name not in names:
            return [None] * n
        arr = batch.column(names.index(name))
        if name == "bornTimestamp" and pa.types.is_timestamp(arr.type):
            arr = arr.cast(pa.timestamp("ms", tz=arr.type.tz)).cast(pa.int64())
        return arr.to_pylist()

    topics, bodies, qids = col("topic"), col("body"), col("queueId")
    tags, keys, props = col("tags"), col("keys"), col("properties")
    flags, borns, hosts = col("flag"), col("bornTimestamp"), col("bornHost")
    out = {c: [] for c in ("topic", "queueId", "body", "flag", "tags", "keys", "properties", "bornTimestamp",
                           "bornHost")}
    for i in range(n):
        seq = seq_start + i
        if skip is not None and seq in skip:
            continue
        topic = topics[i]
        if topic is None:
            raise OptionError(f"row {seq}: topic is null")
        body = bodies[i]
        if body is None:
            body = b""
        elif isinstance(body, str):
            body = body.encode("utf-8")
        k = keys_string(keys[i])
        pmap = dict(props[i]) if props[i] else None
        if pmap:
            # TAGS / KEYS come from their own columns when present.
            if "tags" in names:
                pmap.pop("TAGS", None)
            if "keys" in names:
                pmap.pop("KEYS", None)
        if extra_props is not None:
            pmap = dict(pmap or {})
            pmap.update(extra_props(seq))
        out["topic"].append(topic)
        out["queueId"].append(chooser.choose(topic, qids[i], k))
        out["body"].append(body)
        out["flag"].append(int(flags[i] or 0))
        out["tags"].append(tags[i] or None)
        out["keys"].append(k or None)
        out["properties"].append(list(pmap.items()) if pmap else None)
        out["bornTimestamp"].append(_ms(borns[i]))
        out["bornHost"].append(hosts[i] or None)
    return pa.table({
        "topic": pa.array(out["topic"], pa.string()),
        "queueId": pa.array(out["queueId"], pa.int32()),
        "body": pa.array(out["body"], pa.binary()),
        "flag": pa.array(out["flag"], pa.int32()),
        "tags": pa.array(out["tags"], pa.string()),
        "keys": pa.array(out["keys"], pa.string()),
        "properties": pa.array(out["properties"], pa.map_(pa.string(), pa.string())),
        "bornTimestamp": pa.array(out["bornTimestamp"], pa.int64()),
        "bornHost": pa.array(out["bornHost"], pa.string()),
    })


def _put_all(writer, table: pa.Table) -> tuple[int, int, int]:
    """Put the rows through the writer's columnar path; (count, first CommitLog offset, end offset).

    Raises on a refused put (nothing of the task is acknowledged to Spark then)."""
    first = -1
    end = -1
    for i in range(0, table.num_rows, PUT_CHUNK):
        chunk = table.slice(i, PUT_CHUNK)
        results = writer.put_arrow_batch(chunk)
        if results.ok_count != chunk.num_rows:
            j = int(np.flatnonzero(~results.ok_mask)[0])
            r = results[j]
            raise StoreError(f"rmq sink: put of a message to {r.topic}:{r.queue_id} failed with "
                             f"{r.status.value}: {r.reason or r.append_status}")
        if first < 0:
            first = results[0].commit_log_offset
        last = results[chunk.num_rows - 1]
        end = last.commit_log_offset + last.size
    return table.num_rows, first, end


def refuse_unsupported_layout(opts: SinkOptions) -> None:
    """At planning, on the driver: a store of another layout fails the write before any task runs."""
    from ..store.layout import StoreLayout
    StoreLayout.for_config(opts.root, opts.config).check_supported()


def open_store_writer(opts: SinkOptions):
    """Open the store writer under the lock, with a clear error when another process keeps it."""
    from ..store.writer import MessageStoreWriter
    os.makedirs(opts.root, exist_ok=True)
    try:
        return MessageStoreWriter(opts.root, opts.config, lock_timeout_s=opts.lock_timeout_s)
    except StoreLockedError as exc:
        raise StoreLockedError(f"rmq sink: could not lock the store {opts.root} within {opts.lock_timeout_s:g} s "
                               f"(option lockTimeout): another process - a broker or another writer - holds "
                               f"{os.path.join(opts.root, 'lock')}. ({exc})") from None


# --------------------------------------------------------------------------- batch sink

@dataclass
class SinkCommitMessage(WriterCommitMessage):
    partition_id: int = -1
    rows: int = 0
    appended: int = 0
    skipped: int = 0
    first_offset: int = -1
    end_offset: int = -1
    batch_id: int = -1
    query_id: Optional[str] = None
    lock_wait_s: float = 0.0
    append_s: float = 0.0


def _task_partition_id() -> int:
    from pyspark import TaskContext
    tc = TaskContext.get()
    return tc.partitionId() if tc is not None else 0


class RmqBatchWriter(DataSourceArrowWriter):
    """``df.write.format("rmq").mode("append")``: each task appends its rows under the store lock."""

    def __init__(self, options: Mapping[str, str], schema, overwrite: bool):
        if overwrite:
            raise OptionError("the rmq sink only appends (a message store cannot be overwritten); "
                              "use .mode('append')")
        self.opts = parse_sink_options(options)
        self.columns = check_schema(schema)
        refuse_unsupported_layout(self.opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        pid = _task_partition_id()
        batches = [b for b in iterator if b.num_rows]
        rows = sum(b.num_rows for b in batches)
        if rows == 0:
            return SinkCommitMessage(partition_id=pid)
        chooser = QueueChooser(self.opts, seed=pid)
        msgs = pa.concat_tables([table_from_batch(b, chooser) for b in batches])
        t0 = time.monotonic()
        writer = open_store_writer(self.opts)
        t1 = time.monotonic()
        try:
            n, first, end = _put_all(writer, msgs)
        finally:
            writer.close()
        return SinkCommitMessage(partition_id=pid, rows=rows, appended=n, first_offset=first, end_offset=end,
                                 lock_wait_s=t1 - t0, append_s=time.monotonic() - t1)

    def commit(self, messages) -> None:
        # Every task appended and dispatched its rows before reporting success; nothing to publish.
        return None

    def abort(self, messages) -> None:
        # A message store is append-only: rows of tasks that succeeded stay in the store.
        return None


# --------------------------------------------------------------------------- sink log

class SinkLog:
    """``{root}/config/rmqsourceSinkLog.json``; read and written only while holding the store lock.

    ``{"queries": {queryId: {"committedBatch": N, "tasks": {"batch:partition":
    {"start": commitLogOffset, "done": bool, "rows": n}}}}}``
    """

    def __init__(self, root: str):
        self.path = os.path.join(root, "config", SINK_LOG_NAME)

    def load(self) -> dict:
        doc = load_with_bak(self.path, parse_sink_log)
        return doc if doc is not None else {"queries": {}}

    def save(self, doc: dict) -> None:
        def valid(old: bytes) -> bool:
            try:
                parse_sink_log(old.decode("utf-8"), self.path)
                return True
            except (FormatError, UnicodeDecodeError):
                return False
        string2file(self.path, json.dumps(doc, indent=1, sort_keys=True), validate_previous=valid)


def parse_sink_log(text: str, file: str) -> dict:
    """The sink log, shape-checked; FormatError (never RecursionError, KeyError ...) for anything else.

    Parsed with the bounded config-JSON parser (nesting depth capped).
    """
    doc = loads_fastjson(text, file=file)

    def bad(what: str):
        raise FormatError(f"sink log: {what}", file=file, offset=0)

    def is_int(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if not isinstance(doc, dict) or not isinstance(doc.get("queries", {}), dict):
        bad('expected {"queries": {...}}')
    for qid, q in doc.get("queries", {}).items():
        if not isinstance(q, dict) or not is_int(q.get("committedBatch", -1)) or not isinstance(q.get("tasks", {}),
                                                                                                  dict):
            bad(f"query {str(qid)[:80]!r}: expected {{\"committedBatch\": int, \"tasks\": {{...}}}}")
        for key, task in q.get("tasks", {}).items():
            batch, sep, part = str(key).partition(":")
            if not (sep and batch.lstrip("-").isdecimal() and part.isdecimal() and batch.isascii() and part.isascii()):
                bad(f"query {str(qid)[:80]!r}: task key {str(key)[:80]!r} is not batch:partition")
            if not isinstance(task, dict) or not is_int(task.get("start")) or not isinstance(task.get("done"), bool):
                bad(f"query {str(qid)[:80]!r}: task {str(key)[:80]!r} needs an int start and a bool done")
    return doc


def _take_fault(root: str, point: str) -> bool:
    path = os.environ.get(FAULT_ENV)
    if not path:
        return False
    try:
        with open(path, "r", encoding="utf-8") as f:
            spec = f.read().strip()
    except OSError:
        return False
    if spec != f"{point} {os.path.realpath(root)}":
        return False
    try:
        os.unlink(path)
    except OSError:
        return False
    return True


def _stream_ids() -> tuple[str, int, int]:
    from pyspark import TaskContext
    tc = TaskContext.get()
    if tc is None:
        raise StoreError("the rmq streaming sink must run inside a Spark task")
    qid = tc.getLocalProperty("sql.streaming.queryId")
    bid = tc.getLocalProperty("streaming.sql.batchId")
    if not qid or bid is None:
        raise StoreError("the rmq streaming sink needs the Spark local properties sql.streaming.queryId and "
                         "streaming.sql.batchId (micro-batch queries set them)")
    return qid, int(bid), tc.partitionId()


def find_appended(root: str, config: StoreConfig, start: int, end: int, tag: str, partition: int) -> set[int]:
    """Row indexes already in the CommitLog range [start, end) with ``__RMQSOURCE_BATCH == tag``."""
    from ..store.commitlog import CommitLog
    from ..store.layout import StoreLayout
    seen: set[int] = set()
    layout = StoreLayout.for_config(root, config)
    cl = CommitLog(layout)
    prefix = f"{partition}:"
    try:
        for step in cl.walk(max(start, cl.min_offset), stop_offset=end):
            if step.decoded.kind is not Kind.MESSAGE:
                if step.decoded.kind is Kind.BLANK:
                    continue
                break
            props = step.decoded.record.properties
            if props.get(BATCH_PROPERTY) == tag:
                seq = props.get(SEQ_PROPERTY, "")
                if seq.startswith(prefix) and seq[len(prefix):].isdigit():
                    seen.add(int(seq[len(prefix):]))
    finally:
        cl.close()
    return seen


class RmqStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("rmq")``: exactly-once appends per micro-batch (see the module docstring)."""

    def __init__(self, options: Mapping[str, str], schema, overwrite: bool):
        self.opts = parse_sink_options(options)
        self.columns = check_schema(schema)
        refuse_unsupported_layout(self.opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        query_id, batch_id, pid = _stream_ids()
        batches = [b for b in iterator if b.num_rows]
        rows = sum(b.num_rows for b in batches)
        tag = f"{query_id}:{batch_id}"
        task_key = f"{batch_id}:{pid}"
        msg = SinkCommitMessage(partition_id=pid, rows=rows, batch_id=batch_id, query_id=query_id)
        if rows == 0:
            return msg
        t0 = time.monotonic()
        writer = open_store_writer(self.opts)
        t1 = time.monotonic()
        msg.lock_wait_s = t1 - t0
        try:
            log = SinkLog(self.opts.root)
            doc = log.load()
            q = doc["queries"].setdefault(query_id, {"committedBatch": -1, "tasks": {}})
            if batch_id <= q.get("committedBatch", -1):
                msg.skipped = rows
                return msg
            entry = q["tasks"].get(task_key)
            if entry is not None and entry.get("done"):
                msg.skipped = rows
                return msg
            skip: set[int] = set()
            if entry is not None:
                # An earlier attempt died while appending: keep what it wrote.
                skip = find_appended(self.opts.root, self.opts.config, int(entry["start"]),
                                     writer.commit_log_max_offset, tag, pid)
            else:
                entry = {"start": writer.commit_log_max_offset, "done": False, "rows": rows}
                q["tasks"][task_key] = entry
                log.save(doc)
            chooser = QueueChooser(self.opts, seed=pid)
            tables = []
            seq = 0
            for b in batches:
                tables.append(table_from_batch(
                    b, chooser, seq_start=seq, skip=skip,
                    extra_props=lambda s: {BATCH_PROPERTY: tag, SEQ_PROPERTY: f"{pid}:{s}"}))
                seq += b.num_rows
            msgs = pa.concat_tables(tables)
            if msgs.num_rows > 1 and _take_fault(self.opts.root, f"mid-append:{batch_id}"):
                _put_all(writer, msgs.slice(0, msgs.num_rows // 2))
                writer.flush()
                os._exit(17)          # the task dies half-way through its append
            n, first, end = _put_all(writer, msgs)
            writer.flush()
            entry["done"] = True
            entry["appended"] = n + len(skip)
            log.save(doc)
            msg.appended, msg.skipped = n, len(skip)
            msg.first_offset, msg.end_offset = first, end
        finally:
            writer.close()
        msg.append_s = time.monotonic() - t1
        return msg

    def commit(self, messages, batchId: int) -> None:
        """Record the batch as committed and forget its task entries (under the store lock)."""
        root = self.opts.root
        query_ids = {m.query_id for m in messages if isinstance(m, SinkCommitMessage) and m.query_id}
        if not query_ids or not os.path.isdir(root):
            return
        if _take_fault(root, f"commit:{batchId}"):
            raise StoreError(f"injected fault before committing batch {batchId} (test hook {FAULT_ENV})")
        lock = StoreLock(root, timeout_s=self.opts.lock_timeout_s)
        try:
            lock.acquire()
        except StoreLockedError as exc:
            raise StoreLockedError(f"rmq sink: could not lock the store {root} to commit batch {batchId} "
                                   f"within {self.opts.lock_timeout_s:g} s: {exc}") from None
        try:
            log = SinkLog(root)
            doc = log.load()
            for query_id in sorted(query_ids):
                q = doc["queries"].setdefault(query_id, {"committedBatch": -1, "tasks": {}})
                q["committedBatch"] = max(int(q.get("committedBatch", -1)), int(batchId))
                q["tasks"] = {k: v for k, v in q.get("tasks", {}).items() if int(k.split(":")[0]) > batchId}
            log.save(doc)
        finally:
            lock.release()

    def abort(self, messages, batchId: int) -> None:
        # Nothing to undo: finished tasks are recorded as done and are skipped when the batch is retried.
        return None


__all__ = ["RmqBatchWriter", "RmqStreamWriter", "SinkLog", "SinkOptions", "parse_sink_options",
           "BATCH_PROPERTY", "SEQ_PROPERTY", "RmqError"]
