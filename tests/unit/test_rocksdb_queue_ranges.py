"""Range reads of RocksDB ConsumeQueue units (rmqsource/store/rocksdb_queue.py over rmqsource/io/rocksdb.py).

Queues of thousands of units (the broker corpora's queues hold a few dozen): a range is one bounded iterator
pass, so these check whole queues and ranges come back complete (an upper bound released while its iterator
was read once ended a scan after 96 keys: see rmqsource/io/rocksdb.py), that a gap keeps the run from the
start, that neighbouring queues do not leak into a range, and that the database folder is left as it was;
and that the units kept with a snapshot (UnitBlocks) answer every range as the database does, cold or warm.
"""

from __future__ import annotations

import hashlib
import os
import random

import numpy as np
import pytest

from rmqsource.format.rocksdb_queue import encode_cq_key, encode_cq_value, encode_offset_key, encode_offset_value
from rmqsource.io.rocksdb import ReadOnlyRocksDb
from rmqsource.errors import CorruptRecordError
from rmqsource.format.consumequeue import CQ_UNIT_DTYPE
from rmqsource.store.rocksdb_queue import UNIT_BLOCK, RocksDbQueueStore, UnitBlocks
from rmqsource.store.layout import StoreLayout

rocksdict = pytest.importorskip("rocksdict", reason="rmqsource[rocksdb]")
pytestmark = pytest.mark.unit

N = 5_000
W_MISSING = set(range(100)) | {2048, 2049}          # queue W: compacted head, a gap at a block's start
W_MALFORMED = 3500                                  # ... and one value of the wrong length
V_END = 4500                                        # queue V: its max entry's next offset; keys go on to N


def unit(topic: str, qid: int, off: int) -> tuple[int, int, int]:
    return (qid * 10_000_000 + off * 100, 100 + off % 7, hash((topic, off)) & 0xFFFF)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("rdb") / "consumequeue"
    opts = rocksdict.Options(raw_mode=True)
    opts.create_if_missing(True)
    db = rocksdict.Rdict(str(path), options=opts)
    offsets = db.create_column_family("offset", rocksdict.Options(raw_mode=True))
    for topic, qid in (("T", 0), ("T", 1), ("U", 0)):
        for off in range(N):
            if topic == "U" and 3000 <= off < 3010:
                continue                                   # a gap (units compacted away)
            db[encode_cq_key(topic, qid, off)] = encode_cq_value(*unit(topic, qid, off), 0)
        offsets[encode_offset_key(topic, qid, max_entry=True)] = encode_offset_value(unit(topic, qid, N - 1)[0], N - 1)
    for off in range(N):
        if off not in W_MISSING:
            value = encode_cq_value(*unit("W", 0, off), 0)
            db[encode_cq_key("W", 0, off)] = value[:20] if off == W_MALFORMED else value
    offsets[encode_offset_key("W", 0, max_entry=True)] = encode_offset_value(unit("W", 0, N - 1)[0], N - 1)
    for off in range(N):
        db[encode_cq_key("V", 0, off)] = encode_cq_value(*unit("V", 0, off), 0)
    offsets[encode_offset_key("V", 0, max_entry=True)] = encode_offset_value(unit("V", 0, V_END - 1)[0], V_END - 1)
    db.flush()
    db.close()
    (path / "rocksdict-config.json").unlink(missing_ok=True)
    return path


def tree(path):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.iterdir())}


def as_tuples(units: np.ndarray) -> list[tuple[int, int, int]]:
    return list(zip(units["phy_offset"].tolist(), units["size"].tolist(), units["tags_code"].tolist()))


def test_whole_queues_and_ranges(folder):
    before = tree(folder)
    with ReadOnlyRocksDb(folder) as db:
        store = RocksDbQueueStore(StoreLayout.for_root(folder.parent), db)
        assert store.list_queues() == [("T", 0), ("T", 1), ("U", 0), ("V", 0), ("W", 0)]
        for qid in (0, 1):
            q = store.queue("T", qid)
            assert q.max_offset == N and q.first_file_start_offset == 0
            assert as_tuples(q.read_units(0, N)) == [unit("T", qid, o) for o in range(N)]
            assert as_tuples(q.read_units(1234, 2000)) == [unit("T", qid, o) for o in range(1234, 3234)]
            assert as_tuples(q.read_units(N - 3, 100)) == [unit("T", qid, o) for o in range(N - 3, N)]
            assert q.min_offset(0, engine_v5=True) == 0
            assert q.min_offset(unit("T", qid, 777)[0], engine_v5=True) == 777          # point reads of a search
        u = store.queue("U", 0)
        assert as_tuples(u.read_units(2990, 100)) == [unit("U", 0, o) for o in range(2990, 3000)]   # up to the gap
        assert len(u.read_units(3005, 10)) == 0                                                   # in the gap
        assert as_tuples(u.read_units(3010, N)) == [unit("U", 0, o) for o in range(3010, N)]
    assert tree(folder) == before


