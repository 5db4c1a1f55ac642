"""Records past every ConsumeQueue (a writer killed between its CommitLog write and its dispatch) are served by
queue reads of a stopped store, dispatched as the broker's recovery dispatches them (spec §7.3, §7.5); a live
store shows only what was dispatched."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rmqsource.format.record import Kind
from rmqsource.sample import write_sample_store
from rmqsource.store.reader import GetMessageStatus, MessageStoreReader

pytestmark = pytest.mark.unit

FIRST, MORE = 3000, 600


def make_lagging_store(base: Path, *, abort: bool) -> Path:
    """A sample store whose last MORE records are in the CommitLog but in no ConsumeQueue."""
    root = base / "store"
    write_sample_store(str(root), FIRST)
    shutil.copytree(root / "consumequeue", base / "cq-before")
    write_sample_store(str(root), MORE, seed=7)
    shutil.rmtree(root / "consumequeue")
    shutil.copytree(base / "cq-before", root / "consumequeue")
    if abort:
        (root / "abort").write_bytes(b"")
    return root


def walk_records(reader: MessageStoreReader) -> dict[int, object]:
    cl = reader.commitlog
    return {s.phy_offset: s.decoded.record for s in cl.walk(cl.min_offset, stop_offset=reader.commit_log_max_offset)
            if s.decoded.kind is Kind.MESSAGE}


def served_by_queue(reader: MessageStoreReader) -> dict[tuple[str, int], list]:
    out = {}
    for topic, qid in reader.queue_keys():
        out[(topic, qid)] = [m for res in reader.get_loop("g", topic, qid, 0, 256) for m in res.messages]
    return out


@pytest.mark.parametrize("abort", [True, False], ids=["crashed", "clean-stop"])
def test_records_past_the_consume_queues_are_served(tmp_path, abort):
    root = make_lagging_store(tmp_path, abort=abort)
    with MessageStoreReader(root) as r:
        assert not r.live
        walk = walk_records(r)
        assert len(walk) == FIRST + MORE
        served = served_by_queue(r)
        assert sum(len(v) for v in served.values()) == len(walk)
        seen = set()
        for (topic, qid), messages in served.items():
            assert [m.record.queue_offset for m in messages] == list(range(len(messages)))
            q = r.consume_queue(topic, qid)
            assert r.queue_max_offset(q) == len(messages)
            for m in messages:
                phy = m.cq.commit_log_offset
                w = walk[phy]
                assert (m.record.topic, m.record.queue_id) == (topic, qid)
                assert (w.topic, w.queue_id, w.queue_offset, w.body) == \
                       (m.record.topic, m.record.queue_id, m.record.queue_offset, m.record.body)
                seen.add(phy)
            end = r.get_message("g", topic, qid, len(messages), 1)
            assert end.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
        assert seen == set(walk)
        assert {(i.topic, i.queue_id): i.max_offset for i in r.queue_infos()} == \
               {k: len(v) for k, v in served.items()}


def test_a_queue_only_the_tail_holds_is_listed(tmp_path):
    root = make_lagging_store(tmp_path, abort=True)
    shutil.rmtree(root / "consumequeue" / "OrderEvents" / "3")
    with MessageStoreReader(root) as r:
        assert ("OrderEvents", 3) in r.queue_keys()
        # The queue's records before the tail have no unit any more: only the tail's records, from their offsets.
        q = r.consume_queue("OrderEvents", 3)
        first = r.queue_min_offset(q)
        assert first > 0
        tail_only = [m for res in r.get_loop("g", "OrderEvents", 3, first, 256) for m in res.messages]
        assert tail_only and all(m.record.topic == "OrderEvents" and m.record.queue_id == 3 for m in tail_only)
        offsets = [m.record.queue_offset for m in tail_only]
        assert offsets == list(range(first, r.queue_max_offset(q)))


BROKER_LIKE_CHILD = """
import fcntl, os, sys
fd = os.open(os.path.join(sys.argv[1], "lock"), os.O_RDWR | os.O_CREAT, 0o644)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
os.pwrite(fd, b"lock", 0)
print("locked", flush=True)
sys.stdin.read()
"""


def test_a_live_store_serves_only_dispatched_records(tmp_path):
    root = make_lagging_store(tmp_path, abort=True)
    child = subprocess.Popen([sys.executable, "-c", BROKER_LIKE_CHILD, str(root)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "locked"
        with MessageStoreReader(root) as r:
            assert r.live
            served = served_by_queue(r)
            assert sum(len(v) for v in served.values()) == FIRST
            assert len(r.queue_keys()) == len({k for k in served})
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    with MessageStoreReader(root) as r:          # the lock released: the stopped store serves them all
        assert sum(len(v) for v in served_by_queue(r).values()) == FIRST + MORE
