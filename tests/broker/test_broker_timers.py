"""The timers view against a real broker (the ``broker_run`` of conftest.py): what the broker did with every
timer and delay send is the reference.

The harness (RealBroker, ``recallMessageEnable=true``) sends ``timer`` (due in 2-3 s) and ``delay`` (levels
1-2), both delivered before the drain ends; ``timer_parked`` (hours ahead) and ``delay_parked`` (level 18),
still waiting at shutdown; ``timer_recalled`` (due in 3-4 s) and ``timer_parked_recalled`` (hours ahead), each
recalled by ``DefaultMQProducer.recallMessage`` right after its send (the answer is ``recall`` in sent.jsonl).
A recalled timer is never delivered: the broker parks a marker beside it and drops both when the slot is due.

A 4.x broker (no timer messages) gets the delays only: each in the state the broker's deliveries show.

Checked in the store layer (store/timers.py), its JVM twin (store/Timers.java) and the Spark view of the
session's mode: one row per send under its real topic, in the state the broker's deliveries show
(``delivered`` / ``pending`` / ``recalled``), due at the broker's ``TIMER_OUT_MS`` (the send's delivery time
floored to the wheel's 1 s precision; a whole second moves one back), and no row for a recall marker.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from rmqsource.store.reader import MessageStoreReader
from rmqsource.store.timers import DELIVERED, PENDING, RECALLED, timer_entries

import pytest

from jvm_twins import jvm_timers
from test_real_broker import TIMERS, config, read_jsonl, send_ok, topic_records, workload_kinds

TIMER_KINDS = {"timer": DELIVERED, "delay": DELIVERED, "timer_parked": PENDING, "delay_parked": PENDING,
               "timer_recalled": RECALLED, "timer_parked_recalled": RECALLED}
PRECISION_MS = 1000                     # the broker's timerPrecisionMs (default)


def timer_sends(run) -> list[dict]:
    return [s for s in send_ok(run) if s["kind"] in TIMER_KINDS]


def expected_state(send: dict) -> str:
    """What the broker did: a recall it refused leaves the timer to fire (or to wait)."""
    if send["kind"].endswith("_recalled") and "msgId" not in (send.get("recall") or {}):
        return DELIVERED if send["kind"] == "timer_recalled" else PENDING
    return TIMER_KINDS[send["kind"]]


def wheel_due(deliver_ms: int) -> int:
    """TIMER_OUT_MS as the broker computes it from the send's TIMER_DELIVER_MS (HookUtils.transformTimerMessage)."""
    return deliver_ms - PRECISION_MS if deliver_ms % PRECISION_MS == 0 else deliver_ms // PRECISION_MS * PRECISION_MS


def has_timers(run) -> bool:
    """Whether the run's RocketMQ line has timer messages and their recall (5.x); a 4.x run has delays only."""
    return TIMERS <= workload_kinds(run)


def user_entries(run):
    with MessageStoreReader(run / "store", config(run)) as reader:
        return timer_entries(reader, exclude_internal=True)


def test_recalls_were_answered_and_never_delivered(broker_run):
    if not has_timers(broker_run):
        pytest.skip("no timer messages and no recall before RocketMQ 5")
    recalled = [s for s in timer_sends(broker_run) if s["kind"].endswith("_recalled")]
    assert {s["kind"] for s in recalled} == {"timer_recalled", "timer_parked_recalled"}
    assert all(s["recall"].get("msgId") == s["result"]["msgId"] for s in recalled), \
        [s["recall"] for s in recalled]
    consumed = {c.get("uniqKey") for c in read_jsonl(broker_run / "expected" / "consumed.jsonl")}
    assert not [s["seq"] for s in recalled if s["uniqKey"] in consumed]


