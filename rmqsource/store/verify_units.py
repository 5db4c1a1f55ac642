"""Unit matching of ``rmq verify`` (:mod:`rmqsource.store.verify`): ConsumeQueue units and IndexFile entries
against the records of each CommitLog window.

The queue cursors' units are taken in CommitLog order (a heap over the queues); each unit pointing into a
window must point at a record start with that size, topic, queueId, queueOffset and tagsCode, each
IndexFile entry at a record start; records a unit should point at and none does are counted per queue.
A unit of another queue the record's multi-dispatch names (an LMQ copy, ``INNER_MULTI_DISPATCH``) matches
it too.  Records past a RocksDB database's dispatch checkpoint are counted apart: the database holds no unit
of theirs by design (a warning, not a missing unit).  Units and entries left when the walk ends point past
the CommitLog's valid end.  JVM twin: ``io.rmqsource.verify.UnitMatching``.
"""

from __future__ import annotations

import heapq

import numpy as np

from .. import limits
from .verify_report import ERROR, WARNING, Problem


class UnitMatching:
    """Mixin of the verifier (:class:`rmqsource.store.verify._Verifier`, whose state it reads): ConsumeQueue
    units and IndexFile entries against the records of the window the walk just checked."""

    def _take_units(self, hi: int) -> None:
        """Move the units with phy < ``hi`` from the queue cursors into ``self.pending`` (sorted by phy)."""
        parts = [self.pending] if self.pending is not None and len(self.pending[0]) else []
        for _ in range(len(self.heap) + 1):
            if not self.heap or self.heap[0][0] >= hi:
                break
            _, i = heapq.heappop(self.heap)
            q = self.queues[i]
            for uphy, usize, ucode, uqoff in q.take_below(hi):
                parts.append((uphy, usize, ucode, uqoff, np.full(len(uphy), i, dtype=np.int64)))
            p = q.next_phy()
            if p is not None:
                heapq.heappush(self.heap, (p, i))
        if not parts:
            self.pending = None
            return
        cols = [np.concatenate([p[k] for p in parts]) for k in range(5)] if len(parts) > 1 else list(parts[0])
        order = np.argsort(cols[0], kind="stable")
        self.pending = tuple(c[order] for c in cols)

    def _hints(self) -> np.ndarray:
        """Record starts claimed by the pending units (distinct, ascending)."""
        if self.pending is None:
            return np.zeros(0, dtype=np.int64)
        phy = self.pending[0]
        if len(phy) > 1:
            keep = np.empty(len(phy), dtype=bool)
            keep[0] = True
            np.not_equal(phy[1:], phy[:-1], out=keep[1:])
            return phy[keep]
        return phy

    def _check_units_and_entries(self, window_end: int) -> None:
        win = getattr(self, "window", None)
        self.window = None
        starts = _RecordStarts(win[0] if win is not None else np.zeros(0, np.int64))
        self._match_units(window_end, win, starts)
        self._match_entries(window_end, win, starts)
        if win is not None:
            self._collect_unmatched(win)

    def _match_units(self, window_end: int, win, starts: "_RecordStarts") -> None:
        """Units with phy < ``window_end`` against the window's records (all queues at once)."""
        rep = self.report
        if self.pending is None:
            return
        uphy, usize, ucode, uqoff, uq = self.pending
        cut = int(np.searchsorted(uphy, window_end, side="left"))
        if cut == 0:
            return
        self.pending = tuple(a[cut:] for a in self.pending)
        uphy, usize, ucode, uqoff, uq = uphy[:cut], usize[:cut], ucode[:cut], uqoff[:cut], uq[:cut]
        q_topic = np.array([q.topic_id for q in self.queues], dtype=np.int64)
        q_qid = np.array([q.queue_id for q in self.queues], dtype=np.int64)

        def unit_problem(j: int, check: str, message: str, expected: str, found: str) -> None:
            q = self.queues[int(uq[j])]
            f, off = q.file_and_position(int(uqoff[j]))
            rep.add(Problem("consumequeue", check, f, off, f"{q.unit_name(int(uqoff[j]))} {message}", expected, found))

        idx = starts.rows(uphy)
        found = idx >= 0
        for j in self._listed(~found, "cq-target"):
            unit_problem(j, "cq-target", f"points at CommitLog offset {int(uphy[j])}, where no valid record starts",
                         "a record start", "no valid record")
        if not found.any():
            return
        sel = np.flatnonzero(found)
        ri = idx[sel]
        _, r_size, r_topic, r_qid, r_qoff, r_code, _, matched, *_, lmq_copies = win
        same_queue = (r_topic[ri] == q_topic[uq[sel]]) & (r_qid[ri] == q_qid[uq[sel]]) & (r_qoff[ri] == uqoff[sel])
        matched[ri[same_queue]] = True
        if lmq_copies:
            same_queue |= self._lmq_copies_of(lmq_copies, ri, uq[sel], uqoff[sel], ~same_queue)
        for j in self._listed(~same_queue, "cq-queue"):
            u, r = int(sel[j]), int(ri[j])
            q = self.queues[int(uq[u])]
            unit_problem(u, "cq-queue", f"points at the record at CommitLog offset {int(uphy[u])} of another "
                                        f"queue position", f"{q.topic}/{q.queue_id}/{int(uqoff[u])}",
                         f"{self._topic_name(int(r_topic[r]))}/{int(r_qid[r])}/{int(r_qoff[r])}")
        for check, what, want, got in (("cq-size", "size", r_size[ri], usize[sel]),
                                        ("cq-tagscode", "tagsCode", r_code[ri], ucode[sel])):
            for j in self._listed(want != got, check):
                u = int(sel[j])
                unit_problem(u, check, f"{what} differs from the record at CommitLog offset {int(uphy[u])}",
                             str(int(want[j])), str(int(got[j])))

    def _lmq_copies_of(self, lmq_copies: set, rows: np.ndarray, queues: np.ndarray, qoffs: np.ndarray,
                       candidates: np.ndarray) -> np.ndarray:
        """Which candidate units are the copies a record's multi-dispatch gives (``lmq_copies``: (row, queue,
        queueId, queueOffset) of the window's records, see verify_walk.py); they need no unit of their own."""
        out = np.zeros(len(rows), dtype=bool)
        for j in np.flatnonzero(candidates).tolist():
            q = self.queues[int(queues[j])]
            out[j] = (int(rows[j]), q.topic, q.queue_id, int(qoffs[j])) in lmq_copies
        return out

    def _topic_name(self, tid: int) -> str:
        for t, i in self.topic_ids.items():
            if i == tid:
                return t
        return "?"

    def _match_entries(self, window_end: int, win, starts: "_RecordStarts") -> None:
        rep = self.report
        for fi, numbers, ephy in self.index.take_below(window_end):
            found = starts.rows(ephy) >= 0
            path, _, base = self.index.files[fi]
            for j in self._listed(~found, "index-target"):
                rep.add(Problem("index", "index-target", rep.rel(path), base + int(numbers[j]) * 20,
                                f"entry {int(numbers[j])} points at CommitLog offset {int(ephy[j])}, where no record "
                                f"starts", "a record start", "no record"))

    def _collect_unmatched(self, win) -> None:
        phy, _, r_topic, r_qid, _, _, eligible, matched, *_ = win
        done = np.flatnonzero(eligible & matched)
        if len(done):
            self.last_dispatched = max(self.last_dispatched, int(phy[done[-1]]))
        missing = np.flatnonzero(eligible & ~matched)
        if len(missing) == 0:
            return
        if self.dispatch_end is not None:
            past = phy[missing] >= self.dispatch_end
            _count_by_queue(self.past_dispatch_end, missing[past], phy, r_topic, r_qid)
            missing = missing[~past]
        _count_by_queue(self.unmatched, missing, phy, r_topic, r_qid)

    def _report_unmatched_records(self) -> None:
        """Records no unit points at. After an unclean shutdown, those past the last dispatched record are the
        broker's dispatch backlog (it dispatches in CommitLog order; its recovery, or rmq recover, finishes it):
        a warning. Any other is an error."""
        rep = self.report
        unclean = self.layout.abort_exists()
        for (tid, unsigned_qid), (count, first) in sorted(self.unmatched.items()):
            qid = unsigned_qid - (1 << 32) if unsigned_qid >= 1 << 31 else unsigned_qid      # the record's int field
            topic = self._topic_name(tid)
            has_units = (tid, qid) in self.queue_key_index
            where, no_units = self._queue_place(topic, qid)
            if unclean and first > self.last_dispatched:
                rep.add(Problem("consumequeue", "cq-undispatched", where, None,
                                f"{count} record(s) of {topic}/{qid} after the last dispatched record (first at "
                                f"CommitLog offset {first}): the broker stopped before dispatching them; its "
                                f"recovery (or rmq recover) does", "a unit per record", f"{count} not yet dispatched",
                                severity=WARNING))
                continue
            rep.add(Problem("consumequeue", "cq-missing-unit", where, None,
                            f"{count} record(s) of {topic}/{qid} have no ConsumeQueue unit "
                            f"(first at CommitLog offset {first})" + ("" if has_units else no_units),
                            "a unit per record", f"{count} missing"))
        self._report_past_dispatch_end()

    def _queue_place(self, topic: str, qid: int) -> tuple[str, str]:
        """Where a queue's units are (its folder, or the RocksDB database's), and what a queue without any is."""
        if self.rocksdb is not None:
            return self.report.rel(self.rocksdb.folder), "; the RocksDB database holds no unit of the queue"
        return (self.report.rel(self.layout.queue_dir(topic, qid)),
                "; the queue has no ConsumeQueue files (dispatch rebuilds them)")

    def _report_past_dispatch_end(self) -> None:
        """Records past the RocksDB database's dispatch checkpoint: the broker writes their units without a WAL
        into memtables it flushes later (all column families at once), so the database holds none by design;
        the broker's recovery dispatches them from the checkpoint.  One warning per queue."""
        rep = self.report
        for (tid, unsigned_qid), (count, first) in sorted(self.past_dispatch_end.items()):
            qid = unsigned_qid - (1 << 32) if unsigned_qid >= 1 << 31 else unsigned_qid
            topic = self._topic_name(tid)
            rep.add(Problem("consumequeue", "cq-undispatched", self._queue_place(topic, qid)[0], None,
                            f"{count} record(s) of {topic}/{qid} past the RocksDB database's dispatch checkpoint at "
                            f"offset {self.dispatch_end} (first at CommitLog offset {first}): the broker holds their "
                            f"units in memory until its next flush; its recovery dispatches them",
                            "a unit per record", f"{count} past the checkpoint", severity=WARNING))

    def _drain_cursors(self, end: int) -> None:
        """Units and entries left after the walk point past the CommitLog's valid end."""
        rep = self.report
        self.window = None
        self._take_units(1 << 62)
        if self.pending is not None and len(self.pending[0]):
            uphy, _, _, uqoff, uq = self.pending
            for j in self._listed(np.ones(len(uphy), dtype=bool), "cq-past-end"):
                q = self.queues[int(uq[j])]
                f, off = q.file_and_position(int(uqoff[j]))
                rep.add(Problem("consumequeue", "cq-past-end", f, off,
                                f"{q.unit_name(int(uqoff[j]))} points at CommitLog offset "
                                f"{int(uphy[j])}, past the CommitLog's valid end (recovery trims it)",
                                f"< {end}", str(int(uphy[j]))))
        for fi, numbers, ephy in self.index.take_below(1 << 62):
            path, _, base = self.index.files[fi]
            listed = self._listed(np.ones(len(ephy), dtype=bool), "index-past-end")
            rep.counts[(WARNING, "index-past-end")] += rep.counts.pop((ERROR, "index-past-end"), 0)
            for j in listed:
                rep.add(Problem("index", "index-past-end", rep.rel(path), base + int(numbers[j]) * 20,
                                f"entry {int(numbers[j])} points at CommitLog offset {int(ephy[j])}, past the "
                                f"CommitLog's valid end", f"< {end}", str(int(ephy[j])), severity=WARNING))


