"""Damaged and hostile stores: typed errors naming file and offset, never a crash or a hang."""

from __future__ import annotations

import contextlib
import random
import signal
import struct
from pathlib import Path

import pytest

from rmqsource.errors import CorruptRecordError, NotAStoreError, OptionError, RmqError
from rmqsource.format.indexfile import entry_position, slot_position
from rmqsource.format.javahash import index_key_hash
from rmqsource.store.commitlog import CommitLog
from rmqsource.store.layout import StoreLayout
from rmqsource.store.reader import GetMessageStatus, MessageStoreReader

from golden import copy_store, corpora, load_config
from fuzz_stores import read_whole_store

pytestmark = pytest.mark.unit

CORPUS = corpora()[0] if corpora() else None
needs_corpus = pytest.mark.skipif(CORPUS is None, reason="no golden corpus")


@pytest.fixture
def store(tmp_path):
    return copy_store(CORPUS / "store", tmp_path / "store")


def first_unit(store: Path, topic="TopicTest", qid=0, n=0):
    cq = sorted((store / "consumequeue" / topic / str(qid)).iterdir())[0]
    phy, size, code = struct.unpack_from(">qiq", cq.read_bytes(), n * 20)
    return phy, size, code


@contextlib.contextmanager
def no_hang(seconds: float):
    """Fail (instead of hanging the suite) when the body runs longer than ``seconds``."""
    def expire(signum, frame):
        raise TimeoutError(f"still running after {seconds} s: a read loop does not end")
    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def poke(path: Path, offset: int, data: bytes):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


@needs_corpus
@pytest.mark.parametrize("field_offset,value", [
    (0, struct.pack(">i", 0x7FFFFFFF)),        # huge totalSize
    (0, struct.pack(">i", -5)),                # negative totalSize
    (4, b"\xde\xad\xbe\xef"),                   # bad magic
])
def test_damaged_record_under_a_unit_is_a_typed_error(store, field_offset, value):
    phy, size, _ = first_unit(store, n=1)
    segment = store / "commitlog" / f"{0:020d}"
    poke(segment, phy + field_offset, value)
    with MessageStoreReader(store, load_config(CORPUS)) as reader:
        with pytest.raises(CorruptRecordError) as info:
            reader.get_message("g", "TopicTest", 0, 1, 1)
    assert info.value.file == str(segment)
    assert info.value.offset == phy
    assert str(segment) in str(info.value) and f"offset {phy}" in str(info.value)


@needs_corpus
def test_negative_body_length_is_a_typed_error(store):
    phy, size, _ = first_unit(store, n=2)
    segment = store / "commitlog" / f"{0:020d}"
    sys_flag = struct.unpack_from(">i", segment.read_bytes(), phy + 36)[0]
    body_length_at = 68 + (20 if sys_flag & 0x10 else 8) + (20 if sys_flag & 0x20 else 8)
    poke(segment, phy + body_length_at, struct.pack(">i", -1000))
    with MessageStoreReader(store, load_config(CORPUS)) as reader:
        with pytest.raises(CorruptRecordError):
            reader.get_message("g", "TopicTest", 0, 2, 1)


@needs_corpus
def test_walk_over_random_bytes_stops_without_raising(store):
    rng = random.Random(7)
    segment = store / "commitlog" / f"{262144:020d}"
    data = bytearray(segment.read_bytes())
    for i in range(1000, len(data), 997):
        data[i:i + 8] = rng.randbytes(8)
    segment.write_bytes(bytes(data))
    cl = CommitLog(StoreLayout.for_root(store))
    steps = list(cl.walk(262144, check_crc=True))
    assert steps and steps[-1].decoded.kind.name in ("END", "CORRUPT")
    cl.close()


