"""A topic read (ConsumeQueue ranges) of a stopped store whose CommitLog runs past its ConsumeQueues returns
every message of the whole-store read (a CommitLog walk) for that topic, in both Spark modes."""

from __future__ import annotations

import shutil

import pytest

from rmqsource.sample import write_sample_store

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module", params=[True, False], ids=["crashed", "clean-stop"])
def lagging_store(request, tmp_path_factory):
    base = tmp_path_factory.mktemp("cqlag")
    root = base / "store"
    write_sample_store(str(root), 3000)
    shutil.copytree(root / "consumequeue", base / "cq-before")
    write_sample_store(str(root), 600, seed=7)
    shutil.rmtree(root / "consumequeue")
    shutil.copytree(base / "cq-before", root / "consumequeue")
    if request.param:
        (root / "abort").write_bytes(b"")
    return root


COLUMNS = ["topic", "queueId", "queueOffset", "commitLogOffset", "msgId"]


def rows(df):
    return sorted(tuple(r) for r in df.select(*COLUMNS).collect())


def test_topic_read_returns_every_record_of_the_whole_store_read(spark, lagging_store):
    whole = spark.read.format("rmq").load(str(lagging_store))
    all_rows = rows(whole)
    assert len(all_rows) == 3600
    for topic in ("OrderEvents", "PaymentEvents"):
        by_topic = rows(spark.read.format("rmq").option("topics", topic).load(str(lagging_store)))
        expected = [r for r in all_rows if r[0] == topic]
        assert by_topic == expected
        assert len({(r[1], r[2]) for r in by_topic}) == len(by_topic)
        for qid in {r[1] for r in by_topic}:
            offsets = sorted(r[2] for r in by_topic if r[1] == qid)
            assert offsets == list(range(len(offsets)))
    everything = rows(spark.read.format("rmq").option("topics", ",".join(sorted({r[0] for r in all_rows})))
                      .load(str(lagging_store)))
    assert everything == all_rows
