"""StoreConfig: MessageStoreConfig keys, .properties syntax, engine-version helpers."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import pytest

from rmqsource.errors import OptionError
from rmqsource.store.config import (
    BrokerRole,
    FlushDiskType,
    StoreConfig,
    format_message_delay_level,
    parse_java_properties,
    parse_message_delay_level,
    parse_override_args,
)

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).resolve().parents[2].parent / "shared" / "golden"
DEFAULT_DELAYS_MS = (1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000,
                     420000, 480000, 540000, 600000, 1200000, 1800000, 3600000, 7200000)


def _corpora() -> list[Path]:
    return sorted(p for p in GOLDEN.iterdir() if (p / "store.properties").is_file())


def test_defaults_are_rocketmq_defaults():
    c = StoreConfig()
    assert c.mapped_file_size_commit_log_bytes == 1073741824
    assert c.mapped_file_size_consume_queue_bytes == 6000000
    assert c.max_hash_slot_num == 5000000 and c.max_index_num == 20000000
    assert c.index_file_size_bytes == 420000040                      # spec §1.2
    assert c.flush_disk_type is FlushDiskType.ASYNC_FLUSH
    assert c.broker_role is BrokerRole.ASYNC_MASTER
    assert c.message_delay_levels_ms == DEFAULT_DELAYS_MS and c.max_delay_level == 18
    assert (c.check_crc_on_recover, c.message_index_enable, c.message_index_safe) == (True, True, False)
    assert (c.max_msgs_num_batch, c.max_transfer_count_on_message_in_memory,
            c.max_transfer_bytes_on_message_in_memory) == (64, 32, 262144)
    assert c.max_message_size_bytes == 4194304
    assert (c.enable_consume_queue_ext, c.enabled_append_prop_crc, c.auto_message_version_on_topic_len) \
        == (False, False, True)
    assert (c.flush_interval_commit_log_ms, c.max_filter_message_size_bytes) == (500, 16000)
    assert (c.file_reserved_time_hours, c.delete_when, c.disk_max_used_space_ratio_percent) == (72, "04", 75)
    assert c.engine_version == "5.3.3" and c.is_v5
    assert dict(c.extra) == {}


def test_golden_store_properties_load():
    corpora = _corpora()
    assert {p.name for p in corpora} >= {"rmq497-g1", "rmq533-g2"}
    for corpus in corpora:
        path = corpus / "store.properties"
        raw = parse_java_properties(path.read_text(encoding="utf-8"), file=str(path))
        c = StoreConfig.from_properties_file(path)
        assert c.mapped_file_size_commit_log_bytes == int(raw["mappedFileSizeCommitLog"])
        assert c.mapped_file_size_consume_queue_bytes == int(raw["mappedFileSizeConsumeQueue"])
        assert c.max_hash_slot_num == int(raw["maxHashSlotNum"])
        assert c.max_index_num == int(raw["maxIndexNum"])
        assert c.flush_disk_type.value == raw["flushDiskType"]
        assert c.broker_role.value == raw["brokerRole"]
        assert c.message_delay_levels_ms == parse_message_delay_level(raw["messageDelayLevel"])
        assert c.engine_version == raw["engineVersion"]
        # every key is either modelled or kept verbatim
        props = c.to_properties()
        for key, value in raw.items():
            assert key in props
            if key in c.extra:
                assert c.extra[key] == value
        assert StoreConfig.from_mapping(props) == c
        assert pickle.loads(pickle.dumps(c)) == c


def test_golden_values_match_the_corpus_readmes():
    c497 = StoreConfig.from_properties_file(GOLDEN / "rmq497-g1" / "store.properties")
    assert c497.mapped_file_size_commit_log_bytes == 262144
    assert c497.mapped_file_size_consume_queue_bytes == 1200 and c497.consume_queue_units_per_file == 60
    assert c497.index_file_size_bytes == 14088                           # README: 40 + 512*4 + 600*20
    assert c497.file_reserved_time_hours == 876000 and c497.delete_when == "99"
    assert c497.engine_version == "4.9.7" and not c497.is_v5
    assert not c497.trailing_property_separator
    assert c497.extra["haListenPort"] == "0"
    assert c497.extra["scheduleAsyncDeliverMaxPendingLimit"] == "-1"
    c533 = StoreConfig.from_properties_file(GOLDEN / "rmq533-g2" / "store.properties")
    assert c533.is_v5 and c533.trailing_property_separator
    assert c533.enabled_append_prop_crc and c533.append_prop_crc
    assert c533.supports_message_version_v2


@pytest.mark.parametrize("version,trailing,v5", [
    ("4.8.0", True, False), ("4.9.0", True, False), ("4.9.1", False, False), ("4.9.7", False, False),
    ("4.9.8", False, False), ("5.0.0", False, True), ("5.1.4", False, True), ("5.2.0", True, True),
    ("5.3.3", True, True), ("5.3.4-SNAPSHOT", True, True),
])
def test_trailing_property_separator_by_version(version, trailing, v5):
    c = StoreConfig(engine_version=version)
    assert c.trailing_property_separator is trailing
    assert c.is_v5 is v5


def test_prop_crc_needs_5_2():
    assert not StoreConfig(engine_version="5.1.4", enabled_append_prop_crc=True).append_prop_crc
    assert StoreConfig(engine_version="5.2.0", enabled_append_prop_crc=True).append_prop_crc


def test_properties_syntax():
    text = (
        "# comment = ignored\n"
        "! also a comment\\\n"
        "   \n"
        "  mappedFileSizeCommitLog = 262144\r\n"
        "maxIndexNum: 600\r"
        "maxHashSlotNum 512\n"
        "messageDelayLevel=1s 5s \\\n"
        "        10s\n"
        "brokerRole\t=\tSLAVE\n"
        "key\\ with\\=escapes=tab\\there\\u0041\\\\\n"
        "flushDiskType=ASYNC_FLUSH\n"
        "flushDiskType=SYNC_FLUSH\n"
        "emptyValue=\n"
        "bare\n"
    )
    raw = parse_java_properties(text)
    assert raw == {
        "mappedFileSizeCommitLog": "262144", "maxIndexNum": "600", "maxHashSlotNum": "512",
        "messageDelayLevel": "1s 5s 10s", "brokerRole": "SLAVE", "key with=escapes": "tab\thereA\\",
        "flushDiskType": "SYNC_FLUSH", "emptyValue": "", "bare": "",
    }
    c = StoreConfig.from_mapping(raw)
    assert c.message_delay_levels_ms == (1000, 5000, 10000)
    assert c.broker_role is BrokerRole.SLAVE and c.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert c.extra == {"key with=escapes": "tab\thereA\\", "emptyValue": "", "bare": ""}


def test_properties_bad_unicode_escape():
    with pytest.raises(OptionError, match=r"f\.properties:2"):
        parse_java_properties("a=1\nb=\\u12x4\n", file="f.properties")


def test_overrides(tmp_path):
    path = tmp_path / "store.properties"
    path.write_text("mappedFileSizeCommitLog=262144\nhaListenPort=0\nengineVersion=4.9.7\n")
    c = StoreConfig.from_properties_file(
        path, parse_override_args(["maxIndexNum=1000", "haListenPort=10912", "engineVersion=5.2.0", "x=a=b"]))
    assert c.mapped_file_size_commit_log_bytes == 262144
    assert c.max_index_num == 1000
    assert c.extra == {"haListenPort": "10912", "x": "a=b"}
    assert c.engine_version == "5.2.0" and c.trailing_property_separator
    d = c.with_overrides({"maxIndexNum": 2000, "checkCRCOnRecover": False})
    assert (d.max_index_num, d.check_crc_on_recover) == (2000, False)
    assert c.max_index_num == 1000                                      # original unchanged
    with pytest.raises(OptionError, match="key=value"):
        parse_override_args(["novalue"])


def test_missing_file_is_an_option_error(tmp_path):
    with pytest.raises(OptionError, match="nope.properties"):
        StoreConfig.from_properties_file(tmp_path / "nope.properties")


@pytest.mark.parametrize("key,value", [
    ("mappedFileSizeCommitLog", "1g"),
    ("mappedFileSizeCommitLog", "-1"),
    ("mappedFileSizeCommitLog", "0"),
    ("mappedFileSizeCommitLog", "2147483648"),
    ("mappedFileSizeConsumeQueue", "12.5"),
    ("maxHashSlotNum", ""),
    ("maxIndexNum", "-600"),
    ("maxMessageSize", "4MB"),
    ("flushDiskType", "LAZY_FLUSH"),
    ("brokerRole", "MASTER"),
    ("checkCRCOnRecover", "yes"),
    ("messageIndexEnable", "1"),
    ("messageDelayLevel", "1s 5x"),
    ("messageDelayLevel", "500ms"),
    ("messageDelayLevel", "   "),
    ("messageDelayLevel", "-1s"),
    ("engineVersion", "6.0.0"),
    ("engineVersion", "latest"),
    ("fileReservedTime", "-1"),
    ("maxIndexNum", "200000000"),                # IndexFile would exceed a Java int
])
def test_bad_values_name_the_key(tmp_path, key, value):
    with pytest.raises(OptionError) as info:
        StoreConfig.from_mapping({key: value})
    assert key in str(info.value)
    path = tmp_path / "bad.properties"
    path.write_text(f"{key}={value}\n")
    with pytest.raises(OptionError) as info:
        StoreConfig.from_properties_file(path)
    assert str(path) in str(info.value) and key in str(info.value)


def test_bad_override_names_the_key(tmp_path):
    path = tmp_path / "ok.properties"
    path.write_text("maxIndexNum=600\n")
    with pytest.raises(OptionError, match="flushDiskType"):
        StoreConfig.from_properties_file(path, {"flushDiskType": "NOPE"})


def test_direct_construction_is_validated():
    with pytest.raises(OptionError, match="mappedFileSizeCommitLog"):
        StoreConfig(mapped_file_size_commit_log_bytes=0)
    with pytest.raises(OptionError, match="flushDiskType"):
        StoreConfig(flush_disk_type="FAST")
    with pytest.raises(OptionError):
        StoreConfig(extra={"mappedFileSizeCommitLog": "1"})
    assert StoreConfig(flush_disk_type="SYNC_FLUSH").flush_disk_type is FlushDiskType.SYNC_FLUSH


def test_consume_queue_size_rounds_up_to_units():
    assert StoreConfig.from_mapping({"mappedFileSizeConsumeQueue": "1001"}).mapped_file_size_consume_queue_bytes \
        == 1020
    assert StoreConfig(mapped_file_size_consume_queue_bytes=1).mapped_file_size_consume_queue_bytes == 20


def test_values_are_trimmed_and_bools_case_insensitive():
    c = StoreConfig.from_mapping({"maxIndexNum": " 600 ", "messageIndexSafe": "TRUE ",
                                  "flushDiskType": "sync_flush", "deleteWhen": " 04;05 "})
    assert (c.max_index_num, c.message_index_safe, c.flush_disk_type, c.delete_when) == \
        (600, True, FlushDiskType.SYNC_FLUSH, "04;05")


def test_delay_levels():
    assert parse_message_delay_level("1s 1m 1h 1d") == (1000, 60000, 3600000, 86400000)
    assert format_message_delay_level(DEFAULT_DELAYS_MS) == \
        "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    assert format_message_delay_level((90000, 86400000)) == "90s 1d"
    with pytest.raises(OptionError):
        format_message_delay_level((1500,))
    c = StoreConfig()
    assert c.message_delay_level == "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    assert (c.delay_level_ms(1), c.delay_level_ms(3), c.delay_level_ms(18)) == (1000, 10000, 7200000)
    assert c.delay_level_ms(25) == 7200000                        # clamped to level 18 (README)
    with pytest.raises(OptionError):
        c.delay_level_ms(0)
    assert StoreConfig(message_delay_levels_ms=[2000, 4000]).message_delay_levels_ms == (2000, 4000)


def test_frozen_hashable_picklable():
    c = StoreConfig.from_mapping({"maxIndexNum": "600", "someBrokerKey": "v"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.max_index_num = 1
    with pytest.raises(AttributeError):
        c.extra.foo = 1
    assert hash(c) == hash(pickle.loads(pickle.dumps(c)))
    assert pickle.loads(pickle.dumps(c)) == c
    assert pickle.loads(pickle.dumps(c)).extra == {"someBrokerKey": "v"}


def test_paths():
    c = StoreConfig.from_mapping({"storePathRootDir": "/data/store"})
    assert c.store_root() == "/data/store"
    assert c.commit_log_dirs() == ("/data/store/commitlog",)
    assert c.commit_log_dirs("/other") == ("/other/commitlog",)
    m = StoreConfig.from_mapping({"storePathCommitLog": "/a/cl, /b/cl,"})
    assert m.commit_log_dirs("/x") == ("/a/cl", "/b/cl")
    assert StoreConfig.from_mapping({"diskMaxUsedSpaceRatio": "99"}).disk_max_used_space_ratio_effective_percent == 95
