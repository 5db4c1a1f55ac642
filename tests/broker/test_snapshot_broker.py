"""``rmq snapshot`` of a store a real broker is writing (RealBroker --send-for, conftest.start_live_broker).

While the broker sends, snapshots are taken into one folder, again and again (each after the first is
incremental); each is kept aside as it was. Once the broker has shut down, each kept snapshot verifies clean
and reads, queue for queue and record for record, as the broker's store pinned at the snapshot's manifest end
(tests/support/snapshot_checks.py), and a last snapshot of the stopped store holds every SEND_OK once, and
copied nothing of the store twice. No snapshot changes a byte or an mtime of the stopped broker's store.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from conftest import VARIANTS, broker_params, finish_live_broker, start_live_broker, stop_live_broker, store_state
from snapshot_checks import assert_snapshot_matches
from test_live_broker import TOPICS, send_ok_by_seq
from test_real_broker import config, run_cli

from rmqsource.store.snapshot import snapshot_store

pytestmark = pytest.mark.broker

def sent_seqs_in(store: Path, cfg) -> list[int]:
    """rb_seq of every message of TOPICS a snapshot's queues serve."""
    from rmqsource.store.reader import MessageStoreReader
    from test_real_broker import topic_records
    with MessageStoreReader(store, cfg) as reader:
        return sorted(int(r.properties["rb_seq"]) for t in TOPICS for r in topic_records(reader, t))


def database_end(store: Path) -> int:
    """Where a RocksDB-queue store's database ends in the CommitLog (its dispatch checkpoint)."""
    from rmqsource.io.rocksdb import ReadOnlyRocksDb
    from rmqsource.store.layout import StoreLayout
    from rmqsource.store.rocksdb_queue import RocksDbQueueStore
    with ReadOnlyRocksDb(store / "consumequeue") as db:
        return RocksDbQueueStore(StoreLayout.for_root(store), db).dispatch_end


@pytest.mark.parametrize("broker", broker_params())
def test_snapshots_of_a_sending_broker_read_as_its_store_at_their_end(broker, broker_classpath, tmp_path):
    version, variant = broker
    run, dest = tmp_path / "run", tmp_path / "snapshot"
    proc = start_live_broker(broker_classpath(version), run, send_for=12, rate=40, settings=VARIANTS[variant])
    kept, copied = [], []
    try:
        while proc.poll() is None and len(kept) < 8:
            manifest = snapshot_store(run / "store", str(dest))
            copied.append(manifest["bytesCopied"])
            shutil.copytree(dest, tmp_path / f"kept-{len(kept)}")
            kept.append((tmp_path / f"kept-{len(kept)}", manifest))
    except BaseException:
        stop_live_broker(proc)
        raise
    finish_live_broker(proc, run)
    # The broker's settings without its paths (the harness's are the defaults under the store): read so, the
    # source and a snapshot (a store of its own, somewhere else) are read alike.
    cfg = dataclasses.replace(config(run), store_path_root_dir=None, store_path_commit_log=None)
    ends = [m["validEnd"] for _, m in kept]
    print(f"broker {version}: {len(kept)} snapshots while it sent, ends {ends}, bytes copied {copied}")
    assert len(kept) >= 3 and len(set(ends)) >= 2, "the snapshots should overlap the sends"
    assert ends == sorted(ends)
    for folder, manifest in kept:
        assert_snapshot_matches(run / "store", folder, cfg, manifest, strict_verify=False)
    if variant == "rocksdb-v2":
        # The running broker's database lags its CommitLog: those snapshots serve their newest units from the
        # CommitLog past their copied database's dispatch checkpoint.
        lagging = [m["validEnd"] - database_end(folder) for folder, m in kept]
        print(f"CommitLog bytes past each snapshot's database: {lagging}")
        assert any(lagging)

    before = store_state(run / "store")
    code, out = run_cli("snapshot", run / "store", dest, "--json")
    assert code == 0
    last = json.loads(out)
    assert store_state(run / "store") == before
    assert_snapshot_matches(run / "store", dest, cfg, strict_verify=False)
    assert sent_seqs_in(dest, cfg) == sorted(send_ok_by_seq(run))
    # Incremental: of the CommitLog, the stopped store's snapshot copied at most what was written after the last one.
    assert last["counts"]["commitlog"]["bytes"] <= last["validEnd"] - ends[-1]