@needs_corpus
def test_index_chain_loop_terminates(store):
    config = load_config(CORPUS)
    h = config.max_hash_slot_num
    index = sorted((store / "index").iterdir())[0]
    data = bytearray(index.read_bytes())
    slot = index_key_hash("TopicTest#k1") % h
    entry_no = struct.unpack_from(">i", data, slot_position(slot))[0]
    assert entry_no > 0
    # Point the chain's first entry at itself and at a later entry: a loop.
    struct.pack_into(">i", data, entry_position(h, entry_no) + 16, entry_no)
    index.write_bytes(bytes(data))
    with MessageStoreReader(store, config) as reader:
        result = reader.query("TopicTest", "k1", 64)
    assert len(result.messages) <= 1


@needs_corpus
def test_consume_queue_unit_pointing_into_garbage(store):
    cq = sorted((store / "consumequeue" / "TopicTest" / "0").iterdir())[0]
    phy, size, code = first_unit(store, n=3)
    poke(cq, 3 * 20, struct.pack(">qiq", phy + 7, size, code))  # misaligned
    with MessageStoreReader(store, load_config(CORPUS)) as reader:
        with pytest.raises(CorruptRecordError) as info:
            reader.get_message("g", "TopicTest", 0, 3, 1)
        assert "commitlog" in info.value.file


@needs_corpus
def test_truncated_segment_file_is_not_a_crash(store):
    segment = store / "commitlog" / f"{786432:020d}"
    with open(segment, "r+b") as f:
        f.truncate(50_000)
    with MessageStoreReader(store, load_config(CORPUS)) as reader:
        assert reader.commit_log_max_offset <= 786432 + 50_000
        for topic, qid in reader.queue_keys():
            for result in reader.get_loop("g", topic, qid, 0, 64):
                for m in result.messages:
                    assert m.record.phy_offset + m.record.store_size <= reader.commit_log_max_offset


@needs_corpus
def test_hostile_topic_names_never_leave_the_store(store):
    with MessageStoreReader(store, load_config(CORPUS)) as reader:
        result = reader.get_message("g", "../x", 0, 0, 1)
        assert result.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
        with pytest.raises(OptionError):
            reader.layout.queue_dir("../../etc", 0)


