"""The read engine against the real engines' own answers (get, tag get, edge get, view, query, recover)."""

from __future__ import annotations

import base64
import json
import zlib

import pytest

from rmqsource.store.reader import MessageStoreReader
from rmqsource.store.shapes import message_json, query_json, queue_json, status_json, view_json

from golden import (case_id, corpora, corpus_of, crash_cases, engine_json, expected_get_files, is_dledger,
                    load_config, read_jsonl, tag_expression_from_file_name)

pytestmark = pytest.mark.golden

CORPORA = corpora()


def open_reader(store_dir, corpus):
    return MessageStoreReader(store_dir, load_config(corpus))


def replay_loop(reader, topic, queue_id, offset, tag=None, max_msgs=100000):
    messages, calls, last = [], 0, None
    for result in reader.get_loop("rmq-golden", topic, queue_id, offset, max_msgs, tag):
        calls += 1
        last = result
        messages.extend(message_json(m) for m in result.messages)
    return messages, status_json(last, count=len(messages), calls=calls)


def test_corpora_present():
    assert CORPORA, "no golden corpus found under ../shared/golden"


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_get_loop_equals_engine(corpus):
    with open_reader(corpus / "store", corpus) as reader:
        files = expected_get_files(corpus / "expected")
        assert files
        for topic, queue_id, path in files:
            expected = engine_json(read_jsonl(path))
            messages, status = replay_loop(reader, topic, queue_id, 0)
            assert status == expected[-1], (topic, queue_id)
            assert len(messages) == len(expected) - 1
            for got, want in zip(messages, expected[:-1]):
                assert got == want, (topic, queue_id, want["queueOffset"])


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_tag_filtered_get_equals_engine(corpus):
    tag_dir = corpus / "expected" / "get_tag"
    index = read_jsonl(tag_dir / "INDEX.jsonl")
    assert index
    with open_reader(corpus / "store", corpus) as reader:
        for entry in index:
            expected = engine_json(read_jsonl(tag_dir / entry["file"]))
            topic_dir, stem = entry["file"].rsplit("/", 1)
            assert tag_expression_from_file_name(stem[:-6].split("__", 1)[1]) == entry["tagExpression"]
            messages, status = replay_loop(reader, entry["topic"], entry["queueId"], 0, entry["tagExpression"])
            assert status == expected[-1], entry["file"]
            assert messages == expected[:-1], entry["file"]


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_edge_gets_equal_engine(corpus):
    with open_reader(corpus / "store", corpus) as reader:
        for call in engine_json(read_jsonl(corpus / "expected" / "get_edge.jsonl")):
            assert not call["loop"]
            result = reader.get_message("rmq-golden", call["topic"], call["queueId"], call["offset"],
                                        call["maxMsgNums"], call["tag"])
            got = [message_json(m) for m in result.messages]
            assert status_json(result, count=len(got), calls=1) == call["status"], call["label"]
            assert got == call["messages"], call["label"]


def engine_decode_error(call) -> bool:
    """The engine 'found' bytes it could not decode (a DLedger msgId at an entry start, not a record)."""
    return bool((call["result"].get("message") or {}).get("decodeError"))


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_view_equals_engine(corpus):
    with open_reader(corpus / "store", corpus) as reader:
        for call in engine_json(read_jsonl(corpus / "expected" / "view.jsonl")):
            got = view_json(reader.view(call["msgId"]))
            if engine_decode_error(call):
                # Deliberate difference: the engine returns the first byte of a DLedger entry header as a
                # 1-byte "message"; rmqsource never returns header bytes as a message: not found.
                assert is_dledger(corpus), call["label"]
                not_found = {k: v for k, v in call["result"].items() if k != "message"} | {"found": False}
                assert got == not_found, call["label"]
                continue
            assert got == call["result"], call["label"]


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_query_equals_engine(corpus):
    with open_reader(corpus / "store", corpus) as reader:
        for call in engine_json(read_jsonl(corpus / "expected" / "query.jsonl")):
            begin = call["beginTimestamp"] if call["beginTimestamp"] is not None else 0
            end = call["endTimestamp"] if call["endTimestamp"] is not None else (1 << 63) - 1
            result = reader.query(call["topic"], call["key"], call["maxNum"], begin, end)
            got = query_json(result, call["topic"], call["key"])
            assert got["summary"] == call["summary"], call["label"]
            assert got["hits"] == call["hits"], call["label"]


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_filtered_query_drops_hash_collisions(corpus):
    with open_reader(corpus / "store", corpus) as reader:
        calls = [c for c in read_jsonl(corpus / "expected" / "query.jsonl")
                 if any(not h["keyMatch"] for h in c["hits"])]
        assert calls, "corpus has no hash-colliding key query"
        for call in calls:
            result = reader.query(call["topic"], call["key"], call["maxNum"], only_matching=True)
            want = [h["commitLogOffset"] for h in call["hits"] if h["keyMatch"]]
            assert [m.record.phy_offset for m in result.messages] == want


