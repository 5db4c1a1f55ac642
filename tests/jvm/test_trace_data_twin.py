"""Trace message bodies as both twins parse them (rmqsource/format/trace.py and its Java twin
io/rmqsource/format/TraceData.java, both following the client's TraceDataEncoder.decoderFromTraceDataString):
every trace body of the real-broker corpora gives the same events, field for field; bodies of every field
count the client accepts, and its split rules, agree; hostile bodies fail in both with a CorruptRecordError
of the same text."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from rmqsource.errors import CorruptRecordError
from tests.support.jvm_twins import _Call, jvm_or_skip

trace = pytest.importorskip("rmqsource.format.trace")

pytestmark = pytest.mark.jvm

GOLDEN = Path("/work/shared/golden-broker")
FIELDS = ("trace_type", "timestamp_ms", "region_id", "group", "topic", "msg_id", "offset_msg_id", "tags", "keys",
          "store_host", "client_host", "body_length", "cost_time", "msg_type", "success", "request_id",
          "retry_times", "context_code", "transaction_id", "transaction_state", "from_transaction_check")
# TraceData.Event's field for each TraceEvent field
JAVA_FIELDS = {f: "".join(p if i == 0 else p.capitalize() for i, p in enumerate(f.split("_"))) for f in FIELDS}
JAVA_FIELDS["timestamp_ms"] = "timestampMs"


def golden_bodies() -> list[tuple[str, str]]:
    """(id, body text) of every trace message of the corpora (body_b64 is stored decompressed)."""
    out = []
    for view in sorted(GOLDEN.glob("*/expected/storeview.jsonl")):
        for line in view.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            if r.get("record") == "entry" and r.get("msgTopic") == "RMQ_SYS_TRACE_TOPIC":
                body = base64.b64decode(r["body_b64"]).decode("utf-8", errors="replace")
                out.append((f"{view.parent.parent.name}@{r['commitLogOffset']}", body))
    return out


@pytest.fixture(scope="module")
def twin(request):
    """TraceData.parse through py4j, its events as dicts of the Python field names."""
    jvm = jvm_or_skip(request)
    from py4j.java_gateway import get_field

    def parse(body: str) -> list[dict]:
        with _Call():
            events = jvm.io.rmqsource.format.TraceData.parse(body)
            out = []
            for e in events:
                d = {f: get_field(e, JAVA_FIELDS[f]) for f in FIELDS}
                d["keys"] = None if d["keys"] is None else tuple(d["keys"])
                out.append(d)
            return out
    return parse


def python_events(body: str) -> list[dict]:
    return [{f: getattr(e, f) for f in FIELDS} for e in trace.parse_trace_events(body)]


def sep(*events: list[str], trailing: bool = True) -> str:
    """A body: fields joined by U+0001, each event ended by U+0002 (as the client's encoder writes)."""
    body = "\x02".join("\x01".join(e) for e in events)
    return body + "\x02" if trailing and events else body


PUB = ["Pub", "1700000000123", "DefaultRegion", "pg", "TopicA", "FD00AA", "TagA", "k1 k2", "127.0.0.1:10911", "382",
       "57", "0"]
SUB_BEFORE = ["SubBefore", "1700000000200", "DefaultRegion", "cg", "req-1", "FD00AA", "2", "k1"]
SUB_AFTER = ["SubAfter", "req-1", "FD00AA", "13", "true", "k1"]
END_TX = ["EndTransaction", "1700000000300", "DefaultRegion", "pg", "TopicA", "FD00AA", "TagA", "k1",
          "127.0.0.1:10911", "1", "tx-1", "COMMIT_MESSAGE", "false"]
RECALL = ["Recall", "1700000000400", "DefaultRegion", "pg", "TopicA", "FD00AA", "true"]

GOOD = {
    "pub-12": sep(PUB),
    "pub-13": sep(PUB + ["TRUE"]),
    "pub-14": sep(PUB + ["7F0000010000", "false"]),
    "pub-15": sep(PUB + ["7F0000010000", "true", "10.0.0.1"]),
    "pub-16": sep(PUB + ["7F0000010000", "true", "10.0.0.1", "extra"]),
    "pub-nulls": sep(["Pub", "1", "null", "null", "null", "null", "null", "null", "null", "0", "0", "4", "null",
                      "yes", "null"]),
    "sub-before": sep(SUB_BEFORE),
    "sub-after-6": sep(SUB_AFTER),
    "sub-after-7": sep(SUB_AFTER + ["3"]),
    "sub-after-8": sep(SUB_AFTER + ["0", "1700000000500"]),
    "sub-after-9": sep(SUB_AFTER + ["0", "1700000000500", "cg"]),
    "end-tx": sep(END_TX),
    "end-tx-states": sep(END_TX[:11] + ["ROLLBACK_MESSAGE", "true"], END_TX[:11] + ["UNKNOW", "TrUe"]),
    "recall": sep(RECALL),
    "mixed": sep(PUB, SUB_BEFORE, SUB_AFTER, END_TX, RECALL),
    "no-final-separator": sep(PUB, RECALL, trailing=False),
    "unknown-types-skipped": sep(["Nope", "x"], PUB, ["pub", "1"], [""], RECALL),
    "empty": "",
    "separators-only": "\x02\x02\x02",
    "unicode-digits": sep(["Recall", "\u0661\u0662\u0663", "r", "g", "t", "m", "true"]),   # Character.digit takes them
    "leading-empty-event": "\x02" + sep(PUB),
    "keys-spaces": sep(PUB[:7] + ["  a   b  "] + PUB[8:], SUB_BEFORE[:7] + [" "]),
    "trailing-empty-fields": sep(SUB_AFTER + ["", "", ""]),
    "signed-numbers": sep(["Pub", "+17", "r", "g", "t", "m", "", "", "h", "-1", "+0", "+4"]),
    "long-timestamp": sep(["Recall", "9223372036854775807", "r", "g", "t", "m", "false"]),
    "unicode-text": sep(PUB[:6] + ["标签Ω"] + PUB[7:]),
}

HOSTILE = {
    "pub-11-fields": sep(PUB[:11]),
    "sub-before-7-fields": sep(SUB_BEFORE[:7]),
    "sub-after-5-fields": sep(SUB_AFTER[:5]),
    "end-tx-12-fields": sep(END_TX[:12]),
    "recall-6-fields": sep(RECALL[:6]),
    "trailing-empty-fields-dropped": sep(RECALL[:6] + [""]),
    "sub-before-empty-keys": sep(SUB_BEFORE[:7] + [""]),       # String.split drops it: 7 fields
    "bad-timestamp": sep(["Pub", "12:00"] + PUB[2:]),
    "empty-timestamp": sep(["Recall", ""] + RECALL[2:]),
    "timestamp-overflow": sep(["Recall", "9223372036854775808"] + RECALL[2:]),
    "bad-body-length": sep(PUB[:9] + ["1.5"] + PUB[10:]),
    "int-overflow": sep(SUB_BEFORE[:6] + ["2147483648", "k"]),
    "bad-cost-time": sep(SUB_AFTER[:3] + ["fast"] + SUB_AFTER[4:]),
    "bad-context-code": sep(SUB_AFTER + ["x"]),
    "msg-type-9": sep(PUB[:11] + ["9"]),
    "msg-type-negative": sep(END_TX[:9] + ["-1"] + END_TX[10:]),
    "msg-type-null": sep(PUB[:11] + ["null"]),
    "unknown-transaction-state": sep(END_TX[:11] + ["COMMIT", "false"]),
    "transaction-state-lower": sep(END_TX[:11] + ["commit_message", "false"]),
    "bad-second-event": sep(PUB, ["Recall", "x"] + RECALL[2:]),
    "content-separators-only": sep(RECALL) + "\x01\x01\x02",       # the decoder's line[0] throws
}


@pytest.mark.parametrize("body", [b for _, b in golden_bodies()], ids=[i for i, _ in golden_bodies()])
def test_golden_trace_bodies_give_the_same_events(twin, body):
    got = twin(body)
    assert got, "every corpus trace message holds events"
    assert got == python_events(body)


@pytest.mark.skipif(not GOLDEN.is_dir(), reason="no real-broker corpora on this machine")
def test_the_corpora_have_trace_messages():
    assert len(golden_bodies()) >= 20


@pytest.mark.parametrize("name", sorted(GOOD))
def test_field_counts_and_split_rules_agree(twin, name):
    assert twin(GOOD[name]) == python_events(GOOD[name])


def test_a_few_fields_as_the_client_reads_them(twin):
    pub15, = twin(GOOD["pub-15"])
    assert (pub15["offset_msg_id"], pub15["success"], pub15["client_host"], pub15["keys"]) == \
        ("7F0000010000", True, "10.0.0.1", ("k1", "k2"))
    pub13, = twin(GOOD["pub-13"])
    assert (pub13["offset_msg_id"], pub13["success"]) == (None, True)       # Boolean.parseBoolean("TRUE")
    nulls, = twin(GOOD["pub-nulls"])
    assert (nulls["region_id"], nulls["keys"], nulls["msg_type"], nulls["success"]) == (None, None, "Order_Msg", False)
    after8, = twin(GOOD["sub-after-8"])
    assert (after8["context_code"], after8["timestamp_ms"], after8["group"]) == (0, None, None)
    assert [e["trace_type"] for e in twin(GOOD["unknown-types-skipped"])] == ["Pub", "Recall"]
    assert twin(GOOD["separators-only"]) == [] == twin(GOOD["empty"])


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_bodies_fail_alike(twin, name):
    body = HOSTILE[name]
    with pytest.raises(CorruptRecordError) as py:
        trace.parse_trace_events(body)
    with pytest.raises(CorruptRecordError) as jvm:
        twin(body)
    assert str(jvm.value) == str(py.value)
    assert "trace event" in str(jvm.value)
