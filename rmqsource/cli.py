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
import os
import sys
from typing import Optional, Sequence, TextIO

from .commands.export import add_parsers as add_export_parsers
from .commands.lookup import cmd_lag, cmd_query, cmd_view
from .commands.own_topics import add_parsers as add_own_topic_parsers
from .commands.output import (DEFAULT_GROUP, EXIT_INTERRUPTED, EXIT_NOT_FOUND, EXIT_OK, EXIT_STORE_ERROR,  # noqa: F401
                              EXIT_USAGE, PROG, Output, one_line)
from .commands.put import cmd_put
from .commands.read import cmd_get, cmd_queues, cmd_topics
from .commands.recover import cmd_recover
from .commands.snapshot import add_parser as add_snapshot_parser
from .commands.tools import cmd_demo, cmd_jar
from .commands.verify import cmd_verify
from .errors import OptionError, RmqError
from .names import remote_scheme


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
    p.add_argument("key", metavar="KEY", nargs="?", help="the key (not with --keys-from)")
    p.add_argument("rest", nargs="*", metavar="MAXNUM [BEGIN END]")
    p.add_argument("--only-matching", action="store_true",
                   help="drop index hash collisions (hits whose KEYS/UNIQ_KEY do not equal KEY)")
    p.add_argument("--keys-from", metavar="FILE",
                   help="query every key of FILE (one per line; blank lines and lines starting with # skipped): "
                        "MAXNUM applies to each key; --json lines carry the key")
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

    add_export_parsers(sub, common, _int_arg)
    add_snapshot_parser(sub, common)

    p = sub.add_parser("topics", parents=[common], help="list topics with message counts")
    p.add_argument("store", metavar="STORE")
    p.set_defaults(func=cmd_topics)

    p = sub.add_parser("lag", parents=[common], help="consumer-group progress and lag per queue",
                       description="Committed offsets of consumer groups, wherever the broker keeps them "
                                   "(config/consumerOffset.json, lmqConsumerOffset.json, RocksDB config/rdb of "
                                   "configManagerVersion=v2, the 5.2 RocksDB config), against each queue's max "
                                   "offset, like mqadmin consumerProgress. POP groups are marked.")
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
    add_own_topic_parsers(sub, common)
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
        print(f"{PROG} {args.command}: error: {one_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    except RmqError as e:
        _safe_flush(out)
        print(f"{PROG} {args.command}: error: {one_line(e)}", file=sys.stderr)
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
        print(f"{PROG} {args.command}: internal error: {type(e).__name__}: {one_line(e)} "
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


def entry_point() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry_point()
