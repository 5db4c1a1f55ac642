"""``rmq view`` of an id that names no message: the "not found" reason says what is true.

* An offset msgId whose store host is one this store's records carry, at an offset where no record
  starts (a DLedger entry start, a position inside a record): the answer names the offset and says
  the store host matches (no "another broker's store").
* A producer's msgId (UNIQ_KEY) from an IPv6 client is 56 hex digits like an IPv6 offset msgId: when
  no message has it, that comes first.
* A msgId of another broker: every store host the store holds is named, not one sample record's.

Corpora are read in place: ../shared/golden*, ../shared/golden-dledger/* and ../shared/golden-broker/*
(``RMQ_GOLDEN_ROOT`` / ``RMQ_GOLDEN_DLEDGER_ROOT`` / ``RMQ_GOLDEN_BROKER_ROOT`` point elsewhere).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from rmqsource import cli
from rmqsource.format.msgid import create_offset_msg_id, decode_offset_msg_id, parse_host
from rmqsource.format.record import Kind

from golden import GOLDEN_BROKER_ROOT, default_layout_corpora, dledger_corpora, load_config

pytestmark = pytest.mark.golden

BROKER_ROOT = GOLDEN_BROKER_ROOT


def _list(fn) -> list[Path]:
    try:
        return fn()
    except FileNotFoundError:
        return []


DLEDGER = _list(dledger_corpora)
DEFAULT = _list(default_layout_corpora)


def _broker_runs() -> list:
    """Broker-written runs (one keeps its ConsumeQueues in RocksDB: read from a copy, see ``_store_of``)."""
    if not BROKER_ROOT.is_dir():
        return []
    return [pytest.param(p, id=p.name) for p in sorted(BROKER_ROOT.iterdir())
            if (p / "store").is_dir() and (p / "broker.properties").is_file()]


def _store_of(run_dir: Path, tmp_path: Path) -> Path:
    """The run's store; a copy when its ConsumeQueues are a RocksDB database (never opened in place)."""
    store = run_dir / "store"
    if not (store / "consumequeue" / "CURRENT").is_file():
        return store
    import shutil
    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    return copy


BROKER = _broker_runs()


def run(argv) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main([str(a) for a in argv], stdout=out)
    return code, out.getvalue()


def store_hosts(store: Path, config) -> set[str]:
    """Every storeHost of the records of a store (a full walk, independent of the CLI's)."""
    from rmqsource.store.reader import MessageStoreReader
    with MessageStoreReader(store, config) as r:
        return {s.decoded.record.store_host
                for s in r.commitlog.walk(r.commitlog.min_offset, stop_offset=r.commit_log_max_offset)
                if s.decoded.kind is Kind.MESSAGE}


def dledger_entry_starts(corpus: Path, n: int) -> list[tuple[int, str]]:
    """(entry start offset, storeHost of its record) of the first ``n`` DLedger entries."""
    from rmqsource.format.dledger import EntryKind
    from rmqsource.store.reader import MessageStoreReader
    out = []
    with MessageStoreReader(corpus / "store", load_config(corpus)) as r:
        cl = r.commitlog
        first = next(i for i, s in enumerate(cl.segments) if s.dledger)
        for step in cl.dledger_entries(first):
            if step.kind is not EntryKind.ENTRY or len(out) == n:
                break
            found = r.message_at(step.entry_offset + 48)
            assert found is not None, f"no record after the DLedger entry header at {step.entry_offset}"
            out.append((step.entry_offset, found.record.store_host))
    return out


@pytest.mark.skipif(not DLEDGER, reason="no DLedger corpus under ../shared/golden-dledger")
@pytest.mark.parametrize("corpus", DLEDGER, ids=lambda c: c.name)
def test_msgid_at_a_dledger_entry_start_says_no_record_starts_there(corpus, capsys):
    entries = dledger_entry_starts(corpus, 8)
    assert entries
    hosts = store_hosts(corpus / "store", load_config(corpus))
    # the store holds more than one store host: a single sample cannot stand for all of them
    assert len(hosts) > 1
    for entry, host in entries:
        addr, port = parse_host(host)
        mid = create_offset_msg_id(addr, port, entry)
        code, out = run(["view", "--config", corpus / "store.properties", corpus / "store", mid])
        assert code == 3, out
        assert "another broker" not in out, out
        assert f"no record starts at CommitLog offset {entry}" in out, out
        assert host in out, out                                   # the store host that does match
        assert f"its record is at {entry + 48}" in out, out       # where the message is
        # --json: the engine-shaped answer on stdout, the same reason on stderr
        code, out = run(["view", "--json", "--config", corpus / "store.properties", corpus / "store", mid])
        assert code == 3 and json.loads(out)["found"] is False
        err = capsys.readouterr().err
        assert f"no record starts at CommitLog offset {entry}" in err and "another broker" not in err