def test_every_timer_send_is_one_row_in_the_brokers_state(broker_run):
    entries = user_entries(broker_run)
    sends = timer_sends(broker_run)
    states = Counter(expected_state(s) for s in sends)
    if has_timers(broker_run):
        assert states[RECALLED] >= 2
    else:
        assert states[DELIVERED] and states[PENDING], states
    by_key = Counter((e.real_topic, e.uniq_key) for e in entries)
    entry = {(e.real_topic, e.uniq_key): e for e in entries}
    consumed = {c.get("uniqKey") for c in read_jsonl(broker_run / "expected" / "consumed.jsonl")}
    problems = []
    for s in sends:
        key = (s["topic"], s["uniqKey"])
        if by_key[key] != 1:
            problems.append(f"seq {s['seq']} {s['kind']}: {by_key[key]} rows")
            continue
        e, want = entry[key], expected_state(s)
        if e.state != want:
            problems.append(f"seq {s['seq']} {s['kind']}: {e.state}, the broker: {want}")
        if e.real_queue_id != s["result"]["queueId"]:
            problems.append(f"seq {s['seq']} {s['kind']}: queue {e.real_queue_id}, sent to {s['result']['queueId']}")
        if s["deliverTimeMs"] is not None and e.deliver_time_ms != wheel_due(s["deliverTimeMs"]):
            problems.append(f"seq {s['seq']} {s['kind']}: due {e.deliver_time_ms}, sent for {s['deliverTimeMs']}")
        if (e.state == DELIVERED) != (s["uniqKey"] in consumed):
            problems.append(f"seq {s['seq']} {s['kind']}: {e.state}, consumed: {s['uniqKey'] in consumed}")
    assert not problems, "\n".join(problems)
    # nothing else: no row for a recall marker (it carries the target's UNIQ_KEY and topic), no stray copy
    assert len(entries) == len(sends)


def test_a_rolled_timer_is_one_row(broker_run):
    """With the harness's 8 s roll window the wheel re-parks timers hours ahead: several records of one message
    in rmq_sys_wheel_timer (the broker's own, read raw), one row in the view."""
    if not has_timers(broker_run):
        pytest.skip("no timer messages before RocketMQ 5")
    with MessageStoreReader(broker_run / "store", config(broker_run)) as reader:
        copies = Counter((r.properties.get("REAL_TOPIC"), r.uniq_key)
                         for r in topic_records(reader, "rmq_sys_wheel_timer")
                         if "TIMER_DEL_UNIQKEY" not in r.properties)
        entries = timer_entries(reader, exclude_internal=True)
    parked = [s for s in timer_sends(broker_run) if s["kind"] in ("timer_parked", "timer_parked_recalled")]
    rolled = [s for s in parked if copies[(s["topic"], s["uniqKey"])] >= 2]
    assert len(rolled) >= len(parked) // 2, (len(rolled), len(parked))
    rows = Counter((e.real_topic, e.uniq_key) for e in entries)
    assert all(rows[(s["topic"], s["uniqKey"])] == 1 for s in rolled)


def test_jvm_twin_equals_python(broker_run):
    with MessageStoreReader(broker_run / "store", config(broker_run)) as reader:
        every = [dataclasses.asdict(e) for e in timer_entries(reader)]
    assert RECALLED in {e["state"] for e in every} or not has_timers(broker_run)
    assert jvm_timers(broker_run / "store") == every


def test_spark_view_in_the_sessions_mode(broker_run, spark):
    entries = user_entries(broker_run)
    df = (spark.read.format("rmq").option("view", "timers").option("config", str(broker_run / "broker.properties"))
          .load(str(broker_run / "store")))
    rows = [(r.topic, r.uniqKey, r.state, r.commitLogOffset) for r in df.collect()]
    assert rows == [(e.real_topic, e.uniq_key, e.state, e.phy_offset) for e in entries]
    recalled = df.where("state = 'recalled'")          # pushed down: exact
    assert sorted(r.uniqKey for r in recalled.collect()) == sorted(e.uniq_key for e in entries if e.state == RECALLED)
