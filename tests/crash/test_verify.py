"""``rmq verify`` (fsck) and ``rmq recover --dry-run`` on copies of the golden stores.

Damage is made by hand at a known file and offset, and verify must name
exactly that file and offset; every clean golden store must pass.  Each check
runs with both walks (``--engine python`` and, with the jar, ``--engine jvm``),
and the two must report the same problems, problem for problem.  The
dry-run change list is checked against the bytes the real recovery changes.
"""

from __future__ import annotations

import io
import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest

from rmqsource import cli
from rmqsource.format.consumequeue import CQ_UNIT_DTYPE, CQ_UNIT_SIZE
from rmqsource.format.indexfile import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, IndexHeader
from rmqsource.format.record import decode_record
from rmqsource.io.lock import StoreLock
from rmqsource.store.reader import MessageStoreReader
from rmqsource.store.recovery import recover_store
from rmqsource.store.recovery_plan import plan_recovery
from rmqsource.commands.verify_jvm import jvm_command, verify_store_jvm
from rmqsource.store.verify import verify_store

from fuzz_stores import verify_facts
from golden import (case_id, copy_store, corpora, corpus_of, crash_cases, is_dledger, load_config, read_jsonl,
                    tree_bytes, writable)

pytestmark = [pytest.mark.golden, pytest.mark.crash]

CORPORA = corpora()
CRASH = crash_cases()
# Retention states, not damage: a deleted first segment, ConsumeQueues rebuilt with pre-blank units; DLedger
# states the engine serves in full without repair: a missing DLedger checkpoint (a warning), a checkpoint whose
# committedIndex lags entries the leader re-commits.
CLEAN_CRASH_STATES = [c for c in CRASH if c.name in ("deleted_first_segment", "preblank_cq")
                      or (is_dledger(c) and c.name in ("no_dledger_checkpoint", "uncommitted_tail"))]
# The problems each damaged DLedger crash case must show (DLedger recovery stops at the first bad header).
DLEDGER_CRASH_CHECKS = {"torn_tail": {"record-fields"}, "torn_header": {"entry-header", "checkpoint"},
                        "garbage_tail": {"entry-header", "checkpoint"}, "cq_ahead": {"entry-header", "checkpoint"},
                        "no_dledger_index": {"index-missing"}, "no_consumequeue": {"cq-missing-unit"}}


ENGINES = ["python", pytest.param("jvm", marks=pytest.mark.skipif(
    jvm_command() is None, reason="the JVM walk needs the rmq jar and java"))]


@pytest.fixture(params=ENGINES)
def engine(request) -> str:
    return request.param


def walk(engine: str):
    return verify_store_jvm if engine == "jvm" else verify_store


def run(argv) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main([str(a) for a in argv], stdout=out)
    return code, out.getvalue()


def problems(report, check):
    return [(p.file, p.offset) for p in report.problems if p.check == check]


def first_message_with_body(corpus: Path) -> dict:
    for line in read_jsonl(corpus / "expected" / "get" / "TopicTest" / "0.jsonl")[:-1]:
        if line["body"]:
            return line
    raise AssertionError("no message with a body")


def segment_of(store: Path, phy: int) -> tuple[Path, int]:
    segs = sorted((store / "commitlog").iterdir())
    seg = [s for s in segs if int(s.name) <= phy][-1]
    return seg, phy - int(seg.name)


@pytest.mark.parametrize("store", [c / "store" for c in CORPORA] + [c / "store" for c in CLEAN_CRASH_STATES],
                         ids=lambda p: case_id(p.parent) if p.parent.parent.name != "crash" else case_id(p.parent))
