"""consumerOffset.json (spec §8.2) and the string2File / file2String protocol (§8.1)."""

from __future__ import annotations

import fcntl
import io
import json
import multiprocessing
import os
from pathlib import Path

import pytest

from rmqsource.errors import FormatError, OptionError, StoreLockedError
from rmqsource.format.configjson import loads_fastjson
from rmqsource.io import durable
from rmqsource.io.durable import file2string, load_with_bak, string2file, write_file_atomically
from rmqsource.store.config import StoreConfig
from rmqsource.store.consumer_offsets import ConsumerOffsets, OffsetEntry

pytestmark = pytest.mark.unit

V4 = StoreConfig(engine_version="4.9.7")
V5 = StoreConfig(engine_version="5.3.3")
NOW_MS = 1736661762584

SPEC_49_EXAMPLE = (
    "{\n"
    "\t\"offsetTable\":{\n"
    "\t\t\"%RETRY%please_rename_unique_group_name@please_rename_unique_group_name\":{0:0\n"
    "\t\t},\n"
    "\t\t\"TopicTest@please_rename_unique_group_name\":{0:6,1:3,2:3,3:2\n"
    "\t\t}\n"
    "\t}\n"
    "}"
)

V5_FILE = (
    "{\n"
    "\t\"dataVersion\":{\n"
    "\t\t\"counter\":1448,\n"
    "\t\t\"stateVersion\":7,\n"
    "\t\t\"timestamp\":1700000000000\n"
    "\t},\n"
    "\t\"groupTopicMap\":{\n"
    "\t\t\"groupA\":[\"%RETRY%groupA\",\"TopicTest\"]\n"
    "\t},\n"
    "\t\"lmqOffsetTable\":{},\n"
    "\t\"offsetTable\":{\n"
    "\t\t\"TopicTest@groupA\":{0:37960,1:37961,2:37959,3:37959},\n"
    "\t\t\"TopicTest@groupA@broadcast\":{0:5},\n"
    "\t\t\"%RETRY%groupA@groupA\":{0:0}\n"
    "\t}\n"
    "}"
)


@pytest.fixture(params=["python", pytest.param("jvm", marks=pytest.mark.spark)])
def offsets_impl(request):
    """ConsumerOffsets, or its JVM twin ConsumerOffsetsFile (py4j): one format, two implementations."""
    if request.param == "python":
        return ConsumerOffsets
    from jvm_twins import JvmConsumerOffsets, jvm_or_skip
    jvm = jvm_or_skip(request)
    return lambda root, **kw: JvmConsumerOffsets(jvm, root, **kw)


def _store(tmp_path: Path, content: str | None = None, name: str = "consumerOffset.json") -> Path:
    root = tmp_path / "store"
    (root / "config").mkdir(parents=True)
    if content is not None:
        (root / "config" / name).write_text(content, encoding="utf-8")
    return root


def _cfg(root: Path, suffix: str = "") -> Path:
    return root / "config" / f"consumerOffset.json{suffix}"


# ------------------------------------------------------------------ reading

def test_reads_spec_49_example(tmp_path, offsets_impl):
    co = offsets_impl(_store(tmp_path, SPEC_49_EXAMPLE), config=V4)
    assert co.offsets_for_group("please_rename_unique_group_name") == {
        "%RETRY%please_rename_unique_group_name": {0: 0},
        "TopicTest": {0: 6, 1: 3, 2: 3, 3: 2},
    }
    assert co.offsets_for_group("other") == {}
    entries = co.all_entries()
    assert len(entries) == 5
    assert OffsetEntry("TopicTest", "please_rename_unique_group_name", 3, 2) in entries


def test_reads_quoted_queue_ids(tmp_path, offsets_impl):
    co = offsets_impl(_store(tmp_path, '{"offsetTable":{"T@g":{"0":5,"1":"7"}}}'))
    assert co.offsets_for_group("g") == {"T": {0: 5, 1: 7}}


def test_reads_do_not_create_anything(tmp_path, offsets_impl):
    root = tmp_path / "fresh"
    root.mkdir()
    co = offsets_impl(root)
    assert co.offsets_for_group("g") == {} and co.all_entries() == []
    assert list(root.iterdir()) == []


