"""rmqsource against a real Apache RocketMQ broker started for the test (see conftest.py).

The broker's own answers (send results, deliveries, admin topicStats and consumeStats) are the reference;
rmqsource reads the stopped broker's store through per-topic reads and the public store API
(MessageStoreReader, ``rmq lag``, ``rmq verify``, ``format("rmq")`` with ``topics``, a stream at
``startingOffsets=group``), so the checks hold whether or not whole-store reads include RocketMQ's own topics.

Every check runs on every broker variant of conftest.VARIANTS (ids ``5.5.0-default``, ``5.5.0-rocksdb-v2``): file
ConsumeQueues and consumerOffset.json, or ConsumeQueues and consumer offsets in RocksDB; clean and killed. The
checks are the same for both but one: the store's layout is the variant's (``test_workload_ran``).  ``rmq verify``
checks the ConsumeQueue files, or the units in the RocksDB database (docs/layouts.md), and
``test_queue_units_point_at_their_records`` checks the units through the reader as well.

Kinds (harness RealBroker): ``plain normal multikey props big tiny order batch`` are stored where the send
result says (queueId, queueOffset, offsetMsgId); ``delay`` (level 1-2), ``timer`` (2-3 s) and
``tx_commit`` are stored first elsewhere (SCHEDULE_TOPIC_XXXX, rmq_sys_wheel_timer, the half topic) and then
put under their topic by the broker, at a position the send result does not give; ``delay_parked``
(level 18), ``timer_parked`` (hours ahead), ``tx_rollback`` and the recalled timers (``timer_recalled``,
``timer_parked_recalled``: test_broker_timers.py) never reach their topic. A 4.x broker has no timers: its
workload has every other kind (``workload_kinds``).
"""

from __future__ import annotations

import base64
import io
import json
import zlib
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from rmqsource import cli
from rmqsource.format.consumequeue import PRE_BLANK_SIZE
from rmqsource.format.record import Kind
from rmqsource.format.tagscode import consume_queue_tags_code
from rmqsource.store.config import StoreConfig, parse_java_properties
from rmqsource.store.layout import StoreLayout
from rmqsource.store.offset_source import locate_offset_source
from rmqsource.store.reader import MessageStoreReader

from conftest import store_checksums

DIRECT = {"plain", "normal", "multikey", "props", "big", "tiny", "order", "batch"}
REPUT = {"delay", "timer", "tx_commit"}
NEVER = {"delay_parked", "timer_parked", "tx_rollback", "timer_recalled", "timer_parked_recalled"}
TIMERS = {"timer", "timer_parked", "timer_recalled", "timer_parked_recalled"}      # RocketMQ 5 only
# Properties the client adds to a delivered message after decoding it: not in the store.
CLIENT_ADDED = {"MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME", "POP_CK", "1ST_POP_TIME"}


def read_jsonl(path: Path) -> list[dict]:
    out = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break                                # a killed harness's torn last line
            raise
    return out


def sends(run: Path) -> list[dict]:
    return [s for s in read_jsonl(run / "expected" / "sent.jsonl") if s["record"] == "send"]


def send_ok(run: Path) -> list[dict]:
    return [s for s in sends(run) if s["result"] and s["result"]["status"] == "SEND_OK"]


def admin(run: Path) -> dict:
    return json.loads((run / "expected" / "admin.json").read_text(encoding="utf-8"))


def config(run: Path) -> StoreConfig:
    return StoreConfig.from_properties_file(run / "broker.properties")


def broker_settings(run: Path) -> dict[str, str]:
    """The broker's effective settings (the harness writes BrokerConfig + MessageStoreConfig + NettyServerConfig)."""
    return parse_java_properties((run / "broker.properties").read_text(encoding="utf-8"))


def rocksdb_queues(run: Path) -> bool:
    """Whether the broker kept its ConsumeQueues in RocksDB (storeType=defaultRocksDB)."""
    return broker_settings(run).get("storeType") == "defaultRocksDB"


