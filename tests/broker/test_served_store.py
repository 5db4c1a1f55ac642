"""A store written by ``rmq put`` handed to a real broker: it routes every topic from the writer's
config/topics.json (autoCreateTopicEnable=false, no admin command), serves every message byte for byte through
the official lite pull consumer, and delivers a delay-level message (parked by the writer in SCHEDULE_TOPIC_XXXX
as the broker's put hook parks it) under its real topic, not before it is due. The same for a store the batch and
streaming sinks wrote (the session's Spark mode); and for config-v2 brokers (configManagerVersion=v2), which find
the routes, and a group's committed offsets, in config/rdb/ instead of the JSON files."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time

import pytest

from conftest import BROKER_STORE_SETTINGS, serve_store, versions
from golden import read_jsonl

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


def served_by_seq(run) -> tuple[list[dict], dict[int, list[dict]]]:
    """What the served store's consumer got (expected/consumed.jsonl), and the same by ``sv_seq``."""
    served = read_jsonl(run / "expected" / "consumed.jsonl")
    by_seq: dict[int, list[dict]] = {}
    for s in served:
        by_seq.setdefault(int(s["properties"]["sv_seq"]), []).append(s)
    return served, by_seq


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
    served, by_seq = served_by_seq(run)
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


SINK_TOPICS = ["sk_batch_0", "sk_batch_1", "sk_stream"]


def sink_rows(n: int, topics: list[str], first: int) -> list[dict]:
    """Rows for the sinks: tags, keys (some as arrays), unicode and binary bodies, user properties, and every
    20th with a delay level (parked by the writer in SCHEDULE_TOPIC_XXXX, as the broker's put hook does)."""
    out = []
    for i in range(first, first + n):
        props = {"sv_seq": str(i), "note": f"ünï:{i};=x"}
        if i % 20 == 3:
            props["DELAY"] = str(DELAY_LEVEL)
        body = (f"row {i} " + "é" * (i % 11)).encode() if i % 13 else bytes(range(256))
        out.append({"topic": topics[i % len(topics)], "tags": TAGS[i % len(TAGS)], "keys": f"k-{i}",
                    "properties": props, "body": body})
    return out


def _write_with_the_sinks(spark, tmp_path, settings: dict) -> tuple[list[dict], int]:
    """The batch sink then the streaming sink (the session's mode: the JVM sinks with the jar, else the Python
    ones) write one store, ``tmp_path/store``, with ``settings``: 120 rows of two topics, then 60 of a third.
    Returns the rows in ``sv_seq`` order and the time (ms) the writing started."""
    from pyspark.sql.types import BinaryType, MapType, StringType, StructField, StructType
    schema = StructType([StructField("topic", StringType()), StructField("tags", StringType()),
                         StructField("keys", StringType()), StructField("properties", MapType(StringType(), StringType())),
                         StructField("body", BinaryType())])
    store = tmp_path / "store"
    batch = sink_rows(120, SINK_TOPICS[:2], 0)
    w = spark.createDataFrame(batch, schema).repartition(3).write.format("rmq").mode("append")
    for k, v in settings.items():
        w = w.option(k, v)
    put_at_ms = int(time.time() * 1000)
    w.save(str(store))
    # the streaming sink: an availableNow query over JSON files of the rows (bodies as base64)
    streamed = sink_rows(60, SINK_TOPICS[2:], 120)
    src = tmp_path / "in"
    src.mkdir()
    for part in range(3):
        with open(src / f"part-{part}.json", "w", encoding="utf-8") as f:
            for r in streamed[part::3]:
                f.write(json.dumps({**r, "body": base64.b64encode(r["body"]).decode()}) + "\n")
    json_schema = StructType([*schema.fields[:4], StructField("body", StringType())])
    q = (spark.readStream.schema(json_schema).option("maxFilesPerTrigger", 1).json(str(src))
         .selectExpr("topic", "tags", "keys", "properties", "unbase64(body) AS body")
         .writeStream.format("rmq").option("checkpointLocation", str(tmp_path / "ckpt")))
    for k, v in settings.items():
        q = q.option(k, v)
    _finish(q.trigger(availableNow=True).start(str(store)))
    return batch + streamed, put_at_ms


def _finish(query, timeout_s: int = 240) -> None:
    assert query.awaitTermination(timeout_s), f"the query did not finish in {timeout_s} s"
    if query.exception() is not None:
        raise AssertionError(str(query.exception()))


