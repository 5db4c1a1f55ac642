"""The views of RocketMQ's own topics (option view=dlq | retry | trace; docs/views.md), in the session's mode.

The judges are a real 5.5.0 broker and its clients (``../shared/golden-broker``): ``expected/storeview.jsonl``
(every ConsumeQueue entry, read by the broker's engine), ``sent.jsonl`` (what every send returned: topic,
offset msgId, UNIQ_KEY, tags, keys, producer group) and ``admin.json`` (the consumer groups and how they
consume). Stores are read in place and never written; the hostile cases write stores of their own.
"""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

import pytest

from rmqsource.errors import OptionError

from golden import broker_corpora

pytestmark = pytest.mark.spark

RUNS = [pytest.param(p, id=p.name) for p in broker_corpora()] or [
    pytest.param(None, marks=pytest.mark.skip(reason="no real-broker corpora"))]
LMQ_PREFIX = "%LMQ%"


def _jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def storeview_entries(run: Path, prefix: str) -> dict:
    """(topic, queueId, queueOffset) -> the engine's entry, for the topics starting with ``prefix``."""
    return {(d["topic"], d["queueId"], d["queueOffset"]): d for d in _jsonl(run / "expected" / "storeview.jsonl")
            if d["record"] == "entry" and d["topic"].startswith(prefix)}


def sent_ok(run: Path) -> dict:
    """seq -> the send line, for the sends the broker answered SEND_OK."""
    return {d["seq"]: d for d in _jsonl(run / "expected" / "sent.jsonl")
            if d["record"] == "send" and (d.get("result") or {}).get("status") == "SEND_OK"}


def stored_msg_ids(run: Path) -> dict:
    """(topic, rb_seq) -> the offset msgIds of the records the engine holds for that send in that topic."""
    out: dict = {}
    for d in _jsonl(run / "expected" / "storeview.jsonl"):
        if d["record"] == "entry" and "rb_seq" in d["properties"]:
            out.setdefault((d["topic"], int(d["properties"]["rb_seq"])), set()).add(d["offsetMsgId"])
    return out


def groups(run: Path) -> dict:
    return json.loads((run / "expected" / "admin.json").read_text(encoding="utf-8"))["harness"]["groups"]


def view(spark, store, name, **options):
    r = spark.read.format("rmq").option("view", name)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(str(store))


def _key(r) -> tuple:
    return (r["topic"], r["queueId"], r["queueOffset"])


@pytest.mark.parametrize("run", RUNS)
def test_dlq_rows_are_the_dead_letters_with_the_origin_the_broker_recorded(spark, run):
    rows = view(spark, run / "store", "dlq").collect()
    engine = storeview_entries(run, "%DLQ%")
    assert engine, "the corpus should hold dead letters"
    assert {_key(r) for r in rows} == set(engine) and len(rows) == len(engine)
    sent = sent_ok(run)
    stored = stored_msg_ids(run)
    consumers = groups(run)
    for r in rows:
        e = engine[_key(r)]
        assert (r["commitLogOffset"], r["uniqKey"], r["reconsumeTimes"]) == (
            e["commitLogOffset"], e["uniqKey"], e["reconsumeTimes"])
        send = sent[int(r["properties"]["rb_seq"])]
        assert r["group"] == r["topic"][len("%DLQ%"):] and r["group"] in consumers
        assert send["topic"] in consumers[r["group"]]["subscriptions"]
        assert r["originTopic"] == send["topic"]
        # the message as first stored: what the send returned, and the record the engine holds
        assert r["originMsgId"] in stored[(send["topic"], send["seq"])]
        assert send["result"]["offsetMsgId"] in (None, r["originMsgId"])
        assert send["userProperties"].get("rb_fail") == "always"      # the messages the group always fails


