"""``rmq verify`` of the DLedger files besides the data walk: the entry index and the checkpoint.

The data walk (verify.py) hands over what DLedger recovery would keep: one row per valid entry
(index, pos, size, term, magic).  Problems are component ``dledger``, in this order: ``index-entry``
(ascending entry index), ``index-missing``, ``checkpoint`` (twin: verify/DLedgerChecks.java).
"""

from __future__ import annotations

from typing import Optional

from ..format.dledger import INDEX_ENTRY_BYTES, decode_checkpoint, decode_index_entry
from ..io.segments import SegmentReader, list_segments
from .layout import StoreLayout
from .verify_report import WARNING, Problem, VerifyReport

PER_CHECK_DETAIL = 200


def check_dledger_files(layout: StoreLayout, rep: VerifyReport, entries: list[tuple[int, int, int, int, int]]) -> None:
    """``entries``: (index, pos, size, term, magic) of every entry the data walk found valid, in order."""
    _check_index(layout, rep, entries)
    _check_checkpoint(layout, rep, entries[-1][0] if entries else None)


def _check_index(layout: StoreLayout, rep: VerifyReport, entries) -> None:
    folder = layout.dledger_index_dir
    files = SegmentReader(list_segments(folder) if folder is not None else [])
    covered = 0                          # entries of the data that an index entry exists for
    listed = 0
    try:
        for index, pos, size, term, magic in entries:
            at = index * INDEX_ENTRY_BYTES
            seg = files.find(at) if index >= 0 else None   # the file the names place it in, as the JVM walk
            if seg is None or at + INDEX_ENTRY_BYTES > seg.start_offset + seg.size_bytes:
                continue
            raw = files.pread(seg, at - seg.start_offset, INDEX_ENTRY_BYTES)
            if len(raw) < INDEX_ENTRY_BYTES:
                continue
            covered += 1
            got = decode_index_entry(raw, 0)
            for name, found, want in (("magic", got.magic, magic), ("pos", got.pos, pos), ("size", got.size, size),
                                      ("index", got.index, index), ("term", got.term, term)):
                if found != want:
                    if listed < PER_CHECK_DETAIL:
                        rep.add(Problem("dledger", "index-entry", rep.rel(seg.path), at - seg.start_offset,
                                        f"DLedger index entry {index} disagrees with its data entry header ({name})",
                                        str(want), str(found)))
                    else:
                        rep.counts[("error", "index-entry")] += 1
                    listed += 1
                    break
    finally:
        files.close()
    if covered < len(entries):
        rep.add(Problem("dledger", "index-missing", rep.rel(folder), None,
                        "the DLedger index covers fewer entries than the data holds (DLedger recovery rebuilds it)",
                        str(len(entries)), str(covered)))


def _check_checkpoint(layout: StoreLayout, rep: VerifyReport, last_index: Optional[int]) -> None:
    path = layout.dledger_checkpoint_path
    rel = rep.rel(path)
    try:
        text = path.read_bytes().decode("latin-1")
    except FileNotFoundError:
        rep.add(Problem("dledger", "checkpoint", rel, None, "no DLedger checkpoint (the engine recovers without "
                        "it: the leader re-commits every entry)", severity=WARNING))
        return
    except OSError as e:
        rep.add(Problem("dledger", "checkpoint", rel, None, f"DLedger checkpoint unreadable: {e.strerror}"))
        return
    try:
        cp = decode_checkpoint(text)
    except ValueError:
        rep.add(Problem("dledger", "checkpoint", rel, None, "DLedger checkpoint values are not numbers",
                        "committedIndex=<n> and endIndex=<n>", text[:80]))
        return
    last = -1 if last_index is None else last_index
    for name, value in (("committedIndex", cp.committed_index), ("endIndex", cp.end_index)):
        if value is not None and value > last:
            rep.add(Problem("dledger", "checkpoint", rel, None,
                            f"DLedger checkpoint {name} is past the last valid entry", f"<= {last}", str(value)))