def offset_source_kind(run: Path) -> str:
    """Where the broker kept the consumer offsets: ``json`` (config v1) or ``rocksdb-v2`` (config/rdb/)."""
    return "rocksdb-v2" if broker_settings(run).get("configManagerVersion") == "v2" else "json"


def user_topics(run: Path) -> list[str]:
    return sorted({s["topic"] for s in sends(run)})


def body_of(record) -> bytes:
    return zlib.decompress(record.body) if record.sys_flag & 1 else record.body


def user_props(props: dict) -> dict:
    return {k: v for k, v in props.items() if k.startswith("rb_")}


def seq_of(properties: dict) -> int | None:
    """The send's sequence number: ``rb_seq``, or for ``plain`` sends (no user property) the key ``k-<seq>``;
    None for a record of no send (a recall's marker in the timer wheel)."""
    if "rb_seq" in properties:
        return int(properties["rb_seq"])
    if "KEYS" not in properties:
        return None
    return int(properties["KEYS"].split()[0].split("-")[1])


def rocketmq_version(run: Path) -> tuple[int, int, int]:
    """The RocketMQ version the harness ran, (5, 3, 3) from admin.json's ``V5_3_3``."""
    version = admin(run)["harness"]["rocketmqVersion"]
    return tuple(int(x) for x in version[1:].split("_")[:3])


def workload_kinds(run: Path) -> set[str]:
    """The kinds the harness sends on the run's RocketMQ line: the timer kinds (and their recall) only on 5.x."""
    kinds = DIRECT | REPUT | NEVER
    return kinds if rocketmq_version(run) >= (5, 0, 0) else kinds - TIMERS


def per_item_uniq_keys(run: Path) -> bool:
    """Before 5.5.0 every item of a batch is stored with the batch's UNIQ_KEY (apache/rocketmq#9416): the
    per-item msgIds the producer got are in no record."""
    return rocketmq_version(run) >= (5, 5, 0)


def topic_records(reader: MessageStoreReader, topic: str) -> list:
    """Every message of ``topic`` through its ConsumeQueues (a per-topic read)."""
    out = []
    for t, qid in reader.queue_keys():
        if t != topic:
            continue
        for result in reader.get_loop("rmq-broker-test", topic, qid, 0, 1 << 30):
            out.extend(m.record for m in result.messages)
    return out


@pytest.fixture(scope="module")
def stored(broker_run):
    """{topic: [record, ...]} of the user topics and the parking topics, read once."""
    with MessageStoreReader(broker_run / "store", config(broker_run)) as reader:
        topics = user_topics(broker_run) + ["SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer"]
        return {t: topic_records(reader, t) for t in topics}


def test_workload_ran(broker_run):
    kinds = Counter(s["kind"] for s in send_ok(broker_run))
    assert set(kinds) >= workload_kinds(broker_run), kinds
    assert admin(broker_run)["harness"]["drainComplete"]
    assert len(list((broker_run / "store" / "commitlog").iterdir())) >= 2, "the CommitLog should roll"


def assert_queue_layout(run: Path) -> None:
    store = run / "store"
    assert StoreLayout.for_config(store, config(run)).rocksdb_queues == rocksdb_queues(run)
    assert (store / "consumequeue" / "CURRENT").is_file() == rocksdb_queues(run)


def test_store_layout_is_the_variants(broker_run):
    """The broker kept its queues and offsets where the variant's settings say, and rmqsource finds them there
    from the files alone: a variant that silently ran with the defaults would prove nothing."""
    store = broker_run / "store"
    assert_queue_layout(broker_run)
    assert locate_offset_source(store).kind == offset_source_kind(broker_run)
    assert (store / "config" / "consumerOffset.json").is_file() == (offset_source_kind(broker_run) == "json")
    assert (store / "config" / "rdb").is_dir() == (offset_source_kind(broker_run) == "rocksdb-v2")


