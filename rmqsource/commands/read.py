"""``rmq get`` (getMessage), ``rmq topics`` and ``rmq queues``: listings read from the store."""

from __future__ import annotations

import sys

from ..errors import OptionError
from .lookup import last_store_times
from .output import (EXIT_NOT_FOUND, EXIT_OK, PROG, Output, body_preview, format_ms, format_table, load_config,
                     note_live_broker, open_reader, short_topic)


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
    from ..store.shapes import message_json, status_json
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



def queue_entries(reader, config, include_memory_queues: bool) -> list[dict]:
    from ..names import SCHEDULE_TOPIC
    from ..store.config import BrokerRole
    from ..store.shapes import queue_json
    entries = {(q.topic, q.queue_id): queue_json(q) for q in reader.queue_infos()}
    if include_memory_queues and not config.is_v5 and config.broker_role is not BrokerRole.SLAVE:
        # 4.x ScheduleMessageService creates one in-memory queue per delay level.
        for qid in range(config.max_delay_level):
            entries.setdefault((SCHEDULE_TOPIC, qid), {"topic": SCHEDULE_TOPIC, "queueId": qid, "minOffset": 0,
                                                       "maxOffset": 0, "cqMaxPhysicOffset": -1})
    return [entries[k] for k in sorted(entries)]



def queue_table(queues: list[dict]) -> list[str]:
    rows = [[short_topic(q["topic"]), q["queueId"], q["minOffset"], q["maxOffset"], q["maxOffset"] - q["minOffset"],
             q["cqMaxPhysicOffset"]] + ([format_ms(q["lastStoreTime"])] if "lastStoreTime" in q else [])
            for q in queues]
    if not rows:
        return ["(no queues)"]
    last = ["lastStoreTime (UTC)"] if "lastStoreTime" in queues[0] else []
    return format_table(["topic", "queueId", "minOffset", "maxOffset", "messages", "cqMaxPhysicOffset"] + last, rows,
                        [False, True, True, True, True, True] + [False] * len(last))



def cmd_queues(args, out: Output) -> int:
    config = load_config(args)
    from ..store.reader import MessageStoreReader
    with MessageStoreReader(args.store, config) as reader:
        note_live_broker(reader)
        queues = queue_entries(reader, config, include_memory_queues=False)
        if args.topic is not None:
            topics = sorted({q["topic"] for q in queues})
            queues = [q for q in queues if q["topic"] == args.topic]
            if not queues:
                raise OptionError(f"topic {args.topic!r} has no ConsumeQueue in {args.store}; "
                                  f"topics: {', '.join(topics) or '(none)'}")
        times = last_store_times(reader, queues)
        for q in queues:
            q["messages"] = q["maxOffset"] - q["minOffset"]
            q["lastStoreTime"] = times[(q["topic"], q["queueId"])]
        if out.json:
            for q in queues:
                out.json_line(q)
            return EXIT_OK
        out.lines(queue_table(queues))
        out.line()
        out.line(f"commitLog [{reader.commitlog.min_offset if reader.commitlog.segments else 0}, "
                 f"{reader.commit_log_max_offset})  segments {len(reader.commitlog.segments)}  "
                 f"queues {len(queues)}")
    return EXIT_OK



def cmd_topics(args, out: Output) -> int:
    config = load_config(args)
    from ..store.reader import MessageStoreReader
    with MessageStoreReader(args.store, config) as reader:
        note_live_broker(reader)
        queues = queue_entries(reader, config, include_memory_queues=False)
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

