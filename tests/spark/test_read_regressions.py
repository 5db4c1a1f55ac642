"""Reads of damaged or edge-case copies of the golden stores that once gave a wrong answer or a false error.

Spark cases run through the source in the session's mode (the JVM scan or the Python path, see
conftest) and compare with what the store holds; ``rmq verify`` cases run both walks.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from golden import GOLDEN_ROOT, case_id, copy_store, corpora, corpus_of, crash_cases, is_dledger, load_config


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

@pytest.mark.spark
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

@pytest.mark.spark
def test_queue_offset_at_int64_max_is_a_row(spark, g1_store):
    """A record whose QUEUEOFFSET holds Long.MAX_VALUE is a valid record (the engine checks no
    queue offset when it reads one): a read of every record returns it, in both modes."""
    def every_record(where=None):
        return read(spark, g1_store, where, excludeInternalTopics="false")

    every = every_record()
    segment = g1_store / "commitlog" / f"{262144:020d}"
    phy = 262144 + 83758 - 20                 # the record whose QUEUEOFFSET field is at 83758
    assert any(r[0] == phy for r in every)
    poke(segment, 83758, struct.pack(">q", I64_MAX))
    got = every_record()
    assert len(got) == len(every) == 892
    assert [r for r in got if r[0] == phy][0][3] == I64_MAX
    assert [r[0] for r in every_record(f"queueOffset = {I64_MAX}")] == [phy]
    assert [r[0] for r in every_record(f"queueOffset >= {I64_MAX}")] == [phy]
    assert every_record(f"queueOffset > {I64_MAX - 1} AND queueOffset < 0") == []


# ------------------------------------------------------------------ tagsCode past a truncated ConsumeQueue file

@pytest.mark.spark
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


# ------------------------------------------------------------------ streams over crash stores

CRASH_WITH_UNITS_AHEAD = [c for c in crash_cases() if c.name in ("cq_ahead", "garbage_tail")]


@pytest.mark.spark
@pytest.mark.parametrize("case", CRASH_WITH_UNITS_AHEAD, ids=case_id)
def test_stream_from_earliest_admits_no_unit_past_the_valid_end(spark, tmp_path, case):
    """Several units of a queue point past the valid CommitLog end (crash stores): the stream stops
    before the first of them, as the batch read does, and returns the batch read's rows."""
    corpus = corpus_of(case)
    config = str(corpus / "store.properties")
    cols = ["topic", "queueId", "queueOffset", "commitLogOffset", "tags"]
    batch = sorted(tuple(r) for r in spark.read.format("rmq").option("config", config)
                   .option("topicPattern", ".*").load(str(case / "store")).select(*cols).collect())
    got = []
    q = (spark.readStream.format("rmq").option("config", config).option("topicPattern", ".*")
         .option("startingOffsets", "earliest").load(str(case / "store")).select(*cols)
         .writeStream.foreachBatch(lambda df, _: got.extend(tuple(r) for r in df.collect()))
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    assert q.awaitTermination(240), "query did not finish"
    assert q.exception() is None, str(q.exception())
    assert sorted(got) == batch
    assert len(batch) > 500


# ------------------------------------------------------------------ errors name the file at fault

def verify_files(store: Path) -> tuple[set, set]:
    """Files named by the Python walk's problems and by the JVM walk's (the same when the jar is built)."""
    from rmqsource.commands.verify_jvm import jvm_command, verify_store_jvm
    from rmqsource.store.verify import verify_store
    config = load_config(G1)
    python = verify_store(store, config)
    jvm = verify_store_jvm(store, config) if jvm_command() is not None else python
    assert [p.to_json() for p in jvm.problems] == [p.to_json() for p in python.problems]
    return {p.file for p in python.problems}, {p.file for p in jvm.problems}


@pytest.mark.unit
def test_verify_names_the_commit_log_segment_that_grew(g1_store):
    """One byte appended to the second of four segments: the segment size still comes out 262144
    (the file names are 262144 apart), so only that file is reported, not the intact ones."""
    with open(g1_store / "commitlog" / f"{262144:020d}", "ab") as f:
        f.write(b"\0")
    python, jvm = verify_files(g1_store)
    assert python == jvm == {f"commitlog/{262144:020d}"}


@pytest.mark.unit
@pytest.mark.parametrize("name,extra", [(f"{0:020d}", 1), (f"{1200:020d}", 1), (f"{1200:020d}", 20)])
def test_verify_names_the_consume_queue_file_that_grew(g1_store, name, extra):
    with open(g1_store / "consumequeue" / "bench-topic_v2" / "0" / name, "ab") as f:
        f.write(b"\0" * extra)
    python, jvm = verify_files(g1_store)
    assert python == jvm == {f"consumequeue/bench-topic_v2/0/{name}"}


@pytest.mark.spark
def test_read_of_a_store_whose_segment_grew_returns_every_row(spark, g1_store):
    """The byte past the blank at the end of the grown segment is not data: every row is read (it
    used to fail, naming the first segment as ending before the valid CommitLog end)."""
    every = read(spark, G1 / "store")
    with open(g1_store / "commitlog" / f"{262144:020d}", "ab") as f:
        f.write(b"\0")
    assert read(spark, g1_store) == every
    assert read(spark, g1_store, "commitLogOffset >= 262144 AND commitLogOffset < 600000") == \
        [r for r in every if 262144 <= r[0] < 600000]


@pytest.mark.spark
@pytest.mark.parametrize("split", ["262144", "65536"])
def test_a_segment_file_longer_than_its_segment_reads_no_record_twice(spark, g1_store, split):
    """A first segment cut inside its records and extended sparse over the next segments' range:
    split CommitLog partitions stay inside the segment (they once read the next files' records
    through the long file's range as well, returning rows twice)."""
    first = g1_store / "commitlog" / f"{0:020d}"
    os.truncate(first, 245760)
    os.truncate(first, 4 * 262144)
    once = read(spark, g1_store)
    rows = read(spark, g1_store, maxBytesPerPartition=split)
    assert len({r[0] for r in rows}) == len(rows)
    assert rows == once


@pytest.mark.spark
def test_topic_read_past_a_truncated_consume_queue_file_names_that_file(spark, g1_store):
    qfile = g1_store / "consumequeue" / "bench-topic_v2" / "0" / f"{0:020d}"
    os.truncate(qfile, 972)
    with pytest.raises(Exception) as info:
        read(spark, g1_store, topics="bench-topic_v2")
    assert f"{qfile}, offset 960: ConsumeQueue bench-topic_v2:0 ends at unit 48" in str(info.value)


@pytest.mark.unit
@pytest.mark.parametrize("case", [c for c in crash_cases() if c.name in ("cq_ahead", "garbage_tail", "torn_tail",
                                                                         "torn_header")], ids=case_id)
def test_stream_tail_of_every_queue_is_the_batch_reads_max_offset(case):
    """The Python stream's driver (no Spark): each queue's admitted tail on a crashed store is the
    batch read's max offset, which stops at the first unit at or past the valid CommitLog end."""
    from rmqsource.spark.store_watcher import StoreWatcher
    from rmqsource.spark.stream_options import parse_stream_options
    from rmqsource.store.reader import MessageStoreReader
    corpus = corpus_of(case)
    root = str(case / "store")
    watcher = StoreWatcher(parse_stream_options({"path": root, "topicPattern": ".*",
                                                 "config": str(corpus / "store.properties")}))
    try:
        with MessageStoreReader(root, load_config(corpus)) as reader:
            for key in watcher.keys():
                assert watcher.max_offset(key) == reader.queue_max_offset(reader.consume_queue(*key)), key
    finally:
        watcher.close()


@pytest.mark.unit
@pytest.mark.parametrize("corpus", [c for c in corpora() if is_dledger(c)], ids=case_id)
def test_stream_tail_stops_at_a_failing_dledger_header_before_valid_ones(corpus, tmp_path):
    """A DLedger entry header failing recovery's pos check in the middle of the last data file, the
    entries after it intact: the engine's data ends there, so the Python stream admits no unit past it
    (each unit's own header still passes; the JVM stream and the batch read stop at the same end)."""
    import struct

    from rmqsource.spark.store_watcher import StoreWatcher
    from rmqsource.spark.stream_options import parse_stream_options
    from rmqsource.store.reader import MessageStoreReader
    store = copy_store(corpus / "store", tmp_path / "store")
    data = sorted((store / "dledger-n0" / "data").iterdir())[-1]
    raw = bytearray(data.read_bytes())
    pos = 0
    for _ in range(10):                                   # the 11th entry of the file
        pos += struct.unpack_from(">i", raw, pos + 4)[0]
    raw[pos + 24:pos + 32] = bytes(8)                     # its pos field
    data.write_bytes(bytes(raw))
    config = load_config(corpus)
    watcher = StoreWatcher(parse_stream_options({"path": str(store), "topicPattern": ".*",
                                                 "config": str(corpus / "store.properties")}))
    try:
        with MessageStoreReader(str(store), config) as reader:
            assert reader.commit_log_max_offset == int(data.name) + pos
            tails = {key: watcher.max_offset(key) for key in watcher.keys()}
            assert tails == {key: reader.queue_max_offset(reader.consume_queue(*key)) for key in tails}
    finally:
        watcher.close()


@pytest.mark.unit
def test_stream_driver_refuses_a_consume_queue_file_cut_short_before_later_files(g1_store):
    """The first ConsumeQueue file of a queue cut to half its size, the next file intact: the stream's
    driver names the cut file and its end (it took the cut file's length as the file size and stopped
    there for good, without a word, while the batch read returns the next file's units)."""
    from rmqsource.errors import CorruptRecordError
    from rmqsource.spark.store_watcher import StoreWatcher
    from rmqsource.spark.stream_options import parse_stream_options
    cut = g1_store / "consumequeue" / "OrderTopic" / "0" / f"{0:020d}"
    os.truncate(cut, 600)
    watcher = StoreWatcher(parse_stream_options({"path": str(g1_store), "topics": "OrderTopic",
                                                 "config": str(G1 / "store.properties")}))
    try:
        assert watcher.max_offset(("OrderTopic", 1)) == 156
        with pytest.raises(CorruptRecordError) as info:
            watcher.max_offset(("OrderTopic", 0))
        assert info.value.file == str(cut) and info.value.offset == 600
        assert "ends at unit 30, 600 of its file's 1200 bytes, and later files follow" in str(info.value)
    finally:
        watcher.close()


@pytest.mark.unit
def test_stream_driver_refuses_a_missing_consume_queue_file_between_others(g1_store):
    """A ConsumeQueue file missing between two others: the stream's driver raises the batch read's gap
    error naming the missing file (it stopped admitting there without a word)."""
    from rmqsource.errors import CorruptRecordError
    from rmqsource.spark.store_watcher import StoreWatcher
    from rmqsource.spark.stream_options import parse_stream_options
    qdir = g1_store / "consumequeue" / "OrderTopic" / "1"
    files = sorted(qdir.iterdir())
    assert len(files) >= 3
    files[1].unlink()
    watcher = StoreWatcher(parse_stream_options({"path": str(g1_store), "topics": "OrderTopic",
                                                 "config": str(G1 / "store.properties")}))
    try:
        with pytest.raises(CorruptRecordError) as info:
            watcher.max_offset(("OrderTopic", 1))
        assert info.value.file == str(files[1]) and "has a gap" in str(info.value)
    finally:
        watcher.close()


# ------------------------------------------------------------------ a gap between ConsumeQueue files

G2 = GOLDEN_ROOT / "rmq533-g2"


@pytest.mark.spark
@pytest.mark.parametrize("action", ["collect", "count"])
def test_consumequeue_gap_is_refused_at_planning_naming_the_missing_file(spark, tmp_path, action):
    """A queue file named far past the others (a gap of ~4.6e17 units, inside int64) is corruption
    (spec §3): planning and the count from ConsumeQueue offsets refuse it at once from the file
    names, naming the missing file, instead of splitting the range unit by unit (which never ended)."""
    import signal
    store = copy_store(G2 / "store", tmp_path / "store")
    qdir = store / "consumequeue" / "OrderTopic" / "0"
    (qdir / "00000000000000001200").rename(qdir / "09223372036854775200")
    df = (spark.read.format("rmq").option("config", str(G2 / "store.properties"))
          .option("topics", "OrderTopic").load(str(store)))

    def too_slow(*_):
        raise TimeoutError("the read did not answer within 120 s")

    previous = signal.signal(signal.SIGALRM, too_slow)
    signal.alarm(120)
    try:
        with pytest.raises(Exception) as err:
            df.count() if action == "count" else df.collect()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    text = str(err.value)
    assert not isinstance(err.value, TimeoutError), text
    assert "CorruptRecordError" in text and "has a gap" in text, text
    assert str(qdir / "00000000000000001200") in text, text


@pytest.mark.spark
@pytest.mark.parametrize("damage", ["cut", "missing"])
def test_a_stream_over_a_damaged_consume_queue_fails_naming_the_file(spark, g1_store, tmp_path, damage):
    """A queue file cut short or missing between two others: the stream fails with the typed error naming
    the file (in either mode), where it used to stop admitting that queue for good without a word."""
    qdir = g1_store / "consumequeue" / "OrderTopic" / "1"
    files = sorted(qdir.iterdir())
    if damage == "cut":
        os.truncate(files[0], 600)
    else:
        files[1].unlink()
    df = (spark.readStream.format("rmq").option("config", str(G1 / "store.properties"))
          .option("topics", "OrderTopic").option("startingOffsets", "earliest").load(str(g1_store)))
    q = (df.writeStream.foreachBatch(lambda d, i: None).option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    with pytest.raises(Exception) as info:
        q.awaitTermination(240)
    text = str(info.value)                # the error's own text, file and offset first (the JVM's names no class)
    if damage == "cut":
        assert f"{files[0]}, offset 600: ConsumeQueue OrderTopic:1 ends at unit 30" in text, text[-2000:]
    else:
        assert f"{files[1]}, offset 0: ConsumeQueue OrderTopic:1 has a gap" in text, text[-2000:]


@pytest.mark.spark
@pytest.mark.parametrize("corpus", [c for c in corpora() if is_dledger(c)], ids=case_id)
def test_a_dledger_header_damaged_between_reads_ends_the_next_read_there(spark, corpus, tmp_path):
    """The same session reads a DLedger store, then a header in the middle of its last data file fails a
    recovery check (file length kept): the next read serves nothing past it, as the engine (the JVM scan
    keeps the walked end per state of the files; a changed file is walked again)."""
    import struct

    from rmqsource.store.reader import MessageStoreReader
    store = copy_store(corpus / "store", tmp_path / "store")

    def topic_rows():
        return (spark.read.format("rmq").option("config", str(corpus / "store.properties"))
                .option("topicPattern", ".*").load(str(store)).select("commitLogOffset").collect())

    before = topic_rows()
    data = sorted((store / "dledger-n0" / "data").iterdir())[-1]
    raw = bytearray(data.read_bytes())
    pos = 0
    for _ in range(10):
        pos += struct.unpack_from(">i", raw, pos + 4)[0]
    raw[pos + 24:pos + 32] = bytes(8)                     # the 11th entry's pos field
    data.write_bytes(bytes(raw))
    stat = data.stat()
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
    after = topic_rows()
    end = int(data.name) + pos
    with MessageStoreReader(str(store), load_config(corpus)) as reader:
        assert reader.commit_log_max_offset == end
    assert {r[0] for r in after} == {r[0] for r in before if r[0] < end}
    assert len(after) < len(before)
