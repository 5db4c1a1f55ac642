"""Dispatch (reput): ConsumeQueue units and IndexFile entries from the CommitLog.

Idempotence (dispatching again changes no byte), rebuild == incremental, the
spec §5.5 IndexFile worked example, index file rolls, and key lookups
against the engine's query answers.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from rmqsource.store.commitlog import CommitLog
from rmqsource.store.config import StoreConfig
from rmqsource.store.dispatch import ConsumeQueueWriter, Dispatcher, compute_tags_code
from rmqsource.store.index_service import IndexService
from rmqsource.store.layout import StoreLayout
from rmqsource.store.writer import MessageExtBrokerInner, MessageStoreWriter

from golden import GOLDEN_ROOT, index_file_contents, tree_bytes, writable_names

pytestmark = pytest.mark.unit

GOLDEN = GOLDEN_ROOT
CORPORA = writable_names()


@pytest.fixture(scope="module", params=CORPORA)
def store(request, tmp_path_factory):
    corpus = request.param
    config = StoreConfig.from_properties_file(GOLDEN / corpus / "store.properties", {"brokerPutHooks": "false"})
    root = tmp_path_factory.mktemp(corpus) / "store"
    with open(GOLDEN / corpus / "inputs.jsonl", encoding="utf-8") as f:
        msgs = [MessageExtBrokerInner.from_json_dict(json.loads(line)) for line in f]
    with MessageStoreWriter(root, config) as w:
        w.put_messages(msgs)
    return corpus, config, root


def _dispatcher(root: Path, config: StoreConfig) -> Dispatcher:
    index = IndexService(root / "index", config.max_hash_slot_num, config.max_index_num)
    return Dispatcher(root, cq_file_size=config.mapped_file_size_consume_queue_bytes,
                      delay_levels_ms=config.message_delay_levels_ms, index_service=index)


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_dispatch_twice_changes_nothing(store, tmp_path):
    corpus, config, root = store
    work = _copy(root, tmp_path / "s")
    before_cq, before_idx = tree_bytes(work / "consumequeue"), index_file_contents(work / "index")
    for _ in range(2):
        d = _dispatcher(work, config)
        cl = CommitLog(StoreLayout.for_root(work), config.mapped_file_size_commit_log_bytes)
        try:
            d.dispatch_from_commitlog(cl, 0)
        finally:
            cl.close()
            d.close()
    assert tree_bytes(work / "consumequeue") == before_cq
    assert index_file_contents(work / "index") == before_idx


def test_rebuild_equals_incremental(store, tmp_path):
    corpus, config, root = store
    work = _copy(root, tmp_path / "s")
    d = _dispatcher(work, config)
    cl = CommitLog(StoreLayout.for_root(work), config.mapped_file_size_commit_log_bytes)
    try:
        d.rebuild(cl, 0)
    finally:
        cl.close()
        d.close()
    assert tree_bytes(work / "consumequeue") == tree_bytes(GOLDEN / corpus / "store" / "consumequeue")
    assert index_file_contents(work / "index") == index_file_contents(GOLDEN / corpus / "store" / "index")


def test_rebuild_from_offset_fills_pre_blank(tmp_path):
    """4.9 corpus rebuilt from the second segment = the engine's preblank_cq ConsumeQueues."""
    case = GOLDEN / "rmq497-g1" / "crash" / "preblank_cq"
    if not case.is_dir():
        pytest.skip("no preblank_cq case")
    config = StoreConfig.from_properties_file(GOLDEN / "rmq497-g1" / "store.properties")
    work = _copy(GOLDEN / "rmq497-g1" / "store", tmp_path / "s")
    for dirpath, dirnames, filenames in os.walk(work):
        os.chmod(dirpath, 0o755)
        for n in filenames:
            os.chmod(os.path.join(dirpath, n), 0o644)
    d = _dispatcher(work, config)
    cl = CommitLog(StoreLayout.for_root(work), config.mapped_file_size_commit_log_bytes)
    try:
        d.rebuild(cl, 262144)
    finally:
        cl.close()
        d.close()
    assert tree_bytes(work / "consumequeue") == tree_bytes(case / "store" / "consumequeue")