@pytest.mark.parametrize("content", [
    '{"offsetTable":[]}', '{"offsetTable":{"T@g":5}}', '{"offsetTable":{"T@g":{"x":1}}}',
    '{"offsetTable":{"T@g":{0:1.5}}}', '{"offsetTable":{"T@g":{-1:0}}}', '{"offsetTable":{0:{0:1}}}',
    '{"offsetTable":{"T@g":{0:1}', "[]",
])
def test_corrupt_file_without_bak_raises(tmp_path, content, offsets_impl):
    root = _store(tmp_path, content)
    co = offsets_impl(root)
    with pytest.raises(FormatError) as info:
        co.offsets_for_group("g")
    assert "consumerOffset.json" in str(info.value)
    # a commit must not overwrite the only (corrupt) copy
    with pytest.raises(FormatError):
        co.commit("g", {"T": {0: 1}})
    assert _cfg(root).read_text() == content


# ------------------------------------------------------------------ committing

def test_commit_into_new_v4_store_writes_fastjson_bytes(tmp_path, offsets_impl):
    root = tmp_path / "store"
    co = offsets_impl(root, config=V4)
    effective = co.commit("please_rename_unique_group_name", {
        "TopicTest": {3: 2, 0: 6, 1: 3, 2: 3},
        "%RETRY%please_rename_unique_group_name": {0: 0},
    })
    assert effective == {"TopicTest": {3: 2, 0: 6, 1: 3, 2: 3}, "%RETRY%please_rename_unique_group_name": {0: 0}}
    assert _cfg(root).read_text(encoding="utf-8") == SPEC_49_EXAMPLE
    assert not _cfg(root, ".bak").exists()          # nothing to back up yet
    assert not _cfg(root, ".tmp").exists()


def test_commit_into_new_v5_store_has_5x_shape(tmp_path, offsets_impl):
    co = offsets_impl(tmp_path / "s", config=V5, clock_ms=lambda: NOW_MS)
    co.commit("g", {"T": {0: 3}})
    doc = loads_fastjson(_cfg(tmp_path / "s").read_text())
    assert list(doc) == ["dataVersion", "groupTopicMap", "offsetTable"]
    assert doc["dataVersion"] == {"counter": 1, "stateVersion": 0, "timestamp": NOW_MS}
    assert doc["groupTopicMap"] == {"g": ["T"]}
    assert doc["offsetTable"] == {"T@g": {0: 3}}


def test_commit_merges_and_never_rewinds(tmp_path, offsets_impl):
    root = _store(tmp_path, SPEC_49_EXAMPLE)
    co = offsets_impl(root, config=V4)
    got = co.commit("please_rename_unique_group_name", {"TopicTest": {0: 4, 1: 9, 7: 1}})
    assert got == {"TopicTest": {0: 6, 1: 9, 7: 1}}                      # 0 stays at 6
    co.commit("g2", {"TopicTest": {0: 1}})
    assert co.offsets_for_group("please_rename_unique_group_name") == {
        "%RETRY%please_rename_unique_group_name": {0: 0},
        "TopicTest": {0: 6, 1: 9, 2: 3, 3: 2, 7: 1},
    }
    assert co.offsets_for_group("g2") == {"TopicTest": {0: 1}}
    got = co.commit("please_rename_unique_group_name", {"TopicTest": {0: 2}}, allow_rewind=True)
    assert got == {"TopicTest": {0: 2}}
    assert co.offsets_for_group("please_rename_unique_group_name")["TopicTest"][0] == 2
    # the shape stays 4.9: no dataVersion appears in a file that had none
    assert list(loads_fastjson(_cfg(root).read_text())) == ["offsetTable"]


def test_commit_keeps_previous_content_in_bak(tmp_path, offsets_impl):
    root = _store(tmp_path, SPEC_49_EXAMPLE)
    co = offsets_impl(root, config=V4)
    co.commit("g", {"T": {0: 1}})
    assert _cfg(root, ".bak").read_text() == SPEC_49_EXAMPLE
    first = _cfg(root).read_text()
    co.commit("g", {"T": {0: 2}})
    assert _cfg(root, ".bak").read_text() == first


def test_noop_commit_does_not_write(tmp_path, offsets_impl):
    root = _store(tmp_path, SPEC_49_EXAMPLE)
    co = offsets_impl(root, config=V4)
    co.commit("please_rename_unique_group_name", {"TopicTest": {0: 6, 1: 2}})
    assert _cfg(root).read_text() == SPEC_49_EXAMPLE
    assert not _cfg(root, ".bak").exists()


