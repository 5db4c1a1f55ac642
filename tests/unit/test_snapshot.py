"""``rmq snapshot``: a snapshot of a stopped store, written by the project's writer or by a real engine
(the golden corpora, read in place), verifies clean and reads equal to its source up to the manifest's end;
a second run copies exactly the new bytes; RocksDB ConsumeQueues are copied with their database;
DLedger stores are refused by name.
The live-writer and killed-run tests are in test_snapshot_live.py and tests/crash/test_snapshot_kill.py."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmqsource import cli
from rmqsource.errors import OptionError, StoreError, UnsupportedLayoutError
from rmqsource.format.consumequeue import CQ_UNIT_SIZE
from rmqsource.format.indexfile import HASH_SLOT_SIZE, INDEX_HEADER_SIZE
from rmqsource.store.config import StoreConfig
from rmqsource.store.snapshot import snapshot_store
from rmqsource.store.snapshot_manifest import MANIFEST_NAME, check_snapshot
from rmqsource.store.verify import verify_store
from rmqsource.store.writer import MessageStoreWriter

from golden import GOLDEN_BROKER_ROOT, case_id, dledger_corpora, default_layout_corpora, engine_json, \
    expected_get_files, load_config, read_jsonl
from snapshot_checks import assert_snapshot_matches, manifest_of, store_view
from workload import make_message, matches

pytestmark = pytest.mark.unit

SEED = 7
SMALL = {"mappedFileSizeCommitLog": 64 * 1024, "mappedFileSizeConsumeQueue": 6000, "maxHashSlotNum": 512,
         "maxIndexNum": 2048}


def small_config() -> StoreConfig:
    return StoreConfig.from_mapping(SMALL)


def write(store: Path, first: int, count: int, config: StoreConfig, batch: int = 64) -> None:
    with MessageStoreWriter(store, config) as writer:
        for start in range(first, first + count, batch):
            results = writer.put_messages([make_message(SEED, i) for i in range(start, min(first + count,
                                                                                          start + batch))])
            assert all(r.ok for r in results)


def run_cli(argv) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main([str(a) for a in argv], stdout=out)
    return code, out.getvalue()


def test_snapshot_of_a_written_store_reads_equal(tmp_path):
    config = small_config()
    store, dest = tmp_path / "store", tmp_path / "snap"
    write(store, 0, 3000, config)
    code, text = run_cli(["snapshot", "--json", *sum((["-C", f"{k}={v}"] for k, v in SMALL.items()), []),
                          store, dest])
    assert code == 0, text
    summary = json.loads(text)
    manifest = manifest_of(dest)
    assert summary["manifest"] == os.path.join(str(dest), MANIFEST_NAME)
    assert summary["validEnd"] == manifest["validEnd"] == store_view(store, config)["end"]
    assert summary["bytesCopied"] == manifest["bytesCopied"] > manifest["validEnd"]
    holding = [n for n in os.listdir(store / "commitlog") if int(n) < manifest["validEnd"]]   # not a spare
    assert summary["counts"]["commitlog"]["files"] == len(holding) > 1
    got = assert_snapshot_matches(store, dest, config, manifest)
    records = [m for _, _, msgs in got["queues"].values() for m in msgs]
    assert len(records) == 3000 == len(got["walk"])
    # The CommitLog's active segment and the queues' last files keep RocketMQ's full file sizes.
    assert {os.path.getsize(p) for p in (dest / "commitlog").iterdir()} == {SMALL["mappedFileSizeCommitLog"]}
    assert not (dest / ".rmq-snapshot-staging").exists()
    assert run_cli(["verify", "--engine", "python", *sum((["-C", f"{k}={v}"] for k, v in SMALL.items()), []),
                    dest])[0] == 0


def test_second_run_copies_exactly_the_new_bytes(tmp_path):
    config = small_config()
    store, dest = tmp_path / "store", tmp_path / "snap"
    write(store, 0, 1500, config)
    first = snapshot_store(store, str(dest), config)
    sealed = {p.name: p.stat().st_ino for p in (dest / "commitlog").iterdir()
              if first["files"][f"commitlog/{p.name}"]["sealed"]}
    assert sealed
    write(store, 1500, 1700, config)
    second = snapshot_store(store, str(dest), config)
    assert_snapshot_matches(store, dest, config, second)
    counts = second["counts"]
    assert counts["commitlog"]["bytes"] == second["validEnd"] - first["validEnd"]
    units_before = sum(q["maxOffset"] for q in first["queues"])
    units_after = sum(q["maxOffset"] for q in second["queues"])
    assert counts["consumequeue"]["bytes"] == CQ_UNIT_SIZE * (units_after - units_before)
    # An IndexFile that changed gets its header, its hash slots and its new entries (the old ones are kept).
    changed_index = [(first["files"].get(rel), e) for rel, e in second["files"].items()
                     if e["kind"] == "index" and first["files"].get(rel) != e]
    assert counts["index"]["copied"] == len(changed_index) >= 1
    assert counts["index"]["bytes"] == sum(INDEX_HEADER_SIZE + e["hashSlotNum"] * HASH_SLOT_SIZE + e["validBytes"]
                                           - (old["validBytes"] if old else 0) for old, e in changed_index)
    changed_other = [e for rel, e in second["files"].items()
                     if e["kind"] in ("config", "checkpoint") and first["files"].get(rel) != e]
    assert counts["config"]["bytes"] + counts["checkpoint"]["bytes"] == sum(e["size"] for e in changed_other)
    assert second["bytesCopied"] == sum(c["bytes"] for c in counts.values())
    # Sealed segments were copied once: the same files, never rewritten.
    assert {n: (dest / "commitlog" / n).stat().st_ino for n in sealed} == sealed
    # Nothing new: nothing copied.
    third = snapshot_store(store, str(dest), config)
    assert third["bytesCopied"] == 0
    assert third["validEnd"] == second["validEnd"]
    assert_snapshot_matches(store, dest, config, third)


def test_file_uri_destination_goes_through_pyarrow_fs(tmp_path):
    """A URI destination (pyarrow's LocalFileSystem for file://): whole files PUT, nothing cloned, so a grown
    file is copied whole from the source again."""
    config = small_config()
    store, dest = tmp_path / "store", tmp_path / "snap"
    write(store, 0, 1000, config)
    first = snapshot_store(store, dest.as_uri(), config)
    assert_snapshot_matches(store, dest, config, first)
    write(store, 1000, 700, config)
    second = snapshot_store(store, dest.as_uri(), config)
    assert_snapshot_matches(store, dest, config, second)
    changed_cl = [e for rel, e in second["files"].items() if e["kind"] == "commitlog" and first["files"].get(rel) != e]
    assert second["counts"]["commitlog"]["bytes"] == sum(e["validBytes"] for e in changed_cl)
    assert second["counts"]["commitlog"]["bytes"] > second["validEnd"] - first["validEnd"]


@pytest.mark.parametrize("open_sources", [3, None], ids=["some-staged", "all-sent-from-source"])
def test_uri_destination_sends_segments_from_the_source(tmp_path, monkeypatch, open_sources):
    """A URI destination sends CommitLog segments straight from the source files (each held open until it is
    uploaded, its CRC-32 taken on the way); past the open-file budget the rest are staged copies. Either way
    the snapshot verifies and its manifest's checksums match, and a segment deleted from the source after it
    was read (retention) still uploads."""
    from rmqsource.io import destinations
    if open_sources is not None:
        monkeypatch.setattr(destinations, "_span_budget", lambda: open_sources)
    config = small_config()
    store, dest = tmp_path / "store", tmp_path / "snap"
    write(store, 0, 1000, config)
    oldest = sorted((store / "commitlog").iterdir())[0]
    data = oldest.read_bytes()
    real_publish = destinations.ArrowDestination.publish

    def publish_after_retention(self, staged, **kw):
        if oldest.exists():
            oldest.unlink()                  # read already: gone before any upload
        return real_publish(self, staged, **kw)
    monkeypatch.setattr(destinations.ArrowDestination, "publish", publish_after_retention)
    manifest = snapshot_store(store, dest.as_uri(), config)
    oldest.write_bytes(data)
    assert len([r for r in manifest["files"] if r.startswith("commitlog/")]) > 3
    assert (dest / "commitlog" / oldest.name).read_bytes() == data
    assert_snapshot_matches(store, dest, config, manifest)


def test_every_record_is_the_workload_message(tmp_path):
    config = small_config()
    store, dest = tmp_path / "store", tmp_path / "snap"
    write(store, 0, 800, config)
    snapshot_store(store, str(dest), config)
    view = store_view(dest, config)
    from rmqsource.format.record import decode_record
    seen = set()
    for _, raw in view["walk"]:
        record = decode_record(raw, 0, len(raw)).record
        assert matches(SEED, record)
        seen.add(int(record.properties["seq"]))
    assert seen == set(range(800))


def test_index_entries_past_the_queues_are_cut(tmp_path):
    """An IndexFile ahead of the ConsumeQueues (the writer indexes a batch before writing its units): the
    snapshot keeps only entries below its end, with slots and header rebuilt, and verifies without warnings."""
    config = small_config()
    store, dest = tmp_path / "store", tmp_path / "snap"
    write(store, 0, 600, config)
    # Units of the last 40 records are lost (zeroed), as if the writer was stopped before writing them.
    view = store_view(store, config)
    last = sorted(view["walk"])[-40][0]
    for folder in (store / "consumequeue").glob("*/*"):
        for f in folder.iterdir():
            data = bytearray(f.read_bytes())
            for pos in range(0, len(data), CQ_UNIT_SIZE):
                if int.from_bytes(data[pos:pos + 8], "big") >= last and int.from_bytes(data[pos + 8:pos + 12], "big"):
                    data[pos:pos + CQ_UNIT_SIZE] = bytes(CQ_UNIT_SIZE)
            f.write_bytes(bytes(data))
    manifest = snapshot_store(store, str(dest), config)
    assert manifest["validEnd"] == last
    report = verify_store(dest, config)
    assert report.ok and report.warnings == 0, [p.to_json() for p in report.problems]
    got = store_view(dest, config)
    assert len(got["walk"]) == 560
    # What the snapshot holds reads as the source pinned at its end.
    assert_snapshot_matches(store, dest, config, manifest)


def test_a_batch_left_half_dispatched_ends_the_snapshot_before_it(tmp_path):
    """A writer killed between two queues of one batch: one queue lacks units for records below the furthest
    unit of the others.  The snapshot ends at the first record without its unit, so no queue has a gap."""
    config = small_config()
    store, dest = tmp_path / "store", tmp_path / "snap"
    write(store, 0, 600, config)
    view = store_view(store, config)
    lagging = next(iter(sorted(view["queues"])))
    lost = view["queues"][lagging][2][-3:]                  # its last 3 units were never written
    first_lost = lost[0][0]
    folder = store / "consumequeue" / lagging[0] / str(lagging[1])
    for f in folder.iterdir():
        data = bytearray(f.read_bytes())
        for pos in range(0, len(data), CQ_UNIT_SIZE):
            if int.from_bytes(data[pos:pos + 8], "big") >= first_lost and int.from_bytes(data[pos + 8:pos + 12], "big"):
                data[pos:pos + CQ_UNIT_SIZE] = bytes(CQ_UNIT_SIZE)
        f.write_bytes(bytes(data))
    assert max(phy for _, _, msgs in view["queues"].values() for phy, *_ in msgs) > first_lost
    manifest = snapshot_store(store, str(dest), config)
    assert manifest["validEnd"] == first_lost
    assert_snapshot_matches(store, dest, config, manifest)


def test_torn_config_file_is_taken_from_its_bak(tmp_path):
    config = small_config()
    store, dest = tmp_path / "store", tmp_path / "snap"
    write(store, 0, 100, config)
    good = b'{\n\t"offsetTable":{\n\t\t"Clicks@g1":{0:3,1:2}\n\t}\n}'
    (store / "config").mkdir(exist_ok=True)
    (store / "config" / "consumerOffset.json").write_bytes(good[:20])        # caught mid-write
    (store / "config" / "consumerOffset.json.bak").write_bytes(good)
    snapshot_store(store, str(dest), config)
    assert (dest / "config" / "consumerOffset.json").read_bytes() == good
    assert not (dest / "config" / "consumerOffset.json.bak").exists()
    assert check_snapshot(dest) == []


def test_config_v2_rocksdb_folder_is_copied(tmp_path):
    """config/rdb/ of a config-v2 store (a RocksDB database: topics, groups, offsets) is copied file by file and
    opens in DEST with the same records."""
    pytest.importorskip("rocksdict")
    from rmqsource.io.rocksdb import ReadOnlyRocksDb
    config = StoreConfig.from_mapping({**SMALL, "configManagerVersion": "v2", "engineVersion": "5.3.3"})
    store, dest = tmp_path / "store", tmp_path / "snap"
    write(store, 0, 300, config)
    assert (store / "config" / "rdb" / "CURRENT").is_file()
    manifest = snapshot_store(store, str(dest), config)
    assert manifest["counts"]["config"]["copied"] >= 3
    assert not (dest / "config" / "rdb" / "LOCK").exists()

    def records(folder):
        with ReadOnlyRocksDb(folder) as db:
            return {cf: list(db.items(cf)) for cf in db.column_families}
    want = records(store / "config" / "rdb")
    assert any(want.values())
    assert records(dest / "config" / "rdb") == want
    assert_snapshot_matches(store, dest, config, manifest)


def test_dest_holding_something_else_is_refused(tmp_path):
    config = small_config()
    a, b, dest = tmp_path / "a", tmp_path / "b", tmp_path / "snap"
    write(a, 0, 50, config)
    write(b, 0, 50, config)
    with pytest.raises(OptionError, match="holds a store but no snapshot manifest"):
        snapshot_store(a, str(b), config)
    snapshot_store(a, str(dest), config)
    with pytest.raises(OptionError, match="holds a snapshot of"):
        snapshot_store(b, str(dest), config)
    code, _ = run_cli(["snapshot", b, dest])
    assert code == 2
    with pytest.raises(OptionError, match="overlap"):
        snapshot_store(a, str(a / "snap"), config)
    assert not (a / "snap").exists()


@pytest.mark.parametrize("corpus", default_layout_corpora(), ids=case_id)
def test_golden_corpus_snapshot_equals_source(corpus, tmp_path):
    config = load_config(corpus)
    dest = tmp_path / "snap"
    manifest = snapshot_store(corpus / "store", str(dest), config)
    assert_snapshot_matches(corpus / "store", dest, config, manifest)
    assert manifest["validEnd"] == store_view(corpus / "store", config)["end"]
    # The real engine's own answers, from the snapshot: every queue's get --loop.
    for topic, queue_id, path in expected_get_files(corpus / "expected"):
        code, text = run_cli(["get", "--json", "--config", corpus / "store.properties", "--loop", "--", dest,
                              topic, queue_id, 0, 100000])
        assert code in (0, 3), text[-300:]
        got = [json.loads(line) for line in text.splitlines()]
        assert got == engine_json(read_jsonl(path)), (topic, queue_id)
    # Every CommitLog, ConsumeQueue and IndexFile of a stopped, consistent store is copied byte for byte.
    for kind in ("commitlog", "consumequeue", "index"):
        for src in (corpus / "store" / kind).rglob("*"):
            if src.is_file():
                assert (dest / src.relative_to(corpus / "store")).read_bytes() == src.read_bytes(), src


def broker_corpus(name: str) -> Path:
    path = GOLDEN_BROKER_ROOT / name
    if not (path / "store").is_dir():
        pytest.skip(f"no {path}")
    return path


def test_real_broker_store_snapshot_names_its_broker(tmp_path):
    corpus = broker_corpus("rmq550-b1")
    config = StoreConfig.from_properties_file(corpus / "broker.properties")
    dest = tmp_path / "snap"
    manifest = snapshot_store(corpus / "store", str(dest), config)
    assert manifest["source"]["brokerClusterName"] == "RbCluster"
    assert "brokerName" in manifest["source"]
    assert (dest / "config" / "consumerOffset.json").is_file() and (dest / "config" / "timercheck").is_file()
    assert not (dest / "lock").exists() and not (dest / "abort").exists()
    assert_snapshot_matches(corpus / "store", dest, config, manifest, strict_verify=False)


def rocksdb_corpus() -> tuple[Path, StoreConfig]:
    pytest.importorskip("rocksdict")
    corpus = broker_corpus("rmq550-b2-rocksdb-v2-lmq")
    return corpus, StoreConfig.from_properties_file(corpus / "broker.properties")


def database_records(folder) -> dict:
    from rmqsource.io.rocksdb import ReadOnlyRocksDb
    with ReadOnlyRocksDb(folder) as db:
        return {cf: list(db.items(cf)) for cf in db.column_families}


def test_rocksdb_queue_store_snapshot_equals_source(tmp_path):
    """ConsumeQueues in RocksDB (storeType=defaultRocksDB, LMQ copies): the database is copied file by file and
    opens with the source's records; the snapshot reads as the source; a second run copies nothing."""
    corpus, config = rocksdb_corpus()
    dest = tmp_path / "snap"
    manifest = snapshot_store(corpus / "store", str(dest), config)
    assert manifest["source"]["storeType"] == "defaultRocksDB"
    assert manifest["validEnd"] == store_view(corpus / "store", config)["end"]
    assert not (dest / "consumequeue" / "LOCK").exists()
    assert database_records(dest / "consumequeue") == database_records(corpus / "store" / "consumequeue")
    got = assert_snapshot_matches(corpus / "store", dest, config, manifest, strict_verify=False)
    assert any(t.startswith("%LMQ%") for t, _ in got["queues"])
    again = snapshot_store(corpus / "store", str(dest), config)
    assert again["bytesCopied"] == 0 and again["queues"] == manifest["queues"]


def test_rocksdb_manifest_copied_while_appended_loses_its_last_edits(tmp_path):
    """Why the copy waits for a MANIFEST that did not grow while it was read: RocksDB opens a copy whose
    MANIFEST ends in a torn record, without that record's edits (here: every table file, so no unit)."""
    corpus, _ = rocksdb_corpus()
    copy = tmp_path / "db"
    shutil.copytree(corpus / "store" / "consumequeue", copy, ignore=shutil.ignore_patterns("LOCK"))
    manifest = copy / (copy / "CURRENT").read_text().strip()
    os.chmod(copy, 0o755)
    for p in copy.iterdir():
        os.chmod(p, 0o644)
    whole = database_records(copy)
    manifest.write_bytes(manifest.read_bytes()[:-1])
    torn = database_records(copy)
    assert sum(map(len, whole.values())) > 0 and sum(map(len, torn.values())) == 0


def writable_copy(corpus: Path, store: Path) -> None:
    shutil.copytree(corpus / "store", store, ignore=shutil.ignore_patterns("LOCK"))
    for p in [store, *store.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)


def test_rocksdb_database_without_a_whole_copy_is_refused_naming_it(tmp_path):
    """CURRENT naming a MANIFEST that is not there (RocksDB rolling its MANIFEST, seen half-way) on every try:
    a StoreError naming the folder, nothing written into DEST."""
    corpus, config = rocksdb_corpus()
    store = tmp_path / "store"
    writable_copy(corpus, store)
    (store / "consumequeue" / "CURRENT").write_text("MANIFEST-000099\n")
    with pytest.raises(StoreError, match=r"consumequeue: no consistent copy .* tries: MANIFEST-000099 vanished"):
        snapshot_store(store, str(tmp_path / "refused"), config)
    assert not (tmp_path / "refused" / MANIFEST_NAME).exists()


def test_rocksdb_units_past_the_commitlog_are_refused(tmp_path):
    """A database whose units reach past the CommitLog's valid end (its tail zeroed: not the CommitLog they
    were written with) is a StoreError naming the database, before DEST holds a manifest."""
    corpus, config = rocksdb_corpus()
    store = tmp_path / "store"
    writable_copy(corpus, store)
    segment = sorted((store / "commitlog").iterdir())[-1]
    end = store_view(corpus / "store", config)["end"] - int(segment.name)
    with open(segment, "r+b") as f:
        f.seek(end - 50_000)
        f.write(bytes(50_000))
    with pytest.raises(StoreError, match=r"consumequeue: the RocksDB ConsumeQueues reach CommitLog offset \d+, past "
                                         r"its valid end"):
        snapshot_store(store, str(tmp_path / "refused"), config)
    assert not (tmp_path / "refused" / MANIFEST_NAME).exists()


def test_rocksdb_manifest_growing_while_copied(tmp_path):
    """Another process appends to the MANIFEST without a pause (as RocksDB does at each flush, more slowly): the
    copy is taken in a moment it held still (else refused, naming the folder), and it opens with the records
    of the source as it was then and reads as the source."""
    corpus, config = rocksdb_corpus()
    store = tmp_path / "store"
    writable_copy(corpus, store)
    manifest = store / "consumequeue" / (store / "consumequeue" / "CURRENT").read_text().strip()
    original = manifest.read_bytes()
    grower = subprocess.Popen([sys.executable, "-c", "import os, sys\nfd = os.open(sys.argv[1], os.O_WRONLY | "
                               "os.O_APPEND)\nwhile True: os.write(fd, b'\\0')", str(manifest)])
    try:
        while manifest.stat().st_size == len(original):
            time.sleep(0.01)
        try:
            doc = snapshot_store(store, str(tmp_path / "snap"), config)
        except StoreError as e:
            assert "consumequeue: no consistent copy" in str(e) and "MANIFEST grew" in str(e)
            return
    finally:
        grower.kill()
        grower.wait()
    copied = (tmp_path / "snap" / "consumequeue" / manifest.name).read_bytes()
    assert copied.startswith(original) and not copied[len(original):].strip(b"\0")
    manifest.write_bytes(original)
    assert database_records(tmp_path / "snap" / "consumequeue") == database_records(store / "consumequeue")
    assert_snapshot_matches(store, tmp_path / "snap", config, doc, strict_verify=False)


@pytest.mark.parametrize("corpus", dledger_corpora(), ids=case_id)
def test_dledger_store_is_refused(corpus, tmp_path):
    with pytest.raises(UnsupportedLayoutError, match="DLedger"):
        snapshot_store(corpus / "store", str(tmp_path / "snap"), load_config(corpus))
    code, _ = run_cli(["snapshot", "--config", corpus / "store.properties", corpus / "store", tmp_path / "snap2"])
    assert code == 1


def test_source_is_never_written(tmp_path):
    config = small_config()
    store, dest = tmp_path / "store", tmp_path / "snap"
    write(store, 0, 300, config)
    before = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in store.rglob("*")}
    for p in store.rglob("*"):
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        snapshot_store(store, str(dest), config)
    finally:
        for p in store.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
    assert {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in store.rglob("*")} == before
    shutil.rmtree(dest)
