"""``rmq export`` (Parquet / JSON lines / Arrow IPC) and ``rmq print`` (mqadmin printMsg), without Spark.

Both run the Spark source's own planner and task reader
(:func:`rmqsource.spark.planning.plan`, :func:`rmqsource.spark.batch.read_partition`)
in this process: same columnar decode, same rows, same Arrow schema
(:data:`rmqsource.spark.schema.ARROW_SCHEMA`) as ``spark.read.format("rmq")``.
Filters are applied the way pushed Spark filters are: ``--tag`` on
ConsumeQueue tagsCode then the exact TAGS, ``--begin/--end`` on store time
(binary search per queue), ``--from-offset/--to-offset`` on queue offsets.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import replace
from typing import TYPE_CHECKING, Iterator, Optional

from ..errors import OptionError
from .output import (EXIT_NOT_FOUND, EXIT_OK, Output, body_preview, format_ms, format_table, load_config,
                     parse_time_ms, short_topic)
from .progress import Progress

if TYPE_CHECKING:
    import pyarrow as pa

FORMATS = ("parquet", "jsonl", "arrow")
VIEWS = ("messages", "timers", "dlq", "retry", "trace", "transactions")
_MIN, _MAX = -(1 << 63), (1 << 63) - 1


def _batches(args, columns=None, topics=None, view="messages") -> Iterator[pa.RecordBatch]:
    """Record batches of the store as the Spark source reads it with these filters (``view``: messages, or
    one of the views of rmqsource.spark.views)."""
    from ..spark.batch import ReadSpec, read_partition
    from ..spark.options import parse_options
    from ..spark.planning import plan
    from ..spark.pushdown import Pushed
    from ..spark.schema import COLUMNS, VIEW_SCHEMAS
    options = {"path": args.store}
    if view != "messages":
        options["view"] = view
        if view == "trace":
            for flag, given in (("--tag", args.tag), ("--begin", args.begin), ("--end", args.end),
                                ("--from-offset", args.from_offset), ("--to-offset", args.to_offset)):
                if given is not None:
                    raise OptionError(f"{flag} does not apply to --view trace (it takes --topic and --queue: "
                                      f"the trace topics read)")
    if topics:
        options["topics"] = ",".join(topics)
    if getattr(args, "queues", None):
        options["queues"] = ",".join(args.queues)
    if getattr(args, "include_internal_topics", False):
        options["excludeInternalTopics"] = "false"
    options.update(body_options(args))
    opts = replace(parse_options(options), store_config=load_config(args))
    tags = None
    if getattr(args, "tag", None):
        tags = frozenset(t.strip() for t in args.tag.split("||") if t.strip())
        if not tags:
            raise OptionError(f"--tag {args.tag!r} names no tag; use e.g. 'TagA || TagB'")
    begin = parse_time_ms(args.begin, "--begin") if args.begin is not None else _MIN
    end = parse_time_ms(args.end, "--end") if args.end is not None else _MAX
    lo = getattr(args, "from_offset", None)
    hi = getattr(args, "to_offset", None)
    pushed = Pushed(tags=tags, store_ts=(begin, end),
                    queue_offset=(_MIN if lo is None else lo, _MAX if hi is None else hi))
    if view == "messages" and opts.body is not None:
        from ..spark.bodies.decode import decode_batches, message_columns
        columns = tuple(columns or COLUMNS + tuple(opts.body.columns.names))
        spec = ReadSpec(opts, pushed, message_columns(columns, opts.body))
        for part in plan(opts, pushed):
            yield from decode_batches(opts.body, columns, read_partition(spec, part))
        return
    if view == "messages":
        spec = ReadSpec(opts, pushed, tuple(columns or COLUMNS))
        for part in plan(opts, pushed):
            yield from read_partition(spec, part)
        return
    from ..spark.views import read_view
    yield from read_view(view, opts, tuple(columns or VIEW_SCHEMAS[view].names), pushed)


# --body-* flag -> the read option it gives (docs/bodies.md)
BODY_FLAGS = {"body_format": "bodyFormat", "body_schema": "bodySchema", "body_schema_file": "bodySchemaFile",
              "body_schema_by_topic": "bodySchemaByTopic", "body_wire_format": "bodyWireFormat",
              "body_column_prefix": "bodyColumnPrefix", "on_bad_record": "onBadRecord"}


def body_options(args) -> dict:
    """The body decoding options the --body-* flags give."""
    return {opt: getattr(args, flag) for flag, opt in BODY_FLAGS.items() if getattr(args, flag, None) is not None}


def _output_schema(args, view: str) -> "pa.Schema":
    """The export's schema: the view's columns, or the message columns then the decoded ones."""
    import pyarrow as pa
    from ..spark.schema import VIEW_SCHEMAS
    options = body_options(args)
    if view != "messages" or not options:
        return VIEW_SCHEMAS[view]
    from ..spark.bodies.decode import arrow_schema
    from ..spark.bodies.spec import parse_body_options
    spec = parse_body_options({k.lower(): v for k, v in options.items()})
    return pa.schema(list(VIEW_SCHEMAS[view]) + list(arrow_schema(spec))) if spec else VIEW_SCHEMAS[view]


def _timer_batches(args, view: str = "timers") -> Iterator[pa.RecordBatch]:
    """The timers or transactions view of the store (one row per parked / transactional message, under its real
    topic), as the Spark source reads it."""
    from ..spark.batch import ReadSpec, read_partition
    from ..spark.options import parse_options
    from ..spark.schema import VIEW_SCHEMAS
    for flag, given in (("--queue", args.queues), ("--tag", args.tag), ("--begin", args.begin), ("--end", args.end),
                        ("--from-offset", args.from_offset), ("--to-offset", args.to_offset)):
        if given is not None:
            raise OptionError(f"{flag} does not apply to --view {view} (it takes --topic: real topics)")
    options = {"path": args.store, "view": view}
    if args.topics:
        options["topics"] = ",".join(args.topics)
    if getattr(args, "include_internal_topics", False):
        options["excludeInternalTopics"] = "false"
    options.update(body_options(args))          # refused with a view, as by the source
    opts = replace(parse_options(options), store_config=load_config(args))
    if view == "timers":
        from ..spark.timers import TimersPushed, plan_timers
        pushed, parts = TimersPushed(), plan_timers(opts, TimersPushed())
    else:
        from ..spark.pushdown import Pushed
        from ..spark.transactions import plan_transactions
        pushed, parts = Pushed(), plan_transactions(opts)
    spec = ReadSpec(opts, pushed, tuple(VIEW_SCHEMAS[view].names))
    for part in parts:
        yield from read_partition(spec, part)


def _json_rows(batch: pa.RecordBatch) -> Iterator[str]:
    """One JSON object per row: the schema's columns; body base64, timestamps epoch ms, properties an object."""
    import pyarrow as pa
    cols = batch.schema.names
    data = {}
    for name in cols:
        arr = batch.column(cols.index(name))
        if pa.types.is_timestamp(arr.type):
            arr = arr.cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
        data[name] = arr.to_pylist()
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_json_default).encode
    for i in range(batch.num_rows):
        row = {}
        for name in cols:
            v = data[name][i]
            if name == "body" and v is not None:
                v = base64.b64encode(v).decode("ascii")
            elif name == "properties" and v is not None:
                v = dict(v)
            elif v is not None:
                v = _json_value(v, batch.schema.field(name).type)
            row[name] = v
        yield dumps(row)