def test_not_a_store(tmp_path):
    with pytest.raises(NotAStoreError):
        MessageStoreReader(tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(RmqError):
        MessageStoreReader(tmp_path / "file")


@needs_corpus
@pytest.mark.parametrize("topics", [None, "TopicTest"])
def test_segment_cut_mid_record_is_corruption_for_spark_reads(store, topics):
    """A CommitLog segment cut inside a record: the whole-store and the queue decode both raise, naming the file."""
    segment = store / "commitlog" / f"{262144:020d}"
    with open(segment, "r+b") as f:
        f.truncate(61131)
    with no_hang(10):
        with pytest.raises(CorruptRecordError) as info:
            read_whole_store(store, CORPUS, topics=topics)
    assert info.value.file == str(segment)
    assert info.value.offset is not None and f"offset {info.value.offset}" in str(info.value)


def _record_in_segment(store: Path, segment_start: int, k: int):
    """(phyOffset, record, field positions) of the k-th message of a CommitLog segment."""
    from fuzz_stores import _record_fields
    from rmqsource.format.record import Kind
    cl = CommitLog(StoreLayout.for_root(store))
    try:
        steps = [s for s in cl.walk(segment_start) if s.decoded.kind is Kind.MESSAGE
                 and s.segment.start_offset == segment_start]
    finally:
        cl.close()
    step = steps[k]
    return step.phy_offset, step.decoded.record, _record_fields(step.decoded.record)


@needs_corpus
@pytest.mark.parametrize("crashed", [False, True])
def test_zeroed_topic_is_corruption_and_recovery_truncates_there(store, crashed):
    from rmqsource.store.recovery import recover_store
    config = load_config(CORPUS)
    seg_start = 786432
    phy, rec, fields = _record_in_segment(store, seg_start, 10)
    at, width = fields["topic"]
    segment = store / "commitlog" / f"{seg_start:020d}"
    poke(segment, phy - seg_start + at, bytes(width))
    with MessageStoreReader(store, config) as reader:
        with pytest.raises(CorruptRecordError) as info:
            reader.get_message("g", rec.topic, rec.queue_id, rec.queue_offset, 1)
    assert (info.value.file, info.value.offset) == (str(segment), phy - seg_start)
    with pytest.raises(CorruptRecordError) as info:
        read_whole_store(store, CORPUS)
    assert (info.value.file, info.value.offset) == (str(segment), phy - seg_start)
    if crashed:
        (store / "abort").write_bytes(b"")
    report = recover_store(store, config, mark_clean=True)
    with MessageStoreReader(store, config) as reader:
        if crashed:
            # The abnormal scan walks every record (checkMessageAndReturnSize): the valid end is the damaged
            # record, which recovery truncates, and every queue now ends before it.
            assert report.commit_log_max_offset == reader.commit_log_max_offset == phy
            assert reader.queue_max_offset(reader.consume_queue(rec.topic, rec.queue_id)) == rec.queue_offset
            for topic, qid in reader.queue_keys():
                for result in reader.get_loop("g", topic, qid, 0, 32):
                    assert all(m.record.phy_offset < phy for m in result.messages)
        else:
            # Normal recovery validates from the last dispatched record on: the damaged record behind it
            # stays, and reading it stays a typed error.
            with pytest.raises(CorruptRecordError):
                reader.get_message("g", rec.topic, rec.queue_id, rec.queue_offset, 1)


@needs_corpus
def test_index_header_with_hostile_index_count_is_a_typed_error(store):
    config = load_config(CORPUS)
    index = sorted((store / "index").iterdir())[-1]
    data = bytearray(index.read_bytes())
    struct.pack_into(">i", data, 36, 2 ** 31 - 1)                       # indexCount
    slot = index_key_hash("TopicTest#k1") % config.max_hash_slot_num
    struct.pack_into(">i", data, slot_position(slot), 2 ** 31 - 2)    # a slot past the entries
    index.write_bytes(bytes(data))
    with MessageStoreReader(store, config) as reader:
        with pytest.raises(CorruptRecordError) as info:
            reader.query("TopicTest", "k1", 64)
    assert info.value.file == str(index) and info.value.offset is not None


@needs_corpus
def test_truncated_last_index_file_names_that_file(store):
    config = load_config(CORPUS)
    files = sorted((store / "index").iterdir())
    assert len(files) > 1
    with open(files[-1], "r+b") as f:
        f.truncate(40 + 84 * 100)          # a size that also fits another geometry (H=100, N=400)
    with MessageStoreReader(store, config) as reader:
        with pytest.raises(CorruptRecordError) as info:
            reader.query("TopicTest", "k1", 64)
    assert info.value.file == str(files[-1])


def _compressed_store(root: Path, n: int, inflated: int) -> Path:
    import zlib
    from rmqsource.store.writer import Message, MessageStoreWriter
    body = zlib.compress(b"\0" * inflated, 9)
    with MessageStoreWriter(root) as w:
        w.put_messages([Message(topic="Z", queue_id=0, body=body, sys_flag=1) for _ in range(n)])
        w.put_messages([Message(topic="Z", queue_id=0, body=b"plain")])
    return root


@pytest.mark.parametrize("topics", [None, "Z"])
def test_inflated_bodies_are_bounded_per_batch_and_per_task(tmp_path, topics):
    from rmqsource.errors import DecompressionError
    from rmqsource.spark.batch import ReadSpec, read_partition
    from rmqsource.spark.options import parse_options
    from rmqsource.spark.planning import plan
    from rmqsource.spark.pushdown import Pushed
    store = _compressed_store(tmp_path / "store", 12, 300_000)
    raw = {"path": str(store), "decompress": "true", "maxInflatedBatchBytes": str(1 << 20)}
    if topics:
        raw["topics"] = topics
    opts = parse_options(raw)
    spec = ReadSpec(opts, Pushed(), ("body", "commitLogOffset"))
    batches = [b for part in plan(opts, Pushed()) for b in read_partition(spec, part)]
    sizes = [sum(len(v) for v in b.column("body").to_pylist()) for b in batches]
    assert sum(b.num_rows for b in batches) == 13 and len(batches) >= 4      # 3.6 MB flushed in batches of <= 1 MiB
    assert all(s <= 1 << 20 for s in sizes)
    offsets = [o for b in batches for o in b.column("commitLogOffset").to_pylist()]
    assert offsets == sorted(offsets)                                       # order kept across the flushes
    raw["maxInflatedTaskBytes"] = str(2 << 20)
    opts = parse_options(raw)
    with pytest.raises(DecompressionError) as info:
        for part in plan(opts, Pushed()):
            for _ in read_partition(ReadSpec(opts, Pushed(), ("body",)), part):
                pass
    assert info.value.file.startswith(str(store / "commitlog")) and info.value.offset is not None
    assert "maxInflatedTaskBytes" in str(info.value)


def test_error_messages_are_bounded():
    from rmqsource.errors import FormatError, OptionError
    huge = "ab" * 5_000_000
    for exc in (FormatError(huge, file="f", offset=1), OptionError(huge), CorruptRecordError(huge)):
        assert len(str(exc)) < 5000


def test_consume_queue_with_a_missing_middle_file(tmp_path):
    """A ConsumeQueue whose second file is gone: queue bounds, getMessage and Spark reads stay typed."""
    import os
    from rmqsource.store.config import StoreConfig
    from rmqsource.store.writer import Message, MessageStoreWriter
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "store.properties").write_text("mappedFileSizeConsumeQueue=1200\n")
    config = StoreConfig.from_properties_file(tmp_path / "conf" / "store.properties")
    root = tmp_path / "store"
    with MessageStoreWriter(root, config) as w:
        w.put_messages([Message(topic="T", queue_id=0, body=b"x" * 50) for _ in range(250)])
    files = sorted((root / "consumequeue" / "T" / "0").iterdir())
    assert len(files) == 5
    os.unlink(files[1])
    with no_hang(10), MessageStoreReader(root, config) as reader:
        (info,) = reader.queue_infos()
        assert 0 <= info.min_offset <= info.max_offset == 250
        served = [m.record.queue_offset for r in reader.get_loop("g", "T", 0, info.min_offset, 32)
                  for m in r.messages]
        assert served and all(not 60 <= o < 120 for o in served)          # nothing from the missing file
    assert read_whole_store(root, tmp_path / "conf") == 250
    with pytest.raises(CorruptRecordError, match="has a gap") as err:      # spec: a gap is corruption
        read_whole_store(root, tmp_path / "conf", topics="T")
    assert err.value.file == str(files[1])


def test_consume_queue_file_size_comes_from_the_names_when_the_first_file_is_cut(tmp_path):
    """With no size configured, a cut-short first file does not set the size: the file names do."""
    from rmqsource.store.config import StoreConfig
    from rmqsource.store.consumequeue import ConsumeQueue
    from rmqsource.store.writer import Message, MessageStoreWriter
    config = StoreConfig.from_mapping({"mappedFileSizeConsumeQueue": "1200"})
    root = tmp_path / "store"
    with MessageStoreWriter(root, config) as w:
        w.put_messages([Message(topic="T", queue_id=0, body=b"x" * 50) for _ in range(150)])
    queue_dir = root / "consumequeue" / "T" / "0"
    first = sorted(queue_dir.iterdir())[0]
    with open(first, "r+b") as f:
        f.truncate(1020)
    q = ConsumeQueue(queue_dir, "T", 0)
    try:
        assert q.file_size == 1200
        for i in (50, 51, 59, 60, 118, 119, 120, 149):        # around both file ends
            units = q.read_units(i, 1)
            assert len(units) == (0 if 51 <= i < 60 else 1), i
        assert len(q.read_units(0, 150)) == 51                  # stops at the cut
        assert len(q.read_units(60, 90)) == 90
    finally:
        q.close()