def test_clean_golden_stores_pass(store, engine):
    corpus = store.parent if (store.parent / "inputs.jsonl").is_file() else corpus_of(store.parent)
    report = walk(engine)(store, load_config(corpus))
    assert report.ok, [p.text() for p in report.problems]
    assert report.stats["records"] > 0
    assert report.stats["cqUnits"] > 0 and report.stats["indexEntries"] > 0
    code, text = run(["verify", store, "--config", corpus / "store.properties", "--engine", engine])
    assert code == 0 and "OK: 0 error(s)" in text and f"{engine} walk" in text


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_flipped_body_byte_is_found_at_its_record(corpus, tmp_path, engine):
    store = copy_store(corpus / "store", tmp_path / "store")
    want = first_message_with_body(corpus)
    seg, pos = segment_of(store, want["commitLogOffset"])
    data = bytearray(seg.read_bytes())
    record = decode_record(data, pos, len(data)).record
    body_at = pos + bytes(data[pos:pos + record.store_size]).find(record.body)
    data[body_at] ^= 0x20
    seg.write_bytes(bytes(data))
    report = walk(engine)(store, load_config(corpus))
    assert not report.ok
    assert problems(report, "body-crc") == [(f"commitlog/{seg.name}", pos)]
    if record.properties.get("__CRC32#") is not None:          # 5.x: the whole-record CRC fails too
        assert problems(report, "record-crc") == [(f"commitlog/{seg.name}", pos)]
    code, text = run(["verify", store, "--config", corpus / "store.properties", "--json", "--engine", engine])
    assert code == 1
    lines = [json.loads(x) for x in text.splitlines()]
    assert lines[-1]["engine"] == engine
    assert {"check": "body-crc", "file": f"commitlog/{seg.name}", "offset": pos}.items() <= lines[0].items()
    assert lines[-1]["ok"] is False and lines[-1]["byCheck"]["body-crc"] == 1


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_bad_consumequeue_unit_is_found(corpus, tmp_path, engine):
    store = copy_store(corpus / "store", tmp_path / "store")
    cq_file = sorted((store / "consumequeue" / "TopicTest" / "0").iterdir())[0]
    units = bytearray(cq_file.read_bytes())
    k = 3
    u = np.frombuffer(bytes(units[k * CQ_UNIT_SIZE:(k + 1) * CQ_UNIT_SIZE]), dtype=CQ_UNIT_DTYPE)[0]
    struct.pack_into(">q", units, k * CQ_UNIT_SIZE + 12, int(u["tags_code"]) + 1)      # tagsCode off by one
    struct.pack_into(">i", units, (k + 1) * CQ_UNIT_SIZE + 8, 17)                       # next unit: wrong size
    cq_file.write_bytes(bytes(units))
    report = walk(engine)(store, load_config(corpus))
    rel = f"consumequeue/TopicTest/0/{cq_file.name}"
    assert problems(report, "cq-tagscode") == [(rel, k * CQ_UNIT_SIZE)]
    assert problems(report, "cq-size") == [(rel, (k + 1) * CQ_UNIT_SIZE)]
    assert not report.ok


def zero_last_unit(store: Path, config, last_of_all: bool) -> tuple[str, int]:
    """Zeroes the last unit of the queue holding the CommitLog's last dispatched record (``last_of_all``) or of
    a queue whose last record comes before another queue's; returns (queue folder, the record's offset)."""
    with MessageStoreReader(store, config) as reader:
        lasts = []
        for t, qid in reader.queue_keys():
            q = reader.consume_queue(t, qid)
            mx = reader.queue_max_offset(q)
            if mx > reader.queue_min_offset(q, mx):
                lasts.append((int(q.unit_at(mx - 1)[0]), t, qid, mx - 1))
    lasts.sort()
    phy, topic, qid, unit = lasts[-1] if last_of_all else lasts[0]
    per_file = config.consume_queue_units_per_file
    folder = store / "consumequeue" / topic / str(qid)
    cq_file = folder / f"{unit // per_file * per_file * CQ_UNIT_SIZE:020d}"
    with open(cq_file, "r+b") as f:
        f.seek(unit % per_file * CQ_UNIT_SIZE)
        f.write(bytes(CQ_UNIT_SIZE))
    return f"consumequeue/{topic}/{qid}", phy


