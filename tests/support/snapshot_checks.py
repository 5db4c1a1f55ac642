"""Checks shared by the snapshot tests: a snapshot read back equals its source up to the manifest's end.

"Equal" is judged by the store engine's own readers: every queue read with getMessage from its min to
its max offset (records byte for byte, with their units), every queue's min/max offsets, and a walk of
the whole CommitLog (each record's offset and bytes) up to the end.  The source is read pinned at the
manifest's ``validEnd`` (``MessageStoreReader(commit_log_end=...)``: the store as it was at that end),
the snapshot as it is, unpinned: a reader must find that end by itself.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

from rmqsource.format.record import Kind
from rmqsource.store.reader import MessageStoreReader
from rmqsource.store.snapshot_manifest import MANIFEST_NAME, check_snapshot
from rmqsource.store.verify import verify_store


def manifest_of(dest: str | os.PathLike) -> dict:
    return json.loads(Path(dest, MANIFEST_NAME).read_text())


def store_view(root, config, end: Optional[int] = None) -> dict:
    """What the readers serve: queues (offsets, messages) and the CommitLog walk, as plain values."""
    with MessageStoreReader(root, config, commit_log_end=end) as reader:
        queues = {}
        for topic, qid in reader.queue_keys():
            q = reader.consume_queue(topic, qid)
            mx = reader.queue_max_offset(q)
            mn = reader.queue_min_offset(q, mx)
            messages = []
            if mx > mn:
                for result in reader.get_loop("snapshot-test", topic, qid, mn, 32):
                    messages.extend((m.cq.commit_log_offset, m.cq.size, m.cq.tags_code, m.record.raw)
                                    for m in result.messages)
            if mx or messages:
                queues[(topic, qid)] = (mn, mx, messages)
        end_found = reader.commit_log_max_offset
        walk = []
        cl = reader.commitlog
        if cl.segments:
            for step in cl.walk(cl.min_offset, keep_raw=True, stop_offset=end_found):
                if step.decoded.kind is Kind.MESSAGE:
                    walk.append((step.phy_offset, step.decoded.record.raw))
                elif step.decoded.kind is not Kind.BLANK:
                    break
    return {"end": end_found, "queues": queues, "walk": walk}


def assert_snapshot_matches(source, dest, config, manifest: Optional[dict] = None, *,
                            strict_verify: bool = True) -> dict:
    """The snapshot in ``dest`` verifies, matches its manifest, and reads as ``source`` pinned at its end."""
    manifest = manifest or manifest_of(dest)
    end = manifest["validEnd"]
    assert check_snapshot(dest) == []
    report = verify_store(dest, config)
    problems = [p.to_json() for p in report.problems]
    assert report.ok, problems
    if strict_verify:
        assert report.warnings == 0, problems
    assert report.stats["commitLogEnd"] == end
    want = store_view(source, config, end)
    got = store_view(dest, config)
    assert got["end"] == end
    assert sorted(got["queues"]) == sorted(want["queues"])
    for key, (mn, mx, messages) in want["queues"].items():
        g_mn, g_mx, g_messages = got["queues"][key]
        assert (g_mn, g_mx) == (mn, mx), key
        assert len(g_messages) == len(messages), key
        assert g_messages == messages, key
    assert {(q["topic"], q["queueId"]): q["maxOffset"] for q in manifest["queues"]} == \
        {k: v[1] for k, v in got["queues"].items()}
    assert got["walk"] == want["walk"]
    return got
