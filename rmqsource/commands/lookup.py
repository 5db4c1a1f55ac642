"""mqadmin-style lookups: ``view`` by offset msgId or UNIQ_KEY (queryMsgById), ``query`` by key (IndexFile),
last store times, ``lag`` of consumer groups."""

from __future__ import annotations

from typing import Optional

from ..errors import OptionError
from ..format.consumequeue import PRE_BLANK_SIZE
from ..format.properties import UNIQ_KEY
from .output import (EXIT_NOT_FOUND, EXIT_OK, JAVA_LONG_MAX, Output, body_preview, cell, format_ms, format_table,
                     load_config, open_reader, parse_time_ms, short_topic, truncate)


def find_by_uniq_key(reader, key: str):
    """Messages whose UNIQ_KEY equals ``key`` (IndexFile lookup in every topic, collisions dropped)."""
    found = []
    if not reader.config.message_index_enable:
        return found
    for topic in reader.topics():
        result = reader.query(topic, key, reader.config.max_msgs_num_batch, only_matching=True)
        found.extend(m for m in result.messages if m.record.properties.get(UNIQ_KEY) == key)
    return sorted(found, key=lambda m: m.record.phy_offset)


# Records the not-found reason reads at most to learn which store hosts a store holds (a full walk of a
# large CommitLog would keep a "not found" waiting for minutes; past this the answer says how many were read).
HOST_SCAN_MAX_RECORDS = 1_000_000


def store_hosts(reader, want: Optional[str] = None,
                max_records: int = HOST_SCAN_MAX_RECORDS) -> tuple[list[str], bool, int]:
    """The storeHosts of this store's records: (hosts in first-seen order, whether every record was read, count).

    Walks the CommitLog (and DLedger data) from its first offset to the valid end; stops early once
    ``want`` is seen (that host is this store's, which is all a caller then needs) or after
    ``max_records`` records, and at the first record that does not hold together.
    """
    from ..errors import RmqError
    from ..format.record import Kind
    cl = reader.commitlog
    hosts: dict[str, None] = {}
    n = 0
    if not cl.segments:
        return [], True, 0
    try:
        for step in cl.walk(cl.min_offset, stop_offset=reader.commit_log_max_offset):
            if step.decoded.kind is Kind.BLANK:
                continue
            if step.decoded.kind is not Kind.MESSAGE:    # the records stop before the valid end
                return list(hosts), False, n
            host = step.decoded.record.store_host
            hosts.setdefault(host, None)
            n += 1
            if host == want:
                return list(hosts), False, n
            if n >= max_records:
                return list(hosts), False, n
    except RmqError:
        return list(hosts), False, n
    return list(hosts), True, n


def _offset_why(reader, phy: int) -> str:
    """Why no message is at CommitLog offset ``phy`` (the msgId names a host of this store)."""
    from ..format.dledger import ENTRY_HEADER_BYTES
    cl = reader.commitlog
    if not cl.segments:
        return f"no message at CommitLog offset {phy}: the store holds no CommitLog file"
    lo, hi = cl.min_offset, reader.commit_log_max_offset
    if phy < lo:
        return f"no message at CommitLog offset {phy}: the CommitLog starts at {lo} (older files were removed)"
    if phy >= hi:
        return f"no message at CommitLog offset {phy}: the CommitLog ends at {hi}"
    why = f"no record starts at CommitLog offset {phy}"
    if cl.divided_offset is not None and phy >= cl.divided_offset:
        found = reader.message_at(phy + ENTRY_HEADER_BYTES)
        if found is not None and found.record.phy_offset == phy + ENTRY_HEADER_BYTES:
            return (f"{why}: a DLedger entry header starts there; its record is at {phy + ENTRY_HEADER_BYTES} "
                    f"(offset msgId {found.record.msg_id})")
    return f"{why} (it lies inside the CommitLog [{lo}, {hi}), not at a record start)"


def _hosts_text(hosts: list[str]) -> str:
    return hosts[0] if len(hosts) == 1 else ", ".join(hosts[:-1]) + " and " + hosts[-1]