@pytest.mark.parametrize("run", RUNS)
def test_retry_rows_name_the_group_and_origin_of_push_and_pop_retries(spark, run):
    df = view(spark, run / "store", "retry")
    rows = df.collect()
    engine = {k: e for k, e in storeview_entries(run, "%RETRY%").items()}
    assert {_key(r) for r in rows} == set(engine) and len(rows) == len(engine)
    sent = sent_ok(run)
    stored = stored_msg_ids(run)
    consumers = groups(run)
    kinds = set()
    for r in rows:
        assert r["commitLogOffset"] == engine[_key(r)]["commitLogOffset"]
        send = sent[int(r["properties"]["rb_seq"])]
        mode = consumers[r["group"]]["mode"]
        kinds.add(mode)
        assert r["originTopic"] == send["topic"] and send["topic"] in consumers[r["group"]]["subscriptions"]
        if mode == "pop":           # revived by the broker: named %RETRY%<group>_<topic>, no ORIGIN_MESSAGE_ID
            assert r["topic"] == f"%RETRY%{r['group']}_{send['topic']}" and r["originMsgId"] is None
        else:                       # sent back by the consumer
            assert r["topic"] == f"%RETRY%{r['group']}"
            assert r["originMsgId"] in stored[(send["topic"], send["seq"])]
            assert send["result"]["offsetMsgId"] in (None, r["originMsgId"])
    assert kinds == {"push", "pop"}
    assert df.count() == len(rows)
    # filters on the added columns (Spark's) and on message columns (pushed) together; a DataFrame of its
    # own, as a filtered query on the Python path must have (docs/reading.md#filter-pushdown)
    pop = view(spark, run / "store", "retry").where("group = 'rb_pop' AND queueOffset >= 1") \
        .select("topic", "queueOffset").collect()
    assert sorted(map(tuple, pop)) == sorted((r["topic"], r["queueOffset"]) for r in rows
                                             if r["group"] == "rb_pop" and r["queueOffset"] >= 1)


@pytest.mark.parametrize("run", RUNS)
def test_trace_rows_are_the_pub_events_of_every_traced_send(spark, run):
    rows = view(spark, run / "store", "trace").collect()
    traced = {d["uniqKey"]: d for d in sent_ok(run).values() if d.get("traced")}
    assert traced, "the corpus should hold traced sends"
    pubs = [r for r in rows if r["traceType"] == "Pub"]
    assert sorted(r["msgId"] for r in pubs) == sorted(traced)
    engine = storeview_entries(run, "RMQ_SYS_TRACE_TOPIC")
    for r in pubs:
        send = traced[r["msgId"]]
        assert (r["topic"], r["tags"], r["keys"], r["group"]) == (
            send["topic"], send["tags"], send["keys"], send["producerGroup"])
        assert r["offsetMsgId"] == send["result"]["offsetMsgId"]
        assert r["success"] is True and r["msgType"] == "Normal_Msg" and r["bodyLength"] == send["bodyLen"]
        assert send["sendAtMs"] <= r["timestamp"].timestamp() * 1000 <= send["returnedAtMs"]
        assert r["costTime"] >= 0 and r["storeHost"]
        assert (r["traceTopic"], r["traceQueueId"], r["traceQueueOffset"]) in engine
        assert engine[(r["traceTopic"], r["traceQueueId"], r["traceQueueOffset"])]["commitLogOffset"] == \
            r["traceCommitLogOffset"]


@pytest.mark.parametrize("run", RUNS)
def test_views_narrow_by_topic_and_refuse_topics_of_another_kind(spark, run):
    store = run / "store"
    engine = storeview_entries(run, "%RETRY%")
    pop_topics = sorted({t for t, _, _ in engine if t != "%RETRY%rb_retry"})
    got = view(spark, store, "retry", topicPattern=".*_rb_topic_\\d").select("topic").collect()
    assert sorted({r.topic for r in got}) == pop_topics
    assert len(got) == sum(1 for t, _, _ in engine if t in pop_topics)
    got = view(spark, store, "retry", topics="%RETRY%rb_retry").count()
    assert got == sum(1 for t, _, _ in engine if t == "%RETRY%rb_retry")
    with pytest.raises(Exception, match=r"view=dlq reads dead-letter topics \(%DLQ%<group>\); topic 'rb_topic_0'"):
        view(spark, store, "dlq", topics="rb_topic_0").collect()
    with pytest.raises(Exception, match=r"view=retry reads retry topics .*topic '%DLQ%rb_retry' is not one"):
        view(spark, store, "retry", queues="%DLQ%rb_retry:0").collect()


