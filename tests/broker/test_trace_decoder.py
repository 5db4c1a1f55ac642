"""Trace bodies read by rmqsource (rmqsource.format.trace, the trace view) and by RocketMQ's own client
(``TraceDataEncoder.decoderFromTraceDataString``, run by the harness class ``TraceDecode``) agree event for
event and field for field, and fail on the same bodies.

The bodies: every trace message of the real-broker corpora (``../shared/golden-broker``: what the client's
trace dispatcher sent), and bodies built here for what those corpora lack: every event type at every field
count the decoder accepts, too few fields, numbers it refuses or takes (signs, non-ASCII digits, overflow),
unknown types, empty events, separators only.
"""

from __future__ import annotations

import base64
import json
import subprocess

import pytest

from rmqsource.errors import CorruptRecordError
from rmqsource.format.trace import parse_trace_events

from broker_harness import java
from conftest import version_tuple, versions
from golden import broker_corpora

pytestmark = pytest.mark.broker

S, E = "\x01", "\x02"


def _event(*fields) -> str:
    return S.join(fields) + E


PUB12 = ["Pub", "1795857000001", "DefaultRegion", "pg", "orders", "MSG1", "TagA", "k-1 k-2", "10.0.0.1:10911", "12",
         "3", "0"]
EDGE_BODIES = [
    "",
    _event(*PUB12),
    _event(*PUB12, "false"),
    _event(*PUB12, "OFF1", "TRUE"),
    _event(*PUB12, "OFF1", "true", "10.0.0.9"),
    _event(*PUB12, "OFF1", "true", "10.0.0.9", "extra"),
    _event(*PUB12[:-1]),                                                   # 11 fields
    _event(*PUB12[:9], "twelve", *PUB12[10:]),
    _event(*PUB12[:11], "5"),                                              # msgType out of range
    _event(*PUB12[:1], "+1795857000001", *PUB12[2:9], "١٢", *PUB12[10:]),  # a sign, Arabic-Indic digits
    _event(*PUB12[:1], "99999999999999999999", *PUB12[2:]),                # a long that overflows
    _event(*PUB12[:9], "2147483648", *PUB12[10:]),                         # an int that overflows
    _event(*PUB12[:9], " 12", *PUB12[10:]),
    _event(*PUB12[:6], "null", "null", *PUB12[8:]),                        # Java nulls
    _event(*PUB12[:7], "  k-1   k-2 ", *PUB12[8:]),
    _event("SubBefore", "1795857000002", "DefaultRegion", "cg", "req-1", "MSG1", "2", "k-1"),
    _event("SubBefore", "1795857000002", "DefaultRegion", "cg", "req-1", "MSG1", "2"),
    _event("SubAfter", "req-1", "MSG1", "7", "false", "k-1"),
    _event("SubAfter", "req-1", "MSG1", "7", "true", "k-1", "4"),
    _event("SubAfter", "req-1", "MSG1", "7", "true", "k-1", "4", "1795857000003"),
    _event("SubAfter", "req-1", "MSG1", "7", "true", "k-1", "4", "1795857000003", "cg"),
    "SubAfter" + S + S.join(["req-1", "MSG1", "7", "true", "k-1", "0"]) + S + E,   # a CLOUD client's trailing split
    _event("SubAfter", "req-1", "MSG1", "x", "true", "k-1"),
    _event("EndTransaction", "1795857000004", "DefaultRegion", "pg", "orders", "MSG1", "TagA", "k-1",
           "10.0.0.1:10911", "1", "TX1", "COMMIT_MESSAGE", "false"),
    _event("EndTransaction", "1795857000004", "DefaultRegion", "pg", "orders", "MSG1", "TagA", "k-1",
           "10.0.0.1:10911", "1", "TX1", "UNKNOW", "true"),
    _event("EndTransaction", "1795857000004", "DefaultRegion", "pg", "orders", "MSG1", "TagA", "k-1",
           "10.0.0.1:10911", "1", "TX1", "MAYBE", "true"),
    _event("Recall", "1795857000005", "DefaultRegion", "pg", "orders", "MSG1", "true"),
    _event("Recall", "1795857000005", "DefaultRegion", "pg", "orders", "MSG1"),
    _event("Foo", "1", "2") + _event(*PUB12),                              # an unknown type is skipped
    E + E + _event(*PUB12) + E,                                            # empty events
    S + S + E,                                                             # separators only
    _event(*PUB12) * 50,
]


