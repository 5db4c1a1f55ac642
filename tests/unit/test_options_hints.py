"""Option parsing at the Spark edge: Kafka names, per-mode option lists, file:// store URIs, group start."""

from __future__ import annotations

import json

import pytest

from rmqsource.errors import OptionError
from rmqsource.spark.options import kafka_option_table, option_names, parse_options
from rmqsource.spark.stream import RmqStreamReader
from rmqsource.spark.stream_options import parse_stream_options
from rmqsource.store.consumer_offsets import ConsumerOffsets

from golden import corpora

pytestmark = pytest.mark.unit

CORPUS = corpora()[0]
STORE = str(CORPUS / "store")
CONFIG = str(CORPUS / "store.properties")


def test_kafka_aliases_mean_the_same_as_ours():
    a = parse_options({"path": STORE, "subscribe": "TopicTest,OrderTopic"})
    assert a.topics == ("TopicTest", "OrderTopic")
    assert parse_options({"path": STORE, "subscribePattern": "Topic.*"}).topic_pattern == "Topic.*"
    assign = parse_options({"path": STORE, "assign": json.dumps({"TopicTest": [0, 2], "OrderTopic": [1]})})
    assert assign.queues == (("TopicTest", 0), ("TopicTest", 2), ("OrderTopic", 1))
    assert parse_options({"path": STORE, "assign": "TopicTest:1"}).queues == (("TopicTest", 1),)
    s = parse_stream_options({"path": STORE, "subscribe": "TopicTest", "maxOffsetsPerTrigger": "100",
                              "minOffsetsPerTrigger": "10", "maxTriggerDelay": "5s"})
    assert (s.read.topics, s.max_messages, s.min_messages) == (("TopicTest",), 100, 10)
    with pytest.raises(OptionError, match="same option"):
        parse_options({"path": STORE, "subscribe": "A", "topics": "B"})


@pytest.mark.parametrize("name, ours", [("includeHeaders", "properties"), ("kafka.group.id", "consumerGroup"),
                                        ("groupIdPrefix", "consumerGroup"), ("kafka.bootstrap.servers", "path")])
def test_other_kafka_names_point_to_ours(name, ours):
    for parse in (parse_options, parse_stream_options):
        with pytest.raises(OptionError, match=f"option {name} is a Kafka source option: the rmq source calls "
                                              f"this {ours}"):
            parse({"path": STORE, "topics": "TopicTest", name.lower(): "x"})
    with pytest.raises(OptionError, match="Kafka consumer setting"):
        parse_options({"path": STORE, "kafka.max.poll.records": "5"})


def test_stream_option_in_a_batch_read_and_kafka_alias_in_the_wrong_mode():
    with pytest.raises(OptionError, match="maxMessagesPerTrigger is for streaming reads") as e:
        parse_options({"path": STORE, "maxMessagesPerTrigger": "5"})
    assert "endingOffsets" in str(e.value) and "consumerGroup" not in str(e.value)
    with pytest.raises(OptionError, match="calls this maxMessagesPerTrigger, an option of stream reads"):
        parse_options({"path": STORE, "maxOffsetsPerTrigger": "5"})


def test_unknown_option_lists_every_option_of_its_mode():
    with pytest.raises(OptionError) as batch:
        parse_options({"path": STORE, "topic": "TopicTest"})
    with pytest.raises(OptionError) as stream:
        parse_stream_options({"path": STORE, "topics": "TopicTest", "topic": "TopicTest"})
    for name in option_names("batch"):
        assert name in str(batch.value)
    for name in option_names("stream"):
        assert name in str(stream.value)
    assert {"maxMessagesPerTrigger", "consumerGroup", "startingOffsetsFallback", "subExpression"} <= \
        set(option_names("stream"))
    assert "endingOffsets" not in option_names("stream") and "consumerGroup" not in option_names("batch")


def test_kafka_table_is_consistent_with_our_names():
    ours = set(option_names("batch")) | set(option_names("stream")) | {"properties"}
    for entry in kafka_option_table().values():
        assert entry["rmq"] is None or entry["rmq"] in ours, entry
        assert entry["kafka"].lower() not in {n.lower() for n in ours}, entry    # never shadows one of ours


def test_file_uris(tmp_path):
    for uri in (f"file://{CORPUS}/store", f"file:{CORPUS}/store", f"file://localhost{CORPUS}/store",
                "file://" + str(CORPUS / "store").replace("-", "%2D")):
        assert parse_options({"path": uri}).paths == (STORE,)
    with pytest.raises(OptionError, match="names host 'otherhost'"):
        parse_options({"path": "file://otherhost/tmp/store"})
    from rmqsource.spark.sink import parse_sink_options
    assert parse_sink_options({"path": f"file://{tmp_path}/out"}).root == f"{tmp_path}/out"


@pytest.mark.parametrize("uri", ["s3a://bucket/store", "s3://bucket/store", "gs://bucket/store", "hdfs://nn/store",
                                 "abfss://c@acct.dfs.core.windows.net/store", "dbfs:/mnt/store"])
def test_object_store_uris_name_the_jvm_scan_on_the_python_path_and_are_read_only_for_sinks(uri):
    from rmqsource.spark.sink import parse_sink_options
    scheme = uri.split(":", 1)[0]
    for parse in (parse_options, parse_stream_options):
        with pytest.raises(OptionError) as read:
            parse({"path": uri, "topics": "TopicTest"})
        text = str(read.value)
        assert "\n" not in text and uri in text and f"not {scheme}: URIs" in text, text
        assert "JVM scan" in text and "rmq jar" in text, text
    with pytest.raises(OptionError) as write:
        parse_sink_options({"path": uri})
    assert str(write.value) == (f"store path {uri!r}: stores on {scheme}: are read-only: the rmq sink writes records "
                                f"in place into preallocated files under a lock, which object stores and HDFS do not "
                                f"offer (they replace or append whole files); write a local store and copy it there")


def _group_reader(root, **extra):
    opts = {"path": str(root), "topics": "TopicTest", "startingOffsets": "group", "consumerGroup": "g1",
            "config": CONFIG, **extra}
    return RmqStreamReader(opts)


def test_group_without_commits_needs_a_fallback(tmp_path):
    from golden import copy_store
    root = copy_store(CORPUS / "store", tmp_path / "store")
    with pytest.raises(OptionError, match="consumer group 'g1' has no committed offsets for TopicTest.*"
                                          "startingOffsetsFallback=earliest or latest"):
        _group_reader(root).initialOffset()
    latest = _group_reader(root, startingOffsetsFallback="latest").initialOffset()
    earliest = _group_reader(root, startingOffsetsFallback="earliest").initialOffset()
    assert all(v > 0 for v in latest["TopicTest"].values()) and set(earliest["TopicTest"].values()) == {0}
    ConsumerOffsets(root).commit("g1", {"TopicTest": {0: 7}})
    start = _group_reader(root).initialOffset()["TopicTest"]       # commits exist: others start at earliest
    assert start["0"] == 7 and start["1"] == 0
    with pytest.raises(OptionError, match="startingOffsetsFallback=none.*TopicTest:1, TopicTest:2, TopicTest:3"):
        _group_reader(root, startingOffsetsFallback="none").initialOffset()
    with pytest.raises(OptionError, match="earliest, latest or none"):
        parse_stream_options({"path": str(root), "topics": "TopicTest", "startingOffsetsFallback": "smallest"})
