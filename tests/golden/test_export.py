"""``rmq export`` and ``rmq print`` against the golden corpora (the engine's expected/get rows are the judge)."""

from __future__ import annotations

import base64
import datetime as dt
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rmqsource import cli
from rmqsource.format.system_topics import is_internal_topic
from rmqsource.spark.schema import ARROW_SCHEMA

from golden import case_id, corpora, expected_get_files, read_jsonl

pytestmark = pytest.mark.golden

CORPORA = corpora()


def run(argv) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main([str(a) for a in argv], stdout=out)
    return code, out.getvalue()


def expected_rows(corpus: Path) -> dict:
    out = {}
    for topic, qid, path in expected_get_files(corpus / "expected"):
        for line in read_jsonl(path)[:-1]:
            out[(topic, qid, line["queueOffset"])] = line
    return out


def ms(ts) -> int:
    return (ts - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(milliseconds=1)


def assert_row_is_engine_message(row: dict, want: dict) -> None:
    key = (want["topic"], want["queueId"], want["queueOffset"])
    for f in ("topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "bodyCRC", "flag", "sysFlag",
              "bornHost", "storeHost", "reconsumeTimes", "preparedTransactionOffset", "tags", "msgId"):
        assert row[f] == want[f], (key, f)
    assert ms(row["bornTimestamp"]) == want["bornTimestamp"] and ms(row["storeTimestamp"]) == want["storeTimestamp"]
    assert row["body"] == base64.b64decode(want["body"] or ""), key
    assert dict(row["properties"]) == want["properties"], key
    assert row["keys"] == (None if want["keys"] is None else [k for k in want["keys"].split(" ") if k]), key
    assert row["uniqKey"] == want["properties"].get("UNIQ_KEY"), key
    assert row["tagsCode"] == want["cq"]["tagsCode"], key


@pytest.mark.parametrize("internal", [False, True], ids=["default", "include-internal-topics"])
@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_parquet_export_equals_engine_get(corpus, internal, tmp_path):
    """A whole-store export gives the engine's messages of every user topic; RocketMQ's own topics
    (SCHEDULE_TOPIC_XXXX, %RETRY%...) only with --include-internal-topics."""
    out = tmp_path / "all.parquet"
    flag = ["--include-internal-topics"] if internal else []
    code, text = run(["export", corpus / "store", out, "--config", corpus / "store.properties", *flag])
    assert code == 0, text
    table = pq.read_table(out)
    assert table.schema.remove_metadata().equals(ARROW_SCHEMA)
    rows = table.to_pylist()
    want = {k: w for k, w in expected_rows(corpus).items() if internal or not is_internal_topic(k[0])}
    assert internal or len(want) < len(expected_rows(corpus))      # the corpora hold delay and retry topics
    got = {(r["topic"], r["queueId"], r["queueOffset"]): r for r in rows}
    assert len(got) == len(rows) and set(got) == set(want)
    for key, w in want.items():
        assert_row_is_engine_message(got[key], w)
    assert f"exported {len(rows):,} messages" in text
    assert not list(tmp_path.glob("*.tmp*"))


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_filtered_export_in_every_format(corpus, tmp_path):
    want = expected_rows(corpus)
    times = sorted(w["storeTimestamp"] for w in want.values())
    begin, end = times[len(times) // 4], times[len(times) // 2]
    sel = {k for k, w in want.items() if k[0] == "TopicTest" and w["tags"] in ("TagA", "TagB")
           and begin <= w["storeTimestamp"] < end}
    assert sel
    base = ["--config", corpus / "store.properties", "--topic", "TopicTest", "--tag", "TagA || TagB",
            "--begin", begin, "--end", end]
    code, _ = run(["export", corpus / "store", tmp_path / "f.parquet", *base])
    assert code == 0
    parquet_rows = pq.read_table(tmp_path / "f.parquet").to_pylist()
    assert {(r["topic"], r["queueId"], r["queueOffset"]) for r in parquet_rows} == sel
    code, _ = run(["export", corpus / "store", tmp_path / "f.arrow", *base])
    assert code == 0
    with pa.memory_map(str(tmp_path / "f.arrow")) as src:
        assert pa.ipc.open_file(src).read_all().to_pylist() == parquet_rows
    code, _ = run(["export", corpus / "store", tmp_path / "f.jsonl", *base])
    assert code == 0
    lines = [json.loads(x) for x in (tmp_path / "f.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(x["topic"], x["queueId"], x["queueOffset"], base64.b64decode(x["body"]), x["storeTimestamp"])
            for x in lines] == [(r["topic"], r["queueId"], r["queueOffset"], r["body"], ms(r["storeTimestamp"]))
                                for r in parquet_rows]
    # queue offset range of one queue
    code, _ = run(["export", corpus / "store", tmp_path / "q.parquet", "--config", corpus / "store.properties",
                   "--queue", "TopicTest:1", "--from-offset", 5, "--to-offset", 9])
    assert code == 0
    assert [r["queueOffset"] for r in pq.read_table(tmp_path / "q.parquet").to_pylist()] == [5, 6, 7, 8]


def test_export_argument_errors(tmp_path):
    corpus = CORPORA[0]
    assert run(["export", corpus / "store", tmp_path / "x.csv", "--config", corpus / "store.properties"])[0] == 2
    assert run(["export", corpus / "store", tmp_path, "--format", "jsonl"])[0] == 2
    assert run(["export", corpus / "store", tmp_path / "x.parquet", "--config", corpus / "store.properties",
                "--topic", "NoSuchTopic"])[0] == 2
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_print_topic_time_range(corpus):
    want = expected_rows(corpus)
    times = sorted(w["storeTimestamp"] for k, w in want.items() if k[0] == "OrderTopic")
    begin, end = times[10], times[30]
    sel = sorted((k[1], k[2]) for k, w in want.items() if k[0] == "OrderTopic" and begin <= w["storeTimestamp"] < end)
    code, text = run(["print", "--json", corpus / "store", "OrderTopic", "--begin", begin, "--end", end,
                      "--config", corpus / "store.properties"])
    assert code == 0
    got = [json.loads(x) for x in text.splitlines()]
    assert sorted((g["queueId"], g["queueOffset"]) for g in got) == sel
    for g in got:
        w = want[("OrderTopic", g["queueId"], g["queueOffset"])]
        assert (g["msgId"], g["storeTimestamp"], base64.b64decode(g["body"])) == \
            (w["msgId"], w["storeTimestamp"], base64.b64decode(w["body"] or ""))
    code, text = run(["print", corpus / "store", "OrderTopic", "--begin", begin, "--end", end,
                      "--config", corpus / "store.properties"])
    assert code == 0 and f"OrderTopic: {len(sel)} message(s) stored in" in text
    # nothing in the range, and a topic that does not exist: not found
    assert run(["print", corpus / "store", "OrderTopic", "--begin", 0, "--end", 1,
                "--config", corpus / "store.properties"])[0] == 3
    assert run(["print", corpus / "store", "NoSuchTopic", "--config", corpus / "store.properties"])[0] == 3


def _broker_runs() -> list:
    """Broker-written stores with file ConsumeQueues (a RocksDB one is not read), read in place."""
    from golden import broker_corpora
    return [p for p in broker_corpora()
            if (p / "expected" / "storeview.jsonl").is_file()
            and "storeType=defaultRocksDB" not in (p / "broker.properties").read_text(encoding="utf-8").replace(" ", "")]


@pytest.mark.parametrize("run", _broker_runs(), ids=lambda p: p.name)
def test_export_of_a_broker_store_leaves_out_internal_topics(run, tmp_path):
    """On a real broker's store, a whole-store export gives exactly the engine's ConsumeQueue entries of the
    user topics (expected/storeview.jsonl); --include-internal-topics adds RocketMQ's own records."""
    from collections import Counter
    view = [d for d in read_jsonl(run / "expected" / "storeview.jsonl") if d["record"] == "entry"]
    user = {(d["topic"], d["queueId"], d["queueOffset"]): d for d in view if not is_internal_topic(d["topic"])}
    assert user and len(user) < len(view)
    code, text = run_cli_export(run, tmp_path / "user.parquet")
    assert code == 0, text
    rows = pq.read_table(tmp_path / "user.parquet").to_pylist()
    got = {(r["topic"], r["queueId"], r["queueOffset"]): r for r in rows}
    assert len(got) == len(rows) and set(got) == set(user)
    for key, d in user.items():
        assert (got[key]["commitLogOffset"], got[key]["storeSize"], got[key]["uniqKey"]) == \
            (d["commitLogOffset"], d["storeSize"], d["uniqKey"]), key
    code, text = run_cli_export(run, tmp_path / "all.parquet", "--include-internal-topics")
    assert code == 0, text
    every = Counter(pq.read_table(tmp_path / "all.parquet", columns=["topic"]).column("topic").to_pylist())
    assert Counter({t: n for t, n in every.items() if not is_internal_topic(t)}) == Counter(k[0] for k in user)
    own = Counter(d["topic"] for d in view if is_internal_topic(d["topic"]))
    assert all(every[t] >= n for t, n in own.items()), (every, own)     # the revive log may grow at shutdown
    # a named internal topic is exported
    code, text = run_cli_export(run, tmp_path / "trace.parquet", "--topic", "RMQ_SYS_TRACE_TOPIC")
    assert code == 0, text
    assert pq.read_table(tmp_path / "trace.parquet").num_rows == own["RMQ_SYS_TRACE_TOPIC"] > 0


def run_cli_export(store_run: Path, out: Path, *extra) -> tuple[int, str]:
    return run(["export", store_run / "store", out, *extra])