def _bodies() -> list[str]:
    out = []
    for run in broker_corpora():
        with open(run / "expected" / "storeview.jsonl", encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                if d["record"] == "entry" and d["topic"] == "RMQ_SYS_TRACE_TOPIC":
                    out.append(base64.b64decode(d["body_b64"]).decode("utf-8"))
    assert out or not broker_corpora(), "the real-broker corpora should hold trace messages"
    return out + EDGE_BODIES


def _client_events(classpath: str, bodies: list[str], tmp_path) -> list[dict]:
    src = tmp_path / "bodies.b64"
    src.write_text("".join(base64.b64encode(b.encode()).decode() + "\n" for b in bodies), encoding="utf-8")
    out = tmp_path / "events.jsonl"
    p = subprocess.run([java(), "-cp", classpath, "io.rmqsource.brokertest.TraceDecode", str(src), str(out)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def _theirs(value):
    return None if value == "null" else value


# the fields each event type sets in the client's TraceContext / TraceBean (the others keep defaults)
SET_FIELDS = {
    "Pub": ("timestamp", "regionId", "group", "topic", "msgId", "tags", "keys", "storeHost", "bodyLength",
            "costTime", "msgType"),
    "SubBefore": ("timestamp", "regionId", "group", "requestId", "msgId", "retryTimes", "keys"),
    "SubAfter": ("requestId", "msgId", "costTime", "success", "keys"),
    "EndTransaction": ("timestamp", "regionId", "group", "topic", "msgId", "tags", "keys", "storeHost", "msgType",
                       "transactionId", "transactionState", "fromTransactionCheck"),
    "Recall": ("timestamp", "regionId", "group", "topic", "msgId", "success"),
}
# the client's names of the TraceEvent fields
OURS = {"timestamp": "timestamp_ms", "regionId": "region_id", "group": "group", "topic": "topic", "msgId": "msg_id",
        "offsetMsgId": "offset_msg_id", "tags": "tags", "keys": "keys", "storeHost": "store_host",
        "clientHost": "client_host", "bodyLength": "body_length", "costTime": "cost_time", "msgType": "msg_type",
        "success": "success", "requestId": "request_id", "retryTimes": "retry_times", "contextCode": "context_code",
        "transactionId": "transaction_id", "transactionState": "transaction_state",
        "fromTransactionCheck": "from_transaction_check"}


def _expected(name: str, value):
    value = _theirs(value)
    if name == "keys" and value is not None:
        return tuple(k for k in value.split(" ") if k)
    return value


@pytest.mark.parametrize("version", [v for v in versions() if version_tuple(v) >= (5,)])
def test_trace_bodies_read_as_the_client_reads_them(version, broker_classpath, tmp_path):
    bodies = _bodies()
    client = _client_events(broker_classpath(version), bodies, tmp_path)
    assert len(client) == len(bodies)
    refused = compared = 0
    for n, (body, theirs) in enumerate(zip(bodies, client)):
        try:
            ours = parse_trace_events(body)
        except CorruptRecordError as exc:
            assert "error" in theirs, f"body {n} {body!r}: rmqsource refused it ({exc}), the client read {theirs}"
            refused += 1
            continue
        assert "events" in theirs, f"body {n} {body!r}: the client threw {theirs.get('error')}, rmqsource read {ours}"
        assert len(ours) == len(theirs["events"]), (n, body)
        for mine, event in zip(ours, theirs["events"]):
            assert mine.trace_type == event["traceType"]
            fields = list(SET_FIELDS[mine.trace_type])
            # the optional fields: set in the client exactly where rmqsource found them
            for optional in ("offsetMsgId", "clientHost", "contextCode", "success", "timestamp", "group"):
                if optional not in fields and getattr(mine, OURS[optional]) is not None:
                    fields.append(optional)
            for name in fields:
                assert getattr(mine, OURS[name]) == _expected(name, event[name]), (n, body, name, event)
            compared += 1
    # the bodies built above that the client's decoder throws on (too few fields, numbers, msgType, state,
    # separators only), and every event of the others
    assert refused == 11
    assert compared == sum(len(parse_trace_events(b)) for b in bodies if _reads(b))


def _reads(body: str) -> bool:
    try:
        parse_trace_events(body)
        return True
    except CorruptRecordError:
        return False
