"""Reading a store while a real broker writes it (RealBroker --send-for, see conftest.start_live_broker).

The broker sends synchronously at a modest rate over 3 topics of 4 queues (normal, props, multikey, tiny,
ordered, batch and compressed big messages, each with user property ``rb_seq``) and writes each SEND_OK to
``expected/sent.jsonl`` as soon as the client has it. Meanwhile the test reads the same store directory:

- per-topic reads through MessageStoreReader and ``rmq export --topic`` give only whole messages that the
  broker acknowledged (same body, UNIQ_KEY, queue and queue offset as the send result), none twice, each
  queue a prefix 0..n-1 of its offsets, and every read a superset of the one before;
- a Spark stream (``readStream.format("rmq")``, processing-time trigger, memory sink) picks up messages while
  the broker sends and, once the broker stopped and the stream caught up, holds every SEND_OK of its topic once;
- no read (batch, stream, ``rmq lag``, ``rmq verify``) changes a byte or an mtime of the stopped broker's store.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import time
import zlib
from collections import Counter
from pathlib import Path

import pytest

from conftest import (VARIANTS, broker_params, finish_live_broker, release_live_broker, run_once, start_live_broker,
                      stop_live_broker, store_state)
from test_real_broker import assert_queue_layout, config, read_jsonl, run_cli, topic_records

pytestmark = pytest.mark.broker

TOPICS = ["lv_topic_0", "lv_topic_1", "lv_topic_2"]


def send_ok_by_seq(run: Path) -> dict[int, dict]:
    """{seq: sent line} of every acknowledged send so far (a torn last line is not yet a send)."""
    return {s["seq"]: s for s in read_jsonl(run / "expected" / "sent.jsonl")
            if s["record"] == "send" and s["result"] and s["result"]["status"] == "SEND_OK"}


def inflate(body: bytes, sys_flag: int) -> bytes:
    return zlib.decompress(body) if sys_flag & 1 else body


def reader_rows(run: Path) -> list[tuple]:
    """(topic, queueId, queueOffset, seq, uniqKey, body) of every message of TOPICS, per-topic reads."""
    from rmqsource.store.reader import MessageStoreReader
    out = []
    with MessageStoreReader(run / "store", config(run)) as reader:
        for topic in TOPICS:
            for r in topic_records(reader, topic):
                out.append((r.topic, r.queue_id, r.queue_offset, int(r.properties["rb_seq"]), r.uniq_key,
                            inflate(r.body, r.sys_flag)))
    return out


def has_topic(run: Path, topic: str) -> bool:
    from rmqsource.store.reader import MessageStoreReader
    with MessageStoreReader(run / "store", config(run)) as reader:
        return any(t == topic for t, _ in reader.queue_keys())


def export_rows(run: Path, topic: str, out: Path) -> list[tuple]:
    """The export of one topic; none while the broker has dispatched no message of it yet (a named topic that
    does not exist is an error, and the first sends may not have reached every topic)."""
    present = has_topic(run, topic)          # before the export: once there, a topic stays
    err = io.StringIO()
    with contextlib.redirect_stderr(err):    # the refusal is an error line on stderr
        code, text = run_cli("export", "--config", run / "broker.properties", run / "store", out, "--topic", topic,
                             "--format", "jsonl")
    if code != 0 and not present and f"topic {topic!r} does not exist" in err.getvalue():
        return []
    assert code == 0, text + err.getvalue()
    rows = []
    for line in out.read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        rows.append((d["topic"], d["queueId"], d["queueOffset"], int(d["properties"]["rb_seq"]), d["uniqKey"],
                     inflate(base64.b64decode(d["body"]), d["sysFlag"])))
    return rows


def check_rows(run: Path, rows: list[tuple], what: str) -> list[str]:
    """Problems: a row that is no acknowledged send (waiting a moment for the send's line: the broker stores a
    message before its client writes the SEND_OK down), differs from it, or comes twice; a queue with holes."""
    sent = send_ok_by_seq(run)
    deadline = time.monotonic() + 10
    while any(r[3] not in sent for r in rows) and time.monotonic() < deadline:
        time.sleep(0.2)
        sent = send_ok_by_seq(run)
    problems = []
    for topic, qid, qoff, seq, uniq, body in rows:
        s = sent.get(seq)
        if s is None:
            problems.append(f"{what}: {topic}/{qid}@{qoff} rb_seq {seq} uniqKey {uniq}: no SEND_OK send")
            continue
        res = s["result"]
        want = (s["topic"], res["queueId"], res["queueOffset"], res["msgId"], base64.b64decode(s["body_b64"]))
        got = (topic, qid, qoff, uniq, body)
        if got != want:
            diff = {k: (g if k != "body" else len(g), w if k != "body" else len(w))
                    for k, g, w in zip(("topic", "queueId", "queueOffset", "uniqKey", "body"), got, want) if g != w}
            problems.append(f"{what}: rb_seq {seq}: (read, broker) {diff}")
    dups = [k for k, n in Counter(r[3] for r in rows).items() if n > 1]
    problems += [f"{what}: rb_seq {k} read more than once" for k in dups[:10]]
    per_queue: dict[tuple, list[int]] = {}
    for r in rows:
        per_queue.setdefault((r[0], r[1]), []).append(r[2])
    for q, offs in sorted(per_queue.items()):
        if sorted(offs) != list(range(len(offs))):
            problems.append(f"{what}: {q[0]}/{q[1]} offsets are not 0..{len(offs) - 1}: {sorted(offs)[:5]}...")
    return problems


def still_sending(run: Path) -> bool:
    """Whether the broker has not finished its sends yet (``expected/SENT`` comes after the last one)."""
    return not (run / "expected" / "SENT").exists()


def keys_of(rows) -> set[tuple]:
    return {(r[0], r[1], r[2], r[3]) for r in rows}


@pytest.mark.parametrize("broker", broker_params())
def test_reads_beside_a_sending_broker_give_whole_acknowledged_messages(broker, broker_classpath, tmp_path):
    version, variant = broker
    run = tmp_path / "run"
    proc = start_live_broker(broker_classpath(version), run, send_for=25, rate=40, settings=VARIANTS[variant])
    rounds, problems, sizes = 0, [], []
    prev_reader: set = set()
    prev_export: dict[str, set] = {t: set() for t in TOPICS}
    try:
        while proc.poll() is None:
            rows = reader_rows(run)
            problems += check_rows(run, rows, f"round {rounds} reader")
            now = keys_of(rows)
            if not prev_reader <= now:
                problems.append(f"round {rounds} reader: gone since the last read: {sorted(prev_reader - now)[:5]}")
            prev_reader = now
            for topic in TOPICS:
                ex = export_rows(run, topic, tmp_path / f"export-{rounds}-{topic}.jsonl")
                problems += check_rows(run, ex, f"round {rounds} export {topic}")
                ex_keys = keys_of(ex)
                if {r[0] for r in ex} - {topic}:
                    problems.append(f"round {rounds} export {topic}: other topics {({r[0] for r in ex})}")
                if not prev_export[topic] <= ex_keys:
                    problems.append(f"round {rounds} export {topic}: gone since the last export: "
                                    f"{sorted(prev_export[topic] - ex_keys)[:5]}")
                prev_export[topic] = ex_keys
            sizes.append((len(rows), still_sending(run)))
            rounds += 1
            assert not problems, "\n".join(problems[:30])
    except BaseException:
        stop_live_broker(proc)
        raise
    finish_live_broker(proc, run)
    assert_queue_layout(run)                  # the variant's queues (RocksDB ones with rocksdb-v2)
    during = [n for n, running in sizes if running]
    print(f"broker {version} {variant}: {rounds} read rounds, messages seen while it sent: {during}, "
          f"{len(send_ok_by_seq(run))} SEND_OK in all")
    assert len(during) >= 3 and len(set(during)) >= 3, f"the reads should overlap the sends: {sizes}"
    # After the clean shutdown every acknowledged send is there, once.
    final = reader_rows(run)
    problems = check_rows(run, final, "after shutdown")
    assert not problems, "\n".join(problems[:30])
    sent = send_ok_by_seq(run)
    assert sorted(r[3] for r in final) == sorted(sent), (len(final), len(sent))
    assert during[0] < len(sent), "the reads should begin while the broker still had sends to make"


@pytest.mark.parametrize("broker", broker_params())
def test_stream_beside_a_sending_broker_gets_every_send_once(broker, broker_classpath, spark, tmp_path):
    version, variant = broker
    topic = TOPICS[1]
    run = tmp_path / "run"
    # The stream starts on the running broker's store before the first send (its first micro-batch, query
    # planning and Python workers, takes 10-40 s on a loaded 2-core machine), then the broker sends for 20 s
    # (one-second triggers: many micro-batches while it sends).
    proc = start_live_broker(broker_classpath(version), run, send_for=20, rate=40, hold=True,
                             settings=VARIANTS[variant])
    name = f"live_{version.replace('.', '_')}_{variant.replace('-', '_')}"
    query = None
    seen = []
    try:
        df = (spark.readStream.format("rmq").option("topics", topic).option("startingOffsets", "earliest")
              .option("decompress", "true").option("config", str(run / "broker.properties"))
              .load(str(run / "store")))
        query = (df.select("topic", "queueId", "queueOffset", "uniqKey", "properties", "body").writeStream
                 .format("memory").queryName(name).trigger(processingTime="1 second")
                 .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
        deadline = time.monotonic() + 180
        while not query.recentProgress and query.exception() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert query.exception() is None, query.exception()
        release_live_broker(proc, run)
        while proc.poll() is None:
            time.sleep(1)
            n = spark.sql(f"select count(*) from {name}").first()[0]
            if still_sending(run):
                seen.append(n)
            assert query.exception() is None, query.exception()
        finish_live_broker(proc, run)
        query.processAllAvailable()
        rows = spark.sql(f"select * from {name}").collect()
    finally:
        if query is not None:
            query.stop()
        stop_live_broker(proc)
    print(f"broker {version} {variant}: stream rows while the broker sent {seen}, {len(rows)} after it stopped")
    grew = sorted(set(n for n in seen if n > 0))
    assert len(grew) >= 2, f"the stream should pick up messages while the broker sends: {seen}"
    got = [(r.topic, r.queueId, r.queueOffset, int(r.properties["rb_seq"]), r.uniqKey, bytes(r.body))
           for r in rows]
    problems = check_rows(run, got, "stream")
    assert not problems, "\n".join(problems[:30])
    want = sorted(seq for seq, s in send_ok_by_seq(run).items() if s["topic"] == topic)
    assert sorted(r[3] for r in got) == want, (len(got), len(want))
    assert grew[0] < len(want), "the stream should have rows before the broker sent its last"


@pytest.fixture(scope="module", params=broker_params())
def stopped_live_run(request, broker_classpath, tmp_path_factory):
    """A live broker's run once it stopped: made once for both passes of scripts/test.sh (conftest.run_once),
    since each test takes the store's state itself before it reads."""
    version, variant = request.param

    def make(run: Path) -> None:
        finish_live_broker(start_live_broker(broker_classpath(version), run, send_for=6, rate=40,
                                             settings=VARIANTS[variant]), run)
    return run_once(tmp_path_factory, f"live-stopped-{version}-{variant}", make, "expected/DONE")


