"""``rmq``: command line front end of the store engine.

Subcommands (store settings by their MessageStoreConfig names, ``--config
FILE`` for a ``.properties`` file and repeated ``-C key=value``)::

    rmq put STORE [--from FILE ...] [--json]          JSON lines on stdin (inputs.jsonl shape)
    rmq get STORE TOPIC QUEUE_ID OFFSET MAX [--tag EXPR] [--loop] [--group G] [--json]
    rmq view STORE MSGID [--json]
    rmq query STORE TOPIC KEY [MAXNUM [BEGIN END]] [--only-matching] [--json]
    rmq recover STORE [--all] [--json]
    rmq topics STORE [--json]
    rmq queues STORE [TOPIC] [--json]

With ``--json`` the output lines have exactly the shapes of the golden
corpora's expected files (``expected/get/*``, ``view.jsonl`` results,
``query.jsonl`` hits and summary, ``recover.json``, ``put.jsonl``).  Without
it every command prints aligned, readable tables.

Exit codes: 0 success (found), 1 store / format errors (the message names
the file and offset; ``verify``: problems found), 2 argument / option errors,
3 not found (``view`` of a missing msgId, ``query`` with no hits, ``get`` of a
missing topic/queue, ``lag --group`` of a group without commits), 130 on Ctrl-C.  A closed pipe
(``rmq get ... | head``) ends the command quietly.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
import unicodedata

import numpy as np
from typing import TYPE_CHECKING, Any, Iterable, Optional, Sequence, TextIO

from .errors import OptionError, RmqError
from .names import remote_scheme

if TYPE_CHECKING:
    from .store.config import StoreConfig

PROG = "rmq"
DEFAULT_GROUP = "rmq-cli"
JAVA_LONG_MAX = (1 << 63) - 1
EXIT_OK, EXIT_STORE_ERROR, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class _Usage(Exception):
    """argparse reported a usage error (it already printed usage and message)."""

    def __init__(self, code: int):
        self.code = code


class _ArgumentParser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so ``main(argv)`` always returns."""

    def exit(self, status: int = 0, message: Optional[str] = None):
        if message:
            self._print_message(message, sys.stderr)
        raise _Usage(status)

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


# --------------------------------------------------------------- output helpers

class Output:
    """Buffered writer over the command's stdout (one ``write`` per chunk)."""

    def __init__(self, stream: TextIO, json_mode: bool):
        self.stream = stream
        self.json = json_mode
        self._buf: list[str] = []
        self._size = 0

    def line(self, text: str = "") -> None:
        self._buf.append(text)
        self._buf.append("\n")
        self._size += len(text) + 1
        if self._size >= (1 << 16):
            self.flush()

    def json_line(self, obj: Any) -> None:
        self.line(_dumps(obj))

    def raw(self, data: bytes) -> None:
        """UTF-8 bytes that already hold whole lines (bulk-rendered JSON lines)."""
        self.flush()
        binary = getattr(self.stream, "buffer", None)
        if binary is not None:
            binary.write(data)      # no decode/encode round trip through the text layer
            binary.flush()
        else:
            self.stream.write(data.decode("utf-8"))

    def lines(self, texts: Iterable[str]) -> None:
        for t in texts:
            self.line(t)

    def flush(self) -> None:
        if self._buf:
            data = "".join(self._buf)
            self._buf.clear()
            self._size = 0
            self.stream.write(data)
        self.stream.flush()


def _char_width(ch: str) -> int:
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def display_width(text: str) -> int:
    if text.isascii():
        return len(text)
    return sum(_char_width(c) for c in text)


def _pad(text: str, width: int, right: bool) -> str:
    gap = width - display_width(text)
    if gap <= 0:
        return text
    return (" " * gap + text) if right else (text + " " * gap)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]],
                 numeric: Optional[Sequence[bool]] = None, *, widths: Optional[list[int]] = None,
                 header: bool = True) -> list[str]:
    """Aligned columns; numeric columns right-aligned, the last column not padded.

    ``widths`` (updated in place) carries column widths across calls, so a
    long listing can be printed in chunks with one header and stable columns.
    """
    cells = [[_cell(v) for v in row] for row in rows]
    n = len(headers)
    if numeric is None:
        numeric = [all(isinstance(row[i], int) and not isinstance(row[i], bool) for row in rows) and bool(rows)
                   for i in range(n)]
    if widths is None:
        widths = []
    if not widths:
        widths.extend(display_width(h) for h in headers)
        for row in cells:
            for i, c in enumerate(row):
                widths[i] = max(widths[i], display_width(c))
    out = []

    def render(row: Sequence[str]) -> str:
        parts = []
        for i, c in enumerate(row):
            last = i == n - 1
            parts.append(_pad(c, widths[i], numeric[i]) if not (last and not numeric[i]) else c)
        return "  ".join(parts).rstrip()

    if header:
        out.append(render(list(headers)))
        out.append("  ".join("-" * w for w in widths))
    out.extend(render(row) for row in cells)
    return out


def short_topic(topic: str, limit: int = 48) -> str:
    """Long topic names shortened for tables (``--json`` always prints them whole)."""
    if len(topic) <= limit:
        return topic
    return f"{topic[:limit - 22]}…{topic[-8:]} ({len(topic)} chars)"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = str(value)
    if not text.isprintable():
        text = _escape_controls(text)
    return text


