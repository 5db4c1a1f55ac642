"""``rmq snapshot`` killed (SIGKILL) half-way through an incremental run: DEST is still the previous snapshot.

A store is snapshotted, grows (new segments, queue files, IndexFile entries), and a second run into a copy
of that DEST is killed in a child process just before its N-th file replacement or its N-th staged write
(snapshot_child.py, through the fault-injection seam), for several N.  Then:

* DEST still matches the previous manifest (files and checksums; the files the unfinished run grew still
  start with the bytes the manifest checksums), and read pinned at that manifest's end it equals the source
  there;
* read as it is, DEST is a consistent prefix of the source (it reads as the source pinned at the end a
  reader finds in DEST): queues are published before the CommitLog, so units the CommitLog does not hold
  yet are ignored, never a gap;
* ``rmq verify`` finds nothing but those units past DEST's CommitLog end (``cq-past-end``, which the
  broker's recovery trims) and IndexFile entries past it (a warning);
* a rerun completes, and the snapshot then verifies clean and reads equal to the source.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rmqsource.store.config import StoreConfig
from rmqsource.store.snapshot import snapshot_store
from rmqsource.store.snapshot_manifest import PENDING_NAME, check_snapshot
from rmqsource.store.verify import verify_store
from rmqsource.store.writer import MessageStoreWriter

from snapshot_checks import assert_snapshot_matches, manifest_of, store_view
from workload import make_message

pytestmark = pytest.mark.crash

SUPPORT = Path(__file__).resolve().parents[1] / "support"
SEED = 5
SMALL = {"mappedFileSizeCommitLog": 64 * 1024, "mappedFileSizeConsumeQueue": 2000, "maxHashSlotNum": 256,
         "maxIndexNum": 1024}


def write(store: Path, first: int, count: int, config: StoreConfig) -> None:
    with MessageStoreWriter(store, config) as writer:
        for start in range(first, first + count, 50):
            assert all(r.ok for r in writer.put_messages([make_message(SEED, i)
                                                          for i in range(start, min(first + count, start + 50))]))


def run_child(store: Path, dest: Path, op: str, n: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SUPPORT / "snapshot_child.py"), str(store), str(dest),
                           json.dumps(SMALL), op, str(n)], cwd=SUPPORT, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def grown(tmp_path_factory):
    """(store, DEST of its first snapshot, the calls a whole second run makes) after the store grew."""
    base = tmp_path_factory.mktemp("snapshot-kill")
    config = StoreConfig.from_mapping(SMALL)
    store, dest = base / "store", base / "first"
    write(store, 0, 800, config)
    snapshot_store(store, str(dest), config)
    write(store, 800, 900, config)
    probe = base / "probe"
    shutil.copytree(dest, probe)
    done = run_child(store, probe, "replace", 0)
    assert done.returncode == 0, done.stderr
    return store, dest, json.loads(done.stdout)


def kill_points(total: int) -> list[int]:
    return sorted({1, 2, 3, total // 4, total // 2, (3 * total) // 4, total - 2, total - 1})


def test_runs_killed_between_files_leave_the_previous_snapshot(grown, tmp_path):
    store, first, calls = grown
    assert calls["replace"] > 20        # pending marker, queue files, segments, IndexFiles, checkpoint, manifest
    for n in kill_points(calls["replace"]):
        check_killed_run(store, first, tmp_path / f"replace-{n}", "replace", n)


def test_runs_killed_while_staging_leave_the_previous_snapshot(grown, tmp_path):
    store, first, calls = grown
    for n in (1, calls["pwrite"] // 2, calls["pwrite"] - 1):
        check_killed_run(store, first, tmp_path / f"pwrite-{n}", "pwrite", n)


def check_killed_run(store: Path, first: Path, dest: Path, op: str, n: int) -> None:
    config = StoreConfig.from_mapping(SMALL)
    shutil.copytree(first, dest)
    before = manifest_of(dest)
    killed = run_child(store, dest, op, n)
    assert killed.returncode == -9, (op, n, killed.stdout, killed.stderr[-2000:])
    assert manifest_of(dest) == before, (op, n)
    assert check_snapshot(dest) == [], (op, n)
    end = before["validEnd"]
    pinned, want = store_view(dest, config, end), store_view(store, config, end)
    assert pinned["queues"] == want["queues"] and pinned["walk"] == want["walk"], (op, n)
    as_is = store_view(dest, config)
    assert as_is["end"] >= end
    source_there = store_view(store, config, as_is["end"])
    assert as_is["queues"] == source_there["queues"] and as_is["walk"] == source_there["walk"], (op, n)
    report = verify_store(dest, config)
    others = [p.to_json() for p in report.problems if p.check not in ("cq-past-end", "index-past-end")]
    assert others == [], (op, n)
    assert all(int(p.found) >= as_is["end"] for p in report.problems), (op, n)
    assert (dest / PENDING_NAME).exists() == (op == "replace" and n > 1), (op, n)
    # A rerun completes.
    manifest = snapshot_store(store, str(dest), config)
    assert manifest["validEnd"] > end
    assert not (dest / PENDING_NAME).exists()
    assert_snapshot_matches(store, dest, config, manifest)
