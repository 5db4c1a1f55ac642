"""Writer unit tests: blank padding and rolls, refused input, lock exclusion, lifecycle files,
engine-generation rules (delay rewrite, magic v2, CRC property), recovery after a crash."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import textwrap
import zlib

import pytest

from rmqsource.errors import StoreLockedError
from rmqsource.format.properties import parse_properties
from rmqsource.format.record import BLANK_MAGIC, MAGIC_V2, Kind, decode_record
from rmqsource.io.lock import StoreLock, is_store_locked
from rmqsource.store.config import StoreConfig
from rmqsource.store.writer import (AppendMessageStatus, MessageExtBrokerInner, MessageStoreWriter,
                                    PutMessageStatus, delete_property)

pytestmark = pytest.mark.unit

SEG = 4096


def cfg(version="4.9.7", **kw) -> StoreConfig:
    base = {"mappedFileSizeCommitLog": SEG, "mappedFileSizeConsumeQueue": 200, "maxHashSlotNum": 16,
            "maxIndexNum": 64, "engineVersion": version}
    base.update(kw)
    return StoreConfig.from_mapping(base)


def msg(i=0, topic="TopicTest", qid=0, body=b"x" * 100, **kw) -> MessageExtBrokerInner:
    kw.setdefault("store_timestamp_ms", 1_700_000_000_000 + i)
    kw.setdefault("born_timestamp_ms", 1_700_000_000_000)
    kw.setdefault("tags", "TagA")
    kw.setdefault("keys", f"k{i}")
    return MessageExtBrokerInner(topic=topic, queue_id=qid, body=body, born_host="10.0.0.1:1234",
                                 store_host="10.0.0.5:10911", **kw)


def segments(root):
    d = os.path.join(root, "commitlog")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def test_roll_writes_blank_record_with_remaining_size(tmp_path):
    with MessageStoreWriter(tmp_path, cfg()) as w:
        results = w.put_messages([msg(i) for i in range(40)])
        assert all(r.ok for r in results)
        # While open: the segment being written plus the pre-allocated next one.
        assert len(segments(tmp_path)) >= 2
    data = (tmp_path / "commitlog" / "00000000000000000000").read_bytes()
    pos = 0
    for _ in range(100):
        d = decode_record(data, pos, SEG, check_crc=True)
        if d.kind is not Kind.MESSAGE:
            break
        pos += d.size
    remaining, magic = struct.unpack_from(">ii", data, pos)
    assert magic == BLANK_MAGIC and remaining == SEG - pos
    size = results[0].size
    assert size + 8 > remaining                      # the next record did not fit
    first_in_seg1 = next(r for r in results if r.commit_log_offset >= SEG)
    assert first_in_seg1.commit_log_offset == SEG
    assert data[pos + 8:] == bytes(SEG - pos - 8)    # nothing written after the blank
    # Clean close deleted the unused pre-allocated segment.
    last = max(r.commit_log_offset for r in results)
    assert segments(tmp_path)[-1] == f"{last - last % SEG:020d}"


def test_record_fits_exactly_with_eight_spare_bytes(tmp_path):
    with MessageStoreWriter(tmp_path, cfg()) as w:
        size0 = w.put_message(msg(0, body=b"")).size     # empty body: base size
        # Fill so that the next record leaves exactly 8 bytes: it must stay in segment 0.
        body_len = SEG - 3 * size0 - 8
        r1 = w.put_message(msg(1, body=b"a" * body_len))
        assert r1.ok and r1.commit_log_offset == size0
        r2 = w.put_message(msg(2, body=b""))
        assert r2.commit_log_offset + r2.size == SEG - 8
        r3 = w.put_message(msg(3, body=b""))
        assert r3.commit_log_offset == SEG
    data = (tmp_path / "commitlog" / "00000000000000000000").read_bytes()
    assert struct.unpack_from(">ii", data, SEG - 8) == (8, BLANK_MAGIC)


@pytest.mark.parametrize("bad, status, append", [
    (dict(topic="../x"), PutMessageStatus.MESSAGE_ILLEGAL, None),
    (dict(topic=""), PutMessageStatus.MESSAGE_ILLEGAL, None),
    (dict(topic="T" * 128), PutMessageStatus.MESSAGE_ILLEGAL, None),
    (dict(body=b"b" * (5 * 1024 * 1024)), PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageStatus.MESSAGE_SIZE_EXCEEDED),
    (dict(properties={"big": "p" * 40_000}), PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, None),
    (dict(qid=-1), PutMessageStatus.MESSAGE_ILLEGAL, None),
])
def test_refused_input_writes_nothing(tmp_path, bad, status, append):
    config = cfg(mappedFileSizeCommitLog=8 * 1024 * 1024)
    with MessageStoreWriter(tmp_path, config) as w:
        r = w.put_message(msg(**bad))
        assert r.status is status and r.append_status is append
        assert r.commit_log_offset == -1 and w.commit_log_max_offset == 0
    assert segments(tmp_path) == []
    assert not (tmp_path / "consumequeue").exists()


def test_mixed_batch_keeps_good_messages(tmp_path):
    with MessageStoreWriter(tmp_path, cfg()) as w:
        rs = w.put_messages([msg(0), msg(1, topic="bad topic"), msg(2)])
    assert [r.status for r in rs] == [PutMessageStatus.PUT_OK, PutMessageStatus.MESSAGE_ILLEGAL,
                                      PutMessageStatus.PUT_OK]
    assert rs[2].commit_log_offset == rs[0].size and rs[2].queue_offset == 1


def test_closed_writer_is_service_not_available(tmp_path):
    w = MessageStoreWriter(tmp_path, cfg())
    w.close()
    r = w.put_message(msg())
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE


def test_abort_lock_and_preallocation_lifecycle(tmp_path):
    w = MessageStoreWriter(tmp_path, cfg())
    try:
        assert (tmp_path / "abort").exists()
        assert (tmp_path / "lock").read_bytes()[:4] == b"lock"
        assert is_store_locked(tmp_path)
        w.put_message(msg())
        assert segments(tmp_path) == ["00000000000000000000", "00000000000000004096"]
        assert all((tmp_path / "commitlog" / n).stat().st_size == SEG for n in segments(tmp_path))
    finally:
        w.close()
    assert not (tmp_path / "abort").exists()
    assert segments(tmp_path) == ["00000000000000000000"]
    assert (tmp_path / "checkpoint").stat().st_size == 4096
    assert not is_store_locked(tmp_path)


def test_second_writer_in_same_process_is_refused(tmp_path):
    with MessageStoreWriter(tmp_path, cfg()):
        with pytest.raises(StoreLockedError):
            MessageStoreWriter(tmp_path, cfg())
    with MessageStoreWriter(tmp_path, cfg()):
        pass


_CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {src!r})
    from rmqsource.errors import StoreLockedError
    from rmqsource.io.lock import StoreLock
    mode, root = sys.argv[1], sys.argv[2]
    if mode == "try":
        try:
            StoreLock(root).acquire()
        except StoreLockedError:
            print("LOCKED"); sys.exit(0)
        print("ACQUIRED")
    else:
        lock = StoreLock(root).acquire()
        print("HOLDING", flush=True)
        time.sleep(float(sys.argv[3]))
        lock.release()
""")