def test_commit_updates_5x_fields_and_keeps_unknown_ones(tmp_path, offsets_impl):
    root = _store(tmp_path, V5_FILE)
    co = offsets_impl(root, config=V4, clock_ms=lambda: NOW_MS)   # the file's shape wins
    co.commit("groupB", {"TopicTest": {0: 10}, "Other": {1: 2}})
    doc = loads_fastjson(_cfg(root).read_text())
    assert doc["dataVersion"] == {"counter": 1449, "stateVersion": 7, "timestamp": NOW_MS}
    assert doc["groupTopicMap"] == {"groupA": ["%RETRY%groupA", "TopicTest"], "groupB": ["Other", "TopicTest"]}
    assert doc["lmqOffsetTable"] == {}
    assert doc["offsetTable"]["TopicTest@groupA@broadcast"] == {0: 5}       # odd keys preserved
    assert doc["offsetTable"]["TopicTest@groupA"] == {0: 37960, 1: 37961, 2: 37959, 3: 37959}
    assert doc["offsetTable"]["TopicTest@groupB"] == {0: 10}
    assert list(doc) == ["dataVersion", "groupTopicMap", "lmqOffsetTable", "offsetTable"]
    # broadcast key is not a topic@group entry
    assert all(e.group in ("groupA", "groupB") for e in co.all_entries())
    assert co.offsets_for_group("groupA")["TopicTest"][1] == 37961


@pytest.mark.parametrize("group,offsets", [
    ("g@x", {"T": {0: 1}}), ("", {"T": {0: 1}}), ("g", {"T@x": {0: 1}}), ("g", {"": {0: 1}}),
    ("g", {"T": {-1: 1}}), ("g", {"T": {True: 1}}), ("g", {"T": {"0": 1}}), ("g", {"T": {0: -1}}),
    ("g", {"T": {0: 2**63}}), ("g", {"T": {0: 1.0}}), ("g", {"T": [1]}), (None, {"T": {0: 1}}),
])
def test_commit_validates_arguments(tmp_path, group, offsets, offsets_impl):
    root = tmp_path / "s"
    with pytest.raises(OptionError):
        offsets_impl(root).commit(group, offsets)
    assert not _cfg(root).exists()


def test_offsets_for_group_rejects_at_sign(tmp_path, offsets_impl):
    with pytest.raises(OptionError):
        offsets_impl(tmp_path).offsets_for_group("a@b")


# ------------------------------------------------------------------ crash safety

def test_crash_after_tmp_written_falls_back_to_bak(tmp_path, offsets_impl):
    # Java string2File crashed after deleting NAME, before renaming NAME.tmp.
    root = _store(tmp_path, SPEC_49_EXAMPLE, name="consumerOffset.json.bak")
    _cfg(root, ".tmp").write_text('{"offsetTable":{"TopicTest@please_rename_unique_gr')   # torn
    co = offsets_impl(root, config=V4)
    assert co.offsets_for_group("please_rename_unique_group_name")["TopicTest"] == {0: 6, 1: 3, 2: 3, 3: 2}
    co.commit("please_rename_unique_group_name", {"TopicTest": {0: 7}})
    assert not _cfg(root, ".tmp").exists()
    assert _cfg(root, ".bak").read_text() == SPEC_49_EXAMPLE
    assert co.offsets_for_group("please_rename_unique_group_name")["TopicTest"] == {0: 7, 1: 3, 2: 3, 3: 2}


@pytest.mark.parametrize("main", ["", "{\"offsetTable\":{\"Top", "\xff garbage"])
def test_empty_or_corrupt_name_falls_back_to_bak(tmp_path, main, offsets_impl):
    root = _store(tmp_path, SPEC_49_EXAMPLE, name="consumerOffset.json.bak")
    _cfg(root).write_text(main, encoding="latin-1")
    co = offsets_impl(root, config=V4)
    assert co.offsets_for_group("please_rename_unique_group_name")["TopicTest"][0] == 6
    co.commit("g", {"T": {0: 1}})
    # NAME is repaired; the good .bak is not replaced by the bad NAME
    assert _cfg(root, ".bak").read_text() == SPEC_49_EXAMPLE
    assert co.offsets_for_group("g") == {"T": {0: 1}}
    assert co.offsets_for_group("please_rename_unique_group_name")["TopicTest"][0] == 6