def _recovered_queue_view(reader):
    return {(q.topic, q.queue_id): queue_json(q) for q in reader.queue_infos()}


@pytest.mark.parametrize("case", crash_cases(), ids=case_id)
def test_crash_store_reads_as_recovered_view(case):
    """Opened read-only, a damaged store shows the engine's recovered offsets and messages."""
    corpus = corpus_of(case)
    expected = json.loads((case / "expected" / "recover.json").read_text())
    starts = json.loads((case / "case.json").read_text())["checks"].get("get_start_offsets", {})
    with open_reader(case / "store", corpus) as reader:
        assert reader.commit_log_max_offset == expected["summary"]["commitLogMaxOffset"]
        assert reader.commitlog.min_offset == expected["summary"]["commitLogMinOffset"]
        view = _recovered_queue_view(reader)
        for q in expected["queues"]:
            key = (q["topic"], q["queueId"])
            if key not in view:  # in-memory queues of the engine with no directory
                assert q["maxOffset"] == 0
                continue
            got = view[key]
            assert (got["minOffset"], got["maxOffset"]) == (q["minOffset"], q["maxOffset"]), key
        torn = torn_records(case)
        for topic, queue_id, path in expected_get_files(case / "expected"):
            want = read_jsonl(path)
            start = starts.get(f"{topic}/{queue_id}", 0)
            if (topic, queue_id) in torn:
                assert_torn_record_refused(reader, topic, queue_id, start, torn[(topic, queue_id)], want)
                continue
            messages, status = replay_loop(reader, topic, queue_id, start)
            assert status == want[-1], (topic, queue_id)
            assert [crash_line(m) for m in messages] == want[:-1], (topic, queue_id)


def crash_line(m: dict) -> dict:
    return {"queueOffset": m["queueOffset"], "commitLogOffset": m["commitLogOffset"], "storeSize": m["storeSize"],
            "tagsCode": m["cq"]["tagsCode"], "rawCrc32": zlib.crc32(base64.b64decode(m["raw"]))}


def torn_records(case) -> dict:
    """(topic, queueId) -> the record the engine served as garbage in a DLedger crash case.

    DLedger recovery checks entry headers only, so a torn record inside an intact header stays below
    the end and the engine returns its bytes; rmqsource checks the record and refuses it instead.
    """
    if not is_dledger(case):
        return {}
    checks = json.loads((case / "case.json").read_text())["checks"]
    return {(r["topic"], r["queueId"]): r for r in checks.get("records_returned_that_differ_from_the_clean_record", [])}


def assert_torn_record_refused(reader, topic, queue_id, start, bad, want):
    """Every record before the torn one as the engine returned it, then a typed error naming file and offset."""
    from rmqsource.errors import CorruptRecordError
    offset, got = start, []
    while offset < bad["queueOffset"]:
        result = reader.get_message("rmq-golden", topic, queue_id, offset, bad["queueOffset"] - offset)
        got.extend(crash_line(message_json(m)) for m in result.messages)
        assert result.next_begin_offset > offset
        offset = result.next_begin_offset
    assert got == [w for w in want[:-1] if w["queueOffset"] < bad["queueOffset"]], (topic, queue_id)
    with pytest.raises(CorruptRecordError) as e:
        reader.get_message("rmq-golden", topic, queue_id, bad["queueOffset"], 1)
    seg = reader.commitlog.reader.find(bad["commitLogOffset"])
    assert seg.dledger and e.value.file == seg.path
    assert e.value.offset == bad["commitLogOffset"] - seg.start_offset


@pytest.mark.parametrize("engine", ["4.9.7", "5.3.3"])
def test_a_get_reads_only_the_units_its_scan_may_reach(tmp_path, engine):
    """A get of 32 messages from a queue whose ConsumeQueue file holds 20,000 units reads at most the
    units the engine's scan looks at (4.9: 800, 5.x: 801), not the rest of the file: a consumer's drain
    of a long queue was quadratic in the file's units."""
    from rmqsource.format.message import Message
    from rmqsource.store.config import StoreConfig
    from rmqsource.store.writer import MessageStoreWriter
    store = tmp_path / "store"
    with MessageStoreWriter(store) as w:
        for start in range(0, 20_000, 2_000):
            w.put_messages([Message(topic="Long", queue_id=0, body=b"m") for _ in range(2_000)])
    with MessageStoreReader(store, StoreConfig.from_mapping({"engineVersion": engine})) as reader:
        queue = reader.consume_queue("Long", 0)
        read = []
        original = queue.read_units
        queue.read_units = lambda offset, count: read.append(count) or original(offset, count)
        results = list(reader.get_loop("g", "Long", 0, 0, 32))
    assert sum(len(r.messages) for r in results) == 20_000
    assert max(read) == (801 if engine.startswith("5") else 800) and sum(read) < 20_000 + 801 * len(read), read[:5]
