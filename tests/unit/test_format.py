"""Codecs against the spec's test vectors (Java 17 outputs) and edge cases."""

from __future__ import annotations

import random
import zlib

import pytest

from rmqsource.format.checkpoint import Checkpoint
from rmqsource.format.compression import inflate_body
from rmqsource.format.consumequeue import PRE_BLANK_UNIT, decode_unit, encode_unit
from rmqsource.format.indexfile import IndexEntry, IndexHeader, time_diff_seconds
from rmqsource.format.javahash import index_key_hash, java_string_hash, tags_code
from rmqsource.format.msgid import create_offset_msg_id, decode_offset_msg_id, parse_host
from rmqsource.format.properties import parse_properties, serialize_properties, split_keys
from rmqsource.format.record import (BLANK_MAGIC, Kind, body_crc, crc_property_digits, decode_record,
                                     encode_blank, encode_record, record_size)
from rmqsource.format.tagscode import consume_queue_tags_code
from rmqsource.errors import DecompressionError, OptionError

pytestmark = pytest.mark.unit

SPEC_RECORDS = {
    "A": "000000CEDAA320A769C865ED000000010000000000000000000000050000000000000000000000000000018BCFE568000A0000010000D4310000018BCFE5687BC0A8016400002A9F0000000000000000000000000000000E48656C6C6F20526F636B65744D5109546F70696354657374005C544147530154616741024B455953016F726465722D313030303102554E49515F4B455901304130303030303133303339314236443335383630303030303345383030303102434C55535445520144656661756C74436C757374657202",
    "B": "00000083DAA320A700000000000000000000000000000000000000000000000040000000000000000000018BCFE568000A0000010000D4310000018BCFE569C8C0A8016400002A9F000000000000000000000000000000000254310026544147530154616741024B455953016F726465722D3130303031206F726465722D3130303032",
    "C": "00000082DAA320A70CDC16830000000200000007000000000000000900000000000000C8000000300000018BCFE56800FE80000000000000000000000000000100009C400000018BCFE56B150000000000000000000000000000000100002A9F0000000300000000000000000000000178025436000C5441475301E8AEA2E58D9502",
    "D": "00000103DAA320AB2EE051E3000000000000000000000000000000000000000000001000000000000000018BCFE568000A0000010000D4310000018BCFE56BE7C0A8016400002A9F000000010000000000000000000000057265747279008C2552455452592567676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767001652455452595F544F50494301546F7069635465737402",
    "E": "00000085DAA320A77C6287FD000000000000000000000000000000000000000000000000000000000000018BCFE568000A0000010000D4310000018BCFE5687BC0A8016400002A9F0000000000000000000000000000000363726309546F70696354657374001E544147530154616741025F5F435243333223013534343135343038363102",
}


@pytest.mark.parametrize("text,expected", [
    ("TagA", 2598919), ("TagB", 2598920), ("order_created", 848461559), ("订单", 1129459),
    ("😀emoji", -1233692477), ("polygenelubricants", -2147483648), ("*", 42),
    ("a-very-long-tag-name-to-force-int-overflow-0123456789", 1814680615),
])
def test_java_string_hash_vectors(text, expected):
    assert java_string_hash(text) == expected


def test_tags_code_and_index_hash():
    assert tags_code(None) == 0 and tags_code("") == 0
    assert index_key_hash("polygenelubricants") == 0
    assert index_key_hash("TopicTest#KEY1") == 1656969516
    assert index_key_hash("T#订单-1") == 772383834
    assert index_key_hash("TopicTest#order-10001") % 5_000_000 == 1785551


def test_delayed_tags_code_is_deliver_time():
    props = {"DELAY": "3", "TAGS": "TagA"}
    assert consume_queue_tags_code("SCHEDULE_TOPIC_XXXX", props, 1700000000123) == 1700000010123
    assert consume_queue_tags_code("SCHEDULE_TOPIC_XXXX", {"DELAY": "99"}, 1000) == 1000 + 7200000
    assert consume_queue_tags_code("TopicTest", props, 1700000000123) == 2598919
    assert consume_queue_tags_code("SCHEDULE_TOPIC_XXXX", {"DELAY": "0", "TAGS": "TagA"}, 5) == 2598919


@pytest.mark.parametrize("body,crc", [(b"", 0), (b"Hello RocketMQ", 1774740973), (b"123456789", 1274296614),
                                      (b"Hello world", 198614610)])
def test_body_crc_vectors(body, crc):
    assert body_crc(body) == crc