def _child(*args, wait=True):
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cmd = [sys.executable, "-c", _CHILD.format(src=src), *map(str, args)]
    if wait:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)


def test_lock_excludes_other_processes(tmp_path):
    with MessageStoreWriter(tmp_path, cfg()):
        assert _child("try", tmp_path) == "LOCKED"
    assert _child("try", tmp_path) == "ACQUIRED"


def test_lock_wait_timeout(tmp_path):
    holder = _child("hold", tmp_path, 0.6, wait=False)
    try:
        assert holder.stdout.readline().strip() == "HOLDING"
        with pytest.raises(StoreLockedError):
            StoreLock(tmp_path, timeout_s=0.1).acquire()
        lock = StoreLock(tmp_path, timeout_s=10).acquire()
        lock.release()
    finally:
        holder.wait(timeout=30)


def test_queue_offsets_and_transactions(tmp_path):
    with MessageStoreWriter(tmp_path, cfg()) as w:
        a = w.put_message(msg(0))
        p = w.put_message(msg(1, sys_flag=0x4))           # PREPARED
        rb = w.put_message(msg(2, sys_flag=0xC))          # ROLLBACK
        c = w.put_message(msg(3, sys_flag=0x8))           # COMMIT
        other = w.put_message(msg(4, qid=3))
    assert (a.queue_offset, p.queue_offset, rb.queue_offset, c.queue_offset, other.queue_offset) == (0, 0, 0, 1, 0)
    cq = (tmp_path / "consumequeue" / "TopicTest" / "0" / "00000000000000000000").read_bytes()
    units = [struct.unpack_from(">qiq", cq, i * 20) for i in range(3)]
    assert units[0][0] == a.commit_log_offset and units[1][0] == c.commit_log_offset and units[2] == (0, 0, 0)