def test_index_worked_example_spec_5_5(tmp_path):
    svc = IndexService(tmp_path / "index", 8, 6, clock_ms=lambda: 1_700_000_000_000)
    svc.put_keys("TopicTest", 0, 1700000000123, 0, "0A00000130391B6D3586000003E80001", "order-10001")
    svc.put_keys("TopicTest", 206, 1700000005500, 0, None, "order-10001")
    svc.put_keys("TopicTest", 412, 1700000009999, 0, None, "k3")
    assert svc.query_offsets("TopicTest", "order-10001", 64, 0, 2**62)[0] == [206, 0]
    assert svc.query_offsets("TopicTest", "order-10001", 64, 1700000004000, 1700000009000)[0] == [206]
    assert svc.query_offsets("TopicTest", "k3", 64, 0, 2**62) == ([412], 412, 1700000009999)
    svc.close()
    data = index_file_contents(tmp_path / "index")[0]
    expected = bytes.fromhex(
        "0000018BCFE5687B0000018BCFE58F0F0000000000000000000000000000019C0000000300000005"
        "0000000000000000000000040000000100000000000000000000000000000003"
        "0000000000000000000000000000000000000000"
        "0B341033000000000000000000000000" "00000000"
        "7750D2CF000000000000000000000000" "00000000"
        "7750D2CF00000000000000CE0000000500000002"
        "0029E6AA000000000000019C0000000900000000")
    assert data[:len(expected)] == expected
    assert data[len(expected):] == bytes(len(data) - len(expected))


def test_index_roll_inherits_header_and_names_increase(tmp_path):
    svc = IndexService(tmp_path / "index", 4, 3, clock_ms=lambda: 1_700_000_000_000)   # 2 entries per file
    for i in range(5):
        svc.put_keys("T", 100 * i, 1_700_000_000_000 + 1000 * i, 0, None, f"k{i}")
    names = [f.name for f in svc.files]
    assert len(names) == 3 and names == sorted(names) and len(set(names)) == 3
    second = svc.files[1].header
    assert (second.begin_phy_offset, second.end_phy_offset) == (200, 300)
    assert svc.index_msg_timestamp_ms == 1_700_000_003_000
    assert svc.query_offsets("T", "k0", 64, 0, 2**62)[0] == [0]
    svc.put_keys("T", 400, 1_700_000_004_000, 0, None, "k4")    # the same record again: skipped
    assert svc.files[-1].header.index_count == 2
    svc.close()


def test_rollback_not_indexed_prepared_indexed(tmp_path):
    svc = IndexService(tmp_path / "index", 4, 10)
    svc.put_keys("T", 0, 1000, 0xC, None, "rb")
    svc.put_keys("T", 10, 1000, 0x4, None, "prep")
    assert svc.query_offsets("T", "rb", 64, 0, 2**62)[0] == []
    assert svc.query_offsets("T", "prep", 64, 0, 2**62)[0] == [10]
    svc.close()


def test_query_offsets_match_engine(store):
    corpus, config, root = store
    svc = IndexService(root / "index", config.max_hash_slot_num, config.max_index_num, writable=False,
                       max_msgs_num_batch=config.max_msgs_num_batch)
    try:
        with open(GOLDEN / corpus / "expected" / "query.jsonl", encoding="utf-8") as f:
            for line in f:
                q = json.loads(line)
                begin = q["beginTimestamp"] if q["beginTimestamp"] is not None else 0
                end = q["endTimestamp"] if q["endTimestamp"] is not None else 2**63 - 1
                offsets, last_phy, last_ts = svc.query_offsets(q["topic"], q["key"], q["maxNum"], begin, end)
                assert sorted(offsets) == [h["commitLogOffset"] for h in q["hits"]], q["label"]
                # queryMessage copies "index last update" only while it loads hits (0, 0 otherwise).
                if offsets:
                    assert (last_phy, last_ts) == (q["summary"]["indexLastUpdatePhyoffset"],
                                                   q["summary"]["indexLastUpdateTimestamp"])
                else:
                    assert q["summary"]["indexLastUpdatePhyoffset"] == 0
    finally:
        svc.close()


def test_tags_code_for_schedule_topic():
    levels = StoreConfig().message_delay_levels_ms
    assert compute_tags_code("SCHEDULE_TOPIC_XXXX", {"DELAY": "3", "TAGS": "TagA"}, 1700000000123, levels) \
        == 1700000010123
    assert compute_tags_code("SCHEDULE_TOPIC_XXXX", {"DELAY": "25"}, 1000, levels) == 1000 + 7_200_000
    assert compute_tags_code("TopicTest", {"DELAY": "3", "TAGS": "TagA"}, 1, levels) == 2598919
    assert compute_tags_code("SCHEDULE_TOPIC_XXXX", {"TAGS": "TagA"}, 1, levels) == 2598919


def test_consume_queue_duplicates_ignored(tmp_path):
    q = ConsumeQueueWriter(str(tmp_path / "cq"), "T", 0, 200)
    assert q.put(0, 100, 1, 0)
    assert q.put(100, 100, 1, 1)
    assert not q.put(100, 100, 1, 1)          # phyOffset + size <= maxPhysicOffset
    assert q.max_offset == 2
    q.close()
