"""Kafka's per-queue timestamp options: startingOffsetsByTimestamp, endingOffsetsByTimestamp and
startingOffsetsByTimestampStrategy (as Spark's Kafka source defines them), batch and stream, in the session's
mode. The judge is the store engine's own record of each message's queue offset and store time
(``expected/get``of a golden corpus): a queue starts at the first offset whose storeTimestamp is at or after the
timestamp."""

from __future__ import annotations

import json

import pytest

from golden import corpora
from test_spark_batch import expected_messages, rmq

pytestmark = pytest.mark.spark

CORPUS = corpora()[0] if corpora() else None
TOPIC = "OrderTopic"


def queue_times(qid: int) -> list[tuple[int, int]]:
    """(queueOffset, storeTimestamp) of a queue of the corpus, by offset."""
    msgs = [v for k, v in expected_messages(CORPUS / "expected").items() if k[:2] == (TOPIC, qid)]
    return sorted((m["queueOffset"], m["storeTimestamp"]) for m in msgs)


def first_at_or_after(times, ts) -> int:
    return next((o for o, t in times if t >= ts), times[-1][0] + 1)


def offsets(df) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for r in df.select("queueId", "queueOffset").collect():
        out.setdefault(r.queueId, []).append(r.queueOffset)
    return {q: sorted(v) for q, v in out.items()}


@pytest.mark.skipif(CORPUS is None, reason="no golden corpus")
def test_batch_starts_and_ends_each_listed_queue_at_its_timestamp(spark):
    q0, q1 = queue_times(0), queue_times(1)
    t_start, t_end = q0[10][1], q1[30][1]
    df = rmq(spark, CORPUS, queues=f"{TOPIC}:0,{TOPIC}:1",
             startingOffsets=json.dumps({TOPIC: {"0": 3}}),                 # the timestamp wins for queue 0
             startingOffsetsByTimestamp=json.dumps({TOPIC: {"0": t_start}}))
    got = offsets(df)
    assert got[0] == list(range(first_at_or_after(q0, t_start), q0[-1][0] + 1))
    assert got[1] == [o for o, _ in q1]                                     # not listed: the whole queue
    df = rmq(spark, CORPUS, queues=f"{TOPIC}:0,{TOPIC}:1", endingOffsetsByTimestamp=json.dumps({TOPIC: {"1": t_end}}))
    got = offsets(df)
    assert got[1] == list(range(q1[0][0], first_at_or_after(q1, t_end)))
    assert got[0] == [o for o, _ in q0]
    # an end timestamp after every message: the queue's end (Kafka: latest)
    df = rmq(spark, CORPUS, queues=f"{TOPIC}:1", endingOffsetsByTimestamp=json.dumps({TOPIC: {"1": 1 << 62}}))
    assert offsets(df)[1] == [o for o, _ in q1]


@pytest.mark.skipif(CORPUS is None, reason="no golden corpus")
def test_a_start_timestamp_after_every_message_fails_or_starts_at_the_end(spark):
    late = json.dumps({TOPIC: {"0": queue_times(0)[-1][1] + 1}})
    with pytest.raises(Exception, match=rf"startingOffsetsByTimestamp: {TOPIC}:0 .* has no message stored at or "
                                        r"after \d+; startingOffsetsByTimestampStrategy=latest"):
        rmq(spark, CORPUS, queues=f"{TOPIC}:0", startingOffsetsByTimestamp=late).collect()
    df = rmq(spark, CORPUS, queues=f"{TOPIC}:0,{TOPIC}:1", startingOffsetsByTimestamp=late,
             startingOffsetsByTimestampStrategy="latest")
    assert set(offsets(df)) == {1}
    with pytest.raises(Exception, match=rf"startingOffsetsByTimestamp: queue {TOPIC}:99 does not exist"):
        rmq(spark, CORPUS, topics=TOPIC, startingOffsetsByTimestamp=json.dumps({TOPIC: {"99": 5}})).collect()


@pytest.mark.skipif(CORPUS is None, reason="no golden corpus")
def test_a_stream_starts_each_listed_queue_at_its_timestamp(spark, tmp_path):
    q0, q1 = queue_times(0), queue_times(1)
    t_start = q0[20][1]
    got: dict[int, list[int]] = {}

    def each(batch_df, batch_id):
        for r in batch_df.select("queueId", "queueOffset").collect():
            got.setdefault(r.queueId, []).append(r.queueOffset)

    df = (spark.readStream.format("rmq").option("config", str(CORPUS / "store.properties"))
          .option("queues", f"{TOPIC}:0,{TOPIC}:1").option("startingOffsets", "earliest")
          .option("startingOffsetsByTimestamp", json.dumps({TOPIC: {"0": t_start}})).load(str(CORPUS / "store")))
    q = df.writeStream.foreachBatch(each).option("checkpointLocation", str(tmp_path / "ckpt")) \
        .trigger(availableNow=True).start()
    assert q.awaitTermination(240) and q.exception() is None
    assert sorted(got[0]) == list(range(first_at_or_after(q0, t_start), q0[-1][0] + 1))
    assert sorted(got[1]) == [o for o, _ in q1]                             # not listed: startingOffsets


def test_the_options_refuse_what_kafka_refuses(tmp_path):
    from rmqsource.errors import OptionError
    from rmqsource.spark.options import parse_options
    base = {"path": str(tmp_path), "topics": "T"}
    with pytest.raises(OptionError, match="must be epoch milliseconds >= 0"):
        parse_options({**base, "startingOffsetsByTimestamp": '{"T": {"0": -1}}'})
    with pytest.raises(OptionError, match="must be JSON like"):
        parse_options({**base, "endingOffsetsByTimestamp": "{T: 1}"})
    with pytest.raises(OptionError, match="use either startingOffsetsByTimestamp or startingTimestamp"):
        parse_options({**base, "startingOffsetsByTimestamp": '{"T": {"0": 1}}', "startingTimestamp": "1"})
    with pytest.raises(OptionError, match="startingOffsetsByTimestampStrategy must be error or latest"):
        parse_options({**base, "startingOffsetsByTimestampStrategy": "earliest"})
