"""``rmq snapshot STORE DEST``: a consistent, incremental copy of a store, live or stopped (docs/snapshots.md)."""

from __future__ import annotations

import os

from ..errors import OptionError
from .output import EXIT_OK, EXIT_STORE_ERROR, Output, format_table, load_config


def add_parser(sub, common) -> None:
    p = sub.add_parser("snapshot", parents=[common], help="copy a store, live or stopped, consistently and incrementally",
                       description="Copy STORE into DEST (a folder, a webhdfs:// or swebhdfs:// URI (HDFS over "
                                   "HTTP), or a s3:// gs:// hdfs:// file:// URI through pyarrow.fs) as a store every reader accepts, up to a CommitLog end every copied "
                                   "ConsumeQueue unit and IndexFile entry lies below. Run again into the same DEST, "
                                   "only what changed is copied. STORE is only read (a running broker is not "
                                   "disturbed); DEST/rmq-snapshot.json describes the copy.")
    p.add_argument("store", metavar="STORE")
    p.add_argument("dest", metavar="DEST")
    p.add_argument("-O", dest="dest_options", metavar="KEY=VALUE", action="append", default=[],
                   help="a pyarrow S3FileSystem setting for an s3:// DEST (repeatable), e.g. "
                        "-O endpoint_override=127.0.0.1:9000 -O scheme=http; for a webhdfs:// DEST "
                        "user.name=NAME or timeout=SECONDS")
    p.add_argument("--check", action="store_true",
                   help="then read DEST back and compare it with its manifest (a local DEST)")
    p.set_defaults(func=cmd_snapshot)


def _options(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise OptionError(f"-O {pair!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def cmd_snapshot(args, out: Output) -> int:
    from ..store.snapshot import snapshot_store
    from ..store.snapshot_manifest import MANIFEST_NAME, check_snapshot
    config = load_config(args)
    doc = snapshot_store(args.store, args.dest, config, dest_options=_options(args.dest_options))
    problems = []
    if args.check:
        if "://" in args.dest:
            raise OptionError("--check reads a local DEST; read a remote one with Spark, or copy it first")
        problems = check_snapshot(args.dest)
    manifest = f"{args.dest.rstrip('/')}/{MANIFEST_NAME}" if "://" in args.dest \
        else os.path.join(args.dest, MANIFEST_NAME)
    counts = doc["counts"]
    if out.json:
        summary = {"manifest": manifest, "validEnd": doc["validEnd"], "bytesCopied": doc["bytesCopied"],
                   "seconds": doc["seconds"], "queues": len(doc["queues"]),
                   "counts": counts}
        if args.check:
            summary["checkProblems"] = problems
        out.json_line(summary)
    else:
        rows = [[kind, c["files"], c["copied"], f"{c['bytes']:,}"] for kind, c in counts.items()]
        out.lines(format_table(["kind", "files", "copied", "bytes copied"], rows, [False, True, True, True]))
        out.line()
        out.line(f"snapshot of {args.store} in {args.dest}: CommitLog up to offset {doc['validEnd']:,}, "
                 f"{len(doc['queues'])} queues, {doc['bytesCopied']:,} bytes copied in {doc['seconds']} s "
                 f"(manifest {manifest})")
        for p in problems:
            out.line(f"check: {p}")
        if args.check and not problems:
            out.line("check: DEST matches its manifest")
    return EXIT_STORE_ERROR if problems else EXIT_OK