def not_found_reason(reader, key: str, mid) -> str:
    """Why ``rmq view`` found nothing for ``key``: no record at its offset, nor a message with it as UNIQ_KEY.

    A msgId whose store host is one this store's records carry is an offset msgId of this store:
    the offset is the story.  Any other id is first of all a UNIQ_KEY no message has (a producer's
    msgId from an IPv6 client is 56 hex digits, like an IPv6 offset msgId); read as an offset msgId
    it names a port no TCP port can be, or a host none of the store's records carry.
    """
    if mid is None:
        return f"{key!r} is not an offset msgId, and no message has it as UNIQ_KEY"
    no_key = f"no message has {key} as UNIQ_KEY"
    if not 0 <= mid.store_port <= 0xFFFF:
        return (f"{no_key} (nor is it an offset msgId: read as one it would name port {mid.store_port}, "
                f"which is no TCP port)")
    hosts, complete, n = store_hosts(reader, want=mid.store_host)
    if mid.store_host in hosts:
        return (f"{_offset_why(reader, mid.phy_offset)}; the msgId's store host {mid.store_host} is this "
                f"store's, and {no_key}")
    if not hosts:
        held = "this store holds no message" if complete else "no record of this store could be read"
        return f"{no_key}, and {held} (the offset msgId names store host {mid.store_host})"
    read = "" if complete else f" (of the first {n} records read)"
    return (f"{no_key}, and as an offset msgId it names store host {mid.store_host}, but this store's "
            f"messages were stored by {_hosts_text(hosts)}{read}: if it is one, it belongs to another broker's "
            f"store")


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
        out.line(f"{k.ljust(width)}  {cell(v)}")
    props = sorted(r.properties.items())
    if props:
        out.line()
        out.lines(format_table(["property", "value"], [[k, truncate(cell(v), 120)] for k, v in props],
                               [False, False]))


def cmd_view(args, out: Output) -> int:
    """``queryMsgById``: an offset msgId of this store, else the id as a UNIQ_KEY (the client's msgId).

    With ``--json`` a found offset msgId prints the engine's ``viewMessage``
    answer (the store reads only the offset); a msgId whose host is not the
    record's storeHost is first tried as a UNIQ_KEY and, failing that, shown
    with a plain note saying so.
    """
    import sys
    from ..format.msgid import decode_offset_msg_id
    from ..store.shapes import message_json, view_json
    key = args.msg_id.strip()
    with open_reader(args) as reader:
        try:
            mid = decode_offset_msg_id(key)
        except OptionError:
            mid = None
        result = reader.view(key) if mid is not None else None
        at_offset = result.message if result is not None else None
        if at_offset is not None and at_offset.record.store_host == mid.store_host:
            return _show_view(out, args, result, None)
        hits = find_by_uniq_key(reader, key)
        if hits:
            if out.json:
                for m in hits:
                    out.json_line({**message_json(m), "foundBy": "UNIQ_KEY"})
            else:
                for i, m in enumerate(hits):
                    out.lines([""] if i else [])
                    out.line(f"UNIQ_KEY {key}: offset msgId {m.record.msg_id}")
                    out.line()
                    _message_details(m, out, args.body_chars)
            return EXIT_OK
        if at_offset is not None:
            note = (f"the msgId names store host {mid.store_host}, but the record at CommitLog offset "
                    f"{mid.phy_offset} was stored by {at_offset.record.store_host} (the store reads only the "
                    f"offset; no message has {key} as UNIQ_KEY)")
            return _show_view(out, args, result, note)
        why = not_found_reason(reader, key, mid)
        if out.json:
            out.json_line(view_json(result) if result is not None else
                          {"msgIdStoreHost": None, "msgIdOffset": None, "found": False})
            out.flush()
            print(f"rmq view: not found: {why}", file=sys.stderr)
        else:
            out.line(f"not found: {why}")
        return EXIT_NOT_FOUND


def _show_view(out: Output, args, result, note: Optional[str]) -> int:
    import sys
    from ..store.shapes import view_json
    if out.json:
        out.json_line(view_json(result))
        if note:
            out.flush()
            print(f"rmq view: note: {note}", file=sys.stderr)
        return EXIT_OK
    out.line(f"msgId {args.msg_id}: storeHost {result.store_host}, commitLogOffset {result.commit_log_offset}")
    if note:
        out.line(f"NOTE: {note}")
    out.line()
    _message_details(result.message, out, args.body_chars)
    return EXIT_OK



def _keys_from(path: str) -> list[str]:
    """The keys of ``--keys-from``: the keys file of the data source's option keysFile, ``#`` lines skipped."""
    from ..spark.options import read_keys_file
    keys = [k for k in read_keys_file(path, "--keys-from") if not k.startswith("#")]
    if not keys:
        raise OptionError(f"--keys-from {path}: no key in the file")
    return list(dict.fromkeys(keys))


def cmd_query(args, out: Output) -> int:
    from ..store.shapes import query_json
    rest = list(args.rest)
    keys_from = getattr(args, "keys_from", None)
    if keys_from is not None:
        rest = ([args.key] if args.key is not None else []) + rest     # no KEY: what came there is MAXNUM
    elif args.key is None:
        raise OptionError("query takes TOPIC KEY [MAXNUM [BEGIN END]], or TOPIC --keys-from FILE [MAXNUM ...]")
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
    if keys_from is not None:
        return _query_keys(args, out, _keys_from(keys_from), max_num, begin, end)
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