@pytest.mark.parametrize("name", sorted(SPEC_RECORDS))
def test_spec_records_decode_and_reencode(name):
    raw = bytes.fromhex(SPEC_RECORDS[name])
    decoded = decode_record(raw, 0, len(raw), check_crc=True, keep_raw=True)
    assert decoded.kind is Kind.MESSAGE and decoded.size == len(raw)
    r = decoded.record
    born_addr, born_port = parse_host(r.born_host)
    store_addr, store_port = parse_host(r.store_host)
    props = r.properties_raw
    crc_prop = name == "E"
    if crc_prop:
        props = props[:-20]
    again = encode_record(topic=r.topic.encode(), queue_id=r.queue_id, flag=r.flag, queue_offset=r.queue_offset,
                          phy_offset=r.phy_offset, sys_flag=r.sys_flag, born_timestamp_ms=r.born_timestamp_ms,
                          born_addr=born_addr, born_port=born_port, store_timestamp_ms=r.store_timestamp_ms,
                          store_addr=store_addr, store_port=store_port, reconsume_times=r.reconsume_times,
                          prepared_transaction_offset=r.prepared_transaction_offset, body=r.body,
                          properties=props, magic_v2=len(r.topic) > 127, append_crc_property=crc_prop)
    assert again == raw


def test_spec_record_fields():
    a = decode_record(bytes.fromhex(SPEC_RECORDS["A"]), 0, 206).record
    assert a.msg_id == "C0A8016400002A9F0000000000000000"
    assert a.properties["CLUSTER"] == "DefaultCluster" and a.tags == "TagA"
    c = decode_record(bytes.fromhex(SPEC_RECORDS["C"]), 0, 130).record
    assert c.born_host == "[fe80:0:0:0:0:0:0:1]:40000" and c.store_host == "[0:0:0:0:0:0:0:1]:10911"
    assert c.reconsume_times == 3 and c.tags == "订单"
    d = decode_record(bytes.fromhex(SPEC_RECORDS["D"]), 0, 259).record
    assert d.topic == "%RETRY%" + "g" * 133
    assert crc_property_digits(1680451445) == b"5441540861"


def test_record_size_formula():
    assert record_size(body_len=14, topic_len=9, props_len=92) == 206
    assert record_size(body_len=1, topic_len=2, props_len=12, born_v6=True, store_v6=True) == 130


def test_blank_and_end_detection():
    seg = encode_blank(37) + bytes(29)
    assert decode_record(seg, 0, len(seg)).kind is Kind.BLANK
    assert int.from_bytes(encode_blank(37)[4:], "big", signed=True) == BLANK_MAGIC
    zeros = bytes(64)
    assert decode_record(zeros, 0, 64).kind is Kind.END


def test_decoder_never_raises_on_random_bytes():
    seed = random.randrange(1 << 30)
    print("seed", seed)
    rng = random.Random(seed)
    base = bytes.fromhex(SPEC_RECORDS["A"])
    for _ in range(3000):
        buf = bytearray(base)
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        cut = rng.randint(0, len(buf))
        d = decode_record(bytes(buf[:cut]), 0, cut, check_crc=True)
        assert d.kind in (Kind.MESSAGE, Kind.END, Kind.CORRUPT, Kind.BLANK)
        if d.kind is Kind.MESSAGE:
            assert d.size <= cut and body_crc(d.record.body) == d.record.body_crc


def test_properties_parsing_rules():
    assert parse_properties(b"a\x011\x02b\x012") == {"a": "1", "b": "2"}
    assert parse_properties(b"a\x011\x02b\x012\x02") == {"a": "1", "b": "2"}
    assert parse_properties(b"a\x01\x02\x01x\x02junk\x02k\x01v\x01w\x02k2\x01z") == {"k": "v\x01w", "k2": "z"}
    assert parse_properties(b"TAGS\x01A\x02TAGS\x01B") == {"TAGS": "B"}
    assert serialize_properties({"a": "1", "b": None}, trailing_separator=True) == "a\x011\x02"
    assert serialize_properties([("a", "1"), ("b", "2")], trailing_separator=False) == "a\x011\x02b\x012"
    assert split_keys("dbl  space ") == ["dbl", "space"]


@pytest.mark.parametrize("host,port,offset,expected", [
    ("192.168.1.100", 10911, 0, "C0A8016400002A9F0000000000000000"),
    ("10.0.0.7", 10911, 123456789, "0A00000700002A9F00000000075BCD15"),
    ("[::1]", 10911, 1073742244, "0000000000000000000000000000000100002A9F00000000400001A4"),
    ("[fe80::1:2:3:4]", 10911, 5, "FE80000000000000000100020003000400002A9F0000000000000005"),
])
def test_offset_msg_id_vectors(host, port, offset, expected):
    addr, p = parse_host(f"{host}:{port}")
    assert create_offset_msg_id(addr, p, offset) == expected
    back = decode_offset_msg_id(expected)
    assert (back.store_addr, back.store_port, back.phy_offset) == (addr, port, offset)


