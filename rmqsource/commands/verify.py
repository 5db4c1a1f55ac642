"""``rmq verify STORE`` (fsck) and the change list of ``rmq recover --dry-run``."""

from __future__ import annotations

import time

from .output import EXIT_OK, EXIT_STORE_ERROR, Output, format_table, load_config
from .progress import Progress


def cmd_verify(args, out: Output) -> int:
    from ..store.verify import commit_log_bytes, verify_store
    from .verify_jvm import jvm_command, verify_store_jvm
    config = load_config(args)
    engine = getattr(args, "engine", "auto")
    if engine == "auto":
        engine = "jvm" if jvm_command() is not None else "python"
    walk = verify_store_jvm if engine == "jvm" else verify_store
    started = time.perf_counter()
    with Progress(commit_log_bytes(args.store, config), "verify") as bar:
        report = walk(args.store, config, progress=bar.update)
    elapsed = time.perf_counter() - started
    summary = report.summary_json()
    summary["seconds"] = round(elapsed, 3)
    summary["engine"] = engine
    if out.json:
        for p in report.problems:
            out.json_line(p.to_json())
        out.json_line(summary)
        return EXIT_OK if report.ok else EXIT_STORE_ERROR
    s = report.stats
    rate = f", {s['records'] / elapsed:,.0f} msgs/s" if elapsed > 0 and s.get("records") else ""
    out.line(f"checked {args.store}: {s.get('records', 0):,} records in {s.get('segments', 0)} CommitLog segments "
             f"(valid data [{s.get('commitLogMinOffset', 0)}, {s.get('commitLogEnd', 0)})), "
             f"{s.get('queues', 0)} ConsumeQueues ({s.get('cqUnits', 0):,} units, "
             f"{s.get('cqUnitsExpired', 0):,} expired), {s.get('indexFiles', 0)} IndexFiles "
             f"({s.get('indexEntries', 0):,} entries)  [{elapsed:.2f} s{rate}, {engine} walk]")
    if report.problems:
        out.line()
        rows = [[p.severity, p.check, p.file if p.offset is None else f"{p.file} @ {p.offset}",
                 p.message + ("" if p.expected is None and p.found is None
                              else f" (expected {p.expected}, found {p.found})")]
                for p in report.problems]
        out.lines(format_table(["severity", "check", "where", "problem"], rows, [False] * 4))
        listed = len(report.problems)
        total = report.errors + report.warnings
        if total > listed:
            out.line(f"... {total - listed} more (counted below; --json lists the first {listed})")
    out.line()
    if report.counts:
        by_check = summary["byCheck"]
        out.lines(format_table(["check", "count"], [[k, v] for k, v in by_check.items()], [False, True]))
        out.line()
    out.line(f"{'OK' if report.ok else 'PROBLEMS FOUND'}: {report.errors} error(s), {report.warnings} warning(s)")
    return EXIT_OK if report.ok else EXIT_STORE_ERROR


def recovery_plan_lines(plan: dict) -> list[str]:
    """Readable lines of :meth:`RecoveryPlan.to_json` (what recover would change)."""
    changes = plan["changes"]
    if not changes:
        return ["recover would change nothing: the store is consistent"]
    out = [f"recover would make {len(changes)} change(s) (valid CommitLog end {plan['commitLogEnd']}):"]
    rows = []
    for c in changes:
        rng = "" if c["from"] is None else f"[{c['from']}, {c['to']})"
        rows.append([c["action"], c["file"], rng, c["detail"]])
    out.extend(format_table(["action", "file", "bytes", "why"], rows, [False] * 4))
    return out