@pytest.mark.parametrize("corpus", [c for c in CORPORA if not is_dledger(c)][:1], ids=case_id)
def test_an_undispatched_tail_after_an_unclean_shutdown_is_a_warning(corpus, tmp_path, engine):
    """A broker killed between appending a record and dispatching it leaves the CommitLog's tail without units;
    it dispatches in CommitLog order and its recovery finishes the tail. With the abort file that is a warning;
    without it, or for a record before the last dispatched one, a missing unit stays an error."""
    config = load_config(corpus)
    store = copy_store(corpus / "store", tmp_path / "tail")
    queue, phy = zero_last_unit(store, config, last_of_all=True)
    report = walk(engine)(store, config)
    assert problems(report, "cq-missing-unit") == [(queue, None)] and not report.ok
    (store / "abort").write_bytes(b"")
    report = walk(engine)(store, config)
    assert report.ok, [p.text() for p in report.problems]
    assert problems(report, "cq-undispatched") == [(queue, None)] and problems(report, "cq-missing-unit") == []
    assert f"first at CommitLog offset {phy}" in next(p.message for p in report.problems if p.check == "cq-undispatched")
    middle = copy_store(corpus / "store", tmp_path / "middle")
    (middle / "abort").write_bytes(b"")
    queue, _ = zero_last_unit(middle, config, last_of_all=False)
    report = walk(engine)(middle, config)
    assert problems(report, "cq-missing-unit") == [(queue, None)] and not report.ok


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_broken_index_chain_is_found(corpus, tmp_path, engine):
    store = copy_store(corpus / "store", tmp_path / "store")
    config = load_config(corpus)
    index_file = sorted((store / "index").iterdir())[0]
    data = bytearray(index_file.read_bytes())
    header = IndexHeader.decode(data)
    base = INDEX_HEADER_SIZE + config.max_hash_slot_num * 4
    entry = header.index_count // 2
    pos = base + entry * INDEX_ENTRY_SIZE + 16                  # the previous-entry pointer
    struct.pack_into(">i", data, pos, entry + 5)                 # points forward: a walk could loop
    index_file.write_bytes(bytes(data))
    report = walk(engine)(store, config)
    assert (f"index/{index_file.name}", base + entry * INDEX_ENTRY_SIZE) in problems(report, "index-chain")
    assert not report.ok


def test_chain_into_another_slot_is_found(tmp_path, engine):
    corpus = CORPORA[0]
    store = copy_store(corpus / "store", tmp_path / "store")
    config = load_config(corpus)
    index_file = sorted((store / "index").iterdir())[0]
    data = bytearray(index_file.read_bytes())
    base = INDEX_HEADER_SIZE + config.max_hash_slot_num * 4
    count = IndexHeader.decode(data).index_count
    entries = np.frombuffer(bytes(data[base:base + count * INDEX_ENTRY_SIZE]),
                            dtype=[("hash", ">i4"), ("phy", ">i8"), ("diff", ">i4"), ("prev", ">i4")])
    slots = entries["hash"].astype(np.int64) % config.max_hash_slot_num
    e = next(i for i in range(2, count) if entries["prev"][i] > 0)
    other = next(i for i in range(1, e) if slots[i] != slots[e])
    struct.pack_into(">i", data, base + e * INDEX_ENTRY_SIZE + 16, other)
    index_file.write_bytes(bytes(data))
    report = walk(engine)(store, config)
    assert (f"index/{index_file.name}", base + e * INDEX_ENTRY_SIZE) in problems(report, "index-chain")


@pytest.mark.parametrize("case", [c for c in CRASH if c not in CLEAN_CRASH_STATES], ids=case_id)
def test_damaged_crash_cases_fail(case, engine):
    report = walk(engine)(case / "store", load_config(corpus_of(case)))
    assert not report.ok
    checks = set(report.summary_json()["byCheck"])
    if is_dledger(case):
        assert DLEDGER_CRASH_CHECKS[case.name] <= checks, checks
    elif case.name == "no_consumequeue":
        assert checks == {"cq-missing-unit"}
    else:
        assert "unclean-shutdown" in checks
        assert checks & {"tail-garbage", "record-fields", "cq-past-end", "cq-target"}


def test_verify_arguments_and_quiet_output(tmp_path, capsys, engine):
    assert run(["verify"])[0] == 2
    assert run(["verify", CORPORA[0] / "store", "--engine", "rust"])[0] == 2
    assert run(["verify", tmp_path, "--engine", engine])[0] == 1                     # not a store
    capsys.readouterr()
    code, text = run(["verify", CORPORA[0] / "store", "--config", CORPORA[0] / "store.properties", "--engine", engine])
    assert code == 0
    assert capsys.readouterr().err == ""                         # no progress bar when not on a terminal