def _escape_controls(text: str) -> str:
    out = []
    for ch in text:
        if ch.isprintable():
            out.append(ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return "".join(out)


def truncate(text: str, limit: int) -> str:
    if limit <= 0 or display_width(text) <= limit:
        return text
    out, w = [], 0
    for ch in text:
        cw = _char_width(ch)
        if w + cw > limit - 1:
            break
        out.append(ch)
        w += cw
    return "".join(out) + "…"


def body_preview(body: Optional[bytes], sys_flag: int = 0, limit: int = 60) -> str:
    """Body as text when it is printable UTF-8 (inflated when compressed), else hex."""
    if not body:
        return ""
    prefix = ""
    data = body
    from .format.compression import is_compressed, inflate_body
    if is_compressed(sys_flag):
        try:
            data = inflate_body(body, sys_flag, max_bytes=1 << 20)
            prefix = "[inflated] "
        except (RmqError, Exception):  # noqa: BLE001 - a preview never fails the command
            data = body
            prefix = "[compressed] "
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and all(c.isprintable() or c in "\n\r\t" for c in text):
        return prefix + truncate(_escape_controls(text), limit)
    hex_chars = max(8, (limit - 16) // 2 * 2)
    shown = data[:hex_chars // 2].hex()
    more = "…" if len(data) > hex_chars // 2 else ""
    return f"{prefix}hex:{shown}{more} ({len(data)} B)"


def format_ms(ms: Optional[int]) -> str:
    """Epoch milliseconds as ``YYYY-MM-DD HH:MM:SS.mmm`` (UTC); raw number if out of range."""
    if ms is None:
        return "-"
    try:
        t = _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"


def parse_time_ms(text: str, what: str) -> int:
    """Epoch ms (integer) or an ISO-8601 date/time (UTC when no zone is given)."""
    t = text.strip()
    try:
        return int(t)
    except ValueError:
        pass
    try:
        d = _dt.datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise OptionError(f"{what} {text!r} is neither epoch milliseconds nor an ISO-8601 time") from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=_dt.timezone.utc)
    return int(d.timestamp() * 1000)


# --------------------------------------------------------------- config / store

def load_config(args) -> "StoreConfig":
    from .store.config import StoreConfig, parse_override_args
    overrides = parse_override_args(args.config_overrides or [])
    if args.config:
        return StoreConfig.from_properties_file(args.config, overrides)
    try:
        return StoreConfig.from_mapping(overrides)
    except OptionError as e:
        raise OptionError(f"-C: {e}") from None


def load_writer_config(args, strict: bool = True) -> "StoreConfig":
    """load_config, with every segment size not given taken from the store's files (put, recover).

    ``strict``: files of one kind that differ in size are an error (put); recover leaves that to recovery.
    """
    from .store.file_sizes import fit_config_to_files, given_keys
    from .store.config import parse_override_args
    given = given_keys(args.config, parse_override_args(args.config_overrides or []))
    return fit_config_to_files(load_config(args), args.store, given, strict=strict)


def open_reader(args):
    from .store.reader import MessageStoreReader
    return MessageStoreReader(args.store, load_config(args))


# --------------------------------------------------------------- get

def _message_rows(found_messages, limit: int):
    rows = []
    for f in found_messages:
        r = f.record
        rows.append([r.queue_offset, r.phy_offset, r.store_size, format_ms(r.store_timestamp_ms),
                     r.tags, r.keys, body_preview(r.body, r.sys_flag, limit)])
    return rows


_MESSAGE_HEADERS = ["queueOffset", "commitLogOffset", "size", "storeTime (UTC)", "tags", "keys", "body"]
_MESSAGE_NUMERIC = [True, True, True, False, False, False, False]


def cmd_get(args, out: Output) -> int:
    from .store.shapes import message_json, status_json
    with open_reader(args) as reader:
        missing = reader.consume_queue(args.topic, args.queue_id) is None
        if missing:
            known = reader.queue_keys()
            if args.topic not in {t for t, _ in known}:
                note = f"topic {args.topic!r} has no ConsumeQueue in this store"
            else:
                note = f"topic {args.topic!r} has no queue {args.queue_id} in this store"
            print(f"{PROG}: note: {note} (the engine answers NO_MESSAGE_IN_QUEUE)", file=sys.stderr)
        if args.loop:
            results = reader.get_loop(args.group, args.topic, args.queue_id, args.offset, args.max, args.tag)
        else:
            results = [reader.get_message(args.group, args.topic, args.queue_id, args.offset, args.max, args.tag)]
        count = calls = 0
        last = None
        rows_pending = []
        widths: list[int] = []
        for result in results:
            calls += 1
            last = result
            count += len(result.messages)
            if out.json:
                for m in result.messages:
                    out.json_line(message_json(m))
            else:
                rows_pending.extend(_message_rows(result.messages, args.body_chars))
                if len(rows_pending) >= 512:
                    _flush_message_rows(out, rows_pending, widths)
                    rows_pending = []
        if out.json:
            out.json_line(status_json(last, count=count, calls=calls))
        else:
            if rows_pending or count == 0:
                _flush_message_rows(out, rows_pending, widths)
            out.line()
            out.line(f"status {last.status.value}  nextBeginOffset {last.next_begin_offset}  "
                     f"minOffset {last.min_offset}  maxOffset {last.max_offset}  "
                     f"messages {count}  calls {calls}")
    return EXIT_NOT_FOUND if missing else EXIT_OK


def _flush_message_rows(out: Output, rows, widths: list[int]) -> None:
    if not rows:
        out.line("(no messages)")
        return
    out.lines(format_table(_MESSAGE_HEADERS, rows, _MESSAGE_NUMERIC, widths=widths, header=not widths))


# --------------------------------------------------------------- view

def _message_details(found, out: Output, body_chars: int) -> None:
    r = found.record
    cq = found.cq
    fields = [
        ("msgId", r.msg_id),
        ("topic", r.topic if len(r.topic) <= 80 else f"{r.topic} ({len(r.topic)} chars)"),
        ("queueId", r.queue_id),
        ("queueOffset", r.queue_offset),
        ("commitLogOffset", r.phy_offset),
        ("storeSize", r.store_size),
        ("magic", f"0x{r.magic & 0xFFFFFFFF:08X}"),
        ("bodyCRC", r.body_crc),
        ("flag", r.flag),
        ("sysFlag", f"{r.sys_flag} (0x{r.sys_flag & 0xFFFFFFFF:X})"),
        ("bornTimestamp", f"{r.born_timestamp_ms} ({format_ms(r.born_timestamp_ms)} UTC)"),
        ("bornHost", r.born_host),
        ("storeTimestamp", f"{r.store_timestamp_ms} ({format_ms(r.store_timestamp_ms)} UTC)"),
        ("storeHost", r.store_host),
        ("reconsumeTimes", r.reconsume_times),
        ("preparedTransactionOffset", r.prepared_transaction_offset),
        ("tags", r.tags),
        ("keys", r.keys),
        ("cq unit", "-" if cq is None else
         f"commitLogOffset {cq.commit_log_offset}  size {cq.size}  tagsCode {cq.tags_code}"),
        ("body", f"{len(r.body)} B  {body_preview(r.body, r.sys_flag, body_chars)}"),
    ]
    width = max(len(k) for k, _ in fields)
    for k, v in fields:
        out.line(f"{k.ljust(width)}  {_cell(v)}")
    props = sorted(r.properties.items())
    if props:
        out.line()
        out.lines(format_table(["property", "value"], [[k, truncate(_cell(v), 120)] for k, v in props],
                               [False, False]))


def cmd_view(args, out: Output) -> int:
    from .commands.lookup import cmd_view as run
    return run(args, out)


# --------------------------------------------------------------- query

def cmd_query(args, out: Output) -> int:
    from .store.shapes import query_json
    rest = list(args.rest)
    if len(rest) not in (0, 1, 3):
        raise OptionError("query takes TOPIC KEY [MAXNUM [BEGIN END]]: give MAXNUM alone or MAXNUM BEGIN END")
    max_num = 32
    begin, end = 0, JAVA_LONG_MAX
    if rest:
        try:
            max_num = int(rest[0])
        except ValueError:
            raise OptionError(f"MAXNUM {rest[0]!r} is not an integer") from None
        if max_num <= 0:
            raise OptionError(f"MAXNUM must be positive, got {max_num}")
    if len(rest) == 3:
        begin = parse_time_ms(rest[1], "BEGIN")
        end = parse_time_ms(rest[2], "END")
    with open_reader(args) as reader:
        result = reader.query(args.topic, args.key, max_num, begin, end, only_matching=args.only_matching)
        doc = query_json(result, args.topic, args.key)
        exit_code = EXIT_OK if doc["hits"] else EXIT_NOT_FOUND
        if out.json:
            for hit in doc["hits"]:
                out.json_line(hit)
            out.json_line(doc["summary"])
            return exit_code
        rows = []
        for found, hit in zip(result.messages, doc["hits"]):
            r = found.record
            rows.append([r.phy_offset, r.queue_id, r.queue_offset, format_ms(r.store_timestamp_ms),
                         hit["keyMatch"], r.keys, r.uniq_key, body_preview(r.body, r.sys_flag, args.body_chars)])
        if rows:
            out.lines(format_table(["commitLogOffset", "queueId", "queueOffset", "storeTime (UTC)", "keyMatch",
                                    "keys", "uniqKey", "body"], rows,
                                   [True, True, True, False, False, False, False, False]))
        else:
            out.line("(no hits)")
        s = doc["summary"]
        out.line()
        out.line(f"hits {s['count']}  indexLastUpdatePhyoffset {s['indexLastUpdatePhyoffset']}  "
                 f"indexLastUpdateTimestamp {s['indexLastUpdateTimestamp']}")
        collisions = sum(1 for h in doc["hits"] if not h["keyMatch"])
        if collisions:
            out.line(f"{collisions} hit(s) are index hash collisions (keyMatch no); --only-matching drops them")
    return exit_code


# --------------------------------------------------------------- recover / queues / topics

def _queue_entries(reader, config, include_memory_queues: bool) -> list[dict]:
    from .names import SCHEDULE_TOPIC
    from .store.config import BrokerRole
    from .store.shapes import queue_json
    entries = {(q.topic, q.queue_id): queue_json(q) for q in reader.queue_infos()}
    if include_memory_queues and not config.is_v5 and config.broker_role is not BrokerRole.SLAVE:
        # 4.x ScheduleMessageService creates one in-memory queue per delay level.
        for qid in range(config.max_delay_level):
            entries.setdefault((SCHEDULE_TOPIC, qid), {"topic": SCHEDULE_TOPIC, "queueId": qid, "minOffset": 0,
                                                       "maxOffset": 0, "cqMaxPhysicOffset": -1})
    return [entries[k] for k in sorted(entries)]


def recover_report_readonly(reader, config, *, all_queues: bool = True) -> dict:
    """The ``recover.json`` document of a store, computed without writing to it (``--dry-run``)."""
    queues = _queue_entries(reader, config, include_memory_queues=True)
    max_offset = reader.commit_log_max_offset
    summary = {
        "abortFileExisted": bool(reader.abort_file_existed),
        "loadOk": True,
        "commitLogMinOffset": reader.commitlog.min_offset if reader.commitlog.segments else 0,
        "commitLogMaxOffset": max_offset,
        "confirmOffset": max_offset if config.is_v5 else -1,
        "dispatchBehindBytes": 0,
        "topicQueueTable": {f"{q['topic']}-{q['queueId']}": q["maxOffset"]
                            for q in sorted(queues, key=lambda q: f"{q['topic']}-{q['queueId']}")},
    }
    if not all_queues:
        queues = [q for q in queues if q["maxOffset"] > 0 or q["cqMaxPhysicOffset"] >= 0]
    return {"command": "recover STORE --all" if all_queues else "recover STORE", "queues": queues,
            "summary": summary}


def refuse_read_only_store(store: str, command: str) -> None:
    """``put``/``recover`` write in place: refuse a store whose root has no write permission bits.

    Running as root ignores permissions, so a read-only reference store (a
    golden corpus) would otherwise be modified; the mode bits state the intent.
    """
    import stat
    from .errors import StoreError
    try:
        mode = os.stat(store).st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise StoreError(f"{store}: {e.strerror or e}") from None
    if stat.S_ISDIR(mode) and not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise StoreError(f"{store} is read-only (mode {stat.filemode(mode)}); {command} writes in place - "
                         f"work on a copy (cp -r) or make it writable")


def run_recovery(args, config) -> dict:
    """Recover the store in place (under the writer lock) and return the recover.json document."""
    from .store.reader import MessageStoreReader
    from .store.shapes import queue_json
    if args.dry_run:
        from .store.layout import StoreLayout
        from .store.recovery_plan import plan_recovery
        StoreLayout.for_config(args.store, config).check_recoverable()
        with MessageStoreReader(args.store, config) as reader:
            doc = recover_report_readonly(reader, config, all_queues=args.all)
        doc["dryRun"] = True
        doc["plan"] = plan_recovery(args.store, config).to_json()
        return doc
    from .io.lock import StoreLock
    from .store.layout import StoreLayout
    from .store.recovery import recover_store
    StoreLayout.for_config(args.store, config).check_recoverable()
    refuse_read_only_store(args.store, "recover")
    with StoreLock(args.store):
        report = recover_store(args.store, config, mark_clean=True)
    queues = [queue_json(q) for q in report.queues]
    summary = {
        "abortFileExisted": bool(report.abort_file_existed),
        "loadOk": True,
        "commitLogMinOffset": report.commit_log_min_offset,
        "commitLogMaxOffset": report.commit_log_max_offset,
        "confirmOffset": report.confirm_offset,
        "dispatchBehindBytes": report.dispatch_behind_bytes,
        "topicQueueTable": dict(report.topic_queue_table),
    }
    if not args.all:
        queues = [q for q in queues if q["maxOffset"] > 0 or q["cqMaxPhysicOffset"] >= 0]
    return {"command": "recover STORE --all" if args.all else "recover STORE", "queues": queues,
            "summary": summary,
            "actions": {"deletedSegments": [os.path.basename(p) for p in report.deleted_segments],
                        "zeroedTailBytes": report.zeroed_tail_bytes,
                        "redispatchedFrom": report.redispatched_from}}


def cmd_recover(args, out: Output) -> int:
    config = load_writer_config(args, strict=False)
    doc = run_recovery(args, config)
    if out.json:
        out.json_line(doc)
        return EXIT_OK
    s = doc["summary"]
    if doc.get("dryRun"):
        from .commands.verify import recovery_plan_lines
        out.line("dry run: report computed read-only, nothing was written")
        out.lines(recovery_plan_lines(doc["plan"]))
        out.line()
    else:
        a = doc["actions"]
        did = []
        if a["deletedSegments"]:
            did.append(f"deleted CommitLog segments {', '.join(a['deletedSegments'])}")
        if a["zeroedTailBytes"]:
            did.append(f"zero-filled {a['zeroedTailBytes']} bytes of torn tail")
        if a["redispatchedFrom"] is not None:
            did.append(f"re-dispatched from CommitLog offset {a['redispatchedFrom']}")
        out.line("recovered: " + ("; ".join(did) if did else "store was consistent, nothing to repair"))
    for k in ("abortFileExisted", "loadOk", "commitLogMinOffset", "commitLogMaxOffset", "confirmOffset",
              "dispatchBehindBytes"):
        out.line(f"{k.ljust(20)} {_cell(s[k])}")
    out.line()
    out.lines(_queue_table(doc["queues"]))
    return EXIT_OK


def _queue_table(queues: list[dict]) -> list[str]:
    rows = [[short_topic(q["topic"]), q["queueId"], q["minOffset"], q["maxOffset"], q["maxOffset"] - q["minOffset"],
             q["cqMaxPhysicOffset"]] + ([format_ms(q["lastStoreTime"])] if "lastStoreTime" in q else [])
            for q in queues]
    if not rows:
        return ["(no queues)"]
    last = ["lastStoreTime (UTC)"] if "lastStoreTime" in queues[0] else []
    return format_table(["topic", "queueId", "minOffset", "maxOffset", "messages", "cqMaxPhysicOffset"] + last, rows,
                        [False, True, True, True, True, True] + [False] * len(last))


def _note_live_broker(reader) -> None:
    if reader.broker_note():
        print(f"{PROG}: note: {reader.broker_note()}", file=sys.stderr)


def cmd_queues(args, out: Output) -> int:
    config = load_config(args)
    from .store.reader import MessageStoreReader
    with MessageStoreReader(args.store, config) as reader:
        _note_live_broker(reader)
        queues = _queue_entries(reader, config, include_memory_queues=False)
        if args.topic is not None:
            topics = sorted({q["topic"] for q in queues})
            queues = [q for q in queues if q["topic"] == args.topic]
            if not queues:
                raise OptionError(f"topic {args.topic!r} has no ConsumeQueue in {args.store}; "
                                  f"topics: {', '.join(topics) or '(none)'}")
        from .commands.lookup import last_store_times
        times = last_store_times(reader, queues)
        for q in queues:
            q["messages"] = q["maxOffset"] - q["minOffset"]
            q["lastStoreTime"] = times[(q["topic"], q["queueId"])]
        if out.json:
            for q in queues:
                out.json_line(q)
            return EXIT_OK
        out.lines(_queue_table(queues))
        out.line()
        out.line(f"commitLog [{reader.commitlog.min_offset if reader.commitlog.segments else 0}, "
                 f"{reader.commit_log_max_offset})  segments {len(reader.commitlog.segments)}  "
                 f"queues {len(queues)}")
    return EXIT_OK


def cmd_lag(args, out: Output) -> int:
    from .commands.lookup import cmd_lag as run
    return run(args, out)


def cmd_export_entry(args, out: Output) -> int:
    from .commands.export import cmd_export
    return cmd_export(args, out)


def cmd_print_entry(args, out: Output) -> int:
    from .commands.export import cmd_print
    return cmd_print(args, out)


def cmd_verify(args, out: Output) -> int:
    from .commands.verify import cmd_verify as run
    return run(args, out)


def cmd_demo(args, out: Output) -> int:
    from .demo import run_demo
    def line(text: str) -> None:   # progress shows while Spark starts and runs
        out.line(text)
        out.flush()
    return run_demo(args.dir, args.messages, keep=bool(args.dir), out=line)


def cmd_jar(args, out: Output) -> int:
    from .spark.jar import build_jar, jar_path
    log = lambda msg: print(msg, file=sys.stderr)  # noqa: E731 - progress on stderr, the path on stdout
    out.line(build_jar(log=log) if args.build else jar_path(required=True))
    return EXIT_OK


def cmd_topics(args, out: Output) -> int:
    config = load_config(args)
    from .store.reader import MessageStoreReader
    with MessageStoreReader(args.store, config) as reader:
        _note_live_broker(reader)
        queues = _queue_entries(reader, config, include_memory_queues=False)
        from .commands.lookup import last_store_times
        times = last_store_times(reader, queues)
        per_topic: dict[str, list[dict]] = {}
        for q in queues:
            per_topic.setdefault(q["topic"], []).append(q)
        docs = []
        for topic in sorted(per_topic):
            qs = per_topic[topic]
            docs.append({"topic": topic, "queueIds": [q["queueId"] for q in qs],
                         "messages": sum(q["maxOffset"] - q["minOffset"] for q in qs),
                         "minOffset": min(q["minOffset"] for q in qs),
                         "maxOffset": max(q["maxOffset"] for q in qs),
                         "lastStoreTime": max((t for q in qs if (t := times[(topic, q["queueId"])]) is not None),
                                              default=None)})
        if out.json:
            for d in docs:
                out.json_line(d)
            return EXIT_OK
        rows = [[short_topic(d["topic"]), len(d["queueIds"]), d["messages"], d["minOffset"], d["maxOffset"],
                 format_ms(d["lastStoreTime"]), ",".join(str(i) for i in d["queueIds"])] for d in docs]
        if rows:
            out.lines(format_table(["topic", "queues", "messages", "minOffset", "maxOffset", "lastStoreTime (UTC)",
                                    "queueIds"], rows, [False, True, True, True, True, False, False]))
        else:
            out.line("(no topics)")
        out.line()
        out.line(f"topics {len(docs)}  messages {sum(d['messages'] for d in docs)}  "
                 f"commitLogMaxOffset {reader.commit_log_max_offset}")
    return EXIT_OK


# --------------------------------------------------------------- put

PUT_CHUNK_BYTES = 8 << 20            # stdin is read and parsed in chunks of about this size

_ARROW_ALIASES = {
    "queueId": "queue_id", "bornTimestamp": "born_timestamp_ms", "bornHost": "born_host",
    "storeHost": "store_host", "sysFlag": "sys_flag", "reconsumeTimes": "reconsume_times",
    "preparedTransactionOffset": "prepared_transaction_offset", "storeTimestamp": "store_timestamp_ms",
    "propertiesString": "properties", "born_timestamp": "born_timestamp_ms",
    "store_timestamp": "store_timestamp_ms",
}
_IGNORED_INPUT_FIELDS = frozenset({"plaintext"})


PUT_BLOCK_BYTES = 64 << 20
PUT_ARROW_BATCH_ROWS = 262_144


def _line_blocks(stream, block_bytes: int = PUT_BLOCK_BYTES):
    """(number of the first line, block of whole lines) from a binary stream, ~block_bytes each."""
    carry = b""
    line_no = 1
    while True:
        chunk = stream.read(block_bytes)
        if not chunk:
            break
        data = carry + chunk
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            carry = data
            continue
        block, carry = data[:cut], data[cut:]
        yield line_no, block
        line_no += block.count(b"\n")
    if carry.strip():
        yield line_no, carry + b"\n"


def _arrow_batches(path: str):
    """Record batches of a Parquet or Arrow IPC (file or stream) file."""
    import pyarrow as pa
    lower = path.lower()
    if lower.endswith((".parquet", ".pq")):
        import pyarrow.parquet as pq
        try:
            pf = pq.ParquetFile(path)
        except (pa.ArrowException, OSError) as e:
            raise OptionError(f"{path}: not a readable Parquet file: {_one_line(e)}") from None
        yield from pf.iter_batches(batch_size=PUT_ARROW_BATCH_ROWS)
        return
    try:
        source = pa.memory_map(path)
    except (pa.ArrowException, OSError) as e:
        raise OptionError(f"{path}: cannot open: {_one_line(e)}") from None
    try:
        reader = pa.ipc.open_file(source)
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)
        return
    except pa.ArrowInvalid:
        pass
    try:
        source.seek(0)
        yield from pa.ipc.open_stream(source)
    except pa.ArrowInvalid as e:
        raise OptionError(f"{path}: neither Parquet (.parquet) nor an Arrow IPC file/stream: {_one_line(e)}") \
            from None


def cmd_put(args, out: Output) -> int:
    import time
    from .io.segments import list_segments
    from .commands.put_input import arrow_bodies_decoded, json_bodies_as_base64
    from .store.queue_select import QueueChooser, TopicQueueNums, with_queue_ids
    from .store.writer import MessageStoreWriter
    config = load_writer_config(args)
    if args.from_files and args.input:
        raise OptionError("give either --from (Parquet/Arrow files) or --input (JSON lines), not both")
    stdin = args.stdin
    if not args.from_files and not args.input and stdin is None:
        raise OptionError("put reads JSON lines from stdin (or --input FILE / --from FILE)")
    for f in args.from_files:
        if not os.path.isfile(f):
            raise OptionError(f"--from {f}: no such file")
    refuse_read_only_store(args.store, "put")
    started = time.perf_counter()
    total = ok = 0
    failures: list[tuple[int, Any]] = []
    writer = MessageStoreWriter(args.store, config)
    try:
        def record(results) -> None:
            """Count one columnar put; print its put.jsonl lines (rendered in bulk by the writer)."""
            nonlocal total, ok
            base = total
            total += len(results)
            ok += results.ok_count
            if ok - base != len(results) and len(failures) < 1000:
                for j in np.flatnonzero(~results.ok_mask)[:1000 - len(failures)].tolist():
                    failures.append((base + j, results[j]))
            if out.json:
                out.raw(results.to_put_jsonl(base))

        if args.from_files:
            # Rows without a queueId: the Spark sink's rule (hash of the keys, else round-robin).
            chooser = QueueChooser(TopicQueueNums.of_store(args.store))
            for path in args.from_files:
                for batch in _arrow_batches(path):
                    if batch.num_rows:
                        batch = arrow_bodies_decoded(batch, args.body_encoding, path)
                        record(writer.put_arrow_batch(with_queue_ids(batch, chooser)))
        else:
            if args.input:
                try:
                    stream = open(args.input, "rb")
                except OSError as e:
                    raise OptionError(f"--input {args.input}: {e.strerror or e}") from None
                what = args.input
            else:
                stream, what = stdin, "stdin"
            try:
                for first_line, block in _line_blocks(stream):
                    block = json_bodies_as_base64(block, args.body_encoding, what, first_line)
                    record(writer.put_json_lines(block, what=what, first_line=first_line))
            finally:
                if args.input:
                    stream.close()
        max_offset = writer.commit_log_max_offset
    except BaseException:
        try:
            writer.close()
        finally:
            if total:
                print(f"{PROG} put: {ok} of {total} messages were stored before the error", file=sys.stderr)
        raise
    writer.close()
    elapsed = time.perf_counter() - started
    starts = [seg.start_offset for d in config.commit_log_dirs(args.store) for seg in list_segments(d)]
    min_offset = min(starts) if starts else 0
    clean = getattr(writer, "clean_shutdown", True)
    summary = {"done": total, "commitLogMinOffset": min_offset, "commitLogMaxOffset": max_offset,
               "dispatchBehindBytes": 0, "shutdown": "clean" if clean else "dirty"}
    if total != ok:
        summary["failed"] = total - ok
    if out.json:
        out.json_line(summary)
    else:
        rate = f"{total / elapsed:,.0f} msg/s" if elapsed > 0 else "-"
        out.line(f"stored {ok} of {total} messages in {args.store} ({elapsed:.2f} s, {rate})")
        out.line(f"commitLog [{min_offset}, {max_offset})  dispatchBehindBytes 0  "
                 f"shutdown {summary['shutdown']}")
        if failures:
            out.line()
            out.lines(format_table(["#", "status", "topic", "queueId", "reason"],
                                   [[i, r.status.value, r.topic, r.queue_id, r.reason] for i, r in failures[:20]],
                                   [True, False, False, True, False]))
            if total - ok > 20:
                out.line(f"... and {total - ok - 20} more failures")
    if total != ok:
        out.flush()
        print(f"{PROG} put: {total - ok} of {total} messages were refused (see status/reason)", file=sys.stderr)
        return EXIT_STORE_ERROR
    return EXIT_OK


# --------------------------------------------------------------- parser

def _int_arg(what: str, minimum: Optional[int] = None):
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be an integer, got {text!r}") from None
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"{what} must be >= {minimum}, got {value}")
        return value
    parse.__name__ = what
    return parse