def _json_value(v, t):
    """A decoded column's value for a JSON line: maps as objects (Arrow gives their entries as pairs)."""
    import pyarrow as pa
    if v is None:
        return None
    if pa.types.is_map(t):
        return {k: _json_value(x, t.item_type) for k, x in v}
    if pa.types.is_struct(t):
        return {t.field(i).name: _json_value(v[t.field(i).name], t.field(i).type) for i in range(t.num_fields)}
    if pa.types.is_list(t):
        return [_json_value(x, t.value_type) for x in v]
    return v


def _json_default(v):
    """Values json does not write itself: bytes as base64, dates and times as ISO-8601, decimals as text."""
    import datetime as dt
    import decimal
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(v).decode("ascii")
    if isinstance(v, (dt.date, dt.datetime)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    raise TypeError(f"cannot write {type(v).__name__} as JSON")


class _Sink:
    def __init__(self, path: str, fmt: str, schema: pa.Schema):
        self.path, self.fmt, self.schema = path, fmt, schema
        import pyarrow as pa
        self.tmp = f"{path}.tmp{os.getpid()}"
        if fmt == "parquet":
            import pyarrow.parquet as pq
            self.writer = pq.ParquetWriter(self.tmp, schema, compression="snappy")
        elif fmt == "arrow":
            self.file = pa.OSFile(self.tmp, "wb")
            self.writer = pa.ipc.new_file(self.file, schema)
        else:
            self.file = open(self.tmp, "w", encoding="utf-8")

    def write(self, batch: pa.RecordBatch) -> None:
        if self.fmt == "jsonl":
            self.file.write("".join(line + "\n" for line in _json_rows(batch)))
        else:
            self.writer.write_batch(batch)

    def close(self, ok: bool) -> None:
        try:
            if self.fmt in ("parquet", "arrow"):
                self.writer.close()
            if self.fmt != "parquet":
                self.file.close()
        finally:
            if ok:
                os.replace(self.tmp, self.path)        # a partial export never looks complete
            elif os.path.exists(self.tmp):
                os.unlink(self.tmp)


def cmd_export(args, out: Output) -> int:
    import time
    fmt = args.format or _format_from_name(args.out)
    if os.path.isdir(args.out):
        raise OptionError(f"{args.out} is a directory; give the output file name")
    started = time.perf_counter()
    rows = 0
    view = getattr(args, "view", "messages")
    from ..spark.schema import VIEW_SCHEMAS
    batches = (_timer_batches(args, view) if view in ("timers", "transactions")
               else _batches(args, topics=args.topics, view=view))
    schema = VIEW_SCHEMAS[view] if view != "messages" else _output_schema(args, view)
    sink = _Sink(args.out, fmt, schema)
    ok = False
    try:
        with Progress(None, "export", unit="msg") as bar:
            for batch in batches:
                sink.write(batch)
                rows += batch.num_rows
                bar.update(batch.num_rows)
        ok = True
    finally:
        sink.close(ok)
    elapsed = time.perf_counter() - started
    summary = {"rows": rows, "format": fmt, "path": args.out, "seconds": round(elapsed, 3)}
    if out.json:
        out.json_line(summary)
    else:
        rate = f", {rows / elapsed:,.0f} msgs/s" if elapsed > 0 and rows else ""
        out.line(f"exported {rows:,} messages to {args.out} ({fmt}, {elapsed:.2f} s{rate})")
    return EXIT_OK


def _format_from_name(path: str) -> str:
    lower = path.lower()
    for suffix, fmt in ((".parquet", "parquet"), (".pq", "parquet"), (".jsonl", "jsonl"), (".json", "jsonl"),
                        (".arrow", "arrow"), (".feather", "arrow"), (".ipc", "arrow")):
        if lower.endswith(suffix):
            return fmt
    raise OptionError(f"give --format {'|'.join(FORMATS)} (cannot tell it from the name {path!r})")


PRINT_COLUMNS = ("topic", "queueId", "queueOffset", "commitLogOffset", "msgId", "uniqKey", "tags", "keys", "body",
                 "properties", "bornTimestamp", "storeTimestamp", "bornHost", "storeHost", "sysFlag", "storeSize")


def cmd_print(args, out: Output) -> int:
    """``printMsg``: the messages of TOPIC stored in [--begin, --end), queue by queue."""
    from ..store.reader import MessageStoreReader
    with MessageStoreReader(args.store, load_config(args)) as reader:
        if args.topic not in reader.topics():
            print(f"rmq print: topic {args.topic!r} has no ConsumeQueue in {args.store} "
                  f"(topics: {', '.join(reader.topics()) or 'none'})", file=__import__("sys").stderr)
            return EXIT_NOT_FOUND
    count = 0
    widths: list[int] = []
    for batch in _batches(args, columns=PRINT_COLUMNS, topics=[args.topic]):
        count += batch.num_rows
        if out.json:
            for line in _json_rows(batch):
                out.line(line)
            continue
        d = batch.to_pydict()
        rows = [[d["queueId"][i], d["queueOffset"][i], d["msgId"][i],
                 format_ms(_ms(d["storeTimestamp"][i])), d["tags"][i], " ".join(d["keys"][i] or []) or None,
                 body_preview(d["body"][i], d["sysFlag"][i], args.body_chars)] for i in range(batch.num_rows)]
        out.lines(format_table(["queueId", "queueOffset", "msgId", "storeTime (UTC)", "tags", "keys", "body"], rows,
                               [True, True, False, False, False, False, False], widths=widths, header=not widths))
    if not out.json:
        if count == 0:
            out.line("(no messages)")
        out.line()
        span = f"[{args.begin or '-'}, {args.end or '-'})"
        out.line(f"{short_topic(args.topic)}: {count} message(s) stored in {span}")
    return EXIT_OK if count else EXIT_NOT_FOUND


def _ms(ts) -> Optional[int]:
    if ts is None:
        return None
    import datetime as dt
    return int((ts - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)).total_seconds() * 1000)