def _damaged_copies(tmp_path) -> list:
    """(name, store, corpus): golden stores with hand-made damage of every area verify checks."""
    out = []
    for corpus in CORPORA:
        name = case_id(corpus)
        store = copy_store(corpus / "store", tmp_path / f"{name}-body")
        want = first_message_with_body(corpus)
        seg, pos = segment_of(store, want["commitLogOffset"])
        data = bytearray(seg.read_bytes())
        data[pos + 120] ^= 0x20                                  # inside the first record with a body
        struct.pack_into(">q", data, pos + 28, 12345)            # PHYSICALOFFSET field
        seg.write_bytes(bytes(data))
        out.append((f"{name}-commitlog", store, corpus))
        store = copy_store(corpus / "store", tmp_path / f"{name}-cq")
        cq_file = sorted((store / "consumequeue" / "TopicTest" / "0").iterdir())[0]
        units = bytearray(cq_file.read_bytes())
        struct.pack_into(">q", units, 2 * CQ_UNIT_SIZE, 7)                      # a unit pointing nowhere
        struct.pack_into(">q", units, 5 * CQ_UNIT_SIZE, 1 << 40)                # a unit far ahead
        struct.pack_into(">i", units, 6 * CQ_UNIT_SIZE + 8, 17)                 # a wrong size
        cq_file.write_bytes(bytes(units))
        out.append((f"{name}-consumequeue", store, corpus))
        store = copy_store(corpus / "store", tmp_path / f"{name}-index")
        index_file = sorted((store / "index").iterdir())[0]
        data = bytearray(index_file.read_bytes())
        config = load_config(corpus)
        base = INDEX_HEADER_SIZE + config.max_hash_slot_num * 4
        count = IndexHeader.decode(data).index_count
        for e in range(1, count, 7):
            struct.pack_into(">i", data, base + e * INDEX_ENTRY_SIZE + 16, e + 3)       # forward chains
        struct.pack_into(">q", data, base + 2 * INDEX_ENTRY_SIZE + 4, 1 << 50)          # past the end
        index_file.write_bytes(bytes(data))
        out.append((f"{name}-index", store, corpus))
        for cut in (0, 50):                                      # last segment cut at, or inside, the last record
            store = copy_store(corpus / "store", tmp_path / f"{name}-cut{cut}")
            end = verify_store(store, load_config(corpus)).stats["commitLogEnd"]
            last = sorted((store / "commitlog").iterdir())[-1]
            os.truncate(last, end - int(last.name) - cut)
            out.append((f"{name}-cut{cut}", store, corpus))
    return out


@pytest.mark.skipif(jvm_command() is None, reason="the JVM walk needs the rmq jar and java")
def test_jvm_walk_reports_exactly_what_the_python_walk_reports(tmp_path):
    damaged = _damaged_copies(tmp_path)
    stores = [(case_id(c), c / "store", c) for c in CORPORA]
    stores += [(case_id(c), c / "store", corpus_of(c)) for c in CRASH]
    (tmp_path / "link").symlink_to(CRASH[0].parent.parent)     # a root reached through a symlink
    damaged.append(("through a symlink", tmp_path / "link" / "crash" / CRASH[0].name / "store", corpus_of(CRASH[0])))
    for name, store, corpus in stores + damaged:
        config = load_config(corpus)
        python, jvm = verify_store(store, config), verify_store_jvm(store, config)
        assert verify_facts(jvm) == verify_facts(python), name
        assert not any(p.file.startswith("/") for p in python.problems), name    # named relative to the root
        assert python.ok == ((name, store, corpus) in stores[:len(CORPORA)] or store.parent in CLEAN_CRASH_STATES), name


def test_last_segment_cut_at_a_record_end_ends_the_data(tmp_path, engine):
    """A last CommitLog file shorter than the segment size, cut between records: the data ends there, at once."""
    corpus = CORPORA[0]
    config = load_config(corpus)
    store = copy_store(corpus / "store", tmp_path / "store")
    end = verify_store(store, config).stats["commitLogEnd"]
    last = sorted((store / "commitlog").iterdir())[-1]
    os.truncate(last, end - int(last.name))
    report = walk(engine)(store, config)
    assert report.stats["commitLogEnd"] == end
    assert set(report.summary_json()["byCheck"]) == {"segment-size"}
    assert problems(report, "segment-size") == [(f"commitlog/{last.name}", 0)]


