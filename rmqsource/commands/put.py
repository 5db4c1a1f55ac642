"""``rmq put``: JSON lines (stdin or ``--input``) or Parquet / Arrow files (``--from``) into a store."""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

from ..errors import OptionError
from .output import (EXIT_OK, EXIT_STORE_ERROR, PROG, Output, format_table, load_writer_config, one_line,
                     refuse_read_only_store)

PUT_BLOCK_BYTES = 64 << 20
PUT_ARROW_BATCH_ROWS = 262_144


def line_blocks(stream, block_bytes: int = PUT_BLOCK_BYTES):
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


def arrow_batches(path: str):
    """Record batches of a Parquet or Arrow IPC (file or stream) file."""
    import pyarrow as pa
    lower = path.lower()
    if lower.endswith((".parquet", ".pq")):
        import pyarrow.parquet as pq
        try:
            pf = pq.ParquetFile(path)
        except (pa.ArrowException, OSError) as e:
            raise OptionError(f"{path}: not a readable Parquet file: {one_line(e)}") from None
        yield from pf.iter_batches(batch_size=PUT_ARROW_BATCH_ROWS)
        return
    try:
        source = pa.memory_map(path)
    except (pa.ArrowException, OSError) as e:
        raise OptionError(f"{path}: cannot open: {one_line(e)}") from None
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
        raise OptionError(f"{path}: neither Parquet (.parquet) nor an Arrow IPC file/stream: {one_line(e)}") \
            from None


def cmd_put(args, out: Output) -> int:
    import time
    from ..io.segments import list_segments
    from .put_input import arrow_bodies_decoded, json_bodies_as_base64
    from ..store.queue_select import QueueChooser, TopicQueueNums, with_queue_ids
    from ..store.writer import MessageStoreWriter
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
                for batch in arrow_batches(path):
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
                for first_line, block in line_blocks(stream):
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