def _query_keys(args, out: Output, keys: list[str], max_num: int, begin: int, end: int) -> int:
    """``query --keys-from``: the IndexFile walk of each key (all keys walked together), hits tagged with their
    key."""
    from ..store.shapes import query_json
    rows, hits, found_keys = [], 0, 0
    with open_reader(args) as reader:
        results = reader.query_many(args.topic, keys, max_num, begin, end, only_matching=args.only_matching)
        for key, result in zip(keys, results):
            doc = query_json(result, args.topic, key)
            hits += len(doc["hits"])
            found_keys += bool(doc["hits"])
            for found, hit in zip(result.messages, doc["hits"]):
                if out.json:
                    out.json_line({"key": key, **hit})
                else:
                    r = found.record
                    rows.append([key, r.phy_offset, r.queue_id, r.queue_offset, format_ms(r.store_timestamp_ms),
                                 hit["keyMatch"], r.uniq_key, body_preview(r.body, r.sys_flag, args.body_chars)])
    if out.json:
        out.json_line({"keys": len(keys), "keysWithHits": found_keys, "count": hits})
    else:
        if rows:
            out.lines(format_table(["key", "commitLogOffset", "queueId", "queueOffset", "storeTime (UTC)", "keyMatch",
                                    "uniqKey", "body"], rows, [False, True, True, True, False, False, False, False]))
        out.line()
        out.line(f"keys {len(keys)}  keys with hits {found_keys}  hits {hits}")
    return EXIT_OK if hits else EXIT_NOT_FOUND


def last_store_times(reader, queues: list[dict]) -> dict[tuple[str, int], Optional[int]]:
    """storeTimestamp of each queue's last message (mqadmin topicStatus "Last Updated")."""
    out = {}
    for q in queues:
        out[(q["topic"], q["queueId"])] = store_time_at(reader, q["topic"], q["queueId"], q["maxOffset"] - 1,
                                                        q["minOffset"])
    return out


def store_time_at(reader, topic: str, queue_id: int, offset: int, min_offset: int = 0) -> Optional[int]:
    """storeTimestamp of the message at a queue offset (None when there is none or it was removed)."""
    if offset < max(0, min_offset):
        return None
    q = reader.consume_queue(topic, queue_id)
    if q is None:
        return None
    u = q.unit_at(offset)
    if u is None or u[1] == PRE_BLANK_SIZE or u[0] < reader.commitlog.min_offset:
        return None
    decoded, _ = reader.commitlog.decode_at(u[0], size_hint=u[1])
    return decoded.record.store_timestamp_ms if decoded.record is not None else None


def cmd_lag(args, out: Output) -> int:
    import sys
    from ..store.lag import group_lag_with_source
    from ..store.reader import MessageStoreReader
    config = load_config(args)
    problems: list[str] = []
    rows, committed = group_lag_with_source(args.store, config, args.group, problems=problems)
    source = committed.source
    for p in problems:
        print(f"rmq lag: warning: {p}", file=sys.stderr)
    for note in committed.notes:
        print(f"rmq lag: note: {note}", file=sys.stderr)
    if args.group is not None and not rows:
        print(f"rmq lag: group {args.group!r} has no committed offsets in {args.store} "
              f"({source.description})", file=sys.stderr)
        return EXIT_NOT_FOUND
    with MessageStoreReader(args.store, config) as reader:
        for r in rows:
            off = r["consumerOffset"]
            r["lastConsumedStoreTime"] = (store_time_at(reader, r["topic"], r["queueId"], off - 1, r["minOffset"])
                                          if off is not None else None)
    if out.json:
        for r in rows:
            r["offsetSource"] = source.kind
            out.json_line(r)
        return EXIT_OK
    out.line(f"Offsets from: {source.description}")
    table = [[r["group"] + (" (POP)" if r["requestMode"] == "POP" else ""), short_topic(r["topic"]), r["queueId"],
              r["brokerOffset"], "-" if r["consumerOffset"] is None else r["consumerOffset"], r["diff"],
              format_ms(r["lastConsumedStoreTime"])] for r in rows]
    if table:
        out.lines(format_table(["#Group", "#Topic", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff",
                                "#LastConsumed (UTC)"], table, [False, False, True, True, True, True, False]))
    elif source.kind == "none":
        out.line("(no consumer groups: the store has no committed offsets anywhere)")
    else:
        out.line(f"(no consumer groups in {source.description})")
    if any(r["requestMode"] == "POP" for r in rows):
        out.line("(POP) consumes by POP (config/messageRequestMode.json): messages popped and not yet acked "
                 "(in flight) are not counted in its Diff, as in the broker's consumeStats")
    out.line(f"Diff Total: {sum(r['diff'] for r in rows)}")
    return EXIT_OK