def _check_sinks_served(run, rows: list[dict], put_at_ms: int) -> list[dict]:
    """Every row served once, routes for all topics, delay-level rows delivered under their topic when due."""
    routes = json.loads((run / "expected" / "routes.json").read_text())
    assert all("error" not in routes[t] for t in SINK_TOPICS), routes
    served, by_seq = served_by_seq(run)
    missing = [i for i in range(len(rows)) if i not in by_seq]
    assert not missing, f"{len(missing)} rows not served, first {missing[:10]}"
    assert [i for i, v in by_seq.items() if len(v) != 1] == []
    for i, r in enumerate(rows):
        (s,) = by_seq[i]
        assert s["topic"] == r["topic"] and base64.b64decode(s["body_b64"]) == r["body"], i
        assert s["tags"] == r["tags"] and s["keys"] == r["keys"], i
        assert {k: s["properties"].get(k) for k in r["properties"] if k != "DELAY"} == \
            {k: v for k, v in r["properties"].items() if k != "DELAY"}, i
        if "DELAY" in r["properties"]:
            assert s["receivedAtMs"] >= put_at_ms + DELAY_MS - 1_000, (i, s["receivedAtMs"] - put_at_ms)
            assert s["properties"].get("REAL_TOPIC") == r["topic"]
    return served


@pytest.mark.parametrize("version", versions())
def test_broker_serves_a_store_written_by_the_sinks(version, broker_classpath, spark, tmp_path):
    """The sinks write one store with the harness's store settings; a broker started on it with
    autoCreateTopicEnable=false routes all three topics (config/topics.json) and serves every row once."""
    store = tmp_path / "store"
    rows, put_at_ms = _write_with_the_sinks(spark, tmp_path, {**BROKER_STORE_SETTINGS, "engineVersion": version})
    topics_json = json.loads((store / "config" / "topics.json").read_text())
    assert sorted(topics_json["topicConfigTable"]) == sorted(SINK_TOPICS)
    run = serve_store(broker_classpath(version), tmp_path / "run", store, SINK_TOPICS, expect=len(rows),
                      wait_ms=90_000, settings={"autoCreateTopicEnable": "false"})
    served = _check_sinks_served(run, rows, put_at_ms)
    print(f"broker {version}: served {len(served)} of {len(rows)} rows written by the batch and streaming sinks")


V2_TOPICS = ["v2_topic_0", "v2_topic_1"]
V2_LATER_TOPIC = "v2_later"
V2_GROUP = "v2_group"
V2_SETTINGS = {"configManagerVersion": "v2", "autoCreateTopicEnable": "false"}


def _offsets_reported(run, group: str = V2_GROUP) -> dict[tuple[str, int], int]:
    """The group's committed offsets as the served store's broker loaded them (expected/groups.json)."""
    stats = json.loads((run / "expected" / "groups.json").read_text())[group]
    return {(q["topic"], q["queueId"]): q["consumerOffset"] for q in stats}


@pytest.mark.parametrize("version", [v for v in versions() if tuple(map(int, v.split(".")[:3])) >= (5, 3, 2)])
def test_config_v2_broker_serves_a_store_written_by_rmq_put(version, broker_classpath, tmp_path):
    """configManagerVersion=v2: ``rmq put -C configManagerVersion=v2`` records its topics in config/rdb/ (no
    topics.json), a group commit records the group and its offsets there; a v2 broker with
    autoCreateTopicEnable=false routes and serves them and reports the offsets. Then the store, now holding
    what that broker wrote, is appended by ``rmq put`` (no setting: config/rdb/ decides) with a new topic and
    a second commit, and a second v2 broker serves all of it."""
    from rmqsource.store.config import StoreConfig
    from rmqsource.store.consumer_offsets import ConsumerOffsets
    msgs = [m for m in workload(90) if "DELAY" not in m["properties"]]
    for m in msgs:
        m["topic"] = V2_TOPICS[int(m["properties"]["sv_seq"]) % 2]
    store = tmp_path / "store"
    base = [a for k, v in {**BROKER_STORE_SETTINGS, "engineVersion": version}.items() for a in ("-C", f"{k}={v}")]
    p = rmq("put", *base, "-C", "configManagerVersion=v2", store,
            stdin=b"".join(json.dumps(m).encode() + b"\n" for m in msgs))
    assert p.returncode == 0, p.stderr.decode()
    assert not (store / "config" / "topics.json").exists() and (store / "config" / "rdb" / "CURRENT").is_file()
    committed = {V2_TOPICS[0]: {0: 2, 1: 1}, V2_TOPICS[1]: {2: 3}}
    ConsumerOffsets(store, config=StoreConfig(engine_version=version)).commit(V2_GROUP, committed)
    run = serve_store(broker_classpath(version), tmp_path / "run1", store, V2_TOPICS, expect=len(msgs),
                      wait_ms=120_000, settings=V2_SETTINGS, groups=[V2_GROUP])
    routes = json.loads((run / "expected" / "routes.json").read_text())
    for t in V2_TOPICS:
        n = max(m["queueId"] for m in msgs if m["topic"] == t) + 1
        assert routes[t] == {"readQueueNums": n, "writeQueueNums": n}, routes
    _, by_seq = served_by_seq(run)
    assert sorted(by_seq) == sorted(int(m["properties"]["sv_seq"]) for m in msgs)
    reported = _offsets_reported(run)
    assert {k: v for k, v in reported.items() if k[0] in committed} == \
        {(t, q): o for t, qs in committed.items() for q, o in qs.items()}, reported

    later = [{"topic": V2_LATER_TOPIC, "queueId": i % 2, "properties": {"sv_seq": str(1000 + i)},
              "body": base64.b64encode(f"later {i}".encode()).decode()} for i in range(10)]
    p = rmq("put", *base, store, stdin=b"".join(json.dumps(m).encode() + b"\n" for m in later))
    assert p.returncode == 0, p.stderr.decode()
    assert not (store / "config" / "topics.json").exists()
    ConsumerOffsets(store, config=StoreConfig(engine_version=version)).commit(
        V2_GROUP, {V2_LATER_TOPIC: {1: 4}, V2_TOPICS[0]: {0: 5}})
    run = serve_store(broker_classpath(version), tmp_path / "run2", store, [*V2_TOPICS, V2_LATER_TOPIC],
                      expect=len(msgs) + len(later), wait_ms=120_000, settings=V2_SETTINGS, groups=[V2_GROUP])
    routes = json.loads((run / "expected" / "routes.json").read_text())
    assert routes[V2_LATER_TOPIC] == {"readQueueNums": 2, "writeQueueNums": 2}, routes
    _, by_seq = served_by_seq(run)
    assert sorted(by_seq) == sorted(int(m["properties"]["sv_seq"]) for m in msgs + later)
    reported = _offsets_reported(run)
    for key, want in {(V2_TOPICS[0], 0): 5, (V2_TOPICS[0], 1): 1, (V2_TOPICS[1], 2): 3, (V2_LATER_TOPIC, 1): 4}.items():
        assert reported.get(key) == want, (key, reported)
    print(f"broker {version} (config v2): served {len(msgs)} then {len(msgs) + len(later)} messages written by "
          f"rmq put, routes {routes}, group offsets {sorted(reported.items())}")