def test_delay_rewrite_on_49_and_with_broker_hooks(tmp_path):
    m = msg(0, properties={"UNIQ_KEY": "U1", "DELAY": "25"})
    with MessageStoreWriter(tmp_path / "a", cfg("4.9.7")) as w:
        r = w.put_message(m)
    assert (r.topic, r.queue_id, r.queue_offset) == ("SCHEDULE_TOPIC_XXXX", 17, 0)
    raw = (tmp_path / "a" / "commitlog" / "00000000000000000000").read_bytes()
    rec = decode_record(raw, 0, SEG).record
    assert rec.properties_raw.endswith(b"DELAY\x0118\x02REAL_TOPIC\x01TopicTest\x02REAL_QID\x010")
    cq = (tmp_path / "a" / "consumequeue" / "SCHEDULE_TOPIC_XXXX" / "17" / "00000000000000000000").read_bytes()
    assert struct.unpack_from(">qiq", cq, 0)[2] == m.store_timestamp_ms + 7_200_000
    with MessageStoreWriter(tmp_path / "b", cfg("5.3.3", brokerPutHooks="false")) as w:
        r = w.put_message(m)
    assert (r.topic, r.queue_id) == ("TopicTest", 0)          # the bare 5.x store engine
    with MessageStoreWriter(tmp_path / "c", cfg("5.3.3")) as w:
        r = w.put_message(m)
    assert (r.topic, r.queue_id) == ("SCHEDULE_TOPIC_XXXX", 17)  # as a 5.x broker's put hook parks it


def test_v5_long_topic_v2_magic_and_crc_property(tmp_path):
    topic = "T" * 200
    with MessageStoreWriter(tmp_path, cfg("5.3.3", enabledAppendPropCRC="true")) as w:
        r = w.put_message(msg(0, topic=topic, properties={"__CRC32#": "junk", "a": "b"}))
        assert r.ok
    raw = (tmp_path / "commitlog" / "00000000000000000000").read_bytes()
    rec = decode_record(raw, 0, SEG, keep_raw=True).record
    assert rec.magic == MAGIC_V2 and rec.topic == topic
    props = rec.properties_raw
    assert props.count(b"__CRC32#") == 1 and props.endswith(b"\x02")
    crc = zlib.crc32(rec.raw[:-20]) & 0x7FFFFFFF
    assert parse_properties(props)["__CRC32#"] == str(crc).zfill(10)[::-1]
    with MessageStoreWriter(tmp_path / "s", cfg("5.3.3"), strict_broker_topic_check=True) as w:
        assert w.put_message(msg(0, topic=topic)).status is PutMessageStatus.MESSAGE_ILLEGAL
        assert w.put_message(msg(0, topic="%RETRY%" + "g" * 150)).ok


def test_delete_property_matches_message_utils():
    s = "A\x011\x02__CRC32#\x01123\x02B\x012"
    assert delete_property(s, "__CRC32#") == "A\x011\x02B\x012"
    assert delete_property("X__CRC32#\x011", "__CRC32#") == "X__CRC32#\x011"
    assert delete_property("__CRC32#\x011", "__CRC32#") == ""


def test_ipv6_hosts_set_sysflag_bits(tmp_path):
    with MessageStoreWriter(tmp_path, cfg()) as w:
        r = w.put_message(MessageExtBrokerInner(topic="T", queue_id=0, body=b"v6", born_host="[fe80::1]:1",
                                                store_host="[::1]:10911", sys_flag=0x30 | 0x1,
                                                store_timestamp_ms=1))
    assert r.sys_flag == 0x31 and len(r.msg_id) == 56


def test_reopen_after_crash_truncates_torn_tail(tmp_path):
    live = tmp_path / "live"
    w = MessageStoreWriter(live, cfg())
    try:
        rs = w.put_messages([msg(i) for i in range(10)])
        w.flush()
        crashed = tmp_path / "crashed"
        shutil.copytree(live, crashed)                  # a crash image: abort present, lock file unlocked
    finally:
        w.close()
    assert (crashed / "abort").exists()
    last = rs[-1]
    seg = crashed / "commitlog" / "00000000000000000000"
    data = bytearray(seg.read_bytes())
    tear = last.commit_log_offset % SEG + last.size // 2
    data[tear:] = bytes(len(data) - tear)
    seg.write_bytes(bytes(data))
    with MessageStoreWriter(crashed, cfg()) as w2:
        assert w2.commit_log_max_offset == last.commit_log_offset
        assert w2.queue_offset("TopicTest", 0) == last.queue_offset
        again = w2.put_message(msg(10))
    assert again.commit_log_offset == last.commit_log_offset and again.queue_offset == last.queue_offset
    assert not (crashed / "abort").exists()


def test_put_arrow_batch(tmp_path):
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"topic": ["T", "T"], "queue_id": [0, 1], "body": [b"a", b"b"],
                      "tags": ["x", None], "store_timestamp_ms": [5, 6]})
    with MessageStoreWriter(tmp_path, cfg()) as w:
        rs = w.put_arrow_batch(table)
    assert [r.ok for r in rs] == [True, True] and rs[1].commit_log_offset == rs[0].size
