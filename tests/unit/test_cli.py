"""``rmq`` CLI: error handling (exit codes, one-line messages, no tracebacks), readable output, input paths."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmqsource import cli
from rmqsource.commands import output

from golden import PROJECT_ROOT, copy_store, corpora

pytestmark = pytest.mark.unit

CORPORA = corpora()
CORPUS = CORPORA[0] if CORPORA else None
needs_corpus = pytest.mark.skipif(not CORPORA, reason="no golden corpus")


def run(argv, stdin: bytes | None = None) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main([str(a) for a in argv], stdout=out,
                    stdin=io.BytesIO(stdin) if stdin is not None else None)
    return code, out.getvalue()


def cfg(corpus=None) -> list[str]:
    return ["--config", str((corpus or CORPUS) / "store.properties")]


def small_store(tmp_path: Path, lines: list[dict], name: str = "store") -> Path:
    store = tmp_path / name
    data = "".join(json.dumps(d) + "\n" for d in lines).encode()
    code, _ = run(["put", "-C", "mappedFileSizeCommitLog=65536", "-C", "mappedFileSizeConsumeQueue=600",
                   "-C", "maxHashSlotNum=64", "-C", "maxIndexNum=256", store], stdin=data)
    assert code == 0
    return store


SMALL = ["-C", "mappedFileSizeCommitLog=65536", "-C", "mappedFileSizeConsumeQueue=600",
         "-C", "maxHashSlotNum=64", "-C", "maxIndexNum=256"]


def msg(i: int, **kw) -> dict:
    d = {"topic": "Orders", "queueId": i % 2, "storeTimestamp": 1700000000000 + i, "bornTimestamp": 1700000000000,
         "bornHost": "10.0.0.1:4000", "storeHost": "10.0.0.5:10911", "tags": "TagA" if i % 2 else "订单",
         "keys": f"k{i} shared", "body": base64.b64encode(f"hello {i}".encode()).decode()}
    d.update(kw)
    return d


def assert_one_line_error(capsys, *needles):
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines, "expected an error message on stderr"
    for n in needles:
        assert n in lines[-1], (n, err)
    return lines[-1]


# ------------------------------------------------------------------ errors

def test_not_a_store(tmp_path, capsys):
    code, out = run(["get", tmp_path, "T", "0", "0", "1"])
    assert code == 1 and out == ""
    assert_one_line_error(capsys, "rmq get: error:", str(tmp_path), "not a RocketMQ store")


def test_missing_store_dir(tmp_path, capsys):
    code, _ = run(["queues", tmp_path / "nope"])
    assert code == 1
    assert_one_line_error(capsys, "not a directory")


def test_usage_errors_exit_2(capsys):
    assert run([])[0] == 2
    assert run(["get", "/tmp"])[0] == 2                      # missing positionals
    assert run(["get", "/tmp", "T", "x", "0", "1"])[0] == 2  # QUEUE_ID not an int
    assert run(["get", "/tmp", "T", "0", "0", "0"])[0] == 2  # MAX must be >= 1
    assert run(["frobnicate"])[0] == 2
    assert "Traceback" not in capsys.readouterr().err


REMOTE_STORES = ["s3://bucket/broker-a/store", "s3a://bucket/store", "gs://bucket/store", "hdfs://nn:8020/store",
                 "abfss://c@acct.dfs.core.windows.net/store", "dbfs:/mnt/store"]
READ_COMMANDS = {"topics": [], "queues": [], "view": ["0A00000500002A9F0000000000000000"], "query": ["T", "k"],
                 "print": ["T"], "export": ["{tmp}/out.parquet"], "verify": [], "get": ["T", "0", "0", "1"], "lag": []}


@pytest.mark.parametrize("uri", REMOTE_STORES)
def test_read_commands_say_in_one_line_that_they_need_a_local_path(uri, tmp_path, capsys):
    for command, rest in READ_COMMANDS.items():
        code, out = run([command, uri, *(a.format(tmp=tmp_path) for a in rest)])
        assert (code, out) == (2, ""), command
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        scheme = uri.split(":", 1)[0]
        assert err.startswith(f"rmq {command}: error: STORE {uri!r}: rmq commands read local or mounted store "
                              f"directories, not {scheme}: URIs"), err
        assert "JVM scan" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["put", "recover"])
def test_writing_commands_refuse_a_remote_store_as_read_only(command, capsys):
    assert run([command, "s3a://bucket/store"], stdin=b"")[0] == 2
    err = capsys.readouterr().err
    assert err == f"rmq {command}: error: STORE 's3a://bucket/store': rmq {command} writes local store directories; " \
                  f"stores on s3a: are read-only\n"


def test_export_to_a_remote_file_is_refused(tmp_path, capsys):
    assert run(["export", tmp_path, "s3://bucket/out.parquet"])[0] == 2
    assert capsys.readouterr().err == "rmq export: error: OUT 's3://bucket/out.parquet': rmq export writes local " \
                                      "files, not s3: URIs (copy it there after)\n"
    assert run(["topics", "C:/stores/a"])[0] == 1          # a drive letter is a path, not a scheme
    assert "not a directory" in capsys.readouterr().err


def test_help_exits_0(capsys):
    assert run(["--help"])[0] == 0
    assert run(["get", "--help"])[0] == 0
    out = capsys.readouterr().out
    assert "--loop" in out and "--tag" in out


@needs_corpus
def test_id_that_is_neither_msgid_nor_uniq_key_is_not_found(capsys):
    # Like queryMsgById: what does not decode as an offset msgId is looked up as a UNIQ_KEY.
    code, out = run(["view", *cfg(), CORPUS / "store", "XYZ"])
    assert code == 3 and "not found: 'XYZ' is not an offset msgId, and no message has it as UNIQ_KEY" in out
    code, out = run(["view", "--json", *cfg(), CORPUS / "store", "0A00000500002A9F000000000000001G"])
    assert code == 3 and json.loads(out)["found"] is False
    assert "not found" in capsys.readouterr().err


@needs_corpus
def test_msgid_past_the_end_is_not_found():
    code, out = run(["view", "--json", *cfg(), CORPUS / "store", "0A00000500002A9F00000000FFFFFFFF"])
    assert code == 3
    doc = json.loads(out)
    assert doc["found"] is False and "message" not in doc
    code, out = run(["view", *cfg(), CORPUS / "store", "0A00000500002A9F00000000FFFFFFFF"])
    assert code == 3 and "no message at CommitLog offset 4294967295" in out


@needs_corpus
def test_msgid_of_another_broker_says_so():
    code, out = run(["view", *cfg(), CORPUS / "store", "0B00000700002A9F00000000FFFFFFFF"])
    assert code == 3
    assert "names store host 11.0.0.7:10911, but this store's messages were stored by 10.0.0.5:10911" in out
    # A record at that offset whose storeHost differs: shown (the store reads only the offset), with a note.
    code, out = run(["view", *cfg(), CORPUS / "store", "0B00000700002A9F0000000000000000"])
    assert code == 0 and "NOTE: the msgId names store host 11.0.0.7:10911" in out


@needs_corpus
@pytest.mark.parametrize("corpus", CORPORA, ids=lambda c: c.name)
def test_view_by_uniq_key_equals_query_hit(corpus):
    from golden import read_jsonl
    lines = [x for x in read_jsonl(corpus / "expected" / "get" / "TopicTest" / "1.jsonl")[:-1]
             if "UNIQ_KEY" in x["properties"]]
    assert lines
    for line in lines[:5]:
        uniq = line["properties"]["UNIQ_KEY"]
        code, out = run(["view", "--json", *cfg(corpus), corpus / "store", uniq])
        assert code == 0
        got = [json.loads(x) for x in out.splitlines()]
        code, qout = run(["query", "--json", "--only-matching", *cfg(corpus), corpus / "store", "TopicTest", uniq])
        hits = [json.loads(x) for x in qout.splitlines()[:-1]]
        assert code == 0 and len(hits) == 1
        assert all(g.pop("foundBy") == "UNIQ_KEY" for g in got)
        hits[0].pop("keyMatch")
        # every message carrying the UNIQ_KEY (retry copies keep it); the topic's one is query's hit
        assert [g for g in got if g["topic"] == "TopicTest"] == hits
        assert hits[0]["msgId"] == line["msgId"]
        assert all(g["properties"]["UNIQ_KEY"] == uniq for g in got)


@needs_corpus
def test_unknown_topic(capsys):
    # get answers like the engine (NO_MESSAGE_IN_QUEUE) and notes the missing queue on stderr.
    code, out = run(["get", "--json", *cfg(), CORPUS / "store", "NoSuchTopic", "0", "0", "10"])
    assert code == 3
    assert json.loads(out) == {"status": "NO_MESSAGE_IN_QUEUE", "nextBeginOffset": 0, "minOffset": 0,
                               "maxOffset": 0, "count": 0, "calls": 1}
    assert "no ConsumeQueue" in capsys.readouterr().err
    # queues with a topic filter names the topics that do exist.
    code, _ = run(["queues", *cfg(), CORPUS / "store", "NoSuchTopic"])
    assert code == 2
    assert_one_line_error(capsys, "NoSuchTopic", "TopicTest")


def test_bad_config_options(tmp_path, capsys):
    store = tmp_path / "s"
    store.mkdir()
    assert run(["queues", "-C", "noequals", store])[0] == 2
    assert_one_line_error(capsys, "key=value")
    assert run(["queues", "-C", "maxHashSlotNum=abc", store])[0] == 2
    assert_one_line_error(capsys, "maxHashSlotNum")
    assert run(["queues", "--config", tmp_path / "missing.properties", store])[0] == 2
    assert_one_line_error(capsys, "missing.properties")
    bad = tmp_path / "bad.properties"
    bad.write_text("engineVersion=3.0.0\n")
    assert run(["queues", "--config", bad, store])[0] == 2
    assert_one_line_error(capsys, "bad.properties", "engineVersion")


def test_query_argument_shapes(tmp_path, capsys):
    store = small_store(tmp_path, [msg(i) for i in range(3)])
    assert run(["query", *SMALL, store, "Orders", "k1", "5", "0"])[0] == 2
    assert_one_line_error(capsys, "MAXNUM BEGIN END")
    assert run(["query", *SMALL, store, "Orders", "k1", "x"])[0] == 2
    assert run(["query", *SMALL, store, "Orders", "k1", "5", "yesterday", "now"])[0] == 2
    assert_one_line_error(capsys, "BEGIN", "yesterday")
    code, out = run(["query", "--json", *SMALL, store, "Orders", "k1", "5", "2023-11-14T00:00:00", "2100-01-01"])
    assert code == 0
    lines = [json.loads(x) for x in out.splitlines()]
    assert [h["keys"] for h in lines[:-1]] == ["k1 shared"] and lines[-1]["count"] == 1


def test_format_error_names_file_and_offset(tmp_path, capsys):
    store = small_store(tmp_path, [msg(i) for i in range(3)])
    cq = store / "consumequeue" / "Orders" / "0" / "00000000000000000000"
    with open(cq, "ab") as f:
        f.write(b"\x01\x02\x03")                       # not a whole 20-byte unit any more
    for argv in (["get", *SMALL, store, "Orders", "0", "0", "10"], ["queues", *SMALL, store],
                 ["recover", "--dry-run", *SMALL, store]):
        code, out = run(argv)
        assert code == 1 and out == ""
        assert_one_line_error(capsys, f"rmq {argv[0]}: error:", str(cq), "offset", "multiple of 20")


def test_damaged_tail_is_not_an_error(tmp_path, capsys):
    """A torn record is what recovery cuts off: the reader stops before it, like the engine."""
    store = small_store(tmp_path, [msg(i) for i in range(4)])
    seg = store / "commitlog" / "00000000000000000000"
    code, out = run(["get", "--json", *SMALL, store, "Orders", "1", "0", "10"])
    last = json.loads(out.splitlines()[-2])
    data = bytearray(seg.read_bytes())
    data[last["commitLogOffset"] + 4:last["commitLogOffset"] + 8] = b"\x00\x00\x00\x00"
    seg.write_bytes(bytes(data))
    code, out = run(["get", "--json", *SMALL, store, "Orders", "1", "0", "10"])
    assert code == 0
    assert json.loads(out.splitlines()[-1])["maxOffset"] == 1
    assert "Traceback" not in capsys.readouterr().err


def test_put_input_errors(tmp_path, capsys):
    store = tmp_path / "s"
    bad_json = b'{"topic":"T","body":""}\n\n{"topic":"T"}\n{oops\n'
    assert run(["put", store], stdin=bad_json)[0] == 2
    assert_one_line_error(capsys, "stdin line 4", "not valid JSON")
    assert run(["put", store], stdin=b'{"topic":"T","body":"%%%"}\n')[0] == 2
    assert_one_line_error(capsys, "stdin line 1", "base64")
    assert run(["put", store], stdin=b'{"queueId":1}\n')[0] == 2
    assert_one_line_error(capsys, "stdin line 1", "topic")
    assert run(["put", store], stdin=b'[1, 2]\n')[0] == 2
    assert_one_line_error(capsys, "JSON object")
    assert run(["put", store, "--from", tmp_path / "none.parquet"])[0] == 2
    assert_one_line_error(capsys, "none.parquet")


def test_put_refused_message_exit_1(tmp_path, capsys):
    store = tmp_path / "s"
    code, out = run(["put", "--json", *SMALL, store],
                    stdin=(json.dumps(msg(0)) + "\n" + json.dumps(msg(1, topic="bad topic!")) + "\n").encode())
    assert code == 1
    lines = [json.loads(x) for x in out.splitlines()]
    assert [x.get("status") for x in lines[:2]] == ["PUT_OK", "MESSAGE_ILLEGAL"]
    assert "characters" in lines[1]["reason"]
    assert lines[-1]["done"] == 2 and lines[-1]["failed"] == 1 and lines[-1]["shutdown"] == "clean"
    assert "refused" in capsys.readouterr().err


@needs_corpus
def test_read_only_store_is_never_recovered_in_place(tmp_path, capsys):
    store = copy_store(CORPUS / "store", tmp_path / "ro")
    os.chmod(store, 0o555)
    try:
        before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
        assert run(["recover", *cfg(), store])[0] == 1
        assert_one_line_error(capsys, "read-only")
        assert run(["put", *cfg(), store], stdin=json.dumps(msg(0)).encode() + b"\n")[0] == 1
        assert_one_line_error(capsys, "read-only")
        after = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
        assert before == after
        # --dry-run only reads, so it works on a read-only store.
        code, out = run(["recover", "--dry-run", *cfg(), store])
        assert code == 0 and "dry run" in out
    finally:
        os.chmod(store, 0o755)


def test_store_locked_by_another_writer(tmp_path, capsys):
    from rmqsource.io.lock import StoreLock
    store = small_store(tmp_path, [msg(0)])
    with StoreLock(store):
        assert run(["recover", *SMALL, store])[0] == 1
        assert_one_line_error(capsys, "locked")


# ------------------------------------------------------------------ readable output

@pytest.fixture()
def store(tmp_path):
    lines = [msg(i) for i in range(6)]
    lines.append(msg(6, body=base64.b64encode(bytes(range(200))).decode(), tags=None))
    return small_store(tmp_path, lines)


def test_readable_get(store):
    code, out = run(["get", *SMALL, store, "Orders", "0", "0", "32"])
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["queueOffset", "commitLogOffset", "size", "storeTime", "(UTC)", "tags", "keys",
                                "body"]
    assert set(lines[1]) <= {"-", " "}
    rows = lines[2:-2]
    assert len(rows) == 4                                   # ids 0, 2, 4, 6 went to queue 0
    assert "hello 0" in rows[0] and "订单" in rows[0] and "2023-11-14 22:13:20.000" in rows[0]
    assert "hex:000102" in rows[3] and "(200 B)" in rows[3]
    # columns are aligned: every row has "hello"/"hex:" starting at the same display column
    starts = {output.display_width(r[:r.index("hello") if "hello" in r else r.index("hex:")]) for r in rows}
    assert len(starts) == 1
    assert lines[-1] == "status FOUND  nextBeginOffset 4  minOffset 0  maxOffset 4  messages 4  calls 1"


def test_readable_get_loop_and_tag(store):
    code, out = run(["get", "--loop", "--tag", "TagA", *SMALL, store, "Orders", "1", "0", "1"])
    assert code == 0
    assert out.splitlines()[-1] == "status FOUND  nextBeginOffset 3  minOffset 0  maxOffset 3  messages 3  calls 3"
    code, out = run(["get", "--tag", "TagZ", *SMALL, store, "Orders", "1", "0", "10"])
    assert "(no messages)" in out and "NO_MATCHED_MESSAGE" in out


def test_readable_view_query_topics_queues(store):
    code, out = run(["get", "--json", *SMALL, store, "Orders", "1", "0", "1"])
    first = json.loads(out.splitlines()[0])
    code, out = run(["view", *SMALL, store, first["msgId"]])
    assert code == 0
    assert "topic                      Orders" in out
    assert "hello 1" in out and "UNIQ_KEY" not in out and "KEYS      k1 shared" in out

    code, out = run(["query", *SMALL, store, "Orders", "shared", "3"])
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["commitLogOffset", "queueId", "queueOffset"]
    assert len(lines) == 2 + 3 + 2 and lines[-1].startswith("hits 3 ")

    code, out = run(["topics", *SMALL, store])
    assert code == 0
    assert out.splitlines()[2].split() == ["Orders", "2", "7", "0", "4", "2023-11-14", "22:13:20.006", "0,1"]
    code, out = run(["topics", "--json", *SMALL, store])
    assert json.loads(out) == {"topic": "Orders", "queueIds": [0, 1], "messages": 7, "minOffset": 0, "maxOffset": 4,
                               "lastStoreTime": 1700000000006}
    code, out = run(["query", *SMALL, store, "Orders", "no-such-key"])
    assert code == 3 and "(no hits)" in out

    code, out = run(["queues", *SMALL, store, "Orders"])
    rows = [line.split() for line in out.splitlines()[2:4]]
    assert [r[:5] for r in rows] == [["Orders", "0", "0", "4", "4"], ["Orders", "1", "0", "3", "3"]]
    code, out = run(["queues", "--json", *SMALL, store])
    docs = [json.loads(x) for x in out.splitlines()]
    assert [d["maxOffset"] for d in docs] == [4, 3]
    # the last message of queue 0 is message 6, of queue 1 message 5 (msg(i) stores at 1700000000000 + i)
    assert [d["lastStoreTime"] for d in docs] == [1700000000006, 1700000000005]
    assert [d["messages"] for d in docs] == [4, 3]


def test_recover_readable_and_json(store):
    (store / "abort").write_bytes(b"")
    code, out = run(["recover", *SMALL, store])
    assert code == 0
    assert out.startswith("recovered: ")
    assert "abortFileExisted     yes" in out and "commitLogMinOffset   0" in out
    assert not (store / "abort").exists()
    code, out = run(["recover", "--json", *SMALL, store])
    doc = json.loads(out)
    assert doc["summary"]["abortFileExisted"] is False
    assert doc["summary"]["topicQueueTable"] == {"Orders-0": 4, "Orders-1": 3}
    assert doc["summary"]["confirmOffset"] == doc["summary"]["commitLogMaxOffset"]   # default engine 5.3.3


def test_put_readable_summary(tmp_path):
    code, out = run(["put", *SMALL, tmp_path / "s"], stdin=b"".join(json.dumps(msg(i)).encode() + b"\n"
                                                                      for i in range(5)))
    assert code == 0
    assert out.startswith("stored 5 of 5 messages in ")
    assert "shutdown clean" in out


@pytest.mark.parametrize("fmt", ["parquet", "arrow", "arrows"])
def test_put_from_arrow_files(tmp_path, fmt):
    pa = pytest.importorskip("pyarrow")
    table = pa.table({
        "topic": ["Orders", "Orders", "Other"],
        "queueId": pa.array([0, 0, 3], pa.int32()),
        "body": pa.array([b"a", b"\x00\xff", b""], pa.binary()),
        "tags": ["TagA", None, "TagB"],
        "keys": ["k1", "k2 k3", None],
        "properties": pa.array([[("p", "1")], [], None], pa.map_(pa.string(), pa.string())),
        "bornTimestamp": pa.array([1, 2, 3], pa.int64()),
    })
    path = tmp_path / f"in.{fmt}"
    if fmt == "parquet":
        import pyarrow.parquet as pq
        pq.write_table(table, path)
    elif fmt == "arrow":
        with pa.ipc.new_file(path, table.schema) as w:
            w.write_table(table)
    else:
        with pa.ipc.new_stream(path, table.schema) as w:
            w.write_table(table)
    store = tmp_path / "s"
    code, out = run(["put", "--json", *SMALL, store, "--from", path])
    assert code == 0, out
    lines = [json.loads(x) for x in out.splitlines()]
    assert [x["status"] for x in lines[:-1]] == ["PUT_OK"] * 3
    assert lines[0]["propertiesString"] == "TAGS\x01TagA\x02KEYS\x01k1\x02p\x011\x02"
    code, out = run(["get", "--json", *SMALL, store, "Orders", "0", "0", "10"])
    got = [json.loads(x) for x in out.splitlines()]
    assert [base64.b64decode(m["body"] or "") for m in got[:-1]] == [b"a", b"\x00\xff"]
    assert got[0]["properties"]["p"] == "1" and got[1]["keys"] == "k2 k3"
    assert got[0]["bornTimestamp"] == 1


def test_put_from_unknown_column(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"topic": ["T"], "colour": ["red"]}), path)
    assert run(["put", tmp_path / "s", "--from", path])[0] == 2
    assert_one_line_error(capsys, "colour")


# ------------------------------------------------------------------ helpers

def test_body_preview():
    assert output.body_preview(b"") == ""
    assert output.body_preview("订单 ok".encode()) == "订单 ok"
    assert output.body_preview(b"line1\nline2") == "line1\\nline2"
    assert output.body_preview(b"x" * 100, limit=10) == "x" * 9 + "…"
    assert output.body_preview(b"\x00\x01\x02") == "hex:000102 (3 B)"
    import zlib
    assert output.body_preview(zlib.compress(b"plain text"), sys_flag=1) == "[inflated] plain text"


def test_format_table_aligns_wide_characters():
    lines = output.format_table(["name", "n"], [["订单", 1], ["ab", 100]])
    assert [output.display_width(x) for x in lines] == [9, 9, 9, 9]
    assert lines[2] == "订单    1" and lines[3] == "ab    100"


def test_format_ms():
    assert output.format_ms(1700000000137) == "2023-11-14 22:13:20.137"
    assert output.format_ms(None) == "-"


# ------------------------------------------------------------------ processes

def _python_m(args, **kw):
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    return subprocess.run([sys.executable, "-m", "rmqsource", *[str(a) for a in args]], capture_output=True,
                          env=env, timeout=60, **kw)


def test_subprocess_error_has_no_traceback(tmp_path):
    p = _python_m(["get", tmp_path, "T", "0", "0", "1"])
    assert p.returncode == 1
    assert b"Traceback" not in p.stderr and p.stderr.count(b"\n") == 1


@needs_corpus
def test_broken_pipe_is_quiet():
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    cmd = (f"{sys.executable} -m rmqsource get --loop {' '.join(cfg())} {CORPUS / 'store'} TopicTest 0 0 100000"
           f" | head -n 3")
    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, env=env, timeout=60)
    assert p.stdout.count(b"\n") == 3
    assert p.stderr == b"", p.stderr
    assert p.returncode == 0


def test_lag_shows_group_progress_per_queue(tmp_path):
    """`rmq lag` reads config/consumerOffset.json (RocketMQ format) against each queue's max offset."""
    import io as _io
    import json as _json

    from rmqsource.cli import main as rmq_main
    from rmqsource.sample import write_sample_store
    from rmqsource.store.consumer_offsets import ConsumerOffsets
    from rmqsource.store.reader import MessageStoreReader

    store = tmp_path / "store"
    write_sample_store(store, 2000, queues_per_topic=2)
    with MessageStoreReader(store) as reader:
        maxes = {(q.topic, q.queue_id): q.max_offset for q in reader.queue_infos()}
    ConsumerOffsets(store).commit("cg1", {"OrderEvents": {0: 10, 1: maxes[("OrderEvents", 1)]}})
    out = _io.StringIO()
    assert rmq_main(["lag", str(store), "--group", "cg1", "--json"], stdout=out) == 0
    rows = {(r["topic"], r["queueId"]): r for r in map(_json.loads, out.getvalue().splitlines())}
    assert rows[("OrderEvents", 0)]["consumerOffset"] == 10
    assert rows[("OrderEvents", 0)]["diff"] == maxes[("OrderEvents", 0)] - 10
    assert rows[("OrderEvents", 1)]["diff"] == 0
    text = _io.StringIO()
    assert rmq_main(["lag", str(store), "--group", "cg1"], stdout=text) == 0
    assert "Diff Total: " + str(maxes[("OrderEvents", 0)] - 10) in text.getvalue()
    # the store time of the last consumed message (offset 9 of queue 0)
    with MessageStoreReader(store) as reader:
        q = reader.consume_queue("OrderEvents", 0)
        phy, size, _ = q.unit_at(9)
        want = reader.commitlog.read_message(phy, size).store_timestamp_ms
    assert rows[("OrderEvents", 0)]["lastConsumedStoreTime"] == want
    assert rmq_main(["lag", str(store), "--group", "nosuch"], stdout=_io.StringIO()) == 3
