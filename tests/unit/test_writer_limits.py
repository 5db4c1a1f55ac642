"""Hostile input to the writer: every field range-checked, strings that are not valid Unicode or that hold
RocketMQ's property separators refused with MESSAGE_ILLEGAL, bad JSON lines named by line number --
on every put path (put_messages, put_json_lines, put_arrow_batch, ``rmq put``), on copies of a golden store.

A refused message is never stored; the other messages of its batch are."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest

from rmqsource.errors import OptionError
from rmqsource.store.reader import MessageStoreReader
from rmqsource.store.writer import MessageExtBrokerInner, MessageStoreWriter, PutMessageStatus

from golden import PROJECT_ROOT, copy_store, corpora, load_config, writable_names

pytestmark = [pytest.mark.unit, pytest.mark.skipif(not corpora(), reason="no golden corpus")]

TOPIC = "HostileInput"
INT32 = 1 << 31
INT64 = 1 << 63


def _copy(corpus, tmp_path):
    store = copy_store(corpus / "store", tmp_path / "store")
    return store, load_config(corpus), corpus


@pytest.fixture
def golden_copy(tmp_path):
    return _copy(corpora()[0], tmp_path)


@pytest.fixture(params=writable_names())
def each_golden_copy(request, tmp_path):
    return _copy(next(c for c in corpora() if c.name == request.param), tmp_path)


def good(i: int, **kw) -> dict:
    d = {"topic": TOPIC, "queueId": 0, "tags": "TagA", "keys": f"key-{i}", "bornHost": "10.0.0.1:4000",
         "storeHost": "10.0.0.5:10911", "bornTimestamp": 1700000000000, "storeTimestamp": 1700000000000 + i,
         "body": base64.b64encode(f"body {i}".encode()).decode()}
    d.update(kw)
    return d


def stored_keys(store, config) -> list[str]:
    """KEYS of every message in the HostileInput queue, in queue order."""
    with MessageStoreReader(store, config) as r:
        res = r.get_message("g", TOPIC, 0, 0, 64)
        return [m.record.properties.get("KEYS") for m in res.messages]


def put_all_paths(store, config, lines: list[dict], path: str):
    """Put ``lines`` through one of the put paths; the results."""
    with MessageStoreWriter(store, config) as w:
        if path == "messages":
            return list(w.put_messages([MessageExtBrokerInner.from_json_dict(d) for d in lines]))
        if path == "json":
            data = "".join(json.dumps(d) + "\n" for d in lines).encode()
            return list(w.put_json_lines(data))
        if path == "arrow":
            names = list(dict.fromkeys(k for d in lines for k in d))      # every field of any line
            table = pa.table({k: [base64.b64decode(d[k]) if k == "body" else d.get(k) for d in lines]
                              for k in names})
            return list(w.put_arrow_batch(table))
    raise AssertionError(path)


# -- row 6: every field range-checked per message ---------------------------------------------

OUT_OF_RANGE = [
    ("flag", 1 << 40), ("flag", -INT32 - 1), ("sysFlag", 1 << 40), ("reconsumeTimes", 1 << 40),
    ("reconsumeTimes", INT32), ("queueId", 1 << 40), ("queueId", -1),
    ("bornTimestamp", INT64), ("preparedTransactionOffset", -INT64 - 1), ("storeTimestamp", INT64),
    ("bornHost", "10.0.0.1:1099511627776"), ("storeHost", "10.0.0.1:65536"), ("bornHost", "[::1]:1099511627776"),
    ("storeHost", "10.0.0.1:-1"),
]


@pytest.mark.parametrize("path", ["messages", "json", "arrow"])
@pytest.mark.parametrize("field,value", OUT_OF_RANGE, ids=[f"{f}={v}" for f, v in OUT_OF_RANGE])
def test_out_of_range_field_is_message_illegal_and_the_batch_goes_on(golden_copy, field, value, path):
    store, config, _ = golden_copy
    if path == "arrow" and isinstance(value, int) and not -INT64 <= value < INT64:
        pytest.skip("not representable in an int64 Arrow column")
    lines = [good(0), good(1, **{field: value}), good(2)]
    results = put_all_paths(store, config, lines, path)
    assert [r.status for r in results] == [PutMessageStatus.PUT_OK, PutMessageStatus.MESSAGE_ILLEGAL,
                                           PutMessageStatus.PUT_OK]
    assert ("port" if field.endswith("Host") else field) in results[1].reason
    assert stored_keys(store, config) == ["key-0", "key-2"]


# -- rows 7 and 12: strings that are not Unicode or hold the property separators ------------------

BAD_STRINGS = [
    ("tags", "\ud800"), ("keys", "k\udfff"), ("tags", "A\x01B"), ("tags", "A\x02"),
    ("keys", "k1\x02TAGS\x01B"), ("prop-name", "na\x01me"), ("prop-value", "v\x02x"), ("prop-value", "\ud83d"),
    ("prop-name", "\udc80"),
]


def with_bad_string(i: int, where: str, text: str) -> dict:
    if where == "prop-name":
        return good(i, properties={text: "v"})
    if where == "prop-value":
        return good(i, properties={"p": text})
    return good(i, **{where: text})


@pytest.mark.parametrize("path", ["messages", "json", "arrow"])
@pytest.mark.parametrize("where,text", BAD_STRINGS, ids=[f"{w}={t!r}" for w, t in BAD_STRINGS])
def test_bad_string_is_message_illegal_before_anything_is_stored(golden_copy, where, text, path):
    store, config, _ = golden_copy
    lines = [good(0), with_bad_string(1, where, text), good(2)]
    if path == "arrow" and any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):
        pytest.skip("Arrow strings are UTF-8: a lone surrogate cannot be put in one")
    results = put_all_paths(store, config, lines, path)
    assert [r.status for r in results] == [PutMessageStatus.PUT_OK, PutMessageStatus.MESSAGE_ILLEGAL,
                                           PutMessageStatus.PUT_OK], results[1].reason
    assert results[1].reason
    assert stored_keys(store, config) == ["key-0", "key-2"]


def test_verbatim_properties_string_keeps_its_separators(golden_copy):
    """A propertiesString IS the encoding: its separators are stored as given (the corpora have such)."""
    store, config, _ = golden_copy
    pstr = "TAGS\x01TagA\x02KEYS\x01key-0\x02"
    with MessageStoreWriter(store, config) as w:
        assert w.put_message(MessageExtBrokerInner(topic=TOPIC, queue_id=0, properties=pstr)).ok
        bad = w.put_message(MessageExtBrokerInner(topic=TOPIC, queue_id=0, properties="TAGS\x01\ud800"))
    assert bad.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert stored_keys(store, config) == ["key-0"]


# -- rows 3, 7, 8: the JSON-lines path and ``rmq put`` ------------------------------------------

def rmq_put(store, corpus, data: bytes) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    return subprocess.run([sys.executable, "-m", "rmqsource.cli", "put", str(store), "--config",
                           str(corpus / "store.properties"), "--json"], input=data, capture_output=True,
                          env=env, timeout=120)


def line(d: dict) -> bytes:
    return json.dumps(d).encode() + b"\n"


NOT_OBJECTS = [b"null", b"  null", b"1", b"[1]", b'"x"', b"true", b"nul"]


@pytest.mark.parametrize("bad", NOT_OBJECTS, ids=[b.decode() for b in NOT_OBJECTS])
@pytest.mark.parametrize("position", [0, 1])
def test_json_line_that_is_not_an_object_is_an_error_naming_the_line(golden_copy, bad, position):
    store, config, _ = golden_copy
    lines = [line(good(0)), line(good(1))]
    lines.insert(position, bad + b"\n")
    with MessageStoreWriter(store, config) as w:
        with pytest.raises(OptionError, match=f"line {position + 1}:"):
            w.put_json_lines(b"".join(lines))
    assert stored_keys(store, config) == []


def test_deeply_nested_line_is_an_error_naming_the_line(golden_copy):
    """pyarrow's JSON reader crashes (SIGSEGV) on ~30,000 levels of nesting; json.loads recurses."""
    store, config, _ = golden_copy
    deep = b'{"topic":"HostileInput","x":' + b"[" * 30000 + b"]" * 30000 + b"}\n"
    with MessageStoreWriter(store, config) as w:
        with pytest.raises(OptionError, match="line 2: JSON nested too deeply"):
            w.put_json_lines(line(good(0)) + deep)
        assert w.put_json_lines(line(good(1)) + b'{"topic":"HostileInput","x":[[1]]}\n').ok_count == 2
    assert stored_keys(store, config) == ["key-1", None]


