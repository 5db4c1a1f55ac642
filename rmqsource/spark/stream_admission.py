"""Admission control of a micro-batch: how many messages of each queue the next batch takes (the JVM twin:
StreamAdmission.java, the same arithmetic so both admit the same offsets)."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from .stream_offsets import Key

MIN_RECORD_BYTES = 91


def split_budget(avail: Mapping[Key, int], budget: int) -> dict[Key, int]:
    """Split ``budget`` messages across queues in proportion to their backlog ``avail``.

    The shares add up to ``min(budget, sum(avail))`` exactly; no queue gets
    more than its backlog; remainders go to the largest fractional shares
    (ties: key order), so the result is deterministic.
    """
    total = sum(avail.values())
    if total <= budget:
        return dict(avail)
    alloc = {k: budget * a // total for k, a in avail.items()}
    rest = budget - sum(alloc.values())
    for k in sorted(avail, key=lambda k: (-(budget * avail[k] % total), k)):
        if rest <= 0:
            break
        if alloc[k] < avail[k]:
            alloc[k] += 1
            rest -= 1
    return alloc


def apply_bytes(watcher, eff: dict, take: dict, max_bytes: int) -> dict:
    """Cut ``take`` (messages per queue) to a bytes budget, split in proportion to the backlog; never empty."""
    total_units = sum(take.values())
    out = {}
    for key, n in take.items():
        if n <= 0:
            out[key] = 0
            continue
        # Bytes budget in proportion to this queue's share of the backlog.
        share = max_bytes * n // total_units
        cap = min(n, share // MIN_RECORD_BYTES + 1)
        sizes = watcher.unit_sizes(key, eff[key], cap)
        fits = int(np.searchsorted(np.cumsum(sizes), share, side="right"))
        out[key] = min(fits, len(sizes))
    if sum(out.values()) == 0 and total_units:
        # Never stall: one message from the queue with the largest backlog.
        key = max(take, key=lambda k: (take[k], k))
        out[key] = 1
    return out