def test_views_are_batch_only(spark, tmp_path):
    from rmqsource.spark.options import parse_options
    for name in ("dlq", "retry", "trace"):
        with pytest.raises(OptionError, match=f"option view={name} is for batch reads"):
            parse_options({"path": str(tmp_path), "view": name}, mode="stream")
    with pytest.raises(OptionError, match="option view must be one of messages, timers, dlq, retry, trace"):
        parse_options({"path": str(tmp_path), "view": "dead"})


# -- trace messages the clients did not write: compressed bodies and broken events --------------------------


def _store_with_trace_bodies(tmp_path: Path, bodies: list[bytes], sys_flags: list[int]) -> Path:
    from rmqsource.format.message import MessageExtBrokerInner
    from rmqsource.store.config import StoreConfig
    from rmqsource.store.writer import MessageStoreWriter
    store = tmp_path / "store"
    with MessageStoreWriter(store, StoreConfig()) as w:
        results = w.put_messages([MessageExtBrokerInner(topic="RMQ_SYS_TRACE_TOPIC", queue_id=0, body=b, sys_flag=f)
                                  for b, f in zip(bodies, sys_flags)])
        assert all(r.ok for r in results)
    return store


def _pub(i: int, keys: str = "k-1 k-2") -> str:
    fields = ["Pub", str(1_795_857_000_000 + i), "DefaultRegion", "pg", "orders", f"MSG{i:04d}", "null", keys,
              "10.0.0.1:10911", "12", "3", "4", f"OFF{i:04d}", "true", "10.0.0.9"]
    return "\x01".join(fields) + "\x02"


def test_a_compressed_trace_body_is_inflated_and_every_event_is_a_row(spark, tmp_path):
    big = "".join(_pub(i) for i in range(200)).encode()      # over 4 KiB: the client compresses such bodies
    sub_after = "\x01".join(["SubAfter", "req-1", "MSG0001", "7", "false", "null", "4"]) + "\x02"
    store = _store_with_trace_bodies(tmp_path, [zlib.compress(big), sub_after.encode()], [1, 0])
    rows = view(spark, store, "trace").orderBy("traceCommitLogOffset", "timestamp").collect()
    assert len(rows) == 201
    first = rows[0]
    assert (first["traceType"], first["group"], first["topic"], first["msgId"], first["tags"], first["keys"],
            first["offsetMsgId"], first["clientHost"], first["msgType"], first["bodyLength"], first["costTime"]) == (
        "Pub", "pg", "orders", "MSG0000", None, ["k-1", "k-2"], "OFF0000", "10.0.0.9", "Order_Msg", 12, 3)
    last = rows[-1]
    assert (last["traceType"], last["requestId"], last["msgId"], last["costTime"], last["success"], last["keys"],
            last["contextCode"], last["timestamp"], last["group"]) == (
        "SubAfter", "req-1", "MSG0001", 7, False, None, 4, None, None)
    assert last["traceQueueOffset"] == 1 and first["traceQueueOffset"] == 0