def test_every_send_ok_found_once_where_the_broker_said(broker_run, stored):
    problems = []
    per_item = per_item_uniq_keys(broker_run)
    by_seq = {t: Counter(seq_of(r.properties) for r in recs) for t, recs in stored.items()}
    records = {(t, seq_of(r.properties)): r for t, recs in stored.items() for r in recs}
    for s in send_ok(broker_run):
        res, topic, uniq = s["result"], s["topic"], s["uniqKey"]
        n = by_seq[topic][s["seq"]]
        if s["kind"] in NEVER:
            if n:
                problems.append(f"seq {s['seq']} {s['kind']}: under {topic} {n} times, expected never")
            continue
        if n != 1:
            problems.append(f"seq {s['seq']} {s['kind']} uniqKey {uniq}: found {n} times under {topic}")
            continue
        r = records[(topic, s["seq"])]
        want = {"body": base64.b64decode(s["body_b64"]), "tags": s["tags"], "keys": " ".join(s["keys"]),
                "user": s["userProperties"], "uniq": res["msgId"]}
        got = {"body": body_of(r), "tags": r.tags, "keys": r.keys, "user": user_props(r.properties),
               "uniq": r.uniq_key}
        if s["kind"] == "batch" and not per_item:
            want["uniq"] = got["uniq"] = None
        if s["kind"] in DIRECT:
            want.update(queueId=res["queueId"], queueOffset=res["queueOffset"], offsetMsgId=res["offsetMsgId"])
            got.update(queueId=r.queue_id, queueOffset=r.queue_offset, offsetMsgId=r.msg_id)
        else:
            want["realTopic"] = None
            got["realTopic"] = None if r.properties.get("REAL_TOPIC") in (None, topic) else r.properties["REAL_TOPIC"]
        if got != want:
            diff = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
            problems.append(f"seq {s['seq']} {s['kind']} {topic}: (rmqsource, broker) {diff}")
    assert not problems, "\n".join(problems[:30])


def test_parked_messages_wait_in_the_broker_topics(broker_run, stored):
    """Level-18 delays sit in SCHEDULE_TOPIC_XXXX queue 17, far timers in rmq_sys_wheel_timer, both
    naming their real topic."""
    parked = {(r.properties.get("REAL_TOPIC"), seq_of(r.properties)): r
              for t in ("SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer") for r in stored[t]}
    missing = []
    for s in send_ok(broker_run):
        if s["kind"] in ("delay_parked", "timer_parked"):
            r = parked.get((s["topic"], s["seq"]))
            if r is None or body_of(r) != base64.b64decode(s["body_b64"]):
                missing.append((s["seq"], s["kind"], s["uniqKey"]))
            elif s["kind"] == "delay_parked":
                assert (r.topic, r.queue_id) == ("SCHEDULE_TOPIC_XXXX", 17)
    assert not missing


def test_queue_offsets_equal_topic_stats(broker_run):
    stats = admin(broker_run)["topicStats"]
    got, want = {}, {}
    with MessageStoreReader(broker_run / "store", config(broker_run)) as reader:
        for topic in user_topics(broker_run):
            for q in stats[topic]:
                want[(topic, q["queueId"])] = (q["minOffset"], q["maxOffset"])
                cq = reader.consume_queue(topic, q["queueId"])
                mx = reader.queue_max_offset(cq) if cq else 0
                got[(topic, q["queueId"])] = (reader.queue_min_offset(cq, mx) if cq else 0, mx)
    assert got == want


def wheel_copies_after(reader: MessageStoreReader, queue_id: int, start: int) -> tuple[int, int]:
    """(records of rmq_sys_wheel_timer's queue from ``start`` on, how many of them re-park a message that has a
    copy before ``start``)."""
    before, after = set(), []
    for result in reader.get_loop("rmq-broker-test", "rmq_sys_wheel_timer", queue_id, 0, 1 << 30):
        for m in result.messages:
            key = (m.record.properties.get("REAL_TOPIC"), m.record.properties.get("UNIQ_KEY"))
            (before.add(key) if m.record.queue_offset < start else after.append(key))
    return len(after), sum(k in before for k in after)


