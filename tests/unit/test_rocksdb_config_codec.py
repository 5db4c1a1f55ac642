"""The RocksDB config codecs (rmqsource/format/rocksdb_config.py) on hand-made keys: round trips, the exact
bytes of a key the broker wrote (from the rmq550-b2 corpus), and a FormatError for every malformed key."""

from __future__ import annotations

import pytest

from rmqsource.errors import FormatError
from rmqsource.format import rocksdb_config as rc

pytestmark = pytest.mark.unit

# b"\x01\x00\x01\x02\x00\x06rb_all\x01\x00\nrb_topic_0\x01\x00\x00\x00\x03" as read from config/rdb of rmq550-b2
BROKER_KEY = bytes.fromhex("01000102000672625f616c6c01000a72625f746f7069635f300100000003")


def test_broker_key_decodes_and_encodes_back():
    k = rc.decode_v2_offset_key(BROKER_KEY)
    assert (k.table, k.group, k.topic, k.queue_id) == (rc.TableId.CONSUMER_OFFSET, "rb_all", "rb_topic_0", 3)
    assert rc.encode_v2_offset_key("rb_all", "rb_topic_0", 3) == BROKER_KEY
    assert BROKER_KEY.startswith(rc.v2_table_prefix(rc.TableId.CONSUMER_OFFSET))


@pytest.mark.parametrize("group,topic,qid", [("g", "t", 0), ("组Ω", "%LMQ%主题", 2**31 - 1), ("g" * 300, "t", 7)])
def test_round_trip(group, topic, qid):
    for table in (rc.TableId.CONSUMER_OFFSET, rc.TableId.PULL_OFFSET):
        k = rc.decode_v2_offset_key(rc.encode_v2_offset_key(group, topic, qid, table))
        assert (k.table, k.group, k.topic, k.queue_id) == (table, group, topic, qid)
    assert rc.decode_v2_offset_value(rc.encode_v2_offset_value(2**63 - 1)) == 2**63 - 1
    dv = rc.V2DataVersion(1, 1_795_857_000_000, 4051)
    assert rc.decode_v2_data_version(rc.encode_v2_data_version(dv)) == dv
    assert rc.v2_data_version_key(rc.TableId.CONSUMER_OFFSET) == b"\x01\x00\x01\x01data_version"


@pytest.mark.parametrize("key", [
    BROKER_KEY[:-1],                                  # queue id cut
    BROKER_KEY + b"\x00",                             # a byte too many
    BROKER_KEY.replace(b"\x00\x01\x02", b"\x00\x03\x02", 1),   # the topic table
    BROKER_KEY[:4] + b"\x00\x40" + BROKER_KEY[6:],    # group length past the end
    BROKER_KEY[:12] + b"\x02" + BROKER_KEY[13:],      # CTRL_2 where CTRL_1 belongs
    BROKER_KEY[:6] + b"\xff\xfe\xfd\xfc\xfb\xfa" + BROKER_KEY[12:],   # group not UTF-8
    BROKER_KEY[:-4] + b"\xff\xff\xff\xff",            # queue id -1
    b"\x01\x00\x01\x01data_version",                  # the data version record
])
def test_malformed_keys_raise(key):
    with pytest.raises(FormatError):
        rc.decode_v2_offset_key(key, file="config/rdb")


def test_values_checked():
    with pytest.raises(FormatError, match="8-byte"):
        rc.decode_v2_offset_value(b"\x00" * 7)
    with pytest.raises(FormatError, match="24"):
        rc.decode_v2_data_version(b"\x00" * 16)


def test_v1_records():
    assert rc.decode_v1_offset_record(b"T@g", b'{"offsetTable":{"0":12,"3":"40"}}') == ("T@g", {0: 12, 3: 40})
    with pytest.raises(FormatError):
        rc.decode_v1_offset_record(b"T@g", b'{"offsets":{}}')
    with pytest.raises(FormatError):
        rc.decode_v1_offset_record(b"T@g", b'{"offsetTable":{"x":1}}')
    assert rc.decode_v1_data_version_counter(b'{"counter":9,"stateVersion":0,"timestamp":1}') == 9
    assert rc.decode_v1_data_version_counter(None) == 0 and rc.decode_v1_data_version_counter(b"junk") == 0


# A topic and a group record as the 5.5.0 broker wrote them into config/rdb of rmq550-b2 (ConfigHelper.keyBufOf,
# valueBufOf: the serialization byte, then fastjson2's compact JSON of the bean).
BROKER_TOPIC = (b"\x01\x00\x03\x02\x00\nrb_topic_0",
                b'\x01{"attributes":{},"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",'
                b'"topicName":"rb_topic_0","topicSysFlag":0,"writeQueueNums":4}')
BROKER_GROUP = (b"\x01\x00\x04\x02\x00\x06rb_all",
                b'\x01{"attributes":{},"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,'
                b'"consumeFromMinEnable":true,"consumeMessageOrderly":false,"consumeTimeoutMinute":15,'
                b'"groupName":"rb_all","groupRetryPolicy":{"type":"CUSTOMIZED"},"groupSysFlag":0,'
                b'"notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,'
                b'"whichBrokerWhenConsumeSlowly":1}')


def test_topic_and_group_records_encode_as_the_broker_wrote_them():
    from rmqsource.store.broker_configs import group_config_entry, topic_config_entry
    assert rc.encode_v2_name_key(rc.TableId.TOPIC, "rb_topic_0") == BROKER_TOPIC[0]
    assert rc.encode_v2_config_value(topic_config_entry("rb_topic_0", 4, True)) == BROKER_TOPIC[1]
    assert rc.encode_v2_name_key(rc.TableId.SUBSCRIPTION_GROUP, "rb_all") == BROKER_GROUP[0]
    assert rc.encode_v2_config_value(group_config_entry("rb_all", True)) == BROKER_GROUP[1]
    assert rc.decode_v2_name_key(BROKER_TOPIC[0]) == (rc.TableId.TOPIC, "rb_topic_0")
    assert rc.decode_v2_config_value(BROKER_TOPIC[1])["readQueueNums"] == 4


@pytest.mark.parametrize("key", [BROKER_TOPIC[0] + b"x", BROKER_TOPIC[0][:-1], BROKER_KEY, b"\x01\x00\x03"])
def test_malformed_name_keys_raise(key):
    with pytest.raises(FormatError):
        rc.decode_v2_name_key(key)


@pytest.mark.parametrize("value", [b"", b"\x02{}", b"\x01[1]", b"\x01{", b"\x01\xff"])
def test_malformed_config_values_raise(value):
    with pytest.raises(FormatError):
        rc.decode_v2_config_value(value)


def test_data_version_steps_as_the_broker_stamps_it():
    assert rc.next_v2_data_version(None, 3, 1000) == rc.V2DataVersion(0, 1000, 3)
    assert rc.next_v2_data_version(rc.V2DataVersion(7, 5, 16), 2, 2000) == rc.V2DataVersion(7, 2000, 18)
