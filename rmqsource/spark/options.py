"""Options of the ``rmq`` data source, parsed once at planning into a picklable value.

Option names are case-insensitive (Spark lower-cases them).  Anything that is
not one of ours must be a RocketMQ MessageStoreConfig key (``maxHashSlotNum``
...); other names are refused, so a typo such as ``topic=`` fails loudly, and
the error lists every option of that mode (batch or stream).  Kafka source
option names (``kafka_options.json``, shared with the JVM scan) are accepted
as aliases where the meaning is the same (``subscribe`` -> ``topics``,
``maxOffsetsPerTrigger`` -> ``maxMessagesPerTrigger`` ...) and otherwise
refused with "the rmq source calls this X".  Store paths may be ``file://``
URIs.
"""

from __future__ import annotations

import functools
import json
import os
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Optional, Union

from .. import limits
from ..errors import OptionError
from ..names import (DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, local_file_path, remote_scheme, topic_problem,
                     validate_queue_id)
from ..store.config import _KEYS as STORE_CONFIG_KEYS  # RocketMQ key names (read only)
from ..store.config import StoreConfig

if TYPE_CHECKING:
    from .bodies.spec import BodySpec

EARLIEST = "earliest"
LATEST = "latest"
OffsetSpec = Union[str, dict]     # "earliest" | "latest" | {topic: {queueId: offset}}

# Our own options: lower-case name -> documented name.
OPTIONS = {
    "path": "path",
    "paths": "paths",
    "brokername": "brokerName",
    "config": "config",
    "topics": "topics",
    "topicpattern": "topicPattern",
    "queues": "queues",
    "startingoffsets": "startingOffsets",
    "endingoffsets": "endingOffsets",
    "startingtimestamp": "startingTimestamp",
    "endingtimestamp": "endingTimestamp",
    "startingoffsetsbytimestamp": "startingOffsetsByTimestamp",
    "endingoffsetsbytimestamp": "endingOffsetsByTimestamp",
    "startingoffsetsbytimestampstrategy": "startingOffsetsByTimestampStrategy",
    "failondataloss": "failOnDataLoss",
    "decompress": "decompress",
    "maxinflatedbodybytes": "maxInflatedBodyBytes",
    "maxinflatedbatchbytes": "maxInflatedBatchBytes",
    "maxinflatedtaskbytes": "maxInflatedTaskBytes",
    "includetransactional": "includeTransactional",
    "excludeinternaltopics": "excludeInternalTopics",
    "maxrecordsperpartition": "maxRecordsPerPartition",
    "minpartitions": "minPartitions",
    "maxbytesperpartition": "maxBytesPerPartition",
    "batchsize": "batchSize",
    "indexlookups": "indexLookups",
    "view": "view",
    "metadata": "metadata",
    # typed bodies (docs/bodies.md; parsed by rmqsource.spark.bodies.spec)
    "bodyformat": "bodyFormat",
    "bodyschema": "bodySchema",
    "bodyschemafile": "bodySchemaFile",
    "bodyschemabytopic": "bodySchemaByTopic",
    "bodywireformat": "bodyWireFormat",
    "bodycolumnprefix": "bodyColumnPrefix",
    "onbadrecord": "onBadRecord",
    # lookups by key (docs/reading.md#lookups-by-key), batch reads only
    "keys": "keys",
    "keysfile": "keysFile",
}
_STORE_KEYS = {k.lower(): k for k in STORE_CONFIG_KEYS}
# Batch-only options (a stream has no end) and the options only streams take.
KEY_OPTIONS = {"keys": "keys", "keysfile": "keysFile"}     # lookups by key: a stream refuses them
BATCH_ONLY_OPTIONS = {"endingoffsets": "endingOffsets", "endingtimestamp": "endingTimestamp",
                      "endingoffsetsbytimestamp": "endingOffsetsByTimestamp", **KEY_OPTIONS}
