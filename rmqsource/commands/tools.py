"""``rmq demo`` (a sample store queried with Spark) and ``rmq jar`` (the JVM scan's jar)."""

from __future__ import annotations

import sys

from .output import EXIT_OK, Output


def cmd_demo(args, out: Output) -> int:
    from ..demo import run_demo
    def line(text: str) -> None:   # progress shows while Spark starts and runs
        out.line(text)
        out.flush()
    return run_demo(args.dir, args.messages, keep=bool(args.dir), out=line)


def cmd_jar(args, out: Output) -> int:
    from ..spark.jar import build_jar, jar_path
    log = lambda msg: print(msg, file=sys.stderr)  # noqa: E731 - progress on stderr, the path on stdout
    out.line(build_jar(log=log) if args.build else jar_path(required=True))
    return EXIT_OK

