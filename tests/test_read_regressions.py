"""Reads of damaged or edge-case copies of the golden stores that once gave a wrong answer or a false error.

Each case runs through the Spark source in the session's mode (the JVM scan or the Python path, see
conftest) and compares with what the store holds.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from golden import GOLDEN_ROOT, copy_store

pytestmark = pytest.mark.spark

G1 = GOLDEN_ROOT / "rmq497-g1"
I64_MAX = (1 << 63) - 1
ROW = ("commitLogOffset", "topic", "queueId", "queueOffset", "tagsCode")


@pytest.fixture
def g1_store(tmp_path) -> Path:
    return copy_store(G1 / "store", tmp_path / "store")


def read(spark, store: Path, where: str | None = None, **options):
    r = spark.read.format("rmq").option("config", str(G1 / "store.properties"))
    for k, v in options.items():
        r = r.option(k, v)
    df = r.load(str(store))
    if where:
        df = df.where(where)
    return sorted(tuple(x) for x in df.select(*ROW).collect())


def poke(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


# ------------------------------------------------------------------ pushed CommitLog offset bounds

@pytest.mark.parametrize("where,keep", [
    ("commitLogOffset <= 300000", lambda p: p <= 300000),
    ("commitLogOffset < 300000", lambda p: p < 300000),
    ("commitLogOffset > 300000", lambda p: p > 300000),
    ("commitLogOffset >= 300000", lambda p: p >= 300000),
    ("commitLogOffset > 300000 AND commitLogOffset < 600000", lambda p: 300000 < p < 600000),
    ("commitLogOffset >= 262144 AND commitLogOffset <= 262145", lambda p: 262144 <= p <= 262145),
])
def test_offset_bound_inside_a_record_narrows_to_whole_records(spark, where, keep):
    """300000 falls inside the record at 262144 (69075 bytes): the range ends at a record start,
    never inside that record, and the rows are exactly those the bound admits."""
    store = G1 / "store"
    every = read(spark, store)
    got = read(spark, store, where)
    assert got == [r for r in every if keep(r[0])]
    assert got


# ------------------------------------------------------------------ a record field at the int64 extreme

def test_queue_offset_at_int64_max_is_a_row(spark, g1_store):
    """A record whose QUEUEOFFSET holds Long.MAX_VALUE is a valid record (the engine checks no
    queue offset when it reads one): a whole-store read returns it, in both modes."""
    every = read(spark, g1_store)
    segment = g1_store / "commitlog" / f"{262144:020d}"
    phy = 262144 + 83758 - 20                 # the record whose QUEUEOFFSET field is at 83758
    assert any(r[0] == phy for r in every)
    poke(segment, 83758, struct.pack(">q", I64_MAX))
    got = read(spark, g1_store)
    assert len(got) == len(every) == 892
    assert [r for r in got if r[0] == phy][0][3] == I64_MAX
    assert [r[0] for r in read(spark, g1_store, f"queueOffset = {I64_MAX}")] == [phy]
    assert [r[0] for r in read(spark, g1_store, f"queueOffset >= {I64_MAX}")] == [phy]
    assert read(spark, g1_store, f"queueOffset > {I64_MAX - 1} AND queueOffset < 0") == []


# ------------------------------------------------------------------ tagsCode past a truncated ConsumeQueue file

@pytest.mark.parametrize("options", [{}, {"maxBytesPerPartition": str(1 << 18)}])
def test_tags_code_of_units_after_a_truncated_consume_queue_file(spark, g1_store, options):
    """consumequeue/bench-topic_v2/0/00000000000000000000 cut to 972 bytes: units 48..59 are gone
    (tagsCode null, as for any record without a unit), units 60.. in the next file are intact and
    give their tagsCode in both modes."""
    qdir = g1_store / "consumequeue" / "bench-topic_v2" / "0"
    first, second = sorted(qdir.iterdir())
    os.truncate(first, 972)
    data = second.read_bytes()
    units = {60 + i: struct.unpack_from(">qiq", data, i * 20) for i in range(len(data) // 20)}
    rows = {r[3]: r for r in read(spark, g1_store, **options) if r[1] == "bench-topic_v2" and r[2] == 0}
    assert all(rows[o][4] is None for o in range(48, 60))
    live = [o for o, (phy, size, _) in units.items() if size > 0 and o in rows]
    assert len(live) >= 8
    for o in live:
        phy, size, code = units[o]
        assert rows[o][0] == phy and rows[o][4] == code