STREAM_OPTIONS = {
    "startingoffsets": "startingOffsets",
    "startingoffsetsfallback": "startingOffsetsFallback",
    "startingtimestamp": "startingTimestamp",
    "maxmessagespertrigger": "maxMessagesPerTrigger",
    "maxbytespertrigger": "maxBytesPerTrigger",
    "minmessagespertrigger": "minMessagesPerTrigger",
    "maxtriggerdelay": "maxTriggerDelay",
    "subexpression": "subExpression",
    "consumergroup": "consumerGroup",
    "commitoffsets": "commitOffsets",
    "reportlatestoffset": "reportLatestOffset",
}
BATCH, STREAM = "batch", "stream"
# A SQL table's OPTIONS (path ...) / LOCATION reach only a JVM provider (Spark passes them to its
# getTable; a Python data source is created with the query's options alone), so without the jar
# a table's reads and writes have no path. Same text in RmqOptions.java.
SQL_TABLE_HINT = ("; a SQL table (CREATE TABLE ... USING rmq) passes its path and options only with the "
                  "rmq jar on spark.jars (`rmq jar`)")


def option_names(mode: str) -> list[str]:
    """Every option name a read in ``mode`` accepts (besides MessageStoreConfig keys), sorted."""
    if mode == STREAM:
        names = {v for k, v in OPTIONS.items() if k not in BATCH_ONLY_OPTIONS} | set(STREAM_OPTIONS.values())
    else:
        names = set(OPTIONS.values())
    return sorted(names, key=str.lower)


@functools.lru_cache(maxsize=1)
def kafka_option_table() -> dict[str, dict]:
    """kafka_options.json by lower-case Kafka name."""
    with open(os.path.join(os.path.dirname(__file__), "kafka_options.json"), encoding="utf-8") as f:
        doc = json.load(f)
    return {e["kafka"].lower(): e for e in doc["options"]}