SINK_GROUP = "sk_group"
V1_CONFIGS = ("topics.json", "subscriptionGroup.json", "consumerOffset.json")     # what a v1 broker reads


@pytest.mark.parametrize("version", [v for v in versions() if tuple(map(int, v.split(".")[:3])) >= (5, 3, 2)])
def test_config_v2_broker_serves_a_store_written_by_the_sinks(version, broker_classpath, spark, tmp_path):
    """The sinks given configManagerVersion=v2 record their topics in config/rdb/ (no JSON config); a streaming
    read of the store with consumerGroup (the session's mode, as the sinks) commits the group and the offsets
    it read to there; a v2 broker with autoCreateTopicEnable=false routes all three topics, serves every row
    once and reports the group's offsets."""
    store = tmp_path / "store"
    settings = {**BROKER_STORE_SETTINGS, "engineVersion": version, "configManagerVersion": "v2"}
    rows, put_at_ms = _write_with_the_sinks(spark, tmp_path, settings)
    assert (store / "config" / "rdb" / "CURRENT").is_file()
    assert not [n for n in V1_CONFIGS if (store / "config" / n).exists()]
    read: list[tuple[str, int, int]] = []
    df = spark.readStream.format("rmq").option("topics", ",".join(SINK_TOPICS)) \
        .option("startingOffsets", "earliest").option("consumerGroup", SINK_GROUP)
    for k, v in settings.items():
        df = df.option(k, v)
    _finish(df.load(str(store)).select("topic", "queueId", "queueOffset").writeStream
            .foreachBatch(lambda d, _: read.extend(tuple(r) for r in d.collect()))
            .option("checkpointLocation", str(tmp_path / "ckpt-read")).trigger(availableNow=True).start())
    direct = [r for r in rows if "DELAY" not in r["properties"]]    # the rest waits in SCHEDULE_TOPIC_XXXX
    assert len(read) == len(set(read)) == len(direct)
    committed: dict[tuple[str, int], int] = {}
    for topic, qid, off in read:
        committed[(topic, qid)] = max(committed.get((topic, qid), 0), off + 1)
    assert not [n for n in V1_CONFIGS if (store / "config" / n).exists()]
    run = serve_store(broker_classpath(version), tmp_path / "run", store, SINK_TOPICS, expect=len(rows),
                      wait_ms=90_000, settings=V2_SETTINGS, groups=[SINK_GROUP])
    served = _check_sinks_served(run, rows, put_at_ms)
    reported = _offsets_reported(run, SINK_GROUP)
    assert {k: v for k, v in reported.items() if k[0] in SINK_TOPICS} == committed, (reported, committed)
    print(f"broker {version} (config v2): served {len(served)} of {len(rows)} rows written by the batch and "
          f"streaming sinks, group offsets {sorted(committed.items())}")
