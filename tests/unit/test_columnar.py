"""format/columnar.py, columnar_headers.py and columnar_properties.py (vectorized decoding) against the scalar decode_record."""

from __future__ import annotations

import pytest

from rmqsource.errors import CorruptRecordError
from rmqsource.format import columnar as col, columnar_headers as hdr
from rmqsource.format.compression import inflate_body
from rmqsource.format.record import decode_record, encode_blank, encode_record
from rmqsource.io.segments import list_segments

from golden import corpora, crash_cases

pytestmark = pytest.mark.unit

ALL = ["topic", "queueId", "queueOffset", "commitLogOffset", "msgId", "uniqKey", "tags", "keys", "body", "properties",
       "bornTimestamp", "storeTimestamp", "bornHost", "storeHost", "sysFlag", "flag", "reconsumeTimes", "bodyCRC",
       "preparedTransactionOffset", "transactionType", "storeSize"]
TX = {0: "NOT_TYPE", 4: "PREPARED_TYPE", 8: "COMMIT_TYPE", 12: "ROLLBACK_TYPE"}


def compare(buf, positions, decompress=False):
    h = hdr.decode_headers(buf, positions)
    cols = col.build_columns(buf, h, ALL, decompress=decompress)
    rows = {k: v.to_pylist() for k, v in cols.items()}
    for i, p in enumerate(positions.tolist()):
        d = decode_record(buf, p, len(buf))
        r = d.record
        assert r is not None, d.reason
        assert rows["topic"][i] == r.topic
        assert rows["queueId"][i] == r.queue_id
        assert rows["queueOffset"][i] == r.queue_offset
        assert rows["commitLogOffset"][i] == r.phy_offset
        assert rows["msgId"][i] == r.msg_id
        assert rows["uniqKey"][i] == r.uniq_key
        assert rows["tags"][i] == r.tags
        assert rows["keys"][i] == (None if r.keys is None else [k for k in r.keys.split(" ") if k])
        body = inflate_body(r.body, r.sys_flag) if decompress else r.body
        assert rows["body"][i] == body
        assert dict(rows["properties"][i]) == r.properties
        assert len(rows["properties"][i]) == len(r.properties)      # duplicates removed
        assert rows["bornTimestamp"][i].timestamp() * 1000 == pytest.approx(r.born_timestamp_ms, abs=0.5)
        assert rows["storeTimestamp"][i].timestamp() * 1000 == pytest.approx(r.store_timestamp_ms, abs=0.5)
        assert rows["bornHost"][i] == r.born_host
        assert rows["storeHost"][i] == r.store_host
        assert rows["sysFlag"][i] == r.sys_flag
        assert rows["flag"][i] == r.flag
        assert rows["reconsumeTimes"][i] == r.reconsume_times
        assert rows["bodyCRC"][i] == r.body_crc
        assert rows["preparedTransactionOffset"][i] == r.prepared_transaction_offset
        assert rows["transactionType"][i] == TX[r.sys_flag & 0xC]
        assert rows["storeSize"][i] == r.store_size
    return rows


@pytest.mark.parametrize("store", [c / "store" for c in corpora()] + [c / "store" for c in crash_cases()],
                         ids=lambda p: str(p.parent.name if p.parent.name != "store" else p))
def test_every_golden_record_decodes_like_decode_record(store):
    total = 0
    for seg in list_segments(store / "commitlog"):
        buf = open(seg.path, "rb").read()
        positions, stop = hdr.walk_chain(buf, 0, len(buf))
        assert stop.reason in (hdr.STOP_BLANK, hdr.STOP_END, hdr.STOP_CORRUPT)
        # crash stores: stop where the scalar decoder stops (torn tail past the valid end)
        ok = [decode_record(buf, p, len(buf)).kind.value == "MESSAGE" for p in positions.tolist()]
        if not all(ok):
            positions = positions[:ok.index(False)]
            with pytest.raises(CorruptRecordError):
                hdr.decode_headers(buf, hdr.walk_chain(buf, 0, len(buf))[0])
        if len(positions):
            compare(buf, positions)
        total += len(positions)
    assert total > 0


def test_golden_compressed_bodies_inflate():
    corpus = corpora()[0]
    seen = 0
    for seg in list_segments(corpus / "store" / "commitlog"):
        buf = open(seg.path, "rb").read()
        positions, _ = hdr.walk_chain(buf, 0, len(buf))
        h = hdr.decode_headers(buf, positions)
        comp = positions[(h.sys_flag & 1) == 1]
        if len(comp):
            compare(buf, comp, decompress=True)
            seen += len(comp)
    assert seen >= 5


def _rec(phy, **kw):
    args = dict(topic=b"T", queue_id=1, flag=0, queue_offset=0, phy_offset=phy, sys_flag=0,
                born_timestamp_ms=1700000000000, born_addr=bytes([10, 0, 0, 1]), born_port=1234,
                store_timestamp_ms=1700000000001, store_addr=bytes([10, 0, 0, 2]), store_port=10911,
                reconsume_times=0, prepared_transaction_offset=0, body=b"", properties=b"")
    args.update(kw)
    return encode_record(**args)


