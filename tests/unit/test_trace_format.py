"""rmqsource.format.trace: trace bodies as the client's TraceDataEncoder writes them (the client's own decoder
judges the same bodies in tests/broker/test_trace_decoder.py; the JVM twin in tests/jvm/test_trace_data_twin.py).
"""

from __future__ import annotations

import pytest

from rmqsource.errors import CorruptRecordError
from rmqsource.format.trace import java_split, parse_trace_events

S, E = "\x01", "\x02"
PUB = ["Pub", "1795857000001", "DefaultRegion", "pg", "orders", "MSG1", "null", "k-1  k-2", "10.0.0.1:10911", "12",
       "3", "1", "OFF1", "true", "10.0.0.9"]


def test_java_split_drops_trailing_empty_strings_only():
    assert java_split("", S) == [""]
    assert java_split("a", S) == ["a"]
    assert java_split(f"a{S}{S}b{S}{S}", S) == ["a", "", "b"]
    assert java_split(f"{S}a", S) == ["", "a"]
    assert java_split(f"{S}{S}", S) == []


@pytest.mark.parametrize("n,extra", [(12, {}), (13, {"success": False}), (14, {"offset_msg_id": "OFF1", "success": False}),
                                     (15, {"offset_msg_id": "OFF1", "success": True, "client_host": "10.0.0.9"})])
def test_pub_fields_by_count(n, extra):
    fields = PUB[:n]
    if n == 13:
        fields = PUB[:12] + ["false"]
    elif n == 14:
        fields = PUB[:13] + ["FALSE"]
    (e,) = parse_trace_events(S.join(fields) + E)
    assert (e.trace_type, e.timestamp_ms, e.group, e.topic, e.msg_id, e.tags, e.keys, e.store_host, e.body_length,
            e.cost_time, e.msg_type) == ("Pub", 1795857000001, "pg", "orders", "MSG1", None, ("k-1", "k-2"),
                                         "10.0.0.1:10911", 12, 3, "Trans_Msg_Half")
    for name in ("offset_msg_id", "success", "client_host"):
        assert getattr(e, name) == extra.get(name)


def test_events_of_every_type_in_one_body():
    body = (S.join(PUB) + E
            + S.join(["SubBefore", "2", "r", "cg", "req", "MSG1", "1", "k-1"]) + E
            + S.join(["SubAfter", "req", "MSG1", "9", "false", "k-1", "2", "3", "cg"]) + E
            + S.join(["EndTransaction", "4", "r", "pg", "orders", "MSG1", "T", "k", "h", "2", "TX", "ROLLBACK_MESSAGE",
                      "true"]) + E
            + S.join(["Recall", "5", "r", "pg", "orders", "MSG1", "false"]) + E
            + S.join(["Later", "6"]) + E)
    events = parse_trace_events(body)
    assert [e.trace_type for e in events] == ["Pub", "SubBefore", "SubAfter", "EndTransaction", "Recall"]
    sub_before, sub_after, end, recall = events[1:]
    assert (sub_before.request_id, sub_before.retry_times, sub_before.group) == ("req", 1, "cg")
    assert (sub_after.cost_time, sub_after.success, sub_after.context_code, sub_after.timestamp_ms,
            sub_after.group) == (9, False, 2, 3, "cg")
    assert (end.msg_type, end.transaction_id, end.transaction_state, end.from_transaction_check) == (
        "Trans_msg_Commit", "TX", "ROLLBACK_MESSAGE", True)
    assert (recall.timestamp_ms, recall.success) == (5, False)


@pytest.mark.parametrize("body,reason", [
    (S.join(PUB[:11]) + E, "Pub has 11 fields, the client's decoder needs at least 12"),
    (S.join(PUB[:9] + ["x"] + PUB[10:]) + E, "bodyLength 'x' is not a 32-bit number"),
    (S.join(PUB[:11] + ["5"]) + E, "msgType 5 is not a MessageType ordinal"),
    (S.join(["SubAfter", "req", "MSG1", "9", "true", "k", "2147483648"]) + E, "contextCode '2147483648'"),
    (S.join(["EndTransaction", "4", "r", "pg", "t", "m", "T", "k", "h", "2", "TX", "commit", "true"]) + E,
     "transactionState 'commit' is not a LocalTransactionState"),
    (S + S + E, "field separators only"),
])
def test_what_the_client_decoder_throws_on_is_a_typed_error(body, reason):
    with pytest.raises(CorruptRecordError, match="trace event") as info:
        parse_trace_events(body, file="/s/commitlog/00000000000000000000", offset=4096)
    assert reason in str(info.value)
    assert info.value.file == "/s/commitlog/00000000000000000000" and info.value.offset == 4096
