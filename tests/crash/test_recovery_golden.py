"""Recovery of copies of the real engines' crash stores, against the engines' own answers."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from rmqsource.store.reader import MessageStoreReader
from rmqsource.store.recovery import recover_store
from rmqsource.store.shapes import queue_json

from golden import (case_id, copy_store, corpora, corpus_of, crash_cases, expected_get_files, is_dledger,
                    load_config, read_jsonl, tree_bytes, writable)

pytestmark = [pytest.mark.golden, pytest.mark.crash]


def report_json(report) -> dict:
    return {
        "queues": [queue_json(q) for q in report.queues],
        "summary": {
            "abortFileExisted": report.abort_file_existed,
            "loadOk": True,
            "commitLogMinOffset": report.commit_log_min_offset,
            "commitLogMaxOffset": report.commit_log_max_offset,
            "confirmOffset": report.confirm_offset,
            "dispatchBehindBytes": report.dispatch_behind_bytes,
            "topicQueueTable": report.topic_queue_table,
        },
    }


def expected_recover(path: Path) -> dict:
    doc = json.loads(path.read_text())
    doc.pop("command", None)
    return doc


@pytest.mark.parametrize("corpus", writable(corpora()))
def test_recover_clean_store(corpus, tmp_path):
    store = copy_store(corpus / "store", tmp_path / "store")
    report = recover_store(store, load_config(corpus))
    assert report_json(report) == expected_recover(corpus / "expected" / "recover.json")
    # A clean store is left byte-for-byte alone.
    for f in sorted((corpus / "store" / "commitlog").iterdir()):
        assert (store / "commitlog" / f.name).read_bytes() == f.read_bytes()


def cq_files(store: Path) -> dict[str, bytes]:
    root = store / "consumequeue"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", writable(crash_cases()))
def test_recover_crash_case(case, tmp_path):
    corpus = corpus_of(case)
    config = load_config(corpus)
    store = copy_store(case / "store", tmp_path / "store")
    report = recover_store(store, config, mark_clean=True)
    assert report_json(report) == expected_recover(case / "expected" / "recover.json")
    assert not (store / "abort").exists()
    starts = json.loads((case / "case.json").read_text())["checks"].get("get_start_offsets", {})
    with MessageStoreReader(store, config) as reader:
        for topic, queue_id, path in expected_get_files(case / "expected"):
            want = read_jsonl(path)
            got = []
            offset = starts.get(f"{topic}/{queue_id}", 0)
            status = None
            for calls, result in enumerate(reader.get_loop("g", topic, queue_id, offset, 100000), 1):
                status = result
                got.extend({"queueOffset": m.record.queue_offset, "commitLogOffset": m.record.phy_offset,
                            "storeSize": m.record.store_size, "tagsCode": m.cq.tags_code,
                            "rawCrc32": zlib.crc32(m.record.raw)} for m in result.messages)
            assert got == want[:-1], (topic, queue_id)
            assert status.status.value == want[-1]["status"]
            assert status.next_begin_offset == want[-1]["nextBeginOffset"]
        # Nothing past the valid end is readable as a message.
        assert reader.message_at(report.commit_log_max_offset) is None
    if case.name == "no_consumequeue":
        # Re-dispatch rebuilds ConsumeQueues byte-identical to the engine's.
        assert cq_files(store) == cq_files(corpus / "store")


@pytest.mark.parametrize("case", writable(crash_cases()))
def test_recovery_is_idempotent(case, tmp_path):
    config = load_config(corpus_of(case))
    store = copy_store(case / "store", tmp_path / "store")
    first = report_json(recover_store(store, config, mark_clean=True))
    snapshot = {p: p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file() and "index" not in p.parts}
    second = report_json(recover_store(store, config))
    assert second["queues"] == first["queues"]
    assert {p: p.read_bytes() for p in snapshot} == snapshot


DLEDGER_STORES = [c / "store" for c in corpora() if is_dledger(c)] + [c / "store" for c in crash_cases()
                                                                       if is_dledger(c)]


@pytest.mark.parametrize("store", DLEDGER_STORES, ids=lambda p: case_id(p.parent))
def test_recover_refuses_a_dledger_store_and_writes_nothing(store, tmp_path):
    """DLedger recovery rebuilds the DLedger index and missing ConsumeQueues, which recover does not do:
    it refuses with one line and leaves every byte as it was (reads see the recovered view without it)."""
    from rmqsource.errors import UnsupportedLayoutError
    from rmqsource.store.recovery_plan import plan_recovery
    corpus = corpus_of(store.parent) if store.parent.parent.name == "crash" else store.parent
    copy = copy_store(store, tmp_path / "store")
    before = tree_bytes(copy)
    for recover in (recover_store, plan_recovery):
        with pytest.raises(UnsupportedLayoutError, match="recovery of a DLedger store .dledger-n0. is not "
                                                         "supported") as e:
            recover(copy, load_config(corpus))
        assert e.value.file == str(copy)
    assert tree_bytes(copy) == before
