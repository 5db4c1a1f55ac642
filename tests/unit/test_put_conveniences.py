"""``rmq put`` conveniences: segment sizes from an existing store's files, --body-encoding, and
``--from`` queue selection by the Spark sink's rule (one shared QueueChooser)."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rmqsource import cli
from rmqsource.format.javahash import java_string_hash
from rmqsource.store.config import StoreConfig
from rmqsource.store.file_sizes import fit_config_to_files

from golden import case_id, copy_store, corpora, read_jsonl, writable

pytestmark = pytest.mark.unit

MIB64 = 64 * 1024 * 1024


def run(argv, stdin: bytes | None = None) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main([str(a) for a in argv], stdout=out,
                    stdin=io.BytesIO(stdin) if stdin is not None else None)
    return code, out.getvalue()


def exported(store: Path, tmp_path: Path) -> list[dict]:
    out = tmp_path / "rows.parquet"
    code, text = run(["export", store, out])
    assert code == 0, text
    return pq.read_table(out).to_pylist()


def line(topic="T", queue_id=0, body=b"x", **extra) -> bytes:
    doc = {"topic": topic, "queueId": queue_id, "body": base64.b64encode(body).decode(), **extra}
    return (json.dumps(doc) + "\n").encode()


# --------------------------------------------------------------------------- segment sizes

def test_store_with_64mib_segments_takes_put_without_settings(tmp_path, capsys):
    store = tmp_path / "s"
    code, text = run(["put", store, "-C", f"mappedFileSizeCommitLog={MIB64}", "-C", "mappedFileSizeConsumeQueue=6000"],
                     line(body=b"first"))
    assert code == 0, text
    code, text = run(["put", store], line(body=b"second"))        # no -C: sizes from the files
    assert code == 0, text
    assert [p.stat().st_size for p in (store / "commitlog").iterdir()] == [MIB64]
    assert [p.stat().st_size for p in (store / "consumequeue" / "T" / "0").iterdir()] == [6000]
    assert [r["body"] for r in exported(store, tmp_path)] == [b"first", b"second"]
    # A given size that differs from the files is refused, naming the file; nothing is written.
    before = (store / "commitlog" / "00000000000000000000").read_bytes()
    code, _ = run(["put", store, "-C", "mappedFileSizeCommitLog=1073741824"], line(body=b"third"))
    err = capsys.readouterr().err
    assert code == cli.EXIT_USAGE
    assert "mappedFileSizeCommitLog is set to 1073741824" in err and "00000000000000000000 is 67108864 bytes" in err
    assert (store / "commitlog" / "00000000000000000000").read_bytes() == before


@pytest.mark.golden
@pytest.mark.parametrize("corpus", writable(corpora()))
def test_golden_copy_takes_put_with_only_the_index_geometry(corpus, tmp_path):
    """CommitLog (256 KiB) and ConsumeQueue (1200 B) sizes come from the files; IndexFile geometry
    (512 slots, 600 entries: not the 1:4 ratio a size can be read back from) is given."""
    store = copy_store(corpus / "store", tmp_path / "store")
    props = dict(ln.split("=", 1) for ln in (corpus / "store.properties").read_text().splitlines()
                 if "=" in ln and not ln.startswith("#"))
    args = ["-C", f"maxHashSlotNum={props['maxHashSlotNum']}", "-C", f"maxIndexNum={props['maxIndexNum']}",
            "-C", f"engineVersion={props['engineVersion']}"]
    first = read_jsonl(corpus / "inputs.jsonl")[0]
    code, text = run(["put", store, *args, "--json"], (json.dumps(first) + "\n").encode())
    assert code == 0, text
    assert json.loads(text.splitlines()[0])["status"] == "PUT_OK"
    sizes = {p.stat().st_size for p in (store / "commitlog").iterdir()}
    assert sizes == {int(props["mappedFileSizeCommitLog"])}
    cq_sizes = {p.stat().st_size for p in (store / "consumequeue").rglob("0000*")}
    assert cq_sizes == {int(props["mappedFileSizeConsumeQueue"])}
    code, text = run(["verify", store, "--config", corpus / "store.properties"])
    assert code == 0, text


def test_files_that_disagree_are_a_clear_error(tmp_path, capsys):
    store = tmp_path / "s"
    assert run(["put", store, "-C", "mappedFileSizeConsumeQueue=6000"], line() + line(topic="U"))[0] == 0
    odd = store / "consumequeue" / "U" / "0" / "00000000000000000000"
    odd.write_bytes(odd.read_bytes()[:4000])
    code, _ = run(["put", store], line())
    err = capsys.readouterr().err
    assert code == cli.EXIT_STORE_ERROR and "ConsumeQueue files differ in size" in err and str(odd) in err


def test_sink_options_take_sizes_from_the_files(tmp_path):
    pytest.importorskip("pyspark")
    from rmqsource.spark.sink import parse_sink_options
    store = tmp_path / "s"
    assert run(["put", store, "-C", f"mappedFileSizeCommitLog={MIB64}"], line())[0] == 0
    assert parse_sink_options({"path": str(store)}).config.mapped_file_size_commit_log_bytes == MIB64
    assert fit_config_to_files(StoreConfig(), tmp_path / "none") == StoreConfig()


# --------------------------------------------------------------------------- body encodings

def test_body_encodings_of_json_lines(tmp_path, capsys):
    store = tmp_path / "s"
    text_lines = b'{"topic":"T","queueId":0,"body":"h\xc3\xa9llo"}\n\n{"topic":"T","queueId":0,"body":""}\n'
    assert run(["put", store, "--body-encoding", "utf8"], text_lines)[0] == 0
    assert run(["put", store, "--body-encoding", "hex"], b'{"topic":"T","queueId":0,"body":"00ff10"}\n')[0] == 0
    assert run(["put", store, "--body-encoding", "base64"], line(body=b"b64"))[0] == 0
    assert [r["body"] for r in exported(store, tmp_path)] == ["héllo".encode(), b"", b"\x00\xff\x10", b"b64"]
    code, _ = run(["put", store, "--body-encoding", "hex"],
                  b'{"topic":"T","queueId":0,"body":"01"}\n{"topic":"T","queueId":0,"body":"zz"}\n')
    err = capsys.readouterr().err
    assert code == cli.EXIT_USAGE and "stdin line 2: body is not hex text" in err
    assert len(exported(store, tmp_path)) == 4                  # the bad block wrote nothing


def test_body_encoding_of_a_string_body_column(tmp_path):
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"topic": ["T", "T"], "queueId": [0, 0], "body": ["aGk=", None]}), src)
    store = tmp_path / "s"
    assert run(["put", store, "--from", src, "--body-encoding", "base64"])[0] == 0
    assert run(["put", store, "--from", src])[0] == 0            # a string column is UTF-8 by default
    assert [r["body"] for r in exported(store, tmp_path)] == [b"hi", b"", b"aGk=", b""]


# --------------------------------------------------------------------------- queue selection

def test_put_from_chooses_queues_like_the_sink(tmp_path):
    rows = {"topic": ["T"] * 12 + ["W"] * 3,
            "queueId": [2, None, None, None, None, None, None, None, None, None, None, None, None, None, 5],
            "keys": [None, "order-1", "order-2", "order-3", "order-4", "order-5", "order-6", None, None, None, None,
                     "a b", None, "k", None],
            "body": [b"%d" % i for i in range(15)]}
    src = tmp_path / "in.arrow"
    table = pa.table(rows)
    with pa.ipc.new_file(str(src), table.schema) as w:
        w.write_table(table)
    store = tmp_path / "s"
    (store / "config").mkdir(parents=True)
    (store / "config" / "topics.json").write_text('{"topicConfigTable":{"W":{"topicName":"W","writeQueueNums":8}}}')
    assert run(["put", store, "--from", src])[0] == 0
    got = {r["body"]: r["queueId"] for r in exported(store, tmp_path)}

    def by_hash(keys: str, n: int) -> int:           # Math.abs(keys.hashCode() % n), written out
        h = java_string_hash(keys)
        return abs(int(h - n * int(h / n)))

    want = []
    rr = {"T": 0, "W": 0}
    for i, (topic, qid, keys) in enumerate(zip(rows["topic"], rows["queueId"], rows["keys"])):
        n = 8 if topic == "W" else 4
        if qid is not None:
            want.append(qid)
        elif keys:
            want.append(by_hash(keys, n))
        else:
            want.append(rr[topic] % n)
            rr[topic] += 1
    assert [got[b"%d" % i] for i in range(15)] == want
    assert len({want[i] for i in range(1, 7)}) > 1           # keyed rows spread over queues
    pytest.importorskip("pyspark")
    from rmqsource.spark.sink import QueueChooser, parse_sink_options, table_from_batch
    sink = table_from_batch(table.to_batches()[0], QueueChooser(parse_sink_options({"path": str(store)}), seed=0))
    assert sink.column("queueId").to_pylist() == want