def test_internal_queue_offsets_equal_topic_stats(broker_run):
    """RocketMQ's own topics too (delay levels, timer wheel, transaction half/op), where they have queues.

    topicStats is taken before the broker stops; the wheel goes on re-parking long timers until then (the
    harness rolls them every few seconds), so its queue may end later, by re-parked copies only."""
    stats = admin(broker_run)["topicStats"]
    diffs = []
    with MessageStoreReader(broker_run / "store", config(broker_run)) as reader:
        on_disk = set(reader.queue_keys())
        for topic, queues in stats.items():
            for q in queues:
                cq = reader.consume_queue(topic, q["queueId"]) if (topic, q["queueId"]) in on_disk else None
                mx = reader.queue_max_offset(cq) if cq else 0
                mn = reader.queue_min_offset(cq, mx) if cq else 0
                if topic == "rmq_sys_wheel_timer" and mn == q["minOffset"] and mx > q["maxOffset"]:
                    later, reparked = wheel_copies_after(reader, q["queueId"], q["maxOffset"])
                    if later == reparked == mx - q["maxOffset"]:
                        continue
                if (mn, mx) != (q["minOffset"], q["maxOffset"]):
                    diffs.append(f"{topic}/{q['queueId']}: rmqsource {(mn, mx)}, topicStats "
                                 f"{(q['minOffset'], q['maxOffset'])}")
    assert not diffs, "\n".join(diffs)


def run_cli(*argv) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main([str(a) for a in argv], stdout=out)
    return code, out.getvalue()


def test_rmq_lag_equals_consume_stats(broker_run):
    stats = admin(broker_run)["consumeStats"]
    code, out = run_cli("lag", "--json", "--config", broker_run / "broker.properties", broker_run / "store")
    assert code == 0, out
    rows = [json.loads(l) for l in out.splitlines() if l.strip()]
    assert {r["offsetSource"] for r in rows} == {offset_source_kind(broker_run)}
    committed = admin(broker_run)["engine"]["consumerOffsetTable"]
    for group, gs in stats.items():
        want = {(q["topic"], q["queueId"]): (q["brokerOffset"], q["consumerOffset"], q["diff"]) for q in gs["queues"]}
        got = {(r["topic"], r["queueId"]): (r["brokerOffset"], r["consumerOffset"], r["diff"])
               for r in rows if r["group"] == group and (r["topic"], r["queueId"]) in want}
        # a queue the group never committed: consumeStats shows offset 0, rmq lag null (the broker's offset table
        # has no entry for it); the diff is the same
        for key, (broker_offset, consumer_offset, diff) in list(got.items()):
            if consumer_offset is None and str(key[1]) not in committed.get(f"{key[0]}@{group}", {}):
                got[key] = (broker_offset, 0, diff)
        assert got == want, group
        assert sum(v[2] for v in got.values()) == gs["totalDiff"], group
    assert stats["rb_all"]["totalDiff"] == 0
    assert stats["rb_lag"]["totalDiff"] > 0, "rb_lag was stopped half-way: it should lag"