def test_range_helpers_hold_their_bound_for_the_whole_pass(folder):
    with ReadOnlyRocksDb(folder) as db:
        first, end = encode_cq_key("T", 0, 0), encode_cq_key("T", 0, N)
        assert len(db.values_range("default", first, end)) == N
        keys, values = db.range("default", first, end, N + 10)
        assert len(keys) == len(values) == N and keys[-1] == encode_cq_key("T", 0, N - 1)
        assert db.first_key("default", encode_cq_key("T", 0, 4321), end) == encode_cq_key("T", 0, 4321)
        assert db.first_key("default", end, encode_cq_key("T", 0, N + 5)) is None


STARTS = (0, 99, 100, 1023, 1024, 2047, 2048, 2050, 2990, 3005, 3010, 3072, 3499, 3500, 4095, 4999, 5000)
COUNTS = (1, 7, 1023, 1024, 1025, 2100)


def answer(read, start, count):
    try:
        units = read(start, count)
        assert units.dtype == CQ_UNIT_DTYPE
        return units.tobytes()
    except CorruptRecordError as e:
        return str(e)


@pytest.mark.parametrize("budget", [64 << 20, 3 * UNIT_BLOCK * 20])
def test_kept_units_answer_as_the_database(folder, budget):
    """Every range, in a shuffled order so that each meets kept, partly kept and unkept blocks, cold and warm
    (and with a budget of a few blocks, so blocks are dropped meanwhile): the answer of a direct read."""
    cases = [(t, q, s, c) for t, q in (("T", 0), ("U", 0), ("W", 0)) for s in STARTS for c in COUNTS]
    random.Random(7).shuffle(cases)
    with ReadOnlyRocksDb(folder) as db:
        db.memo["units"] = UnitBlocks(budget)
        store = RocksDbQueueStore(StoreLayout.for_root(folder.parent), db)
        queues = {key: store.queue(*key) for key in (("T", 0), ("U", 0), ("W", 0))}
        for _ in range(2):
            for topic, qid, start, count in cases:
                q = queues[(topic, qid)]
                assert answer(q._read, start, count) == answer(q._read_direct, start, count), (topic, qid, start, count)
        assert db.memo["units"].nbytes <= budget
        w = queues[("W", 0)]
        assert as_tuples(w._read(100, 3400)) == [unit("W", 0, o) for o in range(100, 2048)]
        assert as_tuples(w._read(2050, 1450)) == [unit("W", 0, o) for o in range(2050, 3500)]
        with pytest.raises(CorruptRecordError, match="unit 3500 has a 20-byte value"):
            w._read(3000, 1024)


def test_a_kept_block_ends_at_the_queues_last_unit_in_the_database(folder):
    """Keys past a queue's max entry are not read as its units (a dispatch the broker had not finished): the
    block holding the queue's last unit is kept up to it from one values pass, its keys not read again."""
    with ReadOnlyRocksDb(folder) as db:
        v = RocksDbQueueStore(StoreLayout.for_root(folder.parent), db).queue("V", 0)
        assert v.max_offset == V_END
        ranges = []
        read_range, db.range = db.range, lambda *a: ranges.append(a) or read_range(*a)
        for _ in range(2):                                              # cold, then from the kept blocks
            assert as_tuples(v.read_units(0, N)) == [unit("V", 0, o) for o in range(V_END)]
            assert as_tuples(v.read_units(V_END - 5, 10)) == [unit("V", 0, o) for o in range(V_END - 5, V_END)]
        assert ranges == []
        assert len(db.memo["units"].get(("V", 0, V_END // UNIT_BLOCK))) == V_END % UNIT_BLOCK


def test_kept_units_are_not_changed_by_a_caller(folder):
    with ReadOnlyRocksDb(folder) as db:
        q = RocksDbQueueStore(StoreLayout.for_root(folder.parent), db).queue("T", 0)
        first = q.read_units(0, N)
        first["size"] = 0
        part = q.read_units(10, 5)
        part["tags_code"] = 0
        assert as_tuples(q.read_units(0, N)) == [unit("T", 0, o) for o in range(N)]
        assert db.memo["units"].nbytes > 0
    assert db.memo == {}                                 # dropped with the snapshot


def test_a_killed_process_shadow_is_removed_by_the_next_open(folder, tmp_path, monkeypatch):
    """A shadow (with its hard links to the broker's table files) left by a killed process is removed by
    the next open on the machine; a live process's shadow and other folders stay."""
    import subprocess
    import sys
    import tempfile
    from rmqsource.io.rocksdb import SHADOW_PREFIX
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    killed.kill()
    killed.wait()
    stale = tmp_path / f"{SHADOW_PREFIX}{killed.pid}-abc"
    live = tmp_path / f"{SHADOW_PREFIX}{os.getppid()}-def"
    other = tmp_path / f"{SHADOW_PREFIX}not-a-pid"
    for d in (stale, live, other):
        d.mkdir()
    os.link(next(folder.glob("*.sst")), stale / "000009.sst")
    with ReadOnlyRocksDb(folder) as db:
        assert db.column_families
        mine = [p.name for p in tmp_path.iterdir() if p.name.startswith(f"{SHADOW_PREFIX}{os.getpid()}-")]
        assert len(mine) == 1
    assert not stale.exists() and live.exists() and other.exists()
    assert not any(p.name.startswith(f"{SHADOW_PREFIX}{os.getpid()}-") for p in tmp_path.iterdir())