def add_parsers(sub, common, int_arg) -> None:
    """The ``export`` and ``print`` subcommands (called from cli.build_parser)."""
    p = sub.add_parser("export", parents=[common], help="write messages to Parquet / JSON lines / Arrow (no Spark)",
                       description="Export the store's messages with the Spark source's schema and decode, "
                                   "without Spark. Filters: --topic, --queue, --tag, --begin/--end (store time), "
                                   "--from-offset/--to-offset (queue offsets). A whole-store export leaves out "
                                   "RocketMQ's own topics unless --include-internal-topics.")
    p.add_argument("store", metavar="STORE")
    p.add_argument("out", metavar="OUT", help="output file (written to OUT.tmp*, renamed when complete)")
    p.add_argument("--format", choices=FORMATS, help="default: from OUT's suffix")
    p.add_argument("--topic", dest="topics", action="append", metavar="TOPIC", help="only this topic (repeatable)")
    p.add_argument("--queue", dest="queues", action="append", metavar="TOPIC:QID", help="only this queue (repeatable)")
    p.add_argument("--tag", metavar="EXPR", help="tag expression, e.g. 'TagA || TagB'")
    p.add_argument("--begin", metavar="TIME", help="store time from (epoch ms or ISO-8601, UTC)")
    p.add_argument("--end", metavar="TIME", help="store time until (exclusive)")
    p.add_argument("--from-offset", type=int_arg("--from-offset", 0), metavar="N", help="queue offsets from N")
    p.add_argument("--to-offset", type=int_arg("--to-offset", 0), metavar="N", help="queue offsets below N")
    p.add_argument("--include-internal-topics", action="store_true",
                   help="also RocketMQ's own topics (SCHEDULE_TOPIC_XXXX, RMQ_SYS_*, rmq_sys_*, %%RETRY%%*, %%DLQ%%*), "
                        "left out of a whole-store export by default; a --topic or --queue is always read")
    p.add_argument("--view", choices=VIEWS, default="messages",
                   help="messages (default), or timers: one row per timer / delay message with deliverTime, "
                        "delayLevel and state (pending | delivered | recalled), as option view=timers reads; --topic names "
                        "real topics; dlq, retry: dead-letter / retry topics with group, originTopic and "
                        "originMsgId; trace: one row per trace event; transactions: one row per transactional message with "
                        "its state and commits (docs/views.md)")
    b = p.add_argument_group("typed bodies", "decode the bodies into columns, as the read options of the same "
                                             "names do (docs/bodies.md)")
    b.add_argument("--body-format", metavar="FORMAT", help="bodyFormat: json, avro or text")
    b.add_argument("--body-schema", metavar="SCHEMA", help="bodySchema: a Spark DDL / JSON struct (json) or an "
                                                          "Avro record schema (avro)")
    b.add_argument("--body-schema-file", metavar="FILE", help="bodySchemaFile: a file holding that schema")
    b.add_argument("--body-schema-by-topic", metavar="JSON", help="bodySchemaByTopic: {\"topic\": \"schema\", ...}")
    b.add_argument("--body-wire-format", choices=("plain", "confluent"), help="bodyWireFormat (default plain)")
    b.add_argument("--body-column-prefix", metavar="PREFIX", help="bodyColumnPrefix")
    b.add_argument("--on-bad-record", choices=("fail", "null", "skip"), help="onBadRecord (default fail)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("print", parents=[common], help="print a topic's messages in a time range (printMsg)",
                       description="Like mqadmin printMsg: the messages of TOPIC stored in [--begin, --end), "
                                   "queue by queue. Exit 3 when there is none.")
    p.add_argument("store", metavar="STORE")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--begin", metavar="TIME", help="store time from (epoch ms or ISO-8601, UTC)")
    p.add_argument("--end", metavar="TIME", help="store time until (exclusive)")
    p.add_argument("--tag", metavar="EXPR", help="tag expression, e.g. 'TagA || TagB'")
    p.set_defaults(func=cmd_print)
