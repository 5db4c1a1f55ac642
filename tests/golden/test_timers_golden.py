"""The timers view (store layer, ``rmq export --view timers``, the JVM twin ``store/Timers.java``) on the
real-broker corpora of ../shared/golden-broker (judged by ``expected/sent.jsonl`` and ``expected/storeview.jsonl``)
and on the engine corpora of ../shared/golden* (delay messages parked in SCHEDULE_TOPIC_XXXX by the engine
itself, never delivered: no schedule service runs there).

Corpora are read in place (``RMQ_GOLDEN_BROKER_ROOT`` points elsewhere).
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rmqsource import cli
from rmqsource.store.config import StoreConfig
from rmqsource.store.reader import MessageStoreReader
from rmqsource.store.timers import DELIVERED, PENDING, SCHEDULE_TOPIC, TIMER_TOPIC, timer_entries

from golden import broker_corpora, corpora, load_config, read_jsonl
from jvm_twins import jvm_timers

pytestmark = pytest.mark.golden

TIMER_KINDS = ("timer", "timer_parked", "delay", "delay_parked")


def broker_runs() -> list[Path]:
    """Broker-written runs (file or RocksDB ConsumeQueues)."""
    return broker_corpora()


RUNS = broker_runs()
ENGINE = corpora()


def broker_config(run: Path) -> StoreConfig:
    return StoreConfig.from_properties_file(run / "broker.properties")


def entries_of(run: Path, **kw):
    with MessageStoreReader(run / "store", broker_config(run)) as reader:
        return timer_entries(reader, **kw)


def timer_sends(run: Path) -> list[dict]:
    return [s for s in read_jsonl(run / "expected" / "sent.jsonl")
            if s.get("record") == "send" and s.get("kind") in TIMER_KINDS
            and (s.get("result") or {}).get("status") == "SEND_OK"]


def storeview(run: Path) -> list[dict]:
    return [e for e in read_jsonl(run / "expected" / "storeview.jsonl") if e.get("record") == "entry"]


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_every_timer_and_delay_send_once_with_state_and_due_time(run):
    entries = entries_of(run)
    by_key = Counter((e.real_topic, e.uniq_key) for e in entries)
    entry = {(e.real_topic, e.uniq_key): e for e in entries}
    view = storeview(run)
    parked = {}
    for v in view:
        if v["topic"] in (TIMER_TOPIC, SCHEDULE_TOPIC):
            parked.setdefault((v["properties"].get("REAL_TOPIC"), v["uniqKey"]), []).append(v)
    delivered_at = {(v["topic"], v["queueId"], v["queueOffset"]): v for v in view}
    sends = timer_sends(run)
    assert {s["kind"] for s in sends} == set(TIMER_KINDS)
    for s in sends:
        key = (s["topic"], s["uniqKey"])
        assert by_key[key] == 1, (s["seq"], s["kind"])
        e = entry[key]
        copies = parked[key]
        assert e.real_queue_id == int(copies[0]["properties"]["REAL_QID"]) == s["result"]["queueId"]
        if s["kind"].startswith("timer"):
            assert e.delay_level is None
            assert e.deliver_time_ms == int(copies[-1]["properties"]["TIMER_OUT_MS"])
        else:
            assert e.delay_level == s["delayLevel"]
            # the schedule unit's tagsCode = store time + the level's delay (level 18: 2 h)
            assert e.deliver_time_ms == copies[-1]["cqTagsCode"]
            assert e.deliver_time_ms == copies[-1]["storeTimestamp"] + \
                broker_config(run).message_delay_levels_ms[s["delayLevel"] - 1]
            if s["kind"] == "delay_parked":
                assert s["delayLevel"] == 18
                assert e.deliver_time_ms - copies[-1]["storeTimestamp"] == 2 * 3600 * 1000
        if s["kind"].endswith("_parked"):
            assert e.state == PENDING and e.queue_offset is None and e.tags_code is None
            assert e.phy_offset == e.parked_offset == max(c["commitLogOffset"] for c in copies)
        else:
            assert e.state == DELIVERED
            got = delivered_at[(s["topic"], e.real_queue_id, e.queue_offset)]
            assert got["uniqKey"] == s["uniqKey"] and got["commitLogOffset"] == e.phy_offset
            assert got["cqTagsCode"] == e.tags_code
            mark = "TIMER_DEQUEUE_MS" if s["kind"] == "timer" else "DELAY"
            assert mark in got["properties"]
            # the broker put it once in the real queue: no other copy of this message there carries the mark
            assert [v for v in view if v["topic"] == s["topic"] and v["uniqKey"] == s["uniqKey"]
                    and mark in v["properties"]] == [got]


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_figures_and_broker_retry_scheduling(run):
    entries = entries_of(run)
    sends = timer_sends(run)
    user = [e for e in entries if e.real_topic.startswith("rb_topic_")]
    assert Counter(e.state for e in user) == Counter(
        PENDING if s["kind"].endswith("_parked") else DELIVERED for s in sends)
    # retries the broker scheduled after consumer failures: SCHEDULE_TOPIC_XXXX copies of %RETRY% topics
    view = storeview(run)
    scheduled = [v for v in view if v["topic"] == SCHEDULE_TOPIC and v["properties"]["REAL_TOPIC"].startswith("%RETRY%")]
    assert scheduled
    retries = [e for e in entries if e.real_topic.startswith("%RETRY%")]
    assert sorted((v["properties"]["REAL_TOPIC"], v["uniqKey"], v["reconsumeTimes"]) for v in scheduled) == \
        sorted((e.real_topic, e.uniq_key, e.reconsume_times) for e in retries)
    for e in retries:
        assert e.delay_level is not None
        if e.state == DELIVERED:
            got = next(v for v in view if v["topic"] == e.real_topic and v["queueOffset"] == e.queue_offset
                       and v["queueId"] == e.real_queue_id)
            assert (got["uniqKey"], got["reconsumeTimes"]) == (e.uniq_key, e.reconsume_times)
    # one row per parked message (re-parked wheel copies are one), a delivered copy is no two rows' delivery,
    # and nothing shows a POP retry copy as delivered
    assert len({e.parked_offset for e in entries}) == len(entries)
    wheel = [e for e in entries if e.delay_level is None]
    assert len({(e.real_topic, e.uniq_key, e.reconsume_times) for e in wheel}) == len(wheel)
    done = [e.phy_offset for e in entries if e.state == DELIVERED]
    assert len(set(done)) == len(done)
    assert not any(e.real_topic.startswith("%RETRY%rb_pop") for e in entries)
    # delivered copies lie in their real queue, at the offset and CommitLog position the storeview shows
    at = {(v["topic"], v["queueId"], v["queueOffset"]): v["commitLogOffset"] for v in view}
    for e in entries:
        if e.state == DELIVERED and (e.real_topic, e.real_queue_id, e.queue_offset) in at:
            assert at[(e.real_topic, e.real_queue_id, e.queue_offset)] == e.phy_offset


@pytest.mark.parametrize("corpus", ENGINE, ids=lambda p: p.name)
def test_engine_corpora_delays_are_pending_with_the_schedule_due_time(corpus):
    config = load_config(corpus)
    with MessageStoreReader(corpus / "store", config) as reader:
        entries = timer_entries(reader)
        parked = []
        for topic, qid in reader.queue_keys():
            if topic != SCHEDULE_TOPIC:
                continue
            q = reader.consume_queue(topic, qid)
            for i in range(reader.queue_min_offset(q), reader.queue_max_offset(q)):
                phy, size, code = q.unit_at(i)
                parked.append((reader.commitlog.read_message(phy, size), code, qid))
    assert len(entries) == len(parked)
    if not parked:
        assert entries == []
        return
    by_phy = {e.phy_offset: e for e in entries}
    delays = config.message_delay_levels_ms
    for r, code, qid in parked:
        e = by_phy[r.phy_offset]
        assert e.state == PENDING and e.queue_offset is None
        assert (e.real_topic, e.real_queue_id) == (r.properties["REAL_TOPIC"], int(r.properties["REAL_QID"]))
        level = int(r.properties["DELAY"])
        assert e.delay_level == level and qid == min(level, len(delays)) - 1
        assert e.deliver_time_ms == code == r.store_timestamp_ms + delays[min(level, len(delays)) - 1]


def run_cli(argv) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main([str(a) for a in argv], stdout=out)
    return code, out.getvalue()


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_cli_export_view_timers_writes_the_store_rows(run, tmp_path):
    out = tmp_path / "timers.parquet"
    code, text = run_cli(["export", run / "store", out, "--view", "timers", "--config", run / "broker.properties"])
    assert code == 0, text
    t = pq.read_table(out)
    assert t.schema.names[-3:] == ["deliverTime", "delayLevel", "state"]
    # RocketMQ's own real topics (%RETRY% retries, POP checkpoints) are left out as in a whole-store export
    entries = entries_of(run, exclude_internal=True)
    assert entries and len(entries) < len(entries_of(run))
    rows = t.to_pylist()
    assert len(rows) == len(entries)
    for row, e in zip(rows, entries):
        assert (row["topic"], row["queueId"], row["queueOffset"], row["commitLogOffset"], row["state"],
                row["delayLevel"], row["uniqKey"]) == (e.real_topic, e.real_queue_id, e.queue_offset, e.phy_offset,
                                                       e.state, e.delay_level, e.uniq_key)
        assert row["deliverTime"].timestamp() * 1000 == e.deliver_time_ms
    code, _ = run_cli(["export", run / "store", tmp_path / "all.parquet", "--view", "timers", "--include-internal-topics",
                       "--config", run / "broker.properties"])
    assert code == 0
    every = pq.read_table(tmp_path / "all.parquet")
    assert every.column("commitLogOffset").to_pylist() == [e.phy_offset for e in entries_of(run)]
    assert any(t.startswith("%RETRY%") for t in every.column("topic").to_pylist())
    # --topic keeps real topics; a store-time filter does not apply to this view
    code, _ = run_cli(["export", run / "store", tmp_path / "t1.jsonl", "--view", "timers", "--topic", "rb_topic_1"])
    assert code == 0
    lines = [json.loads(x) for x in (tmp_path / "t1.jsonl").read_text(encoding="utf-8").splitlines()]
    assert lines and {x["topic"] for x in lines} == {"rb_topic_1"}
    assert len(lines) == sum(e.real_topic == "rb_topic_1" for e in entries)
    code, text = run_cli(["export", run / "store", tmp_path / "t2.jsonl", "--view", "timers", "--begin", "0"])
    assert code != 0 and not (tmp_path / "t2.jsonl").exists()


@pytest.mark.parametrize("store", [p / "store" for p in RUNS] + [c / "store" for c in ENGINE],
                         ids=lambda p: p.parent.name)
def test_jvm_twin_equals_python(store):
    with MessageStoreReader(store) as reader:
        py = [dataclasses.asdict(e) for e in timer_entries(reader)]
        py_topic = [dataclasses.asdict(e) for e in timer_entries(reader, ["rb_topic_2", "OrderTopic"])]
        py_user = [dataclasses.asdict(e) for e in timer_entries(reader, exclude_internal=True)]
    assert py
    assert jvm_timers(store) == py
    assert jvm_timers(store, "--topic", "rb_topic_2", "--topic", "OrderTopic") == py_topic
    assert jvm_timers(store, "--exclude-internal") == py_user