def test_bad_msg_id_is_an_option_error():
    with pytest.raises(OptionError):
        decode_offset_msg_id("XYZ")
    with pytest.raises(OptionError):
        decode_offset_msg_id("Z" * 32)


def test_consume_queue_unit_and_pre_blank():
    assert encode_unit(0, 206, 2598919).hex().upper() == "0000000000000000000000CE000000000027A807"
    assert PRE_BLANK_UNIT.hex().upper() == "00000000000000007FFFFFFF0000000000000000"
    assert decode_unit(encode_unit(300, 250, 1700000010123)) == (300, 250, 1700000010123)


def test_index_worked_example():
    """Spec §5.5: H=8, N=6, four keys, header and entries as the Java model wrote them."""
    h = IndexHeader(1700000000123, 1700000009999, 0, 412, 3, 5)
    assert h.encode().hex().upper() == ("0000018BCFE5687B0000018BCFE58F0F0000000000000000"
                                        "000000000000019C0000000300000005")
    assert IndexEntry(2001785551, 206, 5, 2).encode().hex().upper() == "7750D2CF00000000000000CE0000000500000002"
    assert time_diff_seconds(1700000005500, 1700000000123) == 5
    assert time_diff_seconds(1700000000000, 0) == 0
    assert index_key_hash("TopicTest#order-10001") % 8 == 7


def test_checkpoint_roundtrip():
    cp = Checkpoint(1, 2, 3, 4, 5)
    assert Checkpoint.decode(cp.encode()) == cp
    assert len(cp.encode()) == 4096
    assert Checkpoint(10_000, 20_000, 0).min_timestamp_ms() == 7000


def test_bounded_decompression():
    plain = b"x" * 100_000
    assert inflate_body(zlib.compress(plain), 0x301) == plain
    assert inflate_body(zlib.compress(plain), 0x1) == plain
    with pytest.raises(DecompressionError):
        inflate_body(zlib.compress(plain), 0x301, max_bytes=1000)
    with pytest.raises(DecompressionError):
        inflate_body(b"not zlib", 0x301, file="f", offset=7)
    assert inflate_body(b"raw", 0) == b"raw"


def test_lz4_and_zstd_bodies():
    lz4_frame = pytest.importorskip("lz4.frame")
    zstandard = pytest.importorskip("zstandard")
    plain = b"rocketmq " * 1000
    assert inflate_body(lz4_frame.compress(plain), 0x101) == plain
    # zstd-jni streams omit the content size: decode without it.
    cctx = zstandard.ZstdCompressor(write_content_size=False)
    assert inflate_body(cctx.compress(plain), 0x201) == plain


def test_internal_topics_are_rocketmqs_own():
    import pyarrow as pa
    from rmqsource.format.system_topics import SYSTEM_TOPICS, internal_topic_mask, is_internal_topic
    from rmqsource.spark.options import parse_options
    own = [*SYSTEM_TOPICS, "rmq_sys_wheel_timer", "rmq_sys_REVIVE_LOG_DefaultCluster", "%RETRY%g", "%DLQ%g"]
    users = ["TopicTest", "rb_topic_0", "RMQ_SYS", "rmq_sysX", "%LMQ%q", "DefaultCluster", "x%RETRY%", "tbw102", ""]
    assert all(is_internal_topic(t) for t in own) and not any(is_internal_topic(t) for t in users)
    arr = pa.array([*own, None, *users] * 3, type=pa.string())
    assert internal_topic_mask(arr).tolist() == [t is not None and is_internal_topic(t) for t in arr.to_pylist()]
    assert internal_topic_mask(pa.array([], type=pa.string())).tolist() == []
    assert not internal_topic_mask(pa.array(users)).any()
    # the option: on by default; a named topic or queue is always read, a pattern follows the option
    assert parse_options({"path": "/s"}).internal_topics_excluded
    assert parse_options({"path": "/s", "topicPattern": ".*"}).internal_topics_excluded
    assert not parse_options({"path": "/s", "topics": "RMQ_SYS_TRACE_TOPIC"}).internal_topics_excluded
    assert not parse_options({"path": "/s", "queues": "SCHEDULE_TOPIC_XXXX:2"}).internal_topics_excluded
    assert not parse_options({"path": "/s", "excludeInternalTopics": "false"}).internal_topics_excluded
    with pytest.raises(Exception, match="excludeInternalTopics must be true or false"):
        parse_options({"path": "/s", "excludeinternaltopics": "maybe"})
