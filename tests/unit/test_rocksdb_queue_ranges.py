"""Range reads of RocksDB ConsumeQueue units (rmqsource/store/rocksdb_queue.py over rmqsource/io/rocksdb.py).

Queues of thousands of units (the broker corpora's queues hold a few dozen): a range is one bounded iterator
pass, so these check whole queues and ranges come back complete (an upper bound released while its iterator
was read once ended a scan after 96 keys: see rmqsource/io/rocksdb.py), that a gap keeps the run from the
start, that neighbouring queues do not leak into a range, and that the database folder is left as it was.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from rmqsource.format.rocksdb_queue import encode_cq_key, encode_cq_value, encode_offset_key, encode_offset_value
from rmqsource.io.rocksdb import ReadOnlyRocksDb
from rmqsource.store.rocksdb_queue import RocksDbQueueStore

rocksdict = pytest.importorskip("rocksdict", reason="rmqsource[rocksdb]")
pytestmark = pytest.mark.unit

N = 5_000


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
        store = RocksDbQueueStore(folder, db)
        assert store.list_queues() == [("T", 0), ("T", 1), ("U", 0)]
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