def test_consumed_messages_equal_store(broker_run):
    deliveries = [c for c in read_jsonl(broker_run / "expected" / "consumed.jsonl") if c["record"] == "consume"]
    assert {c["group"] for c in deliveries} == {"rb_all", "rb_lag"}
    problems = []
    # The client inflates a compressed body; the 5.x client also clears sysFlag bit 0 (COMPRESSED_FLAG), the
    # 4.x client leaves it set. The compression type bits stay.
    kept_flags = ~1 if rocketmq_version(broker_run) >= (5, 0, 0) else ~0
    with MessageStoreReader(broker_run / "store", config(broker_run)) as reader:
        for c in deliveries:
            res = reader.get_message(c["group"], c["storeTopic"], c["queueId"], c["queueOffset"], 1)
            if len(res.messages) != 1:
                problems.append(f"{c['group']} {c['storeTopic']}/{c['queueId']}@{c['queueOffset']}: {res.status}")
                continue
            r = res.messages[0].record
            got = {"commitLogOffset": r.phy_offset, "offsetMsgId": r.msg_id, "uniqKey": r.uniq_key,
                   "tags": r.tags, "keys": r.keys, "bornTimestamp": r.born_timestamp_ms,
                   "storeTimestamp": r.store_timestamp_ms, "reconsumeTimes": r.reconsume_times,
                   "storeSize": r.store_size, "bodyCRC": r.body_crc, "queueOffset": r.queue_offset,
                   "properties": dict(sorted(r.properties.items())), "body_b64": base64.b64encode(body_of(r)).decode()}
            got["sysFlag"] = r.sys_flag & kept_flags
            want = {k: c[k] for k in got if k != "properties"}
            want["properties"] = {k: v for k, v in sorted(c["properties"].items()) if k not in CLIENT_ADDED}
            if got != want:
                diff = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
                problems.append(f"{c['group']} {c['storeTopic']}/{c['queueId']}@{c['queueOffset']}: "
                                f"(rmqsource, consumer) {diff}")
    assert not problems, "\n".join(problems[:30])


def test_lag_group_committed_what_it_polled(broker_run):
    polled = defaultdict(set)
    for c in read_jsonl(broker_run / "expected" / "consumed.jsonl"):
        if c["group"] == "rb_lag":
            polled[(c["topic"], c["queueId"])].add(c["queueOffset"])
    for q in admin(broker_run)["consumeStats"]["rb_lag"]["queues"]:
        assert polled[(q["topic"], q["queueId"])] == set(range(q["consumerOffset"])), q


def expected_rows(run: Path, stored_records: list, topic: str) -> Counter:
    """What a read of ``topic`` must return, as (seq, queueId, queueOffset, body) from the sends: the
    positions of the re-put kinds come from the store (their send results name the parking queue)."""
    pos = {seq_of(r.properties): (r.queue_id, r.queue_offset) for r in stored_records}
    out = Counter()
    for s in send_ok(run):
        if s["topic"] != topic or s["kind"] in NEVER:
            continue
        qid, off = ((s["result"]["queueId"], s["result"]["queueOffset"]) if s["kind"] in DIRECT
                    else pos.get(s["seq"], (None, None)))
        out[(s["seq"], qid, off, base64.b64decode(s["body_b64"]))] += 1
    return out


def test_spark_read_of_each_topic_is_its_send_ok_messages(broker_run, stored, spark):
    topics = user_topics(broker_run)
    df = (spark.read.format("rmq").option("topics", ",".join(topics)).option("decompress", "true")
          .option("config", str(broker_run / "broker.properties")).load(str(broker_run / "store")))
    rows = df.select("topic", "properties", "queueId", "queueOffset", "body").collect()
    for topic in topics:
        got = Counter((seq_of(r.properties), r.queueId, r.queueOffset, bytes(r.body)) for r in rows
                      if r.topic == topic)
        want = expected_rows(broker_run, stored[topic], topic)
        assert got == want, (topic, sorted(got - want)[:5], sorted(want - got)[:5])
    assert {r.topic for r in rows} == set(topics)


def commitlog_units(reader: MessageStoreReader) -> dict[tuple[str, int], dict[int, tuple[int, int, int]]]:
    """The unit dispatch gives each record of the CommitLog (to the end a walk from its start finds):
    (topic, queueId) -> {queueOffset: (CommitLog offset, size, tagsCode)}, for file and RocksDB queues alike."""
    delays = reader.config.message_delay_levels_ms
    out: dict[tuple[str, int], dict[int, tuple[int, int, int]]] = defaultdict(dict)
    cl = reader.commitlog
    for step in cl.walk(cl.min_offset):
        if step.decoded.kind is not Kind.MESSAGE:
            continue                                 # BLANK: the next segment follows; END and CORRUPT end the walk
        r = step.decoded.record
        if r.enters_consume_queue:
            key = (r.topic, r.queue_id)
            assert r.queue_offset not in out[key], f"{key} offset {r.queue_offset} stored twice"
            out[key][r.queue_offset] = (step.phy_offset, step.decoded.size,
                                        consume_queue_tags_code(r.topic, r.properties, r.store_timestamp_ms, delays))
    return out


