"""``rmq recover``: recovery in place (or ``--dry-run``, read-only) and its recover.json report."""

from __future__ import annotations

import os

from .output import EXIT_OK, Output, cell, load_writer_config, refuse_read_only_store
from .read import queue_entries, queue_table


def recover_report_readonly(reader, config, *, all_queues: bool = True) -> dict:
    """The ``recover.json`` document of a store, computed without writing to it (``--dry-run``)."""
    queues = queue_entries(reader, config, include_memory_queues=True)
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



def run_recovery(args, config) -> dict:
    """Recover the store in place (under the writer lock) and return the recover.json document."""
    from ..store.reader import MessageStoreReader
    from ..store.shapes import queue_json
    if args.dry_run:
        from ..store.layout import StoreLayout
        from ..store.recovery_plan import plan_recovery
        StoreLayout.for_config(args.store, config).check_recoverable()
        with MessageStoreReader(args.store, config) as reader:
            doc = recover_report_readonly(reader, config, all_queues=args.all)
        doc["dryRun"] = True
        doc["plan"] = plan_recovery(args.store, config).to_json()
        return doc
    from ..io.lock import StoreLock
    from ..store.layout import StoreLayout
    from ..store.recovery import recover_store
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
        from .verify import recovery_plan_lines
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
        out.line(f"{k.ljust(20)} {cell(s[k])}")
    out.line()
    out.lines(queue_table(doc["queues"]))
    return EXIT_OK

