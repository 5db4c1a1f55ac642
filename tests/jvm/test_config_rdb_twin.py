"""config/rdb/ of a config-v2 broker's store as both writers keep it (rmqsource/store/config_rdb.py and its Java
twin io/rmqsource/store/ConfigRdb.java): the same puts and group commit, the same clock, the same records; a
second session with nothing new writes nothing. The records a 5.5.0 broker wrote are checked byte for byte in
tests/unit/test_rocksdb_config_codec.py, and real brokers serve such stores in tests/broker/test_served_store.py."""

from __future__ import annotations

import glob
import os
import re
import subprocess
from pathlib import Path

import pytest

from rmqsource.format import rocksdb_config as rc
from rmqsource.io.rocksdb import DEFAULT_CF, ReadOnlyRocksDb
from rmqsource.store.config import StoreConfig
from rmqsource.store.consumer_offsets import ConsumerOffsets
from tests.jvm.test_broker_configs_twin import CLOCK_MS, LINES, python_put
from tests.support.jvm_writer import jvm_put, put_command

pytestmark = pytest.mark.jvm
pytest.importorskip("rocksdict")
V2 = StoreConfig.from_mapping({"configManagerVersion": "v2"})


def jvm_put_v2(root: Path, inputs: Path) -> None:
    """WriteMain put with configManagerVersion=v2, rocksdbjni (Spark's) beside the jar as in a Spark session."""
    import pyspark
    rocks = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "rocksdbjni-*.jar"))
    if not rocks:
        pytest.skip("no rocksdbjni in pyspark's jars")
    cmd = put_command(root, "-", inputs, clock_ms=CLOCK_MS, overrides=["configManagerVersion=v2"])
    cp = cmd.index("-cp") + 1
    cmd[cp] = cmd[cp] + os.pathsep + rocks[0]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and '"error"' not in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]


def records(root: Path) -> dict[bytes, bytes]:
    with ReadOnlyRocksDb(root / "config" / "rdb") as db:
        return {bytes(k): bytes(v) for k, v in db.items(DEFAULT_CF)}


def test_both_writers_keep_the_same_config_rdb(tmp_path):
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text("\n".join(LINES) + "\n")
    py, jv = tmp_path / "py", tmp_path / "jvm"
    from rmqsource.store.writer import MessageStoreWriter
    with MessageStoreWriter(py, V2, clock_ms=lambda: CLOCK_MS) as w:
        assert w.put_json_lines(inputs.read_bytes()).ok_count == len(LINES)
    jvm_put_v2(jv, inputs)
    assert not (py / "config" / "topics.json").exists() and not (jv / "config" / "topics.json").exists()
    got = records(py)
    assert got == records(jv)
    topic = rc.decode_v2_config_value(got[rc.encode_v2_name_key(rc.TableId.TOPIC, "alpha")])
    assert topic["readQueueNums"] == topic["writeQueueNums"] == 4
    assert rc.encode_v2_name_key(rc.TableId.TOPIC, "SCHEDULE_TOPIC_XXXX") not in got
    version = rc.decode_v2_data_version(got[rc.v2_data_version_key(rc.TableId.TOPIC)])
    assert version == rc.V2DataVersion(0, CLOCK_MS, 5)          # one per topic record written
    # a second session with nothing new writes nothing; config/rdb decides without the setting
    python_put(py, inputs)
    assert records(py) == got
    # a group commit: the group and its offsets, never moved back
    ConsumerOffsets(py, clock_ms=lambda: CLOCK_MS).commit("g1", {"alpha": {0: 3, 3: 1}})
    assert ConsumerOffsets(py, clock_ms=lambda: CLOCK_MS).commit("g1", {"alpha": {0: 2}}) == {"alpha": {0: 3}}
    after = records(py)
    assert rc.decode_v2_offset_value(after[rc.encode_v2_offset_key("g1", "alpha", 0)]) == 3
    assert rc.decode_v2_config_value(after[rc.encode_v2_name_key(rc.TableId.SUBSCRIPTION_GROUP, "g1")]) \
        ["groupName"] == "g1"
    assert rc.decode_v2_data_version(after[rc.v2_data_version_key(rc.TableId.CONSUMER_OFFSET)]).counter == 2