def _assign_to_queues(value: str) -> str:
    """Kafka's ``assign`` JSON ``{"T": [0, 1]}`` as our ``queues`` list ``T:0,T:1`` (our form passes through)."""
    text = str(value).strip()
    if not text.startswith("{"):
        return text
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option assign: cannot parse {text!r} as JSON like {{\"TopicA\": [0, 1]}}: {exc.msg}") \
            from None
    if not isinstance(doc, dict) or not all(isinstance(v, list) for v in doc.values()):
        raise OptionError(f"option assign must map topics to lists of queue ids, got {text!r}")
    return ",".join(f"{t}:{q}" for t, qs in doc.items() for q in qs)


def apply_kafka_names(opts: dict[str, str], mode: str) -> dict[str, str]:
    """Rename Kafka aliases to our options; refuse other Kafka names with a pointer to ours."""
    table = kafka_option_table()
    out = dict(opts)
    for key in list(opts):
        entry = table.get(key)
        if entry is None and key.startswith("kafka."):
            raise OptionError(f"option {key!r} is a Kafka consumer setting; the rmq source reads a RocketMQ store "
                              f"directory (load('/path/to/store')) and takes RocketMQ MessageStoreConfig keys "
                              f"instead (e.g. maxHashSlotNum)")
        if entry is None:
            continue
        kafka, ours = entry["kafka"], entry["rmq"]
        if not entry["alias"] or mode not in entry["modes"]:
            hint = f"the rmq source calls this {ours}" if ours else "the rmq source has no such option"
            if entry["alias"] and mode not in entry["modes"]:
                hint += f", an option of {' and '.join(entry['modes'])} reads"
            raise OptionError(f"option {kafka} is a Kafka source option: {hint} ({entry['note']})")
        value = out.pop(key)
        if kafka == "assign":
            value = _assign_to_queues(value)
        if ours.lower() in out and out[ours.lower()] != value:
            raise OptionError(f"options {kafka} and {ours} are the same option; give one of them")
        out[ours.lower()] = value
    return out


def store_path(text: str, *, write: bool = False) -> str:
    """A store path from an option: plain path or ``file:`` URI. Other schemes (object stores, HDFS) are
    refused: the Python source reads local files only (the JVM scan reads them), and no sink writes them."""
    p = str(text).strip()
    scheme = remote_scheme(p)
    if scheme and write:
        raise OptionError(f"store path {p!r}: stores on {scheme}: are read-only: the rmq sink writes records in "
                          f"place into preallocated files under a lock, which object stores and HDFS do not offer "
                          f"(they replace or append whole files); write a local store and copy it there")
    if scheme:
        raise OptionError(f"store path {p!r}: the Python rmq source reads local or mounted directories "
                          f"(/dbfs/..., /Volumes/...), not {scheme}: URIs; {scheme}: stores are read by the JVM scan (the rmqsource jar on "
                          f"spark.jars: `rmq jar` prints its path)")
    if not re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", p):
        return os.path.abspath(os.path.expanduser(p))
    u = urllib.parse.urlparse(p)
    if u.netloc not in ("", "localhost"):
        raise OptionError(f"store path {p!r} names host {u.netloc!r}; file URIs must be file:///path "
                          f"(or file:/path) on this machine")
    return os.path.abspath(urllib.parse.unquote(u.path))

DEFAULT_MAX_RECORDS_PER_PARTITION = 1_000_000
MIN_AUTO_BYTES_PER_PARTITION = 128 * 1024 * 1024     # Spark's spark.sql.files.maxPartitionBytes, at least
MAX_AUTO_BYTES_PER_PARTITION = 1024 * 1024 * 1024    # and at most, when one partition per core would be larger
DEFAULT_BATCH_SIZE = 32768


@dataclass(frozen=True)
class ReadOptions:
    paths: tuple[str, ...]
    brokers: tuple[str, ...]
    store_config: StoreConfig
    topics: Optional[tuple[str, ...]] = None
    topic_pattern: Optional[str] = None
    queues: Optional[tuple[tuple[str, int], ...]] = None
    starting_offsets: OffsetSpec = EARLIEST
    ending_offsets: OffsetSpec = LATEST
    starting_timestamp: Optional[int] = None
    ending_timestamp: Optional[int] = None
    starting_by_timestamp: Optional[dict] = None    # {topic: {queueId: epoch ms}} (Kafka's startingOffsetsByTimestamp)
    ending_by_timestamp: Optional[dict] = None
    by_timestamp_strategy: str = "error"            # a queue with no message at or after its timestamp: fail | latest
    fail_on_data_loss: bool = True
    decompress: bool = False
    max_inflated_body_bytes: int = limits.DEFAULT_MAX_INFLATED_BODY_BYTES
    max_inflated_batch_bytes: int = limits.DEFAULT_MAX_INFLATED_BATCH_BYTES
    max_inflated_task_bytes: int = limits.DEFAULT_MAX_INFLATED_TASK_BYTES
    include_transactional: bool = False
    exclude_internal_topics: bool = True
    max_records_per_partition: int = DEFAULT_MAX_RECORDS_PER_PARTITION
    min_partitions: int = 0
    max_bytes_per_partition: Optional[int] = None      # None: commit_log_bytes_per_partition chooses
    batch_size: int = DEFAULT_BATCH_SIZE
    index_lookups: bool = True
    view: str = "messages"              # VIEWS: "timers" is one row per timer / delay message
    metadata: Optional[str] = None      # METADATA_TABLES: the store's structure instead of its messages
    topics_by_view: bool = False        # the view chose the topics: a store without them reads empty
    body: Optional["BodySpec"] = None   # bodyFormat ...: the bodies decoded into columns (docs/bodies.md)
    keys: Optional[frozenset] = None    # keys / keysFile: only messages whose KEYS hold one of these
    raw: tuple = field(default=(), compare=False)

    def commit_log_bytes_per_partition(self, total_bytes: int, parallelism: int) -> int:
        """The option when given, else one partition per core (each task costs Spark tens of
        milliseconds), kept within 128 MiB..1 GiB."""
        if self.max_bytes_per_partition is not None:
            return self.max_bytes_per_partition
        per_core = -(-total_bytes // max(1, parallelism))
        return min(MAX_AUTO_BYTES_PER_PARTITION, max(MIN_AUTO_BYTES_PER_PARTITION, per_core))

    @property
    def topic_mode(self) -> bool:
        """Reads through the ConsumeQueues (a topic, pattern or queue list was given)."""
        return self.topics is not None or self.topic_pattern is not None or self.queues is not None

    @property
    def internal_topics_excluded(self) -> bool:
        """RocketMQ's own topics (format/system_topics.py) are left out: excludeInternalTopics, and no
        topic or queue named (a named one is always read; a topicPattern follows the option)."""
        return self.exclude_internal_topics and self.topics is None and self.queues is None


def parse_bool(name: str, value: str) -> bool:
    v = str(value).strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name} must be true or false, got {value!r}")


def parse_int(name: str, value: str, minimum: int, maximum: int = 2 ** 63 - 1) -> int:
    try:
        v = int(str(value).strip())
    except ValueError:
        raise OptionError(f"option {name} must be an integer, got {value!r}") from None
    if v < minimum or v > maximum:
        raise OptionError(f"option {name} must be in [{minimum}, {maximum}], got {v}")
    return v


def parse_offsets(name: str, value: str) -> OffsetSpec:
    """``earliest``, ``latest`` or JSON ``{topic: {queueId: offset}}`` (-2 earliest, -1 latest)."""
    text = str(value).strip()
    if text.lower() in (EARLIEST, LATEST):
        return text.lower()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option {name} must be 'earliest', 'latest' or JSON like "
                          f"{{\"TopicTest\": {{\"0\": 12}}}}; cannot parse {text!r}: {exc.msg}") from None
    if not isinstance(doc, dict) or not doc:
        raise OptionError(f"option {name}: JSON must be a non-empty object of topic -> {{queueId: offset}}, got {text!r}")
    out: dict = {}
    for topic, per_queue in doc.items():
        problem = topic_problem(topic, allow_long_retry=True) if len(topic.encode()) <= 127 else None
        if problem and len(topic.encode()) <= 127:
            raise OptionError(f"option {name}: {problem}")
        if not isinstance(per_queue, dict) or not per_queue:
            raise OptionError(f"option {name}: topic {topic!r} must map to a non-empty object "
                              f"of queueId -> offset, got {per_queue!r}")
        q: dict[int, int] = {}
        for qid, off in per_queue.items():
            try:
                qi = validate_queue_id(qid)
            except OptionError as exc:
                raise OptionError(f"option {name}: topic {topic!r}: {exc}") from None
            if isinstance(off, bool) or not isinstance(off, int) or off < -2:
                raise OptionError(f"option {name}: {topic}/{qid}: offset must be an integer >= 0 "
                                  f"(or -2 = earliest, -1 = latest), got {off!r}")
            q[qi] = off
        out[topic] = q
    return out