def build_parser() -> argparse.ArgumentParser:
    common = _ArgumentParser(add_help=False)
    g = common.add_argument_group("store settings")
    g.add_argument("--config", metavar="FILE",
                   help="MessageStoreConfig .properties file (e.g. broker.conf or a corpus's store.properties)")
    g.add_argument("-C", dest="config_overrides", metavar="KEY=VALUE", action="append", default=[],
                   help="override one MessageStoreConfig setting (repeatable), e.g. -C maxHashSlotNum=512")
    common.add_argument("--json", action="store_true", help="print JSON lines in the golden corpus shapes")
    common.add_argument("--body-chars", type=_int_arg("--body-chars", 0), default=60, metavar="N",
                        help="body preview width in readable output (default 60; 0 = no limit)")

    parser = _ArgumentParser(prog=PROG, description="Read and write Apache RocketMQ store directories.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_ArgumentParser)
    sub.required = True

    p = sub.add_parser("put", parents=[common], help="append messages (JSON lines on stdin, or --from files)",
                       description="Append messages to STORE (created if missing). Input: JSON lines on stdin "
                                   "in the shape of a corpus's inputs.jsonl, or Parquet / Arrow IPC files.")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--from", dest="from_files", metavar="FILE", action="append", default=[],
                   help="Parquet (.parquet) or Arrow IPC (.arrow/.feather/.ipc) file with columns topic, body "
                        "and optionally queueId, tags, keys, properties, flag, bornTimestamp, ... (repeatable)")
    p.add_argument("--input", metavar="FILE", help="read JSON lines from FILE instead of stdin")
    p.add_argument("--body-encoding", choices=("base64", "utf8", "hex"), default=None,
                   help="how the body is written: JSON lines default to base64 (the corpus shape); with --from "
                        "a string body column is UTF-8 unless this says base64 or hex")
    p.set_defaults(func=cmd_put)

    p = sub.add_parser("get", parents=[common], help="getMessage from a queue",
                       description="DefaultMessageStore.getMessage on TOPIC/QUEUE_ID from OFFSET, at most MAX "
                                   "messages per call (--loop repeats from nextBeginOffset).")
    p.add_argument("store", metavar="STORE")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("queue_id", metavar="QUEUE_ID", type=_int_arg("QUEUE_ID", 0))
    p.add_argument("offset", metavar="OFFSET", type=_int_arg("OFFSET"))
    p.add_argument("max", metavar="MAX", type=_int_arg("MAX", 1))
    p.add_argument("--tag", metavar="EXPR", help="tag expression, e.g. 'TagA || TagB' ('*' = all)")
    p.add_argument("--loop", action="store_true", help="call getMessage until the end of the queue")
    p.add_argument("--group", default=DEFAULT_GROUP, help=f"consumer group (default {DEFAULT_GROUP})")
    p.set_defaults(func=cmd_get)

    p = sub.add_parser("view", parents=[common], help="view a message by offset msgId or UNIQ_KEY",
                       description="Like mqadmin queryMsgById: decode an offset msgId (storeHost + "
                                   "commitLogOffset) and read that record; otherwise look the id up as a UNIQ_KEY "
                                   "(the client's msgId) through the IndexFiles. Exit 3 when not found.")
    p.add_argument("store", metavar="STORE")
    p.add_argument("msg_id", metavar="MSGID")
    p.set_defaults(func=cmd_view)

    p = sub.add_parser("query", parents=[common], help="query messages by key (IndexFile)",
                       description="queryMessage: IndexFile lookup of TOPIC#KEY. MAXNUM (default 32, capped at "
                                   "maxMsgsNumBatch); BEGIN/END in epoch ms or ISO-8601 (UTC).")
    p.add_argument("store", metavar="STORE")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("key", metavar="KEY")
    p.add_argument("rest", nargs="*", metavar="MAXNUM [BEGIN END]")
    p.add_argument("--only-matching", action="store_true",
                   help="drop index hash collisions (hits whose KEYS/UNIQ_KEY do not equal KEY)")
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("recover", parents=[common], help="recover a store and report queues and offsets",
                       description="Run recovery on STORE (in place) and report per-queue offsets and the "
                                   "CommitLog range, in the shape of a corpus's recover.json.")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--all", action="store_true", help="list every queue, also empty / in-memory ones")
    p.add_argument("--dry-run", action="store_true", help="only report what recovery would find; write nothing")
    p.set_defaults(func=cmd_recover)

    p = sub.add_parser("verify", parents=[common], help="check every record, unit and index entry (fsck)",
                       description="Check the store read-only: CommitLog records (lengths, body CRC, __CRC32#), "
                                   "ConsumeQueue units against their records, IndexFile chains, checkpoint and "
                                   "config JSON. Exit 0 when clean, 1 when problems were found.")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--engine", choices=("auto", "jvm", "python"), default="auto",
                   help="where the record walk runs: jvm (the rmq jar and java; several times faster), python, "
                        "or auto (jvm when the jar is built and java is found). Both report the same problems")
    p.set_defaults(func=cmd_verify)

    from .commands.export import add_parsers as add_export_parsers
    add_export_parsers(sub, common, _int_arg)

    p = sub.add_parser("topics", parents=[common], help="list topics with message counts")
    p.add_argument("store", metavar="STORE")
    p.set_defaults(func=cmd_topics)

    p = sub.add_parser("lag", parents=[common], help="consumer-group progress and lag per queue",
                       description="Committed offsets of consumer groups (config/consumerOffset.json) against "
                                   "each queue's max offset, like mqadmin consumerProgress.")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--group", help="only this consumer group")
    p.set_defaults(func=cmd_lag)

    p = sub.add_parser("demo", help="write a sample store and query it with Spark",
                       description="Write a sample store (temporary directory unless --dir) and run Spark "
                                   "queries on it through the rmq data source.")
    p.add_argument("--dir", metavar="DIR", help="where to write the sample store (kept)")
    p.add_argument("--messages", type=_int_arg("--messages", 1), default=200_000, metavar="N")
    p.set_defaults(func=cmd_demo, json=False)

    p = sub.add_parser("jar", help="print the path of the JVM scan's jar (--build: compile it)",
                       description="Path of the jar to put on spark.jars (exit 1 when it is not built). --build "
                                   "compiles the Java sources with javac against pyspark's jars (skipped when unchanged).")
    p.add_argument("--build", action="store_true", help="build the jar (needs a JDK 17)")
    p.set_defaults(func=cmd_jar, json=False)

    p = sub.add_parser("queues", parents=[common], help="list queues with min/max offsets")
    p.add_argument("store", metavar="STORE")
    p.add_argument("topic", metavar="TOPIC", nargs="?", help="only this topic's queues")
    p.set_defaults(func=cmd_queues)
    return parser