def test_a_preallocated_next_commitlog_file_is_not_a_later_segment(tmp_path, engine):
    """A broker creates its next CommitLog file before it is needed: all zeros after the file the records end in.
    The data ends where the records end, with nothing lost (RocketMQ's recovery deletes such a file); the same
    file with one byte of data in it is a later segment the data does not reach: an error."""
    corpus = CORPORA[0]
    config = load_config(corpus)
    store = copy_store(corpus / "store", tmp_path / "store")
    before = verify_store(store, config)
    end = before.stats["commitLogEnd"]
    segs = sorted((store / "commitlog").iterdir())
    seg_size = os.path.getsize(segs[0])
    nxt = store / "commitlog" / f"{int(segs[-1].name) + seg_size:020d}"
    with open(nxt, "wb") as f:
        f.truncate(seg_size)                    # sparse, as a broker's pre-allocated file is before warm-up
    report = walk(engine)(store, config)
    assert report.ok, [p.text() for p in report.problems]
    assert report.stats["commitLogEnd"] == end
    assert [p.check for p in report.problems] == [p.check for p in before.problems]
    with open(nxt, "r+b") as f:
        f.seek(seg_size // 2)
        f.write(b"\x01")
    report = walk(engine)(store, config)
    assert problems(report, "segment-end") == [(f"commitlog/{segs[-1].name}", end - int(segs[-1].name))]


def _copy_sparse(src: Path, dst: Path) -> None:
    """Copy a store writing only its non-zero pages: every zero page of every file becomes a hole."""
    page = 4096
    for path in src.rglob("*"):
        target = dst / path.relative_to(src)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        data = path.read_bytes()
        with open(target, "wb") as f:
            for at in range(0, len(data), page):
                chunk = data[at:at + page]
                if chunk.count(0) != len(chunk):
                    f.seek(at)
                    f.write(chunk)
            f.truncate(len(data))


def test_sparse_files_on_a_full_filesystem(small_tmpfs, engine):
    """Every zero page of the store is a hole and the tmpfs is full: touching a hole through a map would
    need a page the file system cannot give (SIGBUS, java.lang.InternalError in the JVM walk).  Both walks
    report what they report on the same store on an ordinary disk."""
    for corpus in CORPORA:
        config = load_config(corpus)
        expected = verify_facts(verify_store(corpus / "store", config))
        store = small_tmpfs / corpus.name
        _copy_sparse(corpus / "store", store)
        last = sorted((store / "commitlog").iterdir())[-1]
        assert os.stat(last).st_blocks * 512 < os.stat(last).st_size      # the tail really is a hole
        filler = small_tmpfs / "filler"
        with open(filler, "wb") as f:                                        # fill the file system up
            try:
                while True:
                    f.write(bytes(1 << 20))
            except OSError:
                pass
        try:
            with open(small_tmpfs / "probe", "wb") as f:
                with pytest.raises(OSError):
                    f.write(bytes(1 << 16))
                    f.flush()
            report = walk(engine)(store, config)
            assert verify_facts(report) == expected, corpus.name
            assert report.ok, corpus.name
        finally:
            filler.unlink()
            (small_tmpfs / "probe").unlink(missing_ok=True)


# --------------------------------------------------------------------------- recover --dry-run

def _expected_after(before: dict, plan, cq_file_size: int) -> tuple[dict, set, bool]:
    """Files after recovery as the plan describes them: (bytes by file, deleted, index files change)."""
    after = dict(before)
    deleted = set()
    index_changes = False
    for c in plan.changes:
        if c.file.startswith("index"):
            index_changes |= c.action in ("write", "create")
            if c.action == "delete":
                deleted.add(c.file)
            continue
        if c.action == "delete":
            deleted.add(c.file)
        elif c.action == "zero":
            data = bytearray(after[c.file].ljust(c.end, b"\0"))
            data[c.start:c.end] = bytes(c.end - c.start)
            after[c.file] = bytes(data)
        elif c.action in ("write", "create"):
            parts = Path(c.file).parts                  # consumequeue/topic/qid/file
            topic, qid, name = parts[1], int(parts[2]), parts[3]
            first, units = plan.cq_units[(topic, qid)]
            file_start_unit = int(name) // CQ_UNIT_SIZE
            data = bytearray(after[c.file] if c.file in after else bytes(cq_file_size))
            lo = file_start_unit + c.start // CQ_UNIT_SIZE
            hi = file_start_unit + c.end // CQ_UNIT_SIZE
            data[c.start:c.end] = units[lo - first:hi - first].tobytes()
            after[c.file] = bytes(data)
    for f in deleted:
        after.pop(f, None)
    return after, deleted, index_changes


@pytest.mark.parametrize("case", writable(CRASH))
def test_recover_dry_run_lists_exactly_what_recover_changes(case, tmp_path):
    config = load_config(corpus_of(case))
    store = copy_store(case / "store", tmp_path / "store")
    plan = plan_recovery(store, config)
    before = tree_bytes(store)
    with StoreLock(str(store)):
        recover_store(store, config, mark_clean=True)
    after = tree_bytes(store)
    after.pop("lock", None)
    want, deleted, index_changes = _expected_after(before, plan, config.mapped_file_size_consume_queue_bytes)
    index = lambda d: {k: v for k, v in d.items() if k.startswith("index/")}  # noqa: E731
    no_index = lambda d: {k: v for k, v in d.items() if not k.startswith("index/")}  # noqa: E731
    assert sorted(no_index(after)) == sorted(no_index(want))
    for f in no_index(after):
        assert after[f] == want[f], f
    assert set(index(before)) - set(index(after)) == {f for f in deleted if f.startswith("index/")}
    survivors = {f for f in index(before) if f in index(after)}
    index_changed = any(after[f] != before[f] for f in survivors) or bool(set(index(after)) - set(index(before)))
    assert index_changed == index_changes
    # The CLI shows the same list without touching the store.
    copy = copy_store(case / "store", tmp_path / "again")
    snapshot = tree_bytes(copy)
    code, text = run(["recover", "--dry-run", "--json", copy, "--config", corpus_of(case) / "store.properties"])
    assert code == 0
    assert json.loads(text)["plan"] == plan.to_json()
    assert tree_bytes(copy) == snapshot


def test_recover_dry_run_names_files_under_a_symlinked_root(tmp_path):
    """The change list names files relative to the root as given, whatever symlinks lead to it."""
    case = next(c for c in CRASH if c.name == "no_consumequeue")
    config = load_config(corpus_of(case))
    (tmp_path / "link").symlink_to(case)
    through_link = plan_recovery(tmp_path / "link" / "store", config)
    assert through_link.changes
    assert through_link.to_json()["changes"] == plan_recovery(case / "store", config).to_json()["changes"]


# ------------------------------------------------------------------ DLedger files

DLEDGER_CORPORA = [c for c in CORPORA if is_dledger(c)]


def dledger_entry_positions(data_file: Path) -> list[int]:
    """Entry positions of one DLedger data file (header chain: size at +4, blank magic -1, zeros end)."""
    data, pos, out = data_file.read_bytes(), 0, []
    while pos + 8 <= len(data):
        magic, size = struct.unpack_from(">ii", data, pos)
        if magic == -1 or (magic == 0 and size == 0):
            break
        out.append(pos)
        pos += size
    return out


@pytest.mark.parametrize("corpus", DLEDGER_CORPORA, ids=case_id)
@pytest.mark.parametrize("field, at, value", [("index", 8, 7), ("term", 16, -1), ("pos", 24, 0), ("magic", 0, 2)])
def test_dledger_entry_header_damage_is_found_where_recovery_stops(corpus, tmp_path, engine, field, at, value):
    """A header failing a recovery check ends the data there: entry-header names the file, entry and field;
    the ConsumeQueue units past it are past the end; the DLedger checkpoint is past the last valid entry."""
    store = copy_store(corpus / "store", tmp_path / "store")
    data_file = sorted((store / "dledger-n0" / "data").iterdir())[1]
    entry = dledger_entry_positions(data_file)[10]
    raw = bytearray(data_file.read_bytes())
    struct.pack_into(">q" if at >= 8 else ">i", raw, entry + at, value)
    data_file.write_bytes(bytes(raw))
    report = walk(engine)(store, load_config(corpus))
    rel = f"dledger-n0/data/{data_file.name}"
    header = [p for p in report.problems if p.check == "entry-header"]
    assert [(p.area, p.file, p.offset, p.found) for p in header] == [("dledger", rel, entry, field)]
    assert report.stats["commitLogEnd"] == int(data_file.name) + entry
    assert "cq-past-end" in report.summary_json()["byCheck"]
    assert problems(report, "checkpoint") == [("dledger-n0/checkpoint", None)] * 2


@pytest.mark.parametrize("corpus", DLEDGER_CORPORA, ids=case_id)
def test_dledger_index_entry_and_checkpoint_damage_is_found(corpus, tmp_path, engine):
    store = copy_store(corpus / "store", tmp_path / "store")
    index_file = sorted((store / "dledger-n0" / "index").iterdir())[1]
    raw = bytearray(index_file.read_bytes())
    k = 5
    struct.pack_into(">q", raw, k * 32 + 4, 12345)              # the pos of entry 256 + 5
    index_file.write_bytes(bytes(raw))
    (store / "dledger-n0" / "checkpoint").write_text("committedIndex=749\nendIndex=800\n")
    report = walk(engine)(store, load_config(corpus))
    assert [(p.area, p.file, p.offset, p.found) for p in report.problems if p.check == "index-entry"] == \
        [("dledger", f"dledger-n0/index/{index_file.name}", k * 32, "12345")]
    assert [(p.message.split(" is ")[0], p.found) for p in report.problems if p.check == "checkpoint"] == \
        [("DLedger checkpoint endIndex", "800")]
    assert report.stats["commitLogEnd"] == 1181362 and not report.ok
