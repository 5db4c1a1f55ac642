"""A store written by ``rmq put`` handed to a real broker: it routes every topic from the writer's
config/topics.json (autoCreateTopicEnable=false, no admin command), serves every message byte for byte through
the official lite pull consumer, and delivers a delay-level message (parked by the writer in SCHEDULE_TOPIC_XXXX
as the broker's put hook parks it) under its real topic, not before it is due."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import BROKER_STORE_SETTINGS, serve_store, versions

pytestmark = pytest.mark.broker

TOPICS = ["sv_topic_0", "sv_topic_1", "sv_topic_2"]
DELAY_LEVEL = 4                      # 30 s with the default messageDelayLevel
DELAY_MS = 30_000
TAGS = ["TagA", None, "标签Ω", "TagB"]


def workload(n: int = 240) -> list[dict]:
    out = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        props = {"sv_seq": str(i), "note": f"ünï:{i};=x"}
        if i % 40 == 7:
            props["DELAY"] = str(DELAY_LEVEL)
        body = (f"message {i} " + "é" * (i % 13)).encode() if i % 17 else bytes(range(256)) * (1 + i % 3)
        d = {"topic": topic, "queueId": (i // 3) % (3 + TOPICS.index(topic)), "keys": f"k-{i}",
             "properties": props, "body": base64.b64encode(body).decode()}
        if TAGS[i % len(TAGS)] is not None:
            d["tags"] = TAGS[i % len(TAGS)]
        out.append(d)
    return out


def rmq(*argv, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmqsource", *map(str, argv)], input=stdin, capture_output=True,
                          timeout=300)


@pytest.mark.parametrize("version", versions())
def test_broker_serves_a_store_written_by_rmq_put(version, broker_classpath, tmp_path):
    msgs = workload()
    store = tmp_path / "store"
    cfg = [a for k, v in {**BROKER_STORE_SETTINGS, "engineVersion": version}.items() for a in ("-C", f"{k}={v}")]
    put_at_ms = int(time.time() * 1000)
    p = rmq("put", *cfg, store, stdin=b"".join(json.dumps(m).encode() + b"\n" for m in msgs))
    assert p.returncode == 0, p.stderr.decode()
    topics_json = json.loads((store / "config" / "topics.json").read_text())
    assert sorted(topics_json["topicConfigTable"]) == TOPICS
    run = serve_store(broker_classpath(version), tmp_path / "run", store, TOPICS, expect=len(msgs),
                      wait_ms=90_000, settings={"autoCreateTopicEnable": "false"})
    routes = json.loads((run / "expected" / "routes.json").read_text())
    for t in TOPICS:
        n = max(m["queueId"] for m in msgs if m["topic"] == t) + 1
        assert routes[t] == {"readQueueNums": n, "writeQueueNums": n}, routes
    served = [json.loads(l) for l in (run / "expected" / "consumed.jsonl").read_text().splitlines() if l]
    by_seq: dict[int, list[dict]] = {}
    for s in served:
        by_seq.setdefault(int(s["properties"]["sv_seq"]), []).append(s)
    missing = [i for i in range(len(msgs)) if i not in by_seq]
    assert not missing, f"{len(missing)} messages not served, first {missing[:10]}"
    assert all(len(v) == 1 for v in by_seq.values())
    for i, m in enumerate(msgs):
        (s,) = by_seq[i]
        assert s["topic"] == m["topic"] and s["queueId"] == m["queueId"], (i, s["topic"], s["queueId"])
        assert base64.b64decode(s["body_b64"]) == base64.b64decode(m["body"]), i
        assert s["tags"] == m.get("tags") and s["keys"] == m["keys"]
        for k, v in m["properties"].items():
            if k != "DELAY":
                assert s["properties"][k] == v, (i, k)
        if "DELAY" in m["properties"]:
            # parked by the writer at store time; the broker's ScheduleMessageService delivers it when due
            assert s["receivedAtMs"] >= put_at_ms + DELAY_MS - 1_000, (i, s["receivedAtMs"] - put_at_ms)
            assert s["properties"].get("REAL_TOPIC") == m["topic"]
    # queue offsets of the directly stored messages are the writer's, in order per queue
    plain = [s for s in served if "DELAY" not in msgs[int(s["properties"]["sv_seq"])]["properties"]]
    per_queue: dict[tuple, list[int]] = {}
    for s in plain:
        per_queue.setdefault((s["topic"], s["queueId"]), []).append(s["queueOffset"])
    for q, offs in per_queue.items():
        assert sorted(offs) == list(range(len(offs))), q
    print(f"broker {version}: served {len(served)} of {len(msgs)} messages written by rmq put "
          f"({sum('DELAY' in m['properties'] for m in msgs)} delay-level, due after {DELAY_MS} ms)")