def test_v1_setting_beside_config_rdb_is_refused_by_both(tmp_path):
    """configManagerVersion=v1 on a store that has config/rdb/: the JSON files it asks for are what a v1 broker
    reads, but the readers (rmq lag, startingOffsets=group) read config/rdb/, so both writers, the group commit
    and the stream refuse it in one line before writing anything; without the setting config/rdb/ is written."""
    from rmqsource.errors import OptionError
    from rmqsource.store.writer import MessageStoreWriter
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text("\n".join(LINES) + "\n")
    root = tmp_path / "store"
    with MessageStoreWriter(root, V2, clock_ms=lambda: CLOCK_MS) as w:
        assert w.put_json_lines(inputs.read_bytes()).ok_count == len(LINES)
    before = records(root)
    commitlog = sorted((p.name, p.stat().st_mtime_ns) for p in (root / "commitlog").iterdir())
    v1 = StoreConfig.from_mapping({"configManagerVersion": "v1"})
    refused = r"configManagerVersion=v1, but .*config/rdb holds the topics, groups and offsets of a config-v2 broker"
    with pytest.raises(OptionError, match=refused):
        MessageStoreWriter(root, v1, clock_ms=lambda: CLOCK_MS)
    with pytest.raises(OptionError, match=refused):
        ConsumerOffsets(root, config=v1, clock_ms=lambda: CLOCK_MS).commit("g1", {"alpha": {0: 3}})
    results, trailer, rc_ = jvm_put(root, "-", inputs, clock_ms=CLOCK_MS, overrides=["configManagerVersion=v1"],
                                    check=False)
    assert rc_ != 0 and not results
    assert trailer.get("error", {}).get("type") == "OptionError", trailer
    assert re.search(refused, trailer["error"]["message"]) and "\n" not in trailer["error"]["message"]
    pytest.importorskip("pyspark")
    from rmqsource.spark.stream import RmqStreamReader
    reader = RmqStreamReader({"path": str(root), "topics": "alpha", "consumerGroup": "g1",
                              "configManagerVersion": "v1"})
    with pytest.raises(OptionError, match=refused):
        reader.initialOffset()
    assert records(root) == before
    assert sorted((p.name, p.stat().st_mtime_ns) for p in (root / "commitlog").iterdir()) == commitlog
    assert not [p.name for p in (root / "config").glob("*.json")]
    # v2, or no setting: config/rdb/ is written
    ConsumerOffsets(root, config=V2, clock_ms=lambda: CLOCK_MS).commit("g1", {"alpha": {0: 3}})
    assert rc.decode_v2_offset_value(records(root)[rc.encode_v2_offset_key("g1", "alpha", 0)]) == 3


def test_the_jvm_writer_needs_rocksdbjni_only_for_config_rdb(tmp_path):
    """Without rocksdbjni on the classpath (WriteMain alone, not in Spark) the JVM writer opens a store without
    config/rdb/ and routes its topics in topics.json, and refuses one with config/rdb/ in one line naming the
    library, before writing anything (the classes it loads for the decision name no org.rocksdb type)."""
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text("\n".join(LINES) + "\n")
    plain = tmp_path / "plain"
    results, trailer, _ = jvm_put(plain, "-", inputs, clock_ms=CLOCK_MS)
    assert len(results) == len(LINES) and "error" not in trailer, trailer
    assert (plain / "config" / "topics.json").is_file()
    v2 = tmp_path / "v2"
    from rmqsource.store.writer import MessageStoreWriter
    with MessageStoreWriter(v2, V2, clock_ms=lambda: CLOCK_MS) as w:
        assert w.put_json_lines(inputs.read_bytes()).ok_count == len(LINES)
    before = records(v2)
    results, trailer, rc_ = jvm_put(v2, "-", inputs, clock_ms=CLOCK_MS, check=False)
    assert rc_ != 0 and not results
    assert trailer.get("error", {}).get("type") == "OptionError", trailer
    assert "writing them needs rocksdbjni on the classpath" in trailer["error"]["message"]
    assert records(v2) == before and not (v2 / "config" / "topics.json").exists()
