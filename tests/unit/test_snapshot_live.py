"""``rmq snapshot`` (the command, in-process) of a store a child process keeps appending to (about 20k messages/s: writer_child.py,
batches of 200): every snapshot, taken again and again into the same DEST while the writer runs,
verifies clean, reads equal to the source pinned at its manifest's end, and holds exactly the first N
messages of the workload (CommitLog order is the workload's order), N growing from one snapshot to the
next (the writer is stopped with SIGSTOP while a snapshot is checked, wherever it is, and continued
after).  The default run takes a few snapshots in a few seconds; the ``slow`` one takes many more of a
store with many segment rolls."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmqsource import cli
from rmqsource.format.record import decode_record
from rmqsource.io.lock import store_lock_state
from rmqsource.store.config import StoreConfig
from rmqsource.store.snapshot import snapshot_store

from snapshot_checks import assert_snapshot_matches, manifest_of, store_view
from workload import index_of, matches

pytestmark = pytest.mark.unit

SUPPORT = Path(__file__).resolve().parents[1] / "support"
SEED = 11
# writer_child.py's settings (its segment size is an argument).
CHILD_CONFIG = {"mappedFileSizeConsumeQueue": 6000, "maxHashSlotNum": 4096, "maxIndexNum": 16384}


def start_writer(store: Path, segment_bytes: int) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, str(SUPPORT / "writer_child.py"), str(store), str(SEED), str(10 ** 9),
                              "200", "ASYNC_FLUSH", str(segment_bytes)], cwd=SUPPORT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    first = child.stdout.readline()                 # the first batch is acknowledged: the store exists
    assert first.strip().isdigit(), (first, child.stderr.read() if child.poll() is not None else "")
    return child


def snapshot_while_writing(tmp_path: Path, rounds: int, segment_bytes: int, pause_s: float) -> list[int]:
    config = StoreConfig.from_mapping({**CHILD_CONFIG, "mappedFileSizeCommitLog": segment_bytes})
    store, dest = tmp_path / "store", tmp_path / "snap"
    child = start_writer(store, segment_bytes)
    counts = []
    try:
        for _ in range(rounds):
            time.sleep(pause_s)
            assert child.poll() is None
            out = io.StringIO()
            settings = {**CHILD_CONFIG, "mappedFileSizeCommitLog": segment_bytes}
            assert cli.main(["snapshot", "--json", *[a for k, v in settings.items() for a in ("-C", f"{k}={v}")],
                             str(store), str(dest)], stdout=out) == 0, out.getvalue()
            summary = json.loads(out.getvalue())
            manifest = manifest_of(dest)
            assert summary["validEnd"] == manifest["validEnd"] and summary["bytesCopied"] == manifest["bytesCopied"]
            # The checks read the whole store: the writer waits meanwhile (else it outruns them), wherever it is.
            child.send_signal(signal.SIGSTOP)
            assert manifest["source"]["live"] and store_lock_state(store).held
            got = assert_snapshot_matches(store, dest, config, manifest)
            seqs = []
            for _, raw in got["walk"]:
                record = decode_record(raw, 0, len(raw)).record
                assert matches(SEED, record)
                seqs.append(index_of(record))
            assert seqs == list(range(len(seqs)))          # a prefix of what was written, with no gap
            counts.append(len(seqs))
            child.send_signal(signal.SIGCONT)
    finally:
        child.kill()
        child.wait()
    assert all(b > a for a, b in zip(counts, counts[1:])), counts
    # After the writer stopped (killed: a crashed store), one more run completes the same DEST.
    manifest = snapshot_store(store, str(dest), config)
    assert_snapshot_matches(store, dest, config, manifest)
    assert store_view(dest, config)["end"] >= manifest["validEnd"]
    return counts


def test_snapshots_of_a_live_store(tmp_path):
    counts = snapshot_while_writing(tmp_path, rounds=3, segment_bytes=1 << 20, pause_s=0.3)
    assert counts[0] > 0


@pytest.mark.slow
def test_many_snapshots_of_a_live_store(tmp_path):
    counts = snapshot_while_writing(tmp_path, rounds=10, segment_bytes=256 * 1024, pause_s=0.5)
    assert counts[-1] > 50_000
