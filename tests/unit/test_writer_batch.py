"""The columnar fast path (put_json_lines / put_arrow_batch / put_columns) writes exactly
the bytes of the per-message path (put_messages): golden corpora, and randomized mixed
batches compared store against store."""

from __future__ import annotations

import base64
import json
import os
import random
from pathlib import Path

import pyarrow as pa
import pytest

from rmqsource.store.config import StoreConfig
from rmqsource.store.writer import MessageExtBrokerInner, MessageStoreWriter

from golden import GOLDEN_ROOT, tree_bytes, writable_names

GOLDEN = GOLDEN_ROOT
CORPORA = writable_names()
PUT_FIELDS = ("status", "appendStatus", "msgId", "commitLogOffset", "queueOffset", "size", "storeTimestamp",
              "topic", "queueId", "sysFlag")


def _same_store(a: Path, b: Path) -> None:
    for sub in ("commitlog", "consumequeue"):
        fa, fb = tree_bytes(a / sub), tree_bytes(b / sub)
        assert sorted(fa) == sorted(fb), sub
        for name in fa:
            assert fa[name] == fb[name], f"{sub}/{name} differs"
    ia = [(a / "index" / n).read_bytes() for n in sorted(os.listdir(a / "index"))] if (a / "index").is_dir() else []
    ib = [(b / "index" / n).read_bytes() for n in sorted(os.listdir(b / "index"))] if (b / "index").is_dir() else []
    assert len(ia) == len(ib)
    for k, (x, y) in enumerate(zip(ia, ib)):
        assert x == y, f"IndexFile #{k} differs"


def _config(corpus: str, **overrides) -> StoreConfig:
    return StoreConfig.from_properties_file(GOLDEN / corpus / "store.properties", {"brokerPutHooks": "false",
                                                                                  **overrides})


@pytest.mark.golden
@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("block", [None, 97])
def test_golden_put_json_lines(tmp_path, corpus, block):
    data = (GOLDEN / corpus / "inputs.jsonl").read_bytes()
    root = tmp_path / "store"
    lines = data.splitlines(keepends=True)
    out = []
    with MessageStoreWriter(root, _config(corpus)) as w:
        step = block or len(lines)
        for k in range(0, len(lines), step):
            res = w.put_json_lines(b"".join(lines[k:k + step]))
            out.append(res.to_put_jsonl(k))
            assert [r.to_json_dict() for r in res] == [res[i].to_json_dict() for i in range(len(res))]
    _same_store(GOLDEN / corpus / "store", root)
    expected = (GOLDEN / corpus / "expected" / "put.jsonl").read_text(encoding="utf-8").splitlines()[:-1]
    got = b"".join(out).decode("utf-8").splitlines()
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        gd, ed = json.loads(g), json.loads(e)
        assert {k: gd[k] for k in PUT_FIELDS + ("i", "tagsCode", "propertiesString")} == \
               {k: ed[k] for k in PUT_FIELDS + ("i", "tagsCode", "propertiesString")}


def _arrow_table(dicts: list[dict]) -> pa.Table:
    """inputs.jsonl dicts as an Arrow table with a map<string,string> properties column."""
    cols = {k: [] for k in ("topic", "queueId", "body", "flag", "tags", "keys", "properties", "propertiesString",
                            "bornTimestamp", "bornHost", "storeHost", "sysFlag", "reconsumeTimes",
                            "preparedTransactionOffset", "storeTimestamp")}
    for d in dicts:
        for k in cols:
            v = d.get(k)
            if k == "body":
                v = base64.b64decode(v or "")
            elif k == "properties" and v is not None:
                v = list(v.items())
            cols[k].append(v)
    types = {"body": pa.binary(), "properties": pa.map_(pa.string(), pa.string()), "propertiesString": pa.string(),
             "tags": pa.string(), "keys": pa.string()}
    return pa.table({k: pa.array(v, types.get(k)) for k, v in cols.items()})


@pytest.mark.golden
@pytest.mark.parametrize("corpus", CORPORA)
def test_golden_put_arrow_batch(tmp_path, corpus):
    dicts = [json.loads(x) for x in (GOLDEN / corpus / "inputs.jsonl").read_text(encoding="utf-8").splitlines()]
    root = tmp_path / "store"
    with MessageStoreWriter(root, _config(corpus)) as w:
        t = _arrow_table(dicts)
        res = [w.put_arrow_batch(t.slice(0, 333)), w.put_arrow_batch(t.slice(333))]
    assert all(r.ok for part in res for r in part)
    _same_store(GOLDEN / corpus / "store", root)