def queue_units(reader: MessageStoreReader) -> dict[tuple[str, int], dict[int, tuple[int, int, int]]]:
    """Every ConsumeQueue unit as the reader sees it (pre-blank units left out), same shape as commitlog_units."""
    out = {}
    for key in reader.queue_keys():
        cq = reader.consume_queue(*key)
        lo = cq.first_file_start_offset
        units = cq.read_units(lo, cq.max_offset - lo)
        assert len(units) == cq.max_offset - lo, f"{key}: units {lo}..{cq.max_offset} have a gap"
        out[key] = {lo + i: (int(u["phy_offset"]), int(u["size"]), int(u["tags_code"]))
                    for i, u in enumerate(units) if int(u["size"]) != PRE_BLANK_SIZE}
    return out


def test_queue_units_point_at_their_records(broker_run):
    """Every ConsumeQueue unit (a file's or a RocksDB value) points at the record of its queue position, with its
    size and tagsCode, and every record the broker dispatches has its unit: rmq verify's unit matching, done
    through the reader (for RocksDB queues: the database's units, then those dispatched past its checkpoint)."""
    assert_units_point_at_their_records(broker_run)


def test_killed_broker_queue_units_point_at_their_records(killed_broker_run):
    """The same after SIGKILL, but for the dispatch backlog: records after the last one with a unit (RocketMQ
    dispatches in CommitLog order; its recovery dispatches the rest, rmq verify's warning cq-undispatched)."""
    assert_units_point_at_their_records(killed_broker_run, backlog=True)


def assert_units_point_at_their_records(run: Path, *, backlog: bool = False) -> None:
    with MessageStoreReader(run / "store", config(run)) as reader:
        from_queues, from_records = queue_units(reader), commitlog_units(reader)
    if backlog:
        last = max((u[0] for units in from_queues.values() for u in units.values()), default=-1)
        from_records = {k: {o: u for o, u in v.items() if u[0] <= last} for k, v in from_records.items()}
        from_records = {k: v for k, v in from_records.items() if v}
    problems = []
    for key in sorted(set(from_queues) | set(from_records)):
        got, want = from_queues.get(key, {}), from_records.get(key, {})
        if got != want:
            wrong = sorted(o for o in got if o in want and got[o] != want[o])
            problems.append(f"{key[0]}/{key[1]}: units without their record {sorted(set(got) - set(want))[:5]}, "
                            f"records without a unit {sorted(set(want) - set(got))[:5]}, "
                            f"differing {[(o, got[o], want[o]) for o in wrong[:3]]}")
    assert not problems, "\n".join(problems[:30])
    assert sum(map(len, from_queues.values())) >= len(send_ok(run))