@pytest.mark.skipif(not DEFAULT, reason="no golden corpus under ../shared/golden")
@pytest.mark.parametrize("corpus", DEFAULT, ids=lambda c: c.name)
def test_msgid_inside_a_record_of_a_host_the_store_holds(corpus):
    config = load_config(corpus)
    hosts = store_hosts(corpus / "store", config)
    from rmqsource.store.reader import MessageStoreReader
    with MessageStoreReader(corpus / "store", config) as r:
        steps = [s for s in r.commitlog.walk(r.commitlog.min_offset, stop_offset=r.commit_log_max_offset)
                 if s.decoded.kind is Kind.MESSAGE][:40]
    for host in sorted(hosts):
        # 8 bytes into a record of this host: inside the CommitLog, no record start
        step = next((s for s in steps if s.decoded.record.store_host == host), steps[0])
        offset = step.phy_offset + 8
        addr, port = parse_host(host)
        code, out = run(["view", "--config", corpus / "store.properties", corpus / "store",
                         create_offset_msg_id(addr, port, offset)])
        assert code == 3, out
        assert "another broker" not in out, out
        assert f"no record starts at CommitLog offset {offset}" in out and host in out, out


@pytest.mark.skipif(not (DEFAULT or DLEDGER), reason="no golden corpus")
@pytest.mark.parametrize("corpus", (DEFAULT + DLEDGER)[:1] + DLEDGER[:1], ids=lambda c: c.name)
def test_msgid_of_another_broker_names_every_store_host(corpus):
    hosts = store_hosts(corpus / "store", load_config(corpus))
    mid = "0B00000700002A9F00000000FFFFFFFF"           # 11.0.0.7:10911, no record there
    assert decode_offset_msg_id(mid).store_host not in hosts
    code, out = run(["view", "--config", corpus / "store.properties", corpus / "store", mid])
    assert code == 3
    assert out.startswith(f"not found: no message has {mid} as UNIQ_KEY"), out
    assert "names store host 11.0.0.7:10911" in out and "another broker's store" in out, out
    for host in hosts:
        assert host in out, (host, out)


def _rejected_uniq_keys(run_dir: Path) -> list[str]:
    """UNIQ_KEYs of sends the broker refused (never stored), 56 hex digits (IPv6 client)."""
    keys = []
    with open(run_dir / "expected" / "sent.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d.get("record") == "send" and d.get("error") and len(d.get("uniqKey") or "") == 56:
                keys.append(d["uniqKey"])
    return keys


@pytest.mark.skipif(not BROKER, reason=f"no broker-written store under {BROKER_ROOT}")
@pytest.mark.parametrize("run_dir", BROKER)
def test_ipv6_client_uniq_key_not_found_says_so_first(run_dir, capsys, tmp_path):
    keys = _rejected_uniq_keys(run_dir)
    if not keys:
        pytest.skip("no refused send with a 56-digit UNIQ_KEY in expected/sent.jsonl")
    conf = run_dir / "broker.properties"
    store = _store_of(run_dir, tmp_path)
    for key in keys[:3]:
        code, out = run(["view", "--config", conf, store, key])
        assert code == 3, out
        assert out.startswith(f"not found: no message has {key} as UNIQ_KEY"), out
        assert "belongs to another broker's store" not in out, out
        port = decode_offset_msg_id(key).store_port
        if not 0 <= port <= 0xFFFF:
            assert f"port {port}, which is no TCP port" in out, out
        code, out = run(["view", "--json", "--config", conf, store, key])
        assert code == 3 and json.loads(out)["found"] is False
        assert f"not found: no message has {key} as UNIQ_KEY" in capsys.readouterr().err
    # a UNIQ_KEY the broker did store is still found by the same lookup
    with open(run_dir / "expected" / "sent.jsonl", encoding="utf-8") as f:
        stored = next(d for d in map(json.loads, f) if d.get("record") == "send" and d.get("result")
                      and d.get("uniqKey") and d["kind"] in ("normal", "plain"))
    code, out = run(["view", "--config", conf, store, stored["uniqKey"]])
    assert code == 0 and f"UNIQ_KEY {stored['uniqKey']}: offset msgId" in out, out