# ---------------------------------------------------------------- randomized equivalence

def _random_dicts(rng: random.Random, n: int) -> list[dict]:
    topics = ["TopicA", "TopicB", "t%x", "SCHEDULE_TOPIC_XXXX", "bad topic", "T" * 130, ""]
    out = []
    for i in range(n):
        d = {"topic": rng.choices(topics, weights=[40, 30, 5, 3, 2, 2, 1])[0], "queueId": rng.choice([0, 1, 2, 3, -1]),
             "bornTimestamp": 1_700_000_000_000 + i * rng.randint(0, 900),
             "storeTimestamp": 1_700_000_001_000 + i * 137,
             "bornHost": rng.choice(["192.168.0.1:1234", "10.1.2.3:99", "[2001:db8:0:0:0:0:0:1]:7", "1.2.3.4:5"]),
             "storeHost": rng.choice(["10.0.0.5:10911"] * 5 + ["[::1]:10911"]),
             "sysFlag": rng.choice([0] * 8 + [2, 4, 8, 12]), "flag": rng.randint(-5, 5)}
        body = rng.randbytes(rng.choice([0, 1, 2, 3, 50, 700, 3000]))
        d["body"] = base64.b64encode(body).decode()
        if rng.random() < 0.8:
            d["tags"] = rng.choice(["TagA", "TagB", "", "😀emoji", "Tag\x02x", "A||B"])
        if rng.random() < 0.7:
            d["keys"] = rng.choice([f"k{i}", f"k{i} s{i % 7}", "  a  b ", "", "ключ", f"dup dup {i}"])
        if rng.random() < 0.8:
            props = {"UNIQ_KEY": f"{rng.getrandbits(128):032X}"}
            for name in rng.sample(["note", "DELAY", "__CRC32#", "empty", "x\x01y", "TAGS"], rng.randint(0, 2)):
                props[name] = rng.choice(["v", "", "3", "0", "abc\x02d", "19"])
            d["properties"] = props
        if rng.random() < 0.02:
            d["propertiesString"] = "TAGS\x01Tv\x02KEYS\x01kv\x02"
            d.pop("tags", None), d.pop("keys", None), d.pop("properties", None)
        out.append(d)
    return out


@pytest.mark.parametrize("engine,crc", [("4.9.7", False), ("5.1.4", False), ("5.3.3", True)])
def test_randomized_fast_equals_per_message(tmp_path, engine, crc):
    seed = random.randrange(1 << 30)
    print(f"seed={seed}")
    rng = random.Random(seed)
    dicts = _random_dicts(rng, 1500)
    config = StoreConfig().with_overrides({
        "engineVersion": engine, "mappedFileSizeCommitLog": str(rng.choice([32768, 65536])),
        "mappedFileSizeConsumeQueue": "600", "maxHashSlotNum": "64", "maxIndexNum": str(rng.choice([50, 333])),
        "enabledAppendPropCRC": str(crc).lower()})
    msgs = [MessageExtBrokerInner.from_json_dict(d) for d in dicts]
    slow_root, fast_root, arrow_root = tmp_path / "slow", tmp_path / "fast", tmp_path / "arrow"
    clock = lambda: 1_700_000_500_000      # noqa: E731
    with MessageStoreWriter(slow_root, config, clock_ms=clock) as w:
        expected = []
        for k in range(0, len(msgs), 400):
            expected += w.put_messages(msgs[k:k + 400])
    lines = [json.dumps(d).encode() + b"\n" for d in dicts]
    with MessageStoreWriter(fast_root, config, clock_ms=clock) as w:
        got = []
        for k in range(0, len(lines), 400):
            got += list(w.put_json_lines(b"".join(lines[k:k + 400])))
    assert [r.to_json_dict() for r in got] == [r.to_json_dict() for r in expected], f"seed={seed}"
    assert [r.reason for r in got] == [r.reason for r in expected], f"seed={seed}"
    _same_store(slow_root, fast_root)
    with MessageStoreWriter(arrow_root, config, clock_ms=clock) as w:
        t = _arrow_table(dicts)
        got2 = []
        for k in range(0, len(dicts), 400):
            got2 += list(w.put_arrow_batch(t.slice(k, 400)))
    assert [r.to_json_dict() for r in got2] == [r.to_json_dict() for r in expected], f"seed={seed}"
    _same_store(slow_root, arrow_root)


