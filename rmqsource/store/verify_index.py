"""IndexFile structure check for ``rmq verify`` (spec §5), vectorized over each file's entries.

Every chain must be walkable and end: an entry's previous-entry pointer is 0
or a LOWER entry of the same hash slot, so following any chain strictly
decreases and stops - the check proves that for all chains at once, without
walking them.  Also: each slot holds the newest entry of its chain (or 0),
``hashSlotCount`` equals the number of chain starts, entries are in
phyOffset order inside [beginPhyOffset, endPhyOffset], timeDiff >= 0.
Whether each entry points at a record start is checked by the CommitLog walk
(:class:`rmqsource.store.verify_cursors.IndexCursor`).
"""

from __future__ import annotations

import os
from typing import Optional

import numpy as np

from ..format.indexfile import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, IndexHeader, index_file_size
from .verify_cursors import INDEX_BLOCK_ENTRIES, INDEX_ENTRY_DTYPE, _pread_all
from .verify_report import ERROR, Problem, VerifyReport

CHAIN_PROBLEMS_PER_FILE = 16


def index_files(index_dir: str) -> list[str]:
    if not os.path.isdir(index_dir):
        return []
    return [os.path.join(index_dir, n) for n in sorted(os.listdir(index_dir)) if n.isdigit() and len(n) == 17]


def index_geometry(files: list[str], hash_slot_num: int, index_num: int) -> tuple[int, int]:
    """Configured (maxHashSlotNum, maxIndexNum), or inferred from the file size when N = 4H (the default ratio)."""
    if files:
        size = os.path.getsize(files[-1])
        if size != index_file_size(hash_slot_num, index_num) and (size - 40) % 84 == 0:
            h = (size - 40) // 84
            return h, 4 * h
    return hash_slot_num, index_num