def test_rmq_put_null_line_is_a_one_line_error(golden_copy):
    """``echo null | rmq put --json`` crashed (SIGSEGV) inside pyarrow.json.read_json."""
    store, _, corpus = golden_copy
    for data in (b"null\n", line(good(0)) + b"null\n", b"null\n" + line(good(0))):
        p = rmq_put(store, corpus, data)
        assert p.returncode in (1, 2), (p.returncode, p.stderr)
        err = p.stderr.decode()
        assert "stdin line" in err and "internal error" not in err and "Traceback" not in err


@pytest.mark.parametrize("raw", [b"a\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"],
                         ids=["xff", "truncated", "cesu-surrogate", "above-max"])
def test_invalid_utf8_in_a_line_is_an_error_naming_the_line(golden_copy, raw):
    store, config, corpus = golden_copy
    bad = line(good(1)).replace(b'"TagA"', b'"' + raw + b'"')
    data = line(good(0)) + bad + line(good(2))
    with MessageStoreWriter(store, config) as w:
        with pytest.raises(OptionError, match="line 2: .*UTF-8"):
            w.put_json_lines(data, what="in.jsonl")
    assert stored_keys(store, config) == []
    p = rmq_put(store, corpus, data)
    err = p.stderr.decode()
    assert p.returncode == 2 and "stdin line 2" in err and "UTF-8" in err and "internal error" not in err


def test_rmq_put_reports_refused_lines_and_stores_the_rest(each_golden_copy):
    """Rows 6, 7, 12 through the CLI: a put.jsonl line per input line, MESSAGE_ILLEGAL with a reason."""
    store, config, corpus = each_golden_copy
    data = (line(good(0)) + line(good(1, flag=1 << 40)) + b'{"topic":"HostileInput","tags":"\\ud800"}\n'
            + line(good(3, keys="k1\x02TAGS\x01B")) + line(good(4, bornHost="10.0.0.1:1099511627776"))
            + line(good(5)))
    p = rmq_put(store, corpus, data)
    assert p.returncode == 1, p.stderr              # some messages were refused
    assert b"internal error" not in p.stderr
    out = [json.loads(x) for x in p.stdout.decode("utf-8").splitlines()]
    results = [o for o in out if "i" in o]
    assert [r["i"] for r in results] == list(range(6))
    assert [r["status"] for r in results] == ["PUT_OK"] + ["MESSAGE_ILLEGAL"] * 4 + ["PUT_OK"]
    assert all(r["reason"] for r in results[1:5])
    assert out[-1]["failed"] == 4
    assert stored_keys(store, config) == ["key-0", "key-5"]
