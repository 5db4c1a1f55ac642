"""option("metadata", ...): the store's structure as tables (docs/metadata.md), in the session's mode.

The judges: a real 5.5.0 broker's admin API (``expected/admin.json``: topicStats, consumeStats, taken just
before shutdown), the broker engine's own reading of its queues (``expected/storeview.jsonl``), and the files
themselves (CommitLog lengths, IndexFile headers as RocketMQ's IndexHeader lays them out). Both layouts of
queues and configs: files (rmq550-b1) and RocksDB (rmq550-b2: queues and config v2), and the engine corpora.
"""

from __future__ import annotations

import json
import os
import struct
from collections import defaultdict
from pathlib import Path

import pytest

from rmqsource.errors import OptionError
from rmqsource.format.system_topics import is_internal_topic

from golden import broker_corpora, corpora

pytestmark = pytest.mark.spark

BROKER_RUNS = [pytest.param(p, id=p.name) for p in broker_corpora()] or [
    pytest.param(None, marks=pytest.mark.skip(reason="no real-broker corpora"))]
ALL_STORES = BROKER_RUNS + [pytest.param(p, id=p.name) for p in corpora()]
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"
# topics the broker may still write during shutdown, after admin.json was taken (golden-broker/README.md)
GROWING = ("RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC")
REVIVE_PREFIX = "rmq_sys_REVIVE_LOG_"


def table(spark, store: Path, name: str):
    return spark.read.format("rmq").option("metadata", name).load(str(store))


def admin(run: Path) -> dict:
    return json.loads((run / "expected" / "admin.json").read_text(encoding="utf-8"))


def storeview_queues(run: Path) -> dict:
    out = {}
    with open(run / "expected" / "storeview.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d["record"] == "queue":
                out[(d["topic"], d["queueId"])] = (d["minOffset"], d["maxOffset"])
    return out


@pytest.mark.parametrize("run", BROKER_RUNS)
def test_queues_and_topics_equal_the_brokers_topic_stats(spark, run):
    queues = {(r.topic, r.queueId): r for r in table(spark, run / "store", "queues").collect()}
    stats = admin(run)["topicStats"]
    assert stats
    for topic, qs in stats.items():
        for q in qs:
            if (topic, q["queueId"]) not in queues:     # configured, never written: no ConsumeQueue to list
                assert q["minOffset"] == q["maxOffset"] == 0, (topic, q)
                continue
            r = queues[(topic, q["queueId"])]
            if topic in GROWING or topic.startswith(REVIVE_PREFIX):
                assert r.minOffset == q["minOffset"] and r.maxOffset >= q["maxOffset"], (topic, q)
                continue
            assert (r.minOffset, r.maxOffset, r.messages) == (q["minOffset"], q["maxOffset"],
                                                              q["maxOffset"] - q["minOffset"]), (topic, q)
    # every queue the engine has, RocketMQ's own included (the revive log and the transaction topics may grow
    # during shutdown, after storeview.jsonl was taken)
    engine = storeview_queues(run)
    assert set(engine) <= set(queues)
    for key, (mn, mx) in engine.items():
        assert queues[key].minOffset == mn and queues[key].maxOffset >= mx, key
        assert queues[key].internal == is_internal_topic(key[0])
    topics = {r.topic: r for r in table(spark, run / "store", "topics").collect()}
    per_topic = defaultdict(list)
    for (t, qid), r in queues.items():
        per_topic[t].append(r)
    assert set(topics) == set(per_topic)
    for t, rs in per_topic.items():
        assert sorted(topics[t].queueIds) == sorted(r.queueId for r in rs)
        assert topics[t].messages == sum(r.messages for r in rs) and topics[t].queues == len(rs)


@pytest.mark.parametrize("run", BROKER_RUNS)
def test_groups_equal_the_brokers_consume_stats(spark, run):
    rows = table(spark, run / "store", "groups").collect()
    by_key = {(r.group, r.topic, r.queueId): r for r in rows}
    stats = admin(run)["consumeStats"]
    assert stats
    for group, s in stats.items():
        for q in s["queues"]:
            r = by_key[(group, q["topic"], q["queueId"])]
            assert (r.brokerOffset, r.consumerOffset, r.diff) == (q["brokerOffset"], q["consumerOffset"], q["diff"])
        assert sum(r.diff for r in rows if r.group == group) == s["totalDiff"], group
    # every committed offset the broker's engine held, wherever it keeps them (consumerOffset.json, config v2)
    engine = {(k.split("@")[1], k.split("@")[0], int(q)): v
              for k, qs in admin(run)["engine"]["consumerOffsetTable"].items() for q, v in qs.items()}
    for key, offset in engine.items():
        if not key[0].startswith(SYSTEM_GROUP_PREFIX):       # system groups commit on until shutdown
            assert by_key[key].consumerOffset == offset, key
    kinds = {r.offsetSource for r in rows}
    assert kinds == {"rocksdb-v2" if (run / "store" / "config" / "rdb").is_dir() else "json"}
    assert {r.requestMode for r in rows if r.group == "rb_pop" and not r.topic.startswith("%RETRY%")} == {"POP"}


@pytest.mark.parametrize("store_dir", ALL_STORES)
def test_segments_and_indexes_are_the_files_and_their_headers(spark, store_dir):
    store = store_dir / "store"
    segments = sorted(table(spark, store, "segments").collect(), key=lambda r: r.startOffset)
    commitlog = store / "commitlog"
    names = sorted(n for n in os.listdir(commitlog) if n.isdigit()) if commitlog.is_dir() else []
    if not any(r.dledger for r in segments):     # a DLedger store's files are its data files (checked below)
        assert [Path(r.file).name for r in segments] == names
    for r in segments:
        assert r.fileSize == os.path.getsize(r.file) and r.storePath == str(store)
        assert 0 <= r.validBytes <= r.fileSize
    assert sum(r.validBytes for r in segments) > 0
    full = [r for r in segments if r.validBytes == r.fileSize]
    assert len(full) >= len(segments) - 1            # only the last file ends before its length
    indexes = table(spark, store, "indexes").collect()
    index_dir = store / "index"
    assert sorted(Path(r.file).name for r in indexes) == (sorted(os.listdir(index_dir)) if index_dir.is_dir() else [])
    for r in indexes:
        with open(r.file, "rb") as f:
            begin, end, begin_phy, end_phy, slots, count = struct.unpack(">qqqqii", f.read(40))
        assert (int(r.beginTimestamp.timestamp() * 1000), int(r.endTimestamp.timestamp() * 1000), r.beginPhyOffset,
                r.endPhyOffset, r.hashSlotCount, r.entries) == (begin, end, begin_phy, end_phy, slots, max(count, 1) - 1)


def test_metadata_is_batch_only_and_alone(spark, tmp_path):
    from rmqsource.spark.options import parse_options
    with pytest.raises(OptionError, match="option metadata must be one of queues, topics, groups, segments, indexes"):
        parse_options({"path": str(tmp_path), "metadata": "files"})
    with pytest.raises(OptionError, match="option metadata=queues is for batch reads"):
        parse_options({"path": str(tmp_path), "metadata": "queues"}, mode="stream")
    with pytest.raises(OptionError, match="option metadata=groups lists the whole store: filter its rows instead "
                                          "of giving topics, view"):
        parse_options({"path": str(tmp_path), "metadata": "groups", "topics": "a", "view": "dlq"})
