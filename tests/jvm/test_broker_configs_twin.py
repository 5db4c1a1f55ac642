"""config/topics.json as both writers keep it (rmqsource/store/broker_configs.py and its Java twin
io/rmqsource/store/BrokerConfigs.java): the same input, the same clock, the same bytes; an existing file is
merged (nothing dropped, queue numbers only grow) and kept in ``topics.json.bak``; the routes are written as
messages become durable (each SYNC_FLUSH put call, each flush), the same puts moving both counters alike; a
timer message is refused by both before anything is written."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from rmqsource.errors import UnsupportedMessageError
from rmqsource.format.configjson import loads_fastjson
from rmqsource.store.config import StoreConfig
from rmqsource.store.writer import MessageStoreWriter
from tests.support.jvm_writer import jvm_put

pytestmark = pytest.mark.jvm

CLOCK_MS = 1_700_000_000_123
EXISTING = """{
\t"dataVersion":{"counter":7,"stateVersion":0,"timestamp":1},
\t"somethingElse":[1,2],
\t"topicConfigTable":{
\t\t"kept":{"topicName":"kept","readQueueNums":8,"writeQueueNums":8,"perm":4,"topicFilterType":"SINGLE_TAG","topicSysFlag":0,"order":true,"attributes":{"+queue.type":"Normal"}},
\t\t"grow":{"topicName":"grow","readQueueNums":1,"writeQueueNums":2,"perm":6,"topicFilterType":"SINGLE_TAG","topicSysFlag":0,"order":false,"attributes":{},"extra":"x"}
\t}
}"""


def line(topic: str, qid: int, props: dict | None = None) -> str:
    d = {"topic": topic, "queueId": qid, "body": base64.b64encode(f"{topic}-{qid}".encode()).decode(),
         "storeTimestamp": CLOCK_MS, "bornTimestamp": CLOCK_MS}
    if props:
        d["properties"] = props
    return json.dumps(d)


LINES = [line("alpha", 0), line("alpha", 3), line("grow", 4), line("beta", 1, {"DELAY": "2"}),
         line("%RETRY%g1", 0), line("kept", 2)]


def python_put(root: Path, inputs: Path) -> None:
    with MessageStoreWriter(root, StoreConfig(), clock_ms=lambda: CLOCK_MS) as w:
        data = inputs.read_bytes()
        res = w.put_json_lines(data)
        assert res.ok_count == data.count(b"\n")


@pytest.mark.parametrize("existing", [False, True], ids=["new", "merged"])
def test_both_writers_keep_the_same_topics_json(tmp_path, existing):
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text("\n".join(LINES) + "\n")
    roots = {"py": tmp_path / "py", "jvm": tmp_path / "jvm"}
    for root in roots.values():
        if existing:
            (root / "config").mkdir(parents=True)
            (root / "config" / "topics.json").write_text(EXISTING)
    python_put(roots["py"], inputs)
    results, trailer, _ = jvm_put(roots["jvm"], "-", inputs, clock_ms=CLOCK_MS)
    assert len(results) == len(LINES) and "error" not in trailer, trailer
    py = (roots["py"] / "config" / "topics.json").read_bytes()
    jv = (roots["jvm"] / "config" / "topics.json").read_bytes()
    assert py == jv
    doc = loads_fastjson(py)
    table = doc["topicConfigTable"]
    assert "SCHEDULE_TOPIC_XXXX" not in table                    # the broker creates its own topics
    assert table["alpha"]["readQueueNums"] == table["alpha"]["writeQueueNums"] == 4
    assert table["beta"]["readQueueNums"] == 2                   # its real queue id 1, though parked
    assert table["%RETRY%g1"]["perm"] == 6 and table["alpha"]["attributes"] == {}
    assert doc["dataVersion"]["timestamp"] == CLOCK_MS
    if existing:
        assert table["kept"]["readQueueNums"] == 8 and table["kept"]["perm"] == 4   # never shrunk or reset
        assert table["kept"]["attributes"] == {"+queue.type": "Normal"}
        assert table["grow"] == {**table["grow"], "readQueueNums": 5, "writeQueueNums": 5, "extra": "x"}
        assert doc["somethingElse"] == [1, 2] and doc["dataVersion"]["counter"] == 8
        for root in roots.values():                          # the broker's .bak: the previous content
            assert (root / "config" / "topics.json.bak").read_text() == EXISTING
    else:
        assert doc["dataVersion"] == {"counter": 1, "stateVersion": 0, "timestamp": CLOCK_MS}
    # a second writer session with nothing new leaves the file alone
    before = py
    python_put(roots["py"], inputs)
    jvm_put(roots["jvm"], "-", inputs, clock_ms=CLOCK_MS + 5)
    assert (roots["py"] / "config" / "topics.json").read_bytes() == before
    assert (roots["jvm"] / "config" / "topics.json").read_bytes() == before


def python_put_batches(root: Path, inputs: Path, batch: int, flush_type: str, flush: bool) -> None:
    with MessageStoreWriter(root, StoreConfig.from_mapping({"flushDiskType": flush_type}),
                            clock_ms=lambda: CLOCK_MS) as w:
        lines = inputs.read_bytes().splitlines(keepends=True)
        for i in range(0, len(lines), batch):
            assert w.put_json_lines(b"".join(lines[i:i + batch])).ok_count == len(lines[i:i + batch])
            if flush:
                w.flush()


@pytest.mark.parametrize("existing", [False, True], ids=["new", "merged"])
@pytest.mark.parametrize("durable_by", ["SYNC_FLUSH", "flush"])
def test_both_writers_route_as_the_puts_become_durable(tmp_path, existing, durable_by):
    """Batches of two lines, each made durable by its SYNC_FLUSH put call or by a flush after it: each routes a
    new topic or queue, so each writes topics.json (the dataVersion counter one up per batch, the previous
    content in topics.json.bak), in both writers alike."""
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text("\n".join(LINES) + "\n")
    flush_type = "SYNC_FLUSH" if durable_by == "SYNC_FLUSH" else "ASYNC_FLUSH"
    roots = {"py": tmp_path / "py", "jvm": tmp_path / "jvm"}
    for root in roots.values():
        if existing:
            (root / "config").mkdir(parents=True)
            (root / "config" / "topics.json").write_text(EXISTING)
    python_put_batches(roots["py"], inputs, 2, flush_type, flush=durable_by == "flush")
    jvm_put(roots["jvm"], "-", inputs, batch=2, clock_ms=CLOCK_MS, overrides=[f"flushDiskType={flush_type}"],
            flush=durable_by == "flush")
    config = {name: root / "config" for name, root in roots.items()}
    py = (config["py"] / "topics.json").read_bytes()
    assert py == (config["jvm"] / "topics.json").read_bytes()
    assert (config["py"] / "topics.json.bak").read_bytes() == (config["jvm"] / "topics.json.bak").read_bytes()
    counter = loads_fastjson(py)["dataVersion"]["counter"]
    batches = len(LINES) // 2                            # every batch routes something new
    assert counter == (7 + batches if existing else batches)
    bak = loads_fastjson((config["py"] / "topics.json.bak").read_text())     # as it was before the last batch
    assert bak["dataVersion"]["counter"] == counter - 1 and "%RETRY%g1" not in bak["topicConfigTable"]


@pytest.mark.parametrize("prop", ["TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS"])
def test_a_timer_message_is_refused_by_both_before_any_write(tmp_path, prop):
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text("\n".join([line("alpha", 0), line("alpha", 1, {prop: "30000"})]) + "\n")
    with pytest.raises(UnsupportedMessageError, match=f"property {prop}="):
        python_put(tmp_path / "py", inputs)
    results, trailer, rc = jvm_put(tmp_path / "jvm", "-", inputs, clock_ms=CLOCK_MS, check=False)
    assert rc != 0 and not results
    assert trailer.get("error", {}).get("type") == "UnsupportedMessageError", trailer
    assert f"property {prop}=" in trailer["error"]["message"]
    for root in (tmp_path / "py", tmp_path / "jvm"):
        assert not (root / "consumequeue").exists() or not any((root / "consumequeue").rglob("0*"))
        assert not (root / "config" / "topics.json").exists()


def test_a_delay_level_wins_over_timer_properties(tmp_path):
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text(line("alpha", 1, {"DELAY": "1", "TIMER_DELIVER_MS": "5", "TIMER_DELAY_SEC": "9"}) + "\n")
    python_put(tmp_path / "py", inputs)
    jvm_put(tmp_path / "jvm", "-", inputs, clock_ms=CLOCK_MS)
    a = (tmp_path / "py" / "commitlog" / "00000000000000000000").read_bytes()
    b = (tmp_path / "jvm" / "commitlog" / "00000000000000000000").read_bytes()
    assert a == b and b"TIMER_DELIVER_MS" not in a and b"REAL_TOPIC\x01alpha" in a