def test_stream_at_the_group_offsets_reads_the_consume_stats_lag(broker_run, spark, tmp_path):
    """A stream at ``startingOffsets=group`` (``commitOffsets=false``) of rb_lag, the group stopped half-way,
    starts each queue at the offset the group committed, wherever the broker keeps it (consumerOffset.json, or
    config/rdb/ with config v2), and reads to the queue's end: per queue exactly the offsets from consumeStats'
    consumerOffset to its brokerOffset, diff rows in all."""
    stats = admin(broker_run)["consumeStats"]["rb_lag"]
    topics = sorted({q["topic"] for q in stats["queues"]})
    df = (spark.readStream.format("rmq").option("topics", ",".join(topics)).option("startingOffsets", "group")
          .option("consumerGroup", "rb_lag").option("commitOffsets", "false")
          .option("config", str(broker_run / "broker.properties")).load(str(broker_run / "store")))
    got = defaultdict(list)

    def each(batch_df, batch_id):
        for r in batch_df.select("topic", "queueId", "queueOffset").collect():
            got[(r.topic, r.queueId)].append(r.queueOffset)

    query = (df.writeStream.foreachBatch(each).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(300), "the availableNow query did not finish"
    assert query.exception() is None, query.exception()
    want = {(q["topic"], q["queueId"]): list(range(q["consumerOffset"], q["brokerOffset"])) for q in stats["queues"]}
    assert {k: sorted(v) for k, v in got.items()} == {k: v for k, v in want.items() if v}
    assert sum(map(len, got.values())) == stats["totalDiff"] > 0


def test_rmq_verify_is_clean(broker_run):
    """No error, whichever queues the store keeps (files, or units in the RocksDB database: a cleanly stopped
    broker flushed them all, so no record is past the database's dispatch checkpoint either)."""
    code, out = run_cli("verify", "--json", "--config", broker_run / "broker.properties", broker_run / "store")
    assert code == 0, out
    summary = json.loads(out.splitlines()[-1])
    assert summary["cqUnits"] > 0 and "cq-undispatched" not in summary["byCheck"], summary


def test_reads_left_the_store_unchanged(broker_run):
    """Runs after every read of this module: a read never changes a broker file."""
    before = dict(line.split("  ", 1)[::-1] for line in
                  (broker_run / "checksums.txt").read_text().splitlines())
    assert store_checksums(broker_run / "store") == before


def test_killed_broker_keeps_every_acknowledged_send(killed_broker_run):
    """SIGKILL while the producer is still sending, after ``kill_after`` sends were acknowledged.

    The broker runs with its default flushDiskType=ASYNC_FLUSH: an acknowledged message is in the CommitLog's
    mapped pages, which survive the death of the process (not of the machine), so every send the harness
    logged as SEND_OK must be found once, where the send result said. The ConsumeQueues may lag the CommitLog
    (dispatch is asynchronous): the reader recovers them as the broker would on restart.
    """
    run = killed_broker_run
    assert (run / "expected" / "KILLED").is_file()
    acked = send_ok(run)
    assert len(acked) >= 150
    with MessageStoreReader(run / "store", config(run)) as reader:
        assert reader.abort_file_existed
        stored = {t: topic_records(reader, t) for t in user_topics(run)}
    problems = []
    counts = {t: Counter(seq_of(r.properties) for r in recs) for t, recs in stored.items()}
    pos = {(t, seq_of(r.properties)): (r.queue_id, r.queue_offset, r.msg_id, body_of(r))
           for t, recs in stored.items() for r in recs}
    for s in acked:
        n = counts[s["topic"]][s["seq"]]
        res = s["result"]
        want = (res["queueId"], res["queueOffset"], res["offsetMsgId"], base64.b64decode(s["body_b64"]))
        got = pos.get((s["topic"], s["seq"]), (None, None, None, None))
        if n != 1 or got != want:
            problems.append(f"seq {s['seq']} {s['topic']}: found {n} times, at {got[:3]}, broker said {want[:3]}")
    dup = [(t, u, n) for t, c in counts.items() for u, n in c.items() if n > 1]
    assert not problems and not dup, "\n".join(problems[:30] + [str(d) for d in dup[:10]])


def test_rmq_verify_of_killed_store_flags_only_the_unclean_shutdown(killed_broker_run):
    """The unclean shutdown, and at most the dispatch backlog the kill left (warning cq-undispatched: records
    after the last dispatched one, or past the RocksDB database's dispatch checkpoint, whose units the broker
    held in memory; its recovery dispatches them); no error."""
    assert_queue_layout(killed_broker_run)
    code, out = run_cli("verify", "--json", "--config", killed_broker_run / "broker.properties",
                        killed_broker_run / "store")
    problems = [json.loads(l) for l in out.splitlines() if l.strip().startswith('{"severity"')]
    assert code == 0, out
    assert [p["check"] for p in problems if p["check"] != "cq-undispatched"] == ["unclean-shutdown"], out
    assert all(p["severity"] == "warning" for p in problems), out