def test_loading_from_bak_restores_name_even_without_changes(tmp_path, offsets_impl):
    root = _store(tmp_path, SPEC_49_EXAMPLE, name="consumerOffset.json.bak")
    co = offsets_impl(root, config=V4)
    co.commit("please_rename_unique_group_name", {"TopicTest": {0: 6}})
    assert _cfg(root).read_text() == SPEC_49_EXAMPLE


def test_failed_rename_leaves_old_file_intact(tmp_path, monkeypatch):
    root = _store(tmp_path, SPEC_49_EXAMPLE)
    co = ConsumerOffsets(root, config=V4)

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(durable.os, "replace", boom)
    with pytest.raises(OSError):
        co.commit("g", {"T": {0: 1}})
    monkeypatch.undo()
    assert _cfg(root).read_text() == SPEC_49_EXAMPLE
    assert not _cfg(root, ".tmp").exists()
    assert co.offsets_for_group("g") == {}


# ------------------------------------------------------------------ concurrency

ROUNDS = 25


def _committer(root: str, worker: int, start) -> None:
    co = ConsumerOffsets(root, config=V5)
    start.wait(10)
    for i in range(ROUNDS):
        # a new key per round: any lost update leaves a key missing at the end
        co.commit(f"g{worker}", {f"T{worker}_{i}": {0: i + 1}})
        co.commit("shared", {"S": {worker: i + 1}})


def test_concurrent_commits_from_two_processes_both_land(tmp_path):
    root = tmp_path / "store"
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()
    procs = [ctx.Process(target=_committer, args=(str(root), w, start)) for w in (0, 1)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    co = ConsumerOffsets(root)
    for w in (0, 1):
        assert co.offsets_for_group(f"g{w}") == {f"T{w}_{i}": {0: i + 1} for i in range(ROUNDS)}
    assert co.offsets_for_group("shared") == {"S": {0: ROUNDS, 1: ROUNDS}}
    doc = loads_fastjson(_cfg(root).read_text())
    assert doc["dataVersion"]["counter"] == 4 * ROUNDS      # one bump per commit, none lost


def _hold_lock(path: str, taken, release) -> None:
    with open(path, "a+") as held:
        fcntl.lockf(held.fileno(), fcntl.LOCK_EX)      # the record lock both implementations take
        taken.set()
        release.wait(30)


def test_commit_times_out_when_the_lock_is_held(tmp_path, offsets_impl):
    root = tmp_path / "store"
    co = offsets_impl(root, lock_timeout_ms=50)
    co.commit("g", {"T": {0: 1}})
    ctx = multiprocessing.get_context("fork")
    taken, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_lock, args=(co.lock_path, taken, release))
    holder.start()
    try:
        assert taken.wait(10)
        with pytest.raises(StoreLockedError, match="lock"):
            co.commit("g", {"T": {0: 2}})
    finally:
        release.set()
        holder.join(10)
    assert co.commit("g", {"T": {0: 2}}) == {"T": {0: 2}}


# ------------------------------------------------------------------ durable module

def test_string2file_protocol(tmp_path):
    name = tmp_path / "cfg" / "x.json"
    string2file(name, "one")                      # creates the missing directory
    assert name.read_text() == "one" and not Path(f"{name}.bak").exists()
    string2file(name, b"two")
    assert name.read_text() == "two" and Path(f"{name}.bak").read_text() == "one"
    name.write_text("")                           # an empty NAME never clobbers the .bak
    string2file(name, "three")
    assert Path(f"{name}.bak").read_text() == "one"
    assert sorted(p.name for p in name.parent.iterdir()) == ["x.json", "x.json.bak"]


