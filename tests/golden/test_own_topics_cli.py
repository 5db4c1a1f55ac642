"""``rmq trace`` and ``rmq dlq`` on a real 5.5.0 broker's stores, judged by what its clients sent and what
its engine stored (``../shared/golden-broker``: sent.jsonl, storeview.jsonl). Read in place, never written."""

from __future__ import annotations

import io
import json

import pytest

from rmqsource import cli

from golden import broker_corpora

pytestmark = pytest.mark.golden

RUNS = [pytest.param(p, id=p.name) for p in broker_corpora()] or [
    pytest.param(None, marks=pytest.mark.skip(reason="no real-broker corpora"))]


def run(*args) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main([str(a) for a in args], stdout=out)
    return code, out.getvalue()


def _jsonl(path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.mark.parametrize("corpus", RUNS)
def test_trace_gives_the_send_event_of_every_traced_message(corpus):
    store = corpus / "store"
    traced = [d for d in _jsonl(corpus / "expected" / "sent.jsonl")
              if d["record"] == "send" and d.get("traced") and (d.get("result") or {}).get("status") == "SEND_OK"]
    assert traced
    for send in traced:
        code, text = run("trace", store, send["uniqKey"], "--json")
        assert code == 0, send["uniqKey"]
        (event,) = [json.loads(line) for line in text.splitlines()]
        assert (event["traceType"], event["msgId"], event["topic"], event["group"], event["keys"],
                event["offsetMsgId"], event["success"]) == (
            "Pub", send["uniqKey"], send["topic"], send["producerGroup"], send["keys"],
            send["result"]["offsetMsgId"], True)
    code, text = run("trace", store, traced[0]["uniqKey"])
    assert code == 0 and "Pub" in text and traced[0]["topic"] in text
    untraced = next(d for d in _jsonl(corpus / "expected" / "sent.jsonl") if d["record"] == "send"
                    and not d.get("traced") and (d.get("result") or {}).get("status") == "SEND_OK")
    code, text = run("trace", store, untraced["uniqKey"])
    assert code == 3 and "no trace event" in text


@pytest.mark.parametrize("corpus", RUNS)
def test_dlq_lists_the_dead_letters_with_their_group_and_origin(corpus):
    store = corpus / "store"
    engine = {d["commitLogOffset"]: d for d in _jsonl(corpus / "expected" / "storeview.jsonl")
              if d["record"] == "entry" and d["topic"].startswith("%DLQ%")}
    assert engine
    code, text = run("dlq", store, "--json")
    assert code == 0
    rows = [json.loads(line) for line in text.splitlines()]
    assert sorted(r["uniqKey"] for r in rows) == sorted(e["uniqKey"] for e in engine.values())
    for r in rows:
        e = next(e for e in engine.values() if e["uniqKey"] == r["uniqKey"])
        assert (r["group"], r["originTopic"], r["originMsgId"], r["reconsumeTimes"]) == (
            e["topic"][len("%DLQ%"):], e["properties"]["RETRY_TOPIC"], e["properties"]["ORIGIN_MESSAGE_ID"],
            e["reconsumeTimes"])
    group = rows[0]["group"]
    code, text = run("dlq", store, "--group", group)
    assert code == 0 and f"dead letters {sum(1 for r in rows if r['group'] == group)}" in text
    code, text = run("dlq", store, "--group", "nobody")
    assert code == 3 and "no dead letters of group nobody" in text