def test_reads_never_change_a_broker_file(stopped_live_run, spark, tmp_path):
    run = stopped_live_run
    before = store_state(run / "store")
    sent = send_ok_by_seq(run)
    opts = {"topics": ",".join(TOPICS), "decompress": "true", "config": str(run / "broker.properties")}
    batch = spark.read.format("rmq").options(**opts).load(str(run / "store"))
    rows = batch.select("topic", "queueId", "queueOffset", "uniqKey", "properties", "body").collect()
    got = [(r.topic, r.queueId, r.queueOffset, int(r.properties["rb_seq"]), r.uniqKey, bytes(r.body)) for r in rows]
    assert not check_rows(run, got, "batch")
    assert sorted(r[3] for r in got) == sorted(sent)
    assert batch.where("queueId = 1").count() == sum(1 for s in sent.values() if s["result"]["queueId"] == 1)
    stream = (spark.readStream.format("rmq").options(**opts).option("startingOffsets", "earliest")
              .load(str(run / "store")).select("properties").writeStream.format("memory")
              .queryName("live_stopped").trigger(availableNow=True)
              .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    stream.awaitTermination(300)
    assert spark.sql("select count(*) from live_stopped").first()[0] == len(sent)
    code, out = run_cli("lag", "--json", "--config", run / "broker.properties", run / "store")
    assert code == 0, out
    lag = [json.loads(l) for l in out.splitlines() if l.strip()]
    assert {r["group"] for r in lag} >= {"rb_live"}
    code, out = run_cli("verify", "--config", run / "broker.properties", run / "store")
    assert code == 0, out         # ConsumeQueue files, or the units of the RocksDB database: no error
    after = store_state(run / "store")
    changed = {k: (before.get(k), after.get(k)) for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert not changed, changed