def test_tricky_synthetic_records():
    v6 = bytes.fromhex("20010db8000000000000000000000001")
    recs = [
        dict(body=b"", properties=b""),                                           # empty everything
        dict(sys_flag=0x30, born_addr=v6, store_addr=v6, body=b"x" * 13),          # IPv6 both
        dict(sys_flag=0x10, born_addr=v6, body=b"abc"),                             # IPv6 born only
        dict(sys_flag=0x20, store_addr=v6, properties=b"TAGS\x01a\x02TAGS\x01b"),   # dup key: last wins
        dict(topic=b"L" * 200, magic_v2=True, properties=b"KEYS\x01 k1  k2 \x02"),  # v2 magic, odd KEYS
        dict(properties=b"\x02\x02a\x01\x02\x01b\x02ab\x02k\x01v\x01w\x02"),         # empty key/value, no 0x01
        dict(properties=b"K\x01\xff\xfe\x02UNIQ_KEY\x01U1"),                        # invalid UTF-8 value
        dict(properties="TAGS\x01订单\x02KEYS\x01é ü".encode()),                       # non-ASCII
        dict(properties=b"a\x01\x01\x02b\x01c"),                                    # value starting with 0x01
        dict(body=bytes(range(256)) * 3, append_crc_property=True, properties=b"TAGS\x01X"),
    ]
    buf = bytearray()
    positions = []
    for r in recs:
        positions.append(len(buf))
        buf += _rec(len(buf), **r)
    buf += encode_blank(64) + bytes(56)
    import numpy as np
    pos, stop = hdr.walk_chain(bytes(buf), 0, len(buf))
    assert pos.tolist() == positions and stop.reason == hdr.STOP_BLANK
    rows = compare(bytes(buf), np.array(positions))
    assert rows["tags"][3] == "b"
    assert rows["keys"][4] == ["k1", "k2"]
    assert rows["bornHost"][1] == "[2001:db8:0:0:0:0:0:1]:1234"
    assert len(rows["msgId"][1]) == 56 and len(rows["msgId"][0]) == 32
    assert rows["properties"][6] == [("K", "\ufffd\ufffd"), ("UNIQ_KEY", "U1")]


def test_subset_of_rows_and_columns():
    import numpy as np
    corpus = corpora()[-1]
    seg = list_segments(corpus / "store" / "commitlog")[0]
    buf = open(seg.path, "rb").read()
    positions, _ = hdr.walk_chain(buf, 0, len(buf))
    h = hdr.decode_headers(buf, positions)
    sub = h.take(np.arange(0, len(h), 7))
    cols = col.build_columns(buf, sub, ["body", "tags"])
    assert set(cols) == {"body", "tags"}
    for i, p in enumerate(positions[::7].tolist()):
        r = decode_record(buf, p, len(buf)).record
        assert cols["body"][i].as_py() == r.body and cols["tags"][i].as_py() == r.tags


def test_hostile_lengths_name_file_and_offset():
    import numpy as np
    good = _rec(0, body=b"hello", properties=b"TAGS\x01a")
    buf = bytearray(good + _rec(len(good), body=b"world"))
    second = len(good)
    buf[second + 84:second + 88] = (10_000).to_bytes(4, "big")        # body length past the record end
    locate = lambda p: ("/store/commitlog/00000000000000262144", 1000 + p)  # noqa: E731
    with pytest.raises(CorruptRecordError, match=rf"00000000000000262144, offset {1000 + second}: body length"):
        hdr.decode_headers(bytes(buf), np.array([0, second]), locate=locate)
    buf2 = bytearray(good)
    buf2[0:4] = (50).to_bytes(4, "big")                               # totalSize below the minimum
    _, stop = hdr.walk_chain(bytes(buf2), 0, len(buf2))
    assert stop.reason == hdr.STOP_CORRUPT and stop.position == 0
    buf3 = bytearray(good)
    buf3[len(good) - len(b"TAGS\x01a") - 2:len(good) - len(b"TAGS\x01a")] = (3).to_bytes(2, "big")
    with pytest.raises(CorruptRecordError, match="fields add up"):
        hdr.decode_headers(bytes(buf3), np.array([0]))
    with pytest.raises(CorruptRecordError, match="ConsumeQueue says"):
        hdr.decode_headers(good, np.array([0]), expected_sizes=np.array([len(good) + 1]))


def test_walk_chain_stops_short_for_partial_record():
    good = _rec(0, body=b"a" * 100)
    buf = good + _rec(len(good), body=b"b" * 100)
    pos, stop = hdr.walk_chain(buf[: len(good) + 50], 0, len(good) + 50, segment_remaining=10_000)
    assert pos.tolist() == [0] and stop.reason == hdr.STOP_SHORT and stop.position == len(good)
