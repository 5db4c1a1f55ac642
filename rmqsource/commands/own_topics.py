"""``rmq trace`` and ``rmq dlq``: the broker's own topics for an operator (docs/views.md, docs/cli.md).

``trace STORE MSGID``: the trace events of one message, found through the IndexFile (a trace message is
indexed under every msgId it holds events of, as the client's ``TraceTransferBean`` keys it), as the
dashboard's message trace shows them.  ``dlq STORE [--group G]``: the dead letters of a group (view dlq).
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..errors import CorruptRecordError
from .output import EXIT_NOT_FOUND, EXIT_OK, Output, body_preview, format_ms, format_table, load_config, open_reader

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
# hits of one IndexFile walk: every trace message of a message fits (a few per send and delivery)
MAX_TRACE_MESSAGES = 1024
TRACE_JSON = (("traceType", "trace_type"), ("timestamp", "timestamp_ms"), ("regionId", "region_id"),
              ("group", "group"), ("topic", "topic"), ("msgId", "msg_id"), ("offsetMsgId", "offset_msg_id"),
              ("tags", "tags"), ("keys", "keys"), ("storeHost", "store_host"), ("clientHost", "client_host"),
              ("bodyLength", "body_length"), ("costTime", "cost_time"), ("msgType", "msg_type"),
              ("success", "success"), ("requestId", "request_id"), ("retryTimes", "retry_times"),
              ("contextCode", "context_code"), ("transactionId", "transaction_id"),
              ("transactionState", "transaction_state"), ("fromTransactionCheck", "from_transaction_check"))


def trace_events(reader, msg_id: str, trace_topic: str = TRACE_TOPIC) -> list[tuple]:
    """(event, the trace message's record) of every event about ``msg_id``, oldest first."""
    from ..format.compression import inflate_body
    from ..format.trace import parse_trace_events
    found = reader.query(trace_topic, msg_id, MAX_TRACE_MESSAGES, only_matching=True)
    out = []
    for hit in found.messages:
        r = hit.record
        file = reader.commitlog.segment_path_for(r.phy_offset)
        try:
            body = inflate_body(r.body, r.sys_flag) if r.body else b""
        except CorruptRecordError as exc:
            raise CorruptRecordError(exc.reason, file=file, offset=r.phy_offset) from None
        for e in parse_trace_events(body.decode("utf-8", errors="replace"), file=file, offset=r.phy_offset):
            if e.msg_id == msg_id:
                out.append((e, r))
    out.sort(key=lambda er: (er[0].timestamp_ms is None, er[0].timestamp_ms or 0, er[1].phy_offset))
    return out


def cmd_trace(args, out: Output) -> int:
    with open_reader(args) as reader:
        events = trace_events(reader, args.msg_id.strip(), args.trace_topic)
    if out.json:
        for e, r in events:
            doc = {name: getattr(e, field) for name, field in TRACE_JSON}
            doc["keys"] = list(e.keys) if e.keys is not None else None
            doc["traceCommitLogOffset"] = r.phy_offset
            out.json_line(doc)
        return EXIT_OK if events else EXIT_NOT_FOUND
    if not events:
        out.line(f"no trace event of {args.msg_id} in {args.trace_topic} (the client sends traces only with "
                 f"message trace on; the IndexFile must hold the trace messages)")
        return EXIT_NOT_FOUND
    rows = [[format_ms(e.timestamp_ms), e.trace_type, e.group or "-", e.topic or "-",
             "-" if e.cost_time is None else e.cost_time, "-" if e.success is None else str(e.success).lower(),
             e.store_host or e.client_host or "-", e.transaction_state or "-", " ".join(e.keys or ())]
            for e, _ in events]
    out.lines(format_table(["time (UTC)", "type", "group", "topic", "costMs", "success", "host", "txState", "keys"],
                           rows, [False, False, False, False, True, False, False, False, False]))
    return EXIT_OK


def dlq_rows(args) -> list[dict]:
    """The dlq view's rows of the store (``--group``: that group's dead-letter topic only)."""
    from ..spark.options import parse_options
    from ..spark.views import read_view
    options = {"path": args.store, "view": "dlq"}
    if args.group:
        options["topicPattern"] = "%DLQ%" + re.escape(args.group)
    opts = replace(parse_options(options), store_config=load_config(args), topics_by_view=True)
    columns = ("group", "originTopic", "originMsgId", "reconsumeTimes", "storeTimestamp", "bornTimestamp", "msgId",
               "uniqKey", "keys", "body", "sysFlag", "topic", "queueId", "queueOffset")
    rows = [r for batch in read_view("dlq", opts, columns) for r in batch.to_pylist()]
    return sorted(rows, key=lambda r: (r["group"], r["storeTimestamp"], r["queueOffset"]))


def cmd_dlq(args, out: Output) -> int:
    rows = dlq_rows(args)
    if out.json:
        for r in rows:
            r = dict(r)
            for k in ("storeTimestamp", "bornTimestamp"):
                r[k] = int(r[k].timestamp() * 1000) if r[k] is not None else None
            r["body"] = body_preview(r.pop("body"), r["sysFlag"], 0)
            out.json_line(r)
        return EXIT_OK if rows else EXIT_NOT_FOUND
    if not rows:
        out.line("(no dead letters" + (f" of group {args.group})" if args.group else ")"))
        return EXIT_NOT_FOUND
    table = [[r["group"], r["originTopic"] or "-", r["originMsgId"] or "-", r["reconsumeTimes"],
              format_ms(int(r["storeTimestamp"].timestamp() * 1000)), r["uniqKey"] or "-",
              body_preview(r["body"], r["sysFlag"], args.body_chars)] for r in rows]
    out.lines(format_table(["group", "originTopic", "originMsgId", "reconsumeTimes", "dead since (UTC)", "msgId",
                            "body"], table, [False, False, False, True, False, False, False]))
    out.line()
    out.line(f"dead letters {len(rows)}  groups {len({r['group'] for r in rows})}")
    return EXIT_OK


def add_parsers(sub, common) -> None:
    """The ``trace`` and ``dlq`` subcommands (called from cli.build_parser)."""
    p = sub.add_parser("trace", parents=[common], help="the trace events of a message (message trace on)",
                       description="The trace events (send, consume before/after, transaction end, recall) the "
                                   "clients recorded for MSGID (the client's msgId: UNIQ_KEY), found through the "
                                   "IndexFile. Exit 3 when there is none.")
    p.add_argument("store", metavar="STORE")
    p.add_argument("msg_id", metavar="MSGID")
    p.add_argument("--trace-topic", default=TRACE_TOPIC, metavar="TOPIC",
                   help=f"the trace topic (default {TRACE_TOPIC}; a client's customizedTraceTopic)")
    p.set_defaults(func=cmd_trace)
    p = sub.add_parser("dlq", parents=[common], help="dead letters, with their group and origin",
                       description="The messages in dead-letter topics (%%DLQ%%<group>) with the group, the topic "
                                   "they came from and their first msgId. Exit 3 when there is none.")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--group", metavar="GROUP", help="only this consumer group's dead letters")
    p.set_defaults(func=cmd_dlq)
