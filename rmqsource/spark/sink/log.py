"""The sink log, ``{root}/config/rmqsourceSinkLog.json`` (the JVM twin: SinkLog.java)."""

from __future__ import annotations

import json
import os

from ...errors import FormatError
from ...format.configjson import loads_fastjson
from ...io.durable import load_with_bak, string2file

SINK_LOG_NAME = "rmqsourceSinkLog.json"


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

    if not isinstance(doc, dict) or not isinstance(doc.get("queries", {}), dict) or \
            not isinstance(doc.get("writes", {}), dict):
        bad('expected {"queries": {...}, "writes": {...}}')
    for wid, w in doc.get("writes", {}).items():
        if not isinstance(w, dict) or not isinstance(w.get("tasks"), dict) or not is_int(w.get("startedMs", 0)):
            bad(f"write {str(wid)[:80]!r}: expected {{\"tasks\": {{...}}}}")
        for key, task in w["tasks"].items():
            if not (str(key).isdecimal() and str(key).isascii()):
                bad(f"write {str(wid)[:80]!r}: task key {str(key)[:80]!r} is not a partition id")
            if not isinstance(task, dict) or not all(is_int(task.get(f)) for f in ("start", "below", "rows")) \
                    or not isinstance(task.get("done"), bool):
                bad(f"write {str(wid)[:80]!r}: task {str(key)[:80]!r} needs int start, below, rows and a bool done")
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
