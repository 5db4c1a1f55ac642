"""Every golden corpus replayed through the ``rmq`` CLI (in-process, plus a few real subprocesses).

The CLI's ``--json`` output must equal the engine's own answers line for line:
get --loop of every queue, every tag-filtered get, every edge get, every view,
every query, ``put --json`` of inputs.jsonl (and the bytes it writes), and
``recover --all`` on copies of the clean store and of every crash case.
Golden folders are read in place and never written: recover/put work on copies
under tmp_path.
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from rmqsource import cli

from golden import (PROJECT_ROOT, case_id, copy_store, corpora, corpus_of, crash_cases, default_layout_corpora,
                    engine_json, expected_get_files, read_jsonl, tag_expression_from_file_name, writable)

pytestmark = pytest.mark.golden

CORPORA = corpora()
CRASH_CASES = crash_cases()


def run(argv, stdin: bytes | None = None) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main([str(a) for a in argv], stdout=out,
                    stdin=io.BytesIO(stdin) if stdin is not None else None)
    return code, out.getvalue()


def run_json(argv, stdin: bytes | None = None, *, codes=(0,)) -> list[dict]:
    code, text = run(argv, stdin)
    assert code in codes, (argv, text[-500:])
    return [json.loads(line) for line in text.splitlines()]


def cfg(corpus: Path) -> list[str]:
    return ["--config", str(corpus / "store.properties")]


def get_argv(corpus, store, topic, queue_id, offset, max_msgs, *, tag=None, loop=True):
    argv = ["get", "--json", *cfg(corpus)]
    if loop:
        argv.append("--loop")
    if tag is not None:
        argv.append(f"--tag={tag}")
    return argv + ["--", store, topic, queue_id, offset, max_msgs]


def writable_copy(src: Path, dst: Path) -> Path:
    """copy_store, then owner-write bits on everything (copytree keeps the read-only dir modes,
    and ``rmq recover``/``put`` refuse a store whose root is read-only)."""
    copy_store(src, dst)
    for dirpath, _dirs, files in os.walk(dst):
        os.chmod(dirpath, 0o755)
        for name in files:
            os.chmod(os.path.join(dirpath, name), 0o644)
    return dst


def compact(message: dict) -> dict:
    """The crash-case form of a get message line."""
    return {"queueOffset": message["queueOffset"], "commitLogOffset": message["commitLogOffset"],
            "storeSize": message["storeSize"], "tagsCode": message["cq"]["tagsCode"],
            "rawCrc32": zlib.crc32(base64.b64decode(message["raw"]))}


def test_corpora_present():
    assert CORPORA and CRASH_CASES


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_get_loop_every_queue(corpus):
    files = expected_get_files(corpus / "expected")
    assert files
    for topic, queue_id, path in files:
        want = engine_json(read_jsonl(path))
        got = run_json(get_argv(corpus, corpus / "store", topic, queue_id, 0, 100000))
        assert got[-1] == want[-1], (topic, queue_id)
        assert len(got) == len(want), (topic, queue_id)
        for g, w in zip(got, want):
            assert g == w, (topic, queue_id, w.get("queueOffset"))


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_tag_filtered_gets(corpus):
    tag_dir = corpus / "expected" / "get_tag"
    index = read_jsonl(tag_dir / "INDEX.jsonl")
    assert index
    for entry in index:
        stem = entry["file"].rsplit("/", 1)[1][:-len(".jsonl")]
        assert tag_expression_from_file_name(stem.split("__", 1)[1]) == entry["tagExpression"]
        want = engine_json(read_jsonl(tag_dir / entry["file"]))
        got = run_json(get_argv(corpus, corpus / "store", entry["topic"], entry["queueId"], 0, 100000,
                                tag=entry["tagExpression"]))
        assert got == want, entry["file"]
        assert got[-1]["count"] == entry["count"] and got[-1]["status"] == entry["status"]


def _check_edge_calls(corpus, store, calls):
    assert calls
    for call in calls:
        assert not call["loop"]
        missing = not (store / "consumequeue" / call["topic"] / str(call["queueId"])).is_dir()
        got = run_json(get_argv(corpus, store, call["topic"], call["queueId"], call["offset"], call["maxMsgNums"],
                                tag=call["tag"], loop=False), codes=(3,) if missing else (0,))
        assert got[-1] == call["status"], call["label"]
        assert got[:-1] == call["messages"], call["label"]


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_edge_gets(corpus):
    _check_edge_calls(corpus, corpus / "store", engine_json(read_jsonl(corpus / "expected" / "get_edge.jsonl")))


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_view_every_msgid(corpus):
    calls = engine_json(read_jsonl(corpus / "expected" / "view.jsonl"))
    assert calls
    for call in calls:
        want = call["result"]
        if (want.get("message") or {}).get("decodeError"):
            # The engine returns a DLedger entry header's first byte as a message; rmqsource never
            # returns header bytes as a message (test_reader_golden.py): not found.
            want = {k: v for k, v in want.items() if k != "message"} | {"found": False}
        got = run_json(["view", "--json", *cfg(corpus), "--", corpus / "store", call["msgId"]],
                       codes=(0,) if want["found"] else (3,))
        assert got == [want], call["label"]


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_query_every_key(corpus):
    calls = engine_json(read_jsonl(corpus / "expected" / "query.jsonl"))
    assert calls
    for call in calls:
        argv = ["query", "--json", *cfg(corpus), "--", corpus / "store", call["topic"], call["key"], call["maxNum"]]
        if call["beginTimestamp"] is not None or call["endTimestamp"] is not None:
            argv += [call["beginTimestamp"], call["endTimestamp"]]
        got = run_json(argv, codes=(0,) if call["hits"] else (3,))
        assert got[-1] == call["summary"], call["label"]
        assert got[:-1] == call["hits"], call["label"]


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_query_keys_from_a_file_gives_each_keys_hits(corpus, tmp_path):
    """--keys-from: one walk per key, the engine's hits for each, tagged with their key (the calls without a
    time range, grouped by topic and maxNum)."""
    calls = [c for c in engine_json(read_jsonl(corpus / "expected" / "query.jsonl"))
             if c["beginTimestamp"] is None and c["endTimestamp"] is None]
    groups: dict = {}
    for c in calls:
        groups.setdefault((c["topic"], c["maxNum"]), {}).setdefault(c["key"], c["hits"])
    assert groups
    for (topic, max_num), hits_by_key in groups.items():
        keys = tmp_path / "keys.txt"
        keys.write_text("# keys\n\n" + "\n".join(hits_by_key) + "\n" + next(iter(hits_by_key)) + "\n", encoding="utf-8")
        any_hit = any(hits_by_key.values())
        got = run_json(["query", "--json", *cfg(corpus), "--keys-from", keys, "--", corpus / "store", topic, max_num],
                       codes=(0,) if any_hit else (3,))
        assert got[-1] == {"keys": len(hits_by_key), "keysWithHits": sum(bool(h) for h in hits_by_key.values()),
                           "count": sum(len(h) for h in hits_by_key.values())}
        for key, hits in hits_by_key.items():
            assert [{k: v for k, v in h.items() if k != "key"} for h in got[:-1] if h["key"] == key] == hits, key


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_query_only_matching_drops_collisions(corpus):
    calls = [c for c in read_jsonl(corpus / "expected" / "query.jsonl") if any(not h["keyMatch"] for h in c["hits"])]
    assert calls
    for call in calls:
        got = run_json(["query", "--json", "--only-matching", *cfg(corpus), "--", corpus / "store", call["topic"],
                        call["key"], call["maxNum"]])
        assert [h["commitLogOffset"] for h in got[:-1]] == [h["commitLogOffset"] for h in call["hits"]
                                                              if h["keyMatch"]]
        assert all(h["keyMatch"] for h in got[:-1])


def _assert_recover_doc(got: dict, want: dict, label: str):
    assert got["command"] == want["command"], label
    assert got["summary"] == want["summary"], label
    assert got["queues"] == want["queues"], label


@pytest.mark.parametrize("corpus", writable(CORPORA))
def test_recover_clean_store_copy(corpus, tmp_path):
    want = json.loads((corpus / "expected" / "recover.json").read_text())
    store = writable_copy(corpus / "store", tmp_path / "store")
    (got,) = run_json(["recover", "--all", "--json", *cfg(corpus), store])
    _assert_recover_doc(got, want, corpus.name)
    assert got["actions"]["deletedSegments"] == [] and got["actions"]["zeroedTailBytes"] == 0
    # Recovering a clean store changes no CommitLog or ConsumeQueue byte.
    for sub in ("commitlog", "consumequeue"):
        for f in sorted((corpus / "store" / sub).rglob("*")):
            if f.is_file():
                assert (store / f.relative_to(corpus / "store")).read_bytes() == f.read_bytes(), f


@pytest.mark.parametrize("case", writable(CRASH_CASES))
def test_recover_dry_run_matches_engine(case):
    """--dry-run only reads (MessageStoreReader), so it runs on the golden store in place."""
    corpus = corpus_of(case)
    want = json.loads((case / "expected" / "recover.json").read_text())
    (got,) = run_json(["recover", "--all", "--dry-run", "--json", *cfg(corpus), case / "store"])
    _assert_recover_doc(got, want, case.name)
    assert got["dryRun"] is True


@pytest.mark.parametrize("case", writable(CRASH_CASES))
def test_recover_crash_case_copy(case, tmp_path):
    corpus = corpus_of(case)
    want = json.loads((case / "expected" / "recover.json").read_text())
    store = writable_copy(case / "store", tmp_path / "store")
    (got,) = run_json(["recover", "--all", "--json", *cfg(corpus), store])
    _assert_recover_doc(got, want, case.name)
    assert not (store / "abort").exists(), "recover leaves a cleanly shut down store"
    # A second recovery finds nothing to repair and reports the same offsets.
    (again,) = run_json(["recover", "--all", "--json", *cfg(corpus), store])
    assert again["queues"] == want["queues"]
    assert again["summary"] | {"abortFileExisted": want["summary"]["abortFileExisted"]} == want["summary"]
    assert again["actions"]["deletedSegments"] == [] and again["actions"]["zeroedTailBytes"] == 0
    # Gets after recovery equal the engine's (compact crash form), from the recorded start offsets.
    starts = json.loads((case / "case.json").read_text())["checks"].get("get_start_offsets", {})
    for topic, queue_id, path in expected_get_files(case / "expected"):
        expected = read_jsonl(path)
        got_lines = run_json(get_argv(corpus, store, topic, queue_id, starts.get(f"{topic}/{queue_id}", 0), 100000))
        assert got_lines[-1] == expected[-1], (case.name, topic, queue_id)
        assert [compact(m) for m in got_lines[:-1]] == expected[:-1], (case.name, topic, queue_id)
    edge = case / "expected" / "get_edge.jsonl"
    if edge.is_file():
        _check_edge_calls(corpus, store, read_jsonl(edge))


def _compare_put(got: list[dict], want: list[dict]):
    assert len(got) == len(want)
    assert got[-1] == want[-1]
    for g, w in zip(got[:-1], want[:-1]):
        assert g == w, w["i"]


@pytest.mark.parametrize("corpus", writable(CORPORA))
def test_put_json_equals_engine(corpus, tmp_path):
    store = tmp_path / "store"
    got = run_json(["put", "--json", *cfg(corpus), "-C", "brokerPutHooks=false", store], stdin=(corpus / "inputs.jsonl").read_bytes())
    _compare_put(got, read_jsonl(corpus / "expected" / "put.jsonl"))
    # The bytes written are the engine's: CommitLog segments and ConsumeQueue files.
    for sub in ("commitlog", "consumequeue"):
        want_files = sorted(p.relative_to(corpus / "store") for p in (corpus / "store" / sub).rglob("*")
                            if p.is_file())
        got_files = sorted(p.relative_to(store) for p in (store / sub).rglob("*") if p.is_file())
        assert got_files == want_files, sub
        for rel in want_files:
            assert (store / rel).read_bytes() == (corpus / "store" / rel).read_bytes(), rel
    # The freshly written store answers like the engine's store.
    topic, queue_id, path = expected_get_files(corpus / "expected")[0]
    assert run_json(get_argv(corpus, store, topic, queue_id, 0, 100000)) == read_jsonl(path)


# ------------------------------------------------------------- real processes

def _subprocess(args, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    return subprocess.run([sys.executable, "-m", "rmqsource", *[str(a) for a in args]], input=stdin,
                          capture_output=True, env=env, timeout=120)


def test_subprocess_get_loop_and_view():
    corpus = CORPORA[0]
    topic, queue_id, path = expected_get_files(corpus / "expected")[-1]
    p = _subprocess(get_argv(corpus, corpus / "store", topic, queue_id, 0, 100000))
    assert p.returncode == 0, p.stderr
    assert p.stderr == b""
    assert [json.loads(line) for line in p.stdout.decode("utf-8").splitlines()] == read_jsonl(path)
    call = read_jsonl(corpus / "expected" / "view.jsonl")[0]
    p = _subprocess(["view", "--json", *cfg(corpus), corpus / "store", call["msgId"]])
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == call["result"]


def test_subprocess_put_and_recover(tmp_path):
    corpus = default_layout_corpora()[-1]
    store = tmp_path / "store"
    p = _subprocess(["put", "--json", *cfg(corpus), "-C", "brokerPutHooks=false", store], stdin=(corpus / "inputs.jsonl").read_bytes())
    assert p.returncode == 0, p.stderr
    _compare_put([json.loads(line) for line in p.stdout.decode("utf-8").splitlines()],
                 read_jsonl(corpus / "expected" / "put.jsonl"))
    p = _subprocess(["recover", "--all", "--json", *cfg(corpus), store])
    assert p.returncode == 0, p.stderr
    _assert_recover_doc(json.loads(p.stdout), json.loads((corpus / "expected" / "recover.json").read_text()),
                        corpus.name)