@pytest.mark.parametrize("body,reason", [
    (_pub(1).replace("\x0112\x01", "\x01twelve\x01"), "bodyLength 'twelve' is not a 32-bit number"),
    (_pub(1).replace("\x014\x01OFF", "\x019\x01OFF"), "msgType 9 is not a MessageType ordinal"),
    ("\x01".join(["Pub", "1", "r", "g"]) + "\x02", "Pub has 4 fields, the client's decoder needs at least 12"),
])
def test_a_broken_trace_event_fails_the_read_naming_the_message(spark, tmp_path, body, reason):
    store = _store_with_trace_bodies(tmp_path, [_pub(0).encode(), body.encode()], [0, 0])
    with pytest.raises(Exception) as info:
        view(spark, store, "trace").collect()
    text = str(info.value)
    assert "CorruptRecordError" in text and reason in text, text[-2000:]
    assert "00000000000000000000" in text            # the CommitLog file holding the message


def test_a_store_without_such_topics_has_no_rows_in_the_views(spark, tmp_path):
    from rmqsource.format.message import MessageExtBrokerInner
    from rmqsource.store.config import StoreConfig
    from rmqsource.store.writer import MessageStoreWriter
    store = tmp_path / "store"                      # messages of a user topic only
    with MessageStoreWriter(store, StoreConfig()) as w:
        assert all(r.ok for r in w.put_messages([MessageExtBrokerInner(topic="orders", queue_id=0, body=b"x")]))
    for name in ("dlq", "retry", "trace"):
        assert view(spark, store, name).collect() == []
    with pytest.raises(Exception, match=r"topicPattern .* matches no topic"):
        view(spark, store, "dlq", topicPattern="%DLQ%nobody").collect()


@pytest.mark.parametrize("run", RUNS)
def test_transactions_rows_end_as_the_producer_ended_them(spark, run):
    """One row per transactional send; its state is what the producer answered (at once, or to the broker's
    checks), and its commits are every commit the broker applied: the producer's commit plus one per check it
    answered with a commit (a 5.x broker can check a half whose end it has not yet written: duplicates)."""
    rows = {r["uniqKey"]: r for r in view(spark, run / "store", "transactions").collect()}
    lines = _jsonl(run / "expected" / "sent.jsonl")
    sends = {d["uniqKey"]: d for d in sent_ok(run).values() if d["kind"] == "tx"}
    answers: dict = {}
    for d in lines:
        if d["record"] == "tx_check":
            answers.setdefault(d["uniqKey"], []).append(d["returned"])
    assert sends and set(rows) == set(sends)
    engine = storeview_entries(run, "")
    for key, send in sends.items():
        r, mine = rows[key], answers.get(key, [])
        final = send["txResolve"] if send["txAction"] == "UNKNOW" else send["txAction"]
        assert r["state"] == {"COMMIT_MESSAGE": "committed", "ROLLBACK_MESSAGE": "rolled_back"}[final], send["seq"]
        assert r["commits"] == (send["txAction"] == "COMMIT_MESSAGE") + mine.count("COMMIT_MESSAGE"), send["seq"]
        # every answered check was a round; a round may be unanswered (the producer still deciding, or stopped)
        assert len(mine) <= r["checkTimes"] and r["halfCopies"] == r["checkTimes"] + 1
        assert (r["topic"], r["queueId"], r["producerGroup"], r["transactionId"]) == (
            send["topic"], send["result"]["queueId"], send["producerGroup"], send["result"]["transactionId"])
        if r["state"] == "committed":       # the row is the first committed record of the real queue
            e = engine[(r["topic"], r["queueId"], r["queueOffset"])]
            assert (e["uniqKey"], e["sysFlagStored"] & 0xC, e["preparedTransactionOffset"] > 0) == (key, 8, True)
            assert r["transactionType"] == "COMMIT_TYPE" and r["resolvedTime"] is not None
        else:
            assert r["queueOffset"] is None and r["commits"] == 0
        assert engine[("RMQ_SYS_TRANS_HALF_TOPIC", 0, next(
            k[2] for k, e in engine.items() if k[0] == "RMQ_SYS_TRANS_HALF_TOPIC"
            and e["commitLogOffset"] == r["halfCommitLogOffset"]))]["uniqKey"] == key