BY_TIMESTAMP_STRATEGIES = ("error", "latest")


def parse_timestamps(name: str, value: str) -> dict:
    """Kafka's ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``: JSON ``{topic: {queueId: epoch ms}}``."""
    text = str(value).strip()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option {name} must be JSON like {{\"TopicTest\": {{\"0\": 1700000000000}}}}; "
                          f"cannot parse {text!r}: {exc.msg}") from None
    if not isinstance(doc, dict) or not doc:
        raise OptionError(f"option {name}: JSON must be a non-empty object of topic -> {{queueId: timestamp}}, "
                          f"got {text!r}")
    out: dict = {}
    for topic, per_queue in doc.items():
        if not isinstance(per_queue, dict) or not per_queue:
            raise OptionError(f"option {name}: topic {topic!r} must map to a non-empty object of queueId -> "
                              f"timestamp, got {per_queue!r}")
        q: dict[int, int] = {}
        for qid, ts in per_queue.items():
            try:
                qi = validate_queue_id(qid)
            except OptionError as exc:
                raise OptionError(f"option {name}: topic {topic!r}: {exc}") from None
            if isinstance(ts, bool) or not isinstance(ts, int) or not 0 <= ts < (1 << 63):
                raise OptionError(f"option {name}: {topic}/{qid}: the timestamp must be epoch milliseconds >= 0, "
                                  f"got {ts!r}")
            q[qi] = ts
        out[topic] = q
    return out


def parse_by_timestamp_strategy(value: str) -> str:
    v = str(value).strip().lower()
    if v not in BY_TIMESTAMP_STRATEGIES:
        raise OptionError(f"option startingOffsetsByTimestampStrategy must be error or latest, got {value!r}")
    return v


def no_offset_for_timestamp(where: str, ts: int) -> OptionError:
    """startingOffsetsByTimestampStrategy=error: a queue with no message stored at or after its timestamp."""
    return OptionError(f"startingOffsetsByTimestamp: {where} has no message stored at or after {ts}; "
                       f"startingOffsetsByTimestampStrategy=latest starts such a queue at its end")


VIEWS = ("messages", "timers", "dlq", "retry", "trace", "transactions")
# The views read as a messages read of some of RocketMQ's own topics (rmqsource/spark/views.py): the prefix
# of the topics read, and how an error names them.
GROUP_TOPIC_VIEWS = {"dlq": (DLQ_GROUP_TOPIC_PREFIX, "dead-letter topics (%DLQ%<group>)"),
                     "retry": (RETRY_GROUP_TOPIC_PREFIX, "retry topics (%RETRY%<group>...)")}
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"             # TopicValidator.RMQ_SYS_TRACE_TOPIC: the clients' default


def parse_view(value: str, mode: str, by_offset: bool) -> str:
    """Option ``view``: ``messages`` (the records), ``timers`` (one row per timer / delay message), ``dlq``,
    ``retry``, ``trace`` (docs/views.md); every view but messages is batch only (the same checks in
    RmqOptions.java)."""
    v = str(value).strip().lower()
    if v not in VIEWS:
        raise OptionError(f"option view must be one of {', '.join(VIEWS)}, got {value!r}")
    if v in ("timers", "transactions") and mode == STREAM:
        raise OptionError(f"option view={v} is for batch reads (spark.read): {v} change state in place, "
                          "a stream cannot follow them")
    if v in GROUP_TOPIC_VIEWS and mode == STREAM:
        raise OptionError(f"option view={v} is for batch reads (spark.read); a stream of dead-letter or retry "
                          f"topics is a messages read: option(\"topicPattern\", \"{GROUP_TOPIC_VIEWS[v][0]}.*\")")
    if v == "trace" and mode == STREAM:
        raise OptionError(f"option view=trace is for batch reads (spark.read); a stream of trace messages is a "
                          f"messages read of topic {TRACE_TOPIC}")
    if v in ("timers", "transactions") and by_offset:
        raise OptionError(f"option view={v} takes topics or topicPattern (real topics), not queues, "
                          "startingOffsets, endingOffsets, startingTimestamp or endingTimestamp")
    return v


KEYS_EXAMPLE = '["order-17", "order-18"]'


def check_lookup_keys(name: str, keys) -> frozenset:
    """The keys of a lookup as a set; a key RocketMQ's KEYS could never hold (empty, or with a space: the
    broker splits KEYS on spaces) is refused, naming ``name``."""
    for k in keys:
        if k == "":
            raise OptionError(f"option {name}: an empty key can never match (RocketMQ drops the empty pieces "
                              f"of KEYS)")
        if " " in k:
            raise OptionError(f"option {name}: key {k!r} contains a space and can never match: RocketMQ splits "
                              f"a message's KEYS on spaces, so each key is one piece; give its pieces as "
                              f"separate keys")
    return frozenset(keys)


def read_keys_file(path: str, name: str = "option keysFile") -> list[str]:
    """The keys of a local keys file (a path or ``file:`` URI), one a line, surrounding whitespace dropped,
    blank lines ignored, first occurrence order (also ``rmq query --keys-from``); errors name ``name``."""
    p = local_file_path(path, name)
    try:
        with open(p, encoding="utf-8") as f:
            keys = [line.strip() for line in f]
    except FileNotFoundError:
        raise OptionError(f"{name}: no such file {p}") from None
    except IsADirectoryError:
        raise OptionError(f"{name}: {p} is a directory, not a file of keys") from None
    except UnicodeDecodeError as exc:
        raise OptionError(f"{name}: {p} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise OptionError(f"{name}: cannot read {p}: {exc.strerror or exc}") from None
    return list(dict.fromkeys(k for k in keys if k))


def parse_keys_option(opts: Mapping[str, str], others: list) -> frozenset:
    """Options ``keys`` (a JSON array of strings) or ``keysFile``: at most one, not with a view or metadata."""
    if "keys" in opts and "keysfile" in opts:
        raise OptionError("use only one of the options keys and keysFile")
    name = "keys" if "keys" in opts else "keysFile"
    if others:
        raise OptionError(f"option {name} looks messages up by key; it does not apply to {' or '.join(others)}")
    if name == "keysFile":
        path = opts["keysfile"].strip()
        scheme = remote_scheme(path)
        if scheme:
            raise OptionError(f"option keysFile {path!r}: the Python rmq source reads a local keys file, not "
                              f"{scheme}: URIs; copy it to a local path, or read with the JVM scan (the rmqsource "
                              f"jar on spark.jars: `rmq jar` prints its path), which reads Hadoop URIs")
        return check_lookup_keys(name, read_keys_file(path))
    text = opts["keys"].strip()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option keys must be a JSON array of strings like {KEYS_EXAMPLE}; cannot parse "
                          f"{text!r}: {exc.msg}") from None
    if not isinstance(doc, list) or not all(isinstance(k, str) for k in doc):
        raise OptionError(f"option keys must be a JSON array of strings like {KEYS_EXAMPLE}, got {text!r}")
    return check_lookup_keys(name, doc)


METADATA_TABLES = ("queues", "topics", "groups", "segments", "indexes")


def parse_metadata(value: str, mode: str, others: list) -> str:
    """Option ``metadata``: one of the store's structure tables (docs/metadata.md), batch only, alone."""
    v = str(value).strip().lower()
    if v not in METADATA_TABLES:
        raise OptionError(f"option metadata must be one of {', '.join(METADATA_TABLES)}, got {value!r}")
    if mode == STREAM:
        raise OptionError(f"option metadata={v} is for batch reads (spark.read)")
    if others:
        raise OptionError(f"option metadata={v} lists the whole store: filter its rows instead of giving "
                          f"{', '.join(others)}")
    return v


def _group_topic_selection(view: str, topics, topic_pattern, queues):
    """The topics a dlq or retry view reads: the named ones (each must have the view's prefix), or those
    matching both the view's prefix and topicPattern, or every topic with the prefix."""
    prefix, what = GROUP_TOPIC_VIEWS[view]
    for t in list(topics or ()) + [t for t, _ in queues or ()]:
        if not t.startswith(prefix):
            raise OptionError(f"option view={view} reads {what}; topic {t!r} is not one")
    if topics is None and queues is None:
        # a lookahead keeps the pattern's own fullmatch semantics, in Python's re and Java's regex alike
        topic_pattern = re.escape(prefix) + ".*" if topic_pattern is None else f"(?={re.escape(prefix)})(?:{topic_pattern})"
    return topics, topic_pattern, queues


def _queues(value: str) -> tuple[tuple[str, int], ...]:
    out = []
    for item in str(value).split(","):
        item = item.strip()
        if not item:
            continue
        topic, sep, qid = item.rpartition(":")
        if not sep or not topic:
            raise OptionError(f"option queues: {item!r} is not topic:queueId (e.g. TopicTest:0)")
        try:
            out.append((topic, validate_queue_id(qid)))
        except OptionError as exc:
            raise OptionError(f"option queues: {item!r}: {exc}") from None
    if not out:
        raise OptionError("option queues is empty; expected e.g. TopicTest:0,TopicTest:1")
    return tuple(dict.fromkeys(out))


def _paths(options: Mapping[str, str]) -> tuple[str, ...]:
    paths: list[str] = []
    if "paths" in options and options["paths"]:
        raw = options["paths"]
        try:
            doc = json.loads(raw)
        except json.JSONDecodeError:
            doc = None
        if isinstance(doc, list):
            for p in doc:
                paths.extend(x.strip() for x in str(p).split(",") if x.strip())
        else:
            paths.extend(x.strip() for x in str(raw).split(",") if x.strip())
    if "path" in options and options["path"]:
        paths.extend(x.strip() for x in str(options["path"]).split(",") if x.strip())
    paths = list(dict.fromkeys(paths))
    if not paths:
        raise OptionError("no store path: use spark.read.format('rmq').load('/path/to/store') "
                          "(several stores: comma-separated or a list)" + SQL_TABLE_HINT)
    return tuple(dict.fromkeys(store_path(p) for p in paths))


def parse_options(options: Mapping[str, str], *, mode: str = BATCH) -> ReadOptions:
    """Batch read options; a stream passes what is left after taking its own (``mode="stream"``)."""
    opts = {str(k).lower(): ("" if v is None else str(v)) for k, v in dict(options).items()}
    opts = apply_kafka_names(opts, mode)
    store_overrides: dict[str, str] = {}
    for key, value in opts.items():
        if mode == STREAM and key in KEY_OPTIONS:
            raise OptionError(f"option {KEY_OPTIONS[key]} is for batch reads (spark.read): a lookup by key reads "
                              f"the messages stored so far; filter a stream with array_contains(keys, 'k') instead")
        if key in OPTIONS and not (mode == STREAM and key in BATCH_ONLY_OPTIONS):
            continue
        if key in _STORE_KEYS:
            store_overrides[_STORE_KEYS[key]] = value
            continue
        valid = f"rmq {mode} read options are: {', '.join(option_names(mode))}, plus RocketMQ MessageStoreConfig " \
                f"keys (e.g. maxHashSlotNum)"
        if mode == BATCH and key in STREAM_OPTIONS:
            raise OptionError(f"option {STREAM_OPTIONS[key]} is for streaming reads (spark.readStream); {valid}")
        if mode == STREAM and key in BATCH_ONLY_OPTIONS:
            raise OptionError(f"option {BATCH_ONLY_OPTIONS[key]} is for batch reads (a stream has no end); {valid}")
        raise OptionError(f"unknown option {key!r}; {valid}")
    paths = _paths(opts)
    config_path = opts.get("config")
    if config_path:
        if not os.path.isfile(config_path):
            raise OptionError(f"option config: {config_path} is not a file")
        config = StoreConfig.from_properties_file(config_path, store_overrides or None)
    else:
        config = StoreConfig().with_overrides(store_overrides)
    if "brokername" in opts and opts["brokername"]:
        brokers = tuple(b.strip() for b in opts["brokername"].split(","))
        if len(brokers) == 1 and len(paths) > 1:
            brokers = brokers * len(paths)
        if len(brokers) != len(paths):
            raise OptionError(f"option brokerName lists {len(brokers)} names for {len(paths)} store paths")
    else:
        brokers = tuple(os.path.basename(p.rstrip(os.sep)) or p for p in paths)

    topics = topic_pattern = queues = None
    if opts.get("topics"):
        topics = tuple(dict.fromkeys(t.strip() for t in opts["topics"].split(",") if t.strip()))
        if not topics:
            raise OptionError("option topics is empty")
    if opts.get("topicpattern"):
        topic_pattern = opts["topicpattern"]
        try:
            re.compile(topic_pattern)
        except re.error as exc:
            raise OptionError(f"option topicPattern is not a valid regular expression: {exc}") from None
    if opts.get("queues"):
        queues = _queues(opts["queues"])
    if sum(x is not None for x in (topics, topic_pattern, queues)) > 1:
        raise OptionError("use only one of the options topics, topicPattern and queues")

    kw = {}
    if "startingoffsets" in opts:
        kw["starting_offsets"] = parse_offsets("startingOffsets", opts["startingoffsets"])
    if "endingoffsets" in opts:
        kw["ending_offsets"] = parse_offsets("endingOffsets", opts["endingoffsets"])
    if kw.get("starting_offsets") == LATEST:
        raise OptionError("startingOffsets=latest is not meaningful for a batch read (it would read nothing)")
    if kw.get("ending_offsets") == EARLIEST:
        raise OptionError("endingOffsets=earliest is not meaningful for a batch read (it would read nothing)")
    for name, key in (("startingTimestamp", "startingtimestamp"), ("endingTimestamp", "endingtimestamp")):
        if key in opts:
            kw[name[0].lower() + re.sub(r"([A-Z])", r"_\1", name[1:]).lower()] = parse_int(name, opts[key], 0)
    for name, key, field_name in (("startingOffsetsByTimestamp", "startingoffsetsbytimestamp", "starting_by_timestamp"),
                                  ("endingOffsetsByTimestamp", "endingoffsetsbytimestamp", "ending_by_timestamp")):
        if key in opts:
            kw[field_name] = parse_timestamps(name, opts[key])
    if "startingoffsetsbytimestampstrategy" in opts:
        kw["by_timestamp_strategy"] = parse_by_timestamp_strategy(opts["startingoffsetsbytimestampstrategy"])
    if "starting_by_timestamp" in kw and "starting_timestamp" in kw:
        raise OptionError("use either startingOffsetsByTimestamp or startingTimestamp, not both")
    if "ending_by_timestamp" in kw and "ending_timestamp" in kw:
        raise OptionError("use either endingOffsetsByTimestamp or endingTimestamp, not both")
    if (("starting_offsets" in kw or "ending_offsets" in kw or "starting_timestamp" in kw
         or "ending_timestamp" in kw or "starting_by_timestamp" in kw or "ending_by_timestamp" in kw)
            and topics is None and topic_pattern is None and queues is None):
        raise OptionError("startingOffsets/endingOffsets/startingTimestamp/endingTimestamp and their ByTimestamp "
                          "forms need one of the options topics, topicPattern or queues")
    if "starting_timestamp" in kw and "starting_offsets" in kw:
        raise OptionError("use either startingOffsets or startingTimestamp, not both")
    if "ending_timestamp" in kw and "ending_offsets" in kw:
        raise OptionError("use either endingOffsets or endingTimestamp, not both")
    if "failondataloss" in opts:
        kw["fail_on_data_loss"] = parse_bool("failOnDataLoss", opts["failondataloss"])
    if "decompress" in opts:
        kw["decompress"] = parse_bool("decompress", opts["decompress"])
    if "maxinflatedbodybytes" in opts:
        kw["max_inflated_body_bytes"] = parse_int("maxInflatedBodyBytes", opts["maxinflatedbodybytes"], 1,
                                                  limits.MAX_ARROW_BINARY_BYTES)
    if "maxinflatedbatchbytes" in opts:
        kw["max_inflated_batch_bytes"] = parse_int("maxInflatedBatchBytes", opts["maxinflatedbatchbytes"], 1,
                                                   limits.MAX_ARROW_BINARY_BYTES)
    if "maxinflatedtaskbytes" in opts:
        kw["max_inflated_task_bytes"] = parse_int("maxInflatedTaskBytes", opts["maxinflatedtaskbytes"], 1)
    if "includetransactional" in opts:
        kw["include_transactional"] = parse_bool("includeTransactional", opts["includetransactional"])
    if "excludeinternaltopics" in opts:
        kw["exclude_internal_topics"] = parse_bool("excludeInternalTopics", opts["excludeinternaltopics"])
    if "maxrecordsperpartition" in opts:
        kw["max_records_per_partition"] = parse_int("maxRecordsPerPartition", opts["maxrecordsperpartition"], 1)
    if "minpartitions" in opts:
        kw["min_partitions"] = parse_int("minPartitions", opts["minpartitions"], 0, 100_000)
    if "maxbytesperpartition" in opts:
        kw["max_bytes_per_partition"] = parse_int("maxBytesPerPartition", opts["maxbytesperpartition"], 4096)
    if "batchsize" in opts:
        kw["batch_size"] = parse_int("batchSize", opts["batchsize"], 1, 10_000_000)
    if "indexlookups" in opts:
        kw["index_lookups"] = parse_bool("indexLookups", opts["indexlookups"])
    if "view" in opts:
        kw["view"] = parse_view(opts["view"], mode, queues is not None or any(
            k in kw for k in ("starting_offsets", "ending_offsets", "starting_timestamp", "ending_timestamp")))
    if "metadata" in opts:
        kw["metadata"] = parse_metadata(opts["metadata"], mode, sorted(
            OPTIONS[k] for k in opts if k in ("topics", "topicpattern", "queues", "startingoffsets", "endingoffsets",
                                              "startingtimestamp", "endingtimestamp", "view", "keys",
                                              "keysfile")))
    from .bodies.spec import parse_body_options
    others = [f"{OPTIONS[k]}={opts[k]}" for k in ("view", "metadata")
              if k in opts and opts[k].strip().lower() not in ("", "messages")]
    if "keys" in opts or "keysfile" in opts:
        kw["keys"] = parse_keys_option(opts, others)
    body = parse_body_options(opts, refuse_with=" or ".join(others) or None)
    if body is not None:
        kw["body"] = body
    if kw.get("view") in ("dlq", "retry", "trace") and topics is None and topic_pattern is None and queues is None:
        kw["topics_by_view"] = True
    if kw.get("view") in GROUP_TOPIC_VIEWS:
        topics, topic_pattern, queues = _group_topic_selection(kw["view"], topics, topic_pattern, queues)
    if kw.get("view") in ("dlq", "retry", "trace"):
        kw["exclude_internal_topics"] = False           # the topics these views read are RocketMQ's own
    if kw.get("view") == "trace":
        kw["decompress"] = True                         # the client sends trace bodies over 4 KiB compressed
        if topics is None and topic_pattern is None and queues is None:
            topics = (TRACE_TOPIC,)
    return ReadOptions(paths=paths, brokers=brokers, store_config=config, topics=topics,
                       topic_pattern=topic_pattern, queues=queues, raw=tuple(sorted(opts.items())), **kw)