def check_index_file(path: str, hash_slot_num: int, index_num: int,
                     report: VerifyReport) -> Optional[tuple[str, int, int]]:
    """Structural checks of one IndexFile; returns (path, indexCount, entries base) when its entries are usable."""
    rel = report.rel(path)
    size = os.path.getsize(path)
    expected = index_file_size(hash_slot_num, index_num)
    if size != expected:
        report.add(Problem("index", "index-file-size", rel, 0,
                           f"IndexFile size does not match maxHashSlotNum={hash_slot_num} maxIndexNum={index_num} "
                           f"(give the broker's values with -C)", str(expected), str(size)))
        return None
    header = IndexHeader.decode(_pread_all(path, INDEX_HEADER_SIZE, 0))
    count = header.index_count
    if count > index_num:
        report.add(Problem("index", "index-header", rel, 36, "indexCount is larger than maxIndexNum",
                           f"<= {index_num}", str(count)))
        return None
    base = INDEX_HEADER_SIZE + hash_slot_num * 4
    slots = np.frombuffer(_pread_all(path, hash_slot_num * 4, INDEX_HEADER_SIZE), dtype=">i4").astype(np.int64)
    # int32 (count <= maxIndexNum, slots < maxHashSlotNum): the random accesses below touch half the memory.
    entry_slot = np.full(count, -1, dtype=np.int32)       # slot of each entry (entry 0 unused)
    entry_prev = np.zeros(count, dtype=np.int32)
    chain_starts = 0
    chain_problems = 0
    last_phy = None
    first_phy = None
    for start in range(1, count, INDEX_BLOCK_ENTRIES):
        n = min(INDEX_BLOCK_ENTRIES, count - start)
        raw = _pread_all(path, n * INDEX_ENTRY_SIZE, base + start * INDEX_ENTRY_SIZE)
        e = np.frombuffer(raw, dtype=INDEX_ENTRY_DTYPE, count=len(raw) // INDEX_ENTRY_SIZE)
        stop = start + len(e)
        key_hash = e["hash"].astype(np.int32)
        prev = entry_prev[start:stop]
        prev[:] = e["prev"]
        phy = e["phy"].astype(np.int64)
        slot = entry_slot[start:stop]
        np.remainder(key_hash, hash_slot_num, out=slot)
        slot[key_hash < 0] = -1
        chain_starts += int(np.count_nonzero(prev == 0))
        numbers = np.arange(start, stop, dtype=np.int32)

        def entry_problem(i: int, check: str, message: str, expected: str, found: str) -> None:
            report.add(Problem("index", check, rel, base + int(numbers[i]) * INDEX_ENTRY_SIZE,
                               f"entry {int(numbers[i])}: {message}", expected, found))

        for i in np.flatnonzero(key_hash < 0)[:CHAIN_PROBLEMS_PER_FILE].tolist():
            entry_problem(i, "index-hash", "keyHash is negative", ">= 0", str(int(key_hash[i])))
        # Chains only point backwards: every walk strictly decreases and ends at 0.
        bad = np.flatnonzero((prev < 0) | (prev >= numbers))
        for i in bad[:CHAIN_PROBLEMS_PER_FILE].tolist():
            if chain_problems < CHAIN_PROBLEMS_PER_FILE:
                entry_problem(i, "index-chain", "previous-entry pointer does not point to a lower entry",
                              f"0..{int(numbers[i]) - 1}", str(int(prev[i])))
            chain_problems += 1
        if first_phy is None and len(phy):
            first_phy = int(phy[0])
        if len(phy):
            before = np.concatenate(([last_phy if last_phy is not None else phy[0]], phy[:-1]))
            for i in np.flatnonzero(phy < before)[:CHAIN_PROBLEMS_PER_FILE].tolist():   # no diff: it overflows
                entry_problem(i, "index-order", "phyOffset is smaller than the previous entry's",
                              "non-decreasing", str(int(phy[i])))
            last_phy = int(phy[-1])
        diff = e["diff"]
        for i in np.flatnonzero(diff < 0)[:CHAIN_PROBLEMS_PER_FILE].tolist():
            entry_problem(i, "index-timediff", "timeDiff is negative", ">= 0", str(int(diff[i])))
    # Each linked entry is in the same slot as the entry pointing at it.
    numbers = np.arange(count, dtype=np.int32)
    linked = np.flatnonzero((entry_prev > 0) & (entry_prev < numbers))
    wrong = linked[np.take(entry_slot, entry_prev[linked], mode="clip") != entry_slot[linked]]
    for e_no in wrong.tolist():
        if chain_problems < CHAIN_PROBLEMS_PER_FILE:
            p = int(entry_prev[e_no])
            report.add(Problem("index", "index-chain", rel, base + e_no * INDEX_ENTRY_SIZE,
                               f"entry {e_no} links to entry {p} of another hash slot",
                               f"slot {int(entry_slot[e_no])}", f"slot {int(entry_slot[p])}"))
        chain_problems += 1
    if chain_problems > CHAIN_PROBLEMS_PER_FILE:
        report.counts[(ERROR, "index-chain")] += chain_problems - CHAIN_PROBLEMS_PER_FILE
    # Slot heads: the newest entry of each slot (entries of a slot are only reachable from it).
    newest = np.zeros(hash_slot_num, dtype=np.int32)
    if count > 1:
        ok = entry_slot[1:] >= 0
        np.maximum.at(newest, entry_slot[1:][ok], numbers[1:][ok])
    head_bad = np.flatnonzero(slots != newest)
    for s in head_bad[:CHAIN_PROBLEMS_PER_FILE].tolist():
        report.add(Problem("index", "index-slot", rel, INDEX_HEADER_SIZE + s * 4,
                           f"hash slot {s} does not hold the newest entry of its chain",
                           str(int(newest[s])), str(int(slots[s]))))
    if header.hash_slot_count != chain_starts:
        report.add(Problem("index", "index-header", rel, 32, "hashSlotCount differs from the number of chains",
                           str(chain_starts), str(header.hash_slot_count)))
    if count > 1:
        if first_phy is not None and header.begin_phy_offset != first_phy:
            report.add(Problem("index", "index-header", rel, 16, "beginPhyOffset differs from entry 1's phyOffset",
                               str(first_phy), str(header.begin_phy_offset)))
        if last_phy is not None and header.end_phy_offset != last_phy:
            report.add(Problem("index", "index-header", rel, 24, "endPhyOffset differs from the last entry's",
                               str(last_phy), str(header.end_phy_offset)))
    report.stats["indexEntries"] = report.stats.get("indexEntries", 0) + max(0, count - 1)
    return path, count, base