# --------------------------------------------------------------- main

def _silence_stdout_after_broken_pipe(stream) -> None:
    """Point fd 1 at /dev/null so the interpreter's final flush cannot fail again."""
    if stream is not sys.__stdout__:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _default_stdin():
    """Binary stdin, or None when it is a terminal (put then needs --input/--from)."""
    stdin = sys.stdin
    if stdin is None:
        return None
    try:
        if stdin.isatty():
            return None
    except (AttributeError, ValueError, OSError):
        pass
    return getattr(stdin, "buffer", None)


def main(argv: Optional[Sequence[str]] = None, *, stdout: Optional[TextIO] = None, stdin=None) -> int:
    """Run one ``rmq`` command; returns the exit code (never raises for bad input).

    ``stdout`` (text) and ``stdin`` (binary) replace the process streams, for
    in-process use.
    """
    stream = stdout if stdout is not None else sys.stdout
    try:
        args = build_parser().parse_args(list(argv) if argv is not None else None)
    except _Usage as u:
        return u.code
    problem = _remote_path_problem(args)
    if problem:
        print(f"{PROG} {args.command}: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    args.stdin = stdin if stdin is not None else (_default_stdin() if args.command == "put" else None)
    out = Output(stream, args.json)
    try:
        code = args.func(args, out)
        out.flush()
        return code
    except BrokenPipeError:
        _silence_stdout_after_broken_pipe(stream)
        return EXIT_OK
    except KeyboardInterrupt:
        _safe_flush(out)
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OptionError as e:
        _safe_flush(out)
        print(f"{PROG} {args.command}: error: {_one_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    except RmqError as e:
        _safe_flush(out)
        print(f"{PROG} {args.command}: error: {_one_line(e)}", file=sys.stderr)
        return EXIT_STORE_ERROR
    except OSError as e:
        _safe_flush(out)
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"{PROG} {args.command}: error: {where}{e.strerror or e}", file=sys.stderr)
        return EXIT_STORE_ERROR
    except Exception as e:  # noqa: BLE001 - last line of defence: no traceback for bad input
        _safe_flush(out)
        if os.environ.get("RMQ_DEBUG"):
            raise
        print(f"{PROG} {args.command}: internal error: {type(e).__name__}: {_one_line(e)} "
              f"(set RMQ_DEBUG=1 for a traceback)", file=sys.stderr)
        return EXIT_STORE_ERROR


WRITING_COMMANDS = ("put", "recover")


def _remote_path_problem(args) -> Optional[str]:
    """Why a STORE (or export's OUT) given as an object-store or HDFS URI cannot be used, in one line."""
    for name, label in (("store", "STORE"), ("out", "OUT")):
        value = getattr(args, name, None)
        scheme = remote_scheme(value) if isinstance(value, str) else None
        if scheme is None:
            continue
        if name == "out":
            return f"{label} {value!r}: rmq {args.command} writes local files, not {scheme}: URIs (copy it there after)"
        if args.command in WRITING_COMMANDS:
            return (f"{label} {value!r}: rmq {args.command} writes local store directories; stores on {scheme}: "
                    f"are read-only")
        return (f"{label} {value!r}: rmq commands read local or mounted store directories, not {scheme}: URIs; "
                f"copy the store to a local disk, or read it with Spark's JVM scan (format('rmq').load('{value}'))")
    return None


def _safe_flush(out: Output) -> None:
    try:
        out.flush()
    except (BrokenPipeError, OSError, ValueError):
        _silence_stdout_after_broken_pipe(out.stream)


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def entry_point() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry_point()