def _count_by_queue(table: dict, rows: np.ndarray, phy: np.ndarray, r_topic: np.ndarray, r_qid: np.ndarray) -> None:
    """Add the records at ``rows`` to ``table``: (topic id, unsigned queueId) -> [count, first CommitLog offset]."""
    if len(rows) == 0:
        return
    key = (r_topic[rows] << 32) | (r_qid[rows] & 0xFFFFFFFF)
    uniq, first, counts = np.unique(key, return_index=True, return_counts=True)
    for k, f, c in zip(uniq.tolist(), first.tolist(), counts.tolist()):
        entry = table.setdefault((k >> 32, k & 0xFFFFFFFF), [0, int(phy[rows[f]])])
        entry[0] += c          # keyed by the unsigned queueId: the JVM walk's order


class _RecordStarts:
    """Row of the window's record starting at a CommitLog offset, by 64-byte block.

    A record is at least MIN_RECORD_BYTES (> 64) long, so no block holds two
    record starts: one gather and one compare per lookup instead of a binary search.
    """

    BLOCK_SHIFT = 6

    def __init__(self, phy: np.ndarray):
        self.phy = phy
        self.base = int(phy[0]) if len(phy) else 0
        span = int(phy[-1]) - self.base + 1 if len(phy) else 0
        self.blocks = np.full((span >> self.BLOCK_SHIFT) + 1, -1, dtype=np.int64)
        self.blocks[(phy - self.base) >> self.BLOCK_SHIFT] = np.arange(len(phy), dtype=np.int64)

    def rows(self, offsets: np.ndarray) -> np.ndarray:
        """Row of the record starting at each offset, -1 where no record of the window starts."""
        if len(self.phy) == 0:
            return np.full(len(offsets), -1, dtype=np.int64)
        b = (offsets - self.base) >> self.BLOCK_SHIFT
        np.clip(b, 0, len(self.blocks) - 1, out=b)
        row = self.blocks[b]
        row[self.phy[row] != offsets] = -1         # row -1 reads the last record: compared like any other
        return row


assert limits.MIN_RECORD_BYTES > 1 << _RecordStarts.BLOCK_SHIFT