def test_put_jsonl_rendering_matches_per_row(tmp_path):
    rng = random.Random(5)
    dicts = [d for d in _random_dicts(rng, 300)]
    data = b"".join(json.dumps(d).encode() + b"\n" for d in dicts)
    with MessageStoreWriter(tmp_path / "s", StoreConfig().with_overrides({"engineVersion": "5.3.3"})) as w:
        res = w.put_json_lines(data)
        text = res.to_put_jsonl(10).decode("utf-8").splitlines()
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    for i, line in enumerate(text):
        r = res[i]
        doc = {"i": 10 + i}
        doc.update(r.to_json_dict())
        doc["tagsCode"], doc["propertiesString"] = res.input_view(i)
        if r.reason:
            doc["reason"] = r.reason
        assert line == dumps(doc)


# ---------------------------------------------------------------- vectorized helpers

def test_java_hashes_match_scalar():
    from rmqsource.format import batch_encode as be
    from rmqsource.format.javahash import java_string_hash
    rng = random.Random(11)
    alphabet = "abcXYZ019 #-_\u00e9\u4e2d\U0001F600\x01"
    old_block = be._POW_BLOCK
    try:
        for block in (old_block, 16):            # 16: rows spread over many cumulative passes
            be._POW_BLOCK = block
            for _ in range(200):
                n = rng.randint(0, 40)
                if rng.random() < 0.3:           # one width: the column-wise path
                    w = rng.randint(0, 70)
                    vals = ["".join(rng.choice("abc019") for _ in range(w)) for _ in range(n)]
                else:
                    vals = [None if rng.random() < 0.1 else
                            "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(n)]
                arr = pa.array(vals, pa.string())
                if n > 3 and rng.random() < 0.3:
                    arr, vals = arr.slice(1, n - 2), vals[1:n - 1]
                h, ln = be.java_hashes(arr)
                assert h.tolist() == [0 if v is None else java_string_hash(v) & 0xFFFFFFFF for v in vals]
                assert ln.tolist() == [0 if v is None else len(v.encode("utf-16-le", "surrogatepass")) // 2
                                       for v in vals]
    finally:
        be._POW_BLOCK = old_block


def test_chunked_table_and_lazy_concat(tmp_path):
    """A Table of many chunks (cut at chunk boundaries, results merged lazily) writes the same
    store and the same put.jsonl as row slices of it."""
    rng = random.Random(3)
    dicts = _random_dicts(rng, 900)
    t = _arrow_table(dicts)
    chunked = pa.Table.from_batches([b for k in range(0, 900, 70) for b in t.slice(k, 70).to_batches()])
    config = StoreConfig().with_overrides({"engineVersion": "5.3.3", "maxHashSlotNum": "64",
                                           "maxIndexNum": "333", "mappedFileSizeCommitLog": "65536"})
    clock = lambda: 1_700_000_500_000      # noqa: E731
    old = MessageStoreWriter._ARROW_CHUNK_ROWS
    MessageStoreWriter._ARROW_CHUNK_ROWS = 256
    try:
        with MessageStoreWriter(tmp_path / "a", config, clock_ms=clock) as w:
            ra = w.put_arrow_batch(chunked)
            ja = ra.to_put_jsonl(7)
            assert ra.ok_count == int(ra.ok_mask.sum())          # lazy merge of the columns
        with MessageStoreWriter(tmp_path / "b", config, clock_ms=clock) as w:
            rb = [w.put_arrow_batch(t.slice(k, 256)) for k in range(0, 900, 256)]
            jb, base = b"", 7
            for r in rb:
                jb += r.to_put_jsonl(base)
                base += len(r)
    finally:
        MessageStoreWriter._ARROW_CHUNK_ROWS = old
    assert ja == jb
    assert [r.to_json_dict() for r in ra] == [x.to_json_dict() for r in rb for x in r]
    assert ja == ra.to_put_jsonl(7)                                # after the merge, same text
    _same_store(tmp_path / "a", tmp_path / "b")