def test_load_with_bak_semantics(tmp_path):
    name = tmp_path / "x.json"

    def parse(text, file):
        if not text.startswith("ok"):
            raise FormatError("bad", file=file, offset=0)
        return (text, file)

    assert load_with_bak(name, parse) is None                       # neither exists
    Path(f"{name}.bak").write_text("ok-bak")
    assert load_with_bak(name, parse) == ("ok-bak", f"{name}.bak")  # NAME missing
    name.write_text("ok-main")
    assert load_with_bak(name, parse) == ("ok-main", str(name))
    name.write_text("garbage")
    assert load_with_bak(name, parse) == ("ok-bak", f"{name}.bak")  # NAME unparseable
    Path(f"{name}.bak").write_text("garbage too")
    with pytest.raises(FormatError) as info:
        load_with_bak(name, parse)
    assert info.value.file == str(name)                             # the primary error is reported
    Path(f"{name}.bak").unlink()
    name.write_text("")
    assert load_with_bak(name, parse) is None                       # empty NAME, no .bak


def test_write_file_atomically_and_file2string(tmp_path):
    path = tmp_path / "a" / "b" / "f.bin"
    write_file_atomically(path, b"\x00\x01")
    write_file_atomically(path, "é".encode("utf-8"))
    assert file2string(path) == "é"
    assert file2string(tmp_path / "missing") is None
    assert os.listdir(path.parent) == ["f.bin"]                     # no temp files left
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(FormatError) as info:
        file2string(path)
    assert info.value.offset == 0
    with pytest.raises(FormatError):
        durable.read_file_bytes(path, max_bytes=1)


# ------------------------------------------------------------------ Python and JVM side by side

@pytest.mark.spark
def test_python_and_jvm_commits_never_lose_each_other(tmp_path, request):
    from jvm_twins import JvmConsumerOffsets, jvm_or_skip
    jvm = jvm_or_skip(request)
    root = tmp_path / "store"
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()
    child = ctx.Process(target=_committer, args=(str(root), 0, start))
    child.start()
    co = JvmConsumerOffsets(jvm, root, config=V5)
    start.set()
    for i in range(ROUNDS):
        co.commit("g1", {f"T1_{i}": {0: i + 1}})
        co.commit("shared", {"S": {1: i + 1}})
    child.join(60)
    assert child.exitcode == 0
    py = ConsumerOffsets(root)
    for w in (0, 1):
        assert py.offsets_for_group(f"g{w}") == {f"T{w}_{i}": {0: i + 1} for i in range(ROUNDS)}
    assert py.offsets_for_group("shared") == {"S": {0: ROUNDS, 1: ROUNDS}}
    assert loads_fastjson(_cfg(root).read_text())["dataVersion"]["counter"] == 4 * ROUNDS


# --------------------------------------------------------------------------- hostile files

@pytest.mark.parametrize("queues", ['{"--5": 1}', '{"\u00b2": 1}', '{"0": "--5"}', '{"0": "\u00b2"}',
                                    '{"0": "\u0663"}', '{"+-1": 2}'])
def test_hostile_queue_ids_and_offsets_are_format_errors_naming_the_file(tmp_path, queues):
    path = tmp_path / "config" / "consumerOffset.json"
    path.parent.mkdir()
    path.write_text('{"offsetTable": {"TopicTest@g1": ' + queues + '}}', encoding="utf-8")
    with pytest.raises(FormatError) as info:
        ConsumerOffsets(tmp_path).load()
    assert info.value.file == str(path)


def test_one_hostile_key_does_not_hide_the_other_groups_lag(tmp_path):
    from rmqsource.cli import main
    from rmqsource.store.lag import group_lag
    from rmqsource.store.writer import Message, MessageStoreWriter
    with MessageStoreWriter(tmp_path, V4) as w:
        w.put_messages([Message(topic="TopicTest", queue_id=0, body=b"x") for _ in range(5)])
    (tmp_path / "config").mkdir(exist_ok=True)
    (tmp_path / "config" / "consumerOffset.json").write_text(
        '{"offsetTable": {"../../etc@g1": {"0": 1}, "TopicTest@g2": {"0": 2}, "a\\u0000b@g3": {"0": 1}}}')
    problems: list = []
    rows = group_lag(tmp_path, V4, problems=problems)
    assert [(r["group"], r["topic"], r["queueId"], r["diff"]) for r in rows] == [("g2", "TopicTest", 0, 3)]
    assert len(problems) == 2 and all("consumerOffset.json" in p for p in problems)
    assert any("../../etc@g1" in p for p in problems)
    out = io.StringIO()
    assert main(["lag", str(tmp_path), "--json"], stdout=out) == 0
    assert [json.loads(line)["group"] for line in out.getvalue().splitlines()] == ["g2"]
