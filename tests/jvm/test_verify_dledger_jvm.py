"""``rmq verify``'s JVM walk on DLedger stores, judged by the real engine's recovery of each crash case.

The walk runs through its entry point (VerifyMain) directly; tests/test_verify.py runs both walks through
the verify API.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from golden import case_id, corpora, corpus_of, crash_cases, is_dledger, load_config
from rmqsource.commands.verify_jvm import jvm_command

pytestmark = [pytest.mark.golden, pytest.mark.crash]

DLEDGER_CASE_PROBLEMS = {
    # case -> the dledger / commitlog problems the walk lists: (area, check, file, offset, found)
    "store": [],
    "no_dledger_checkpoint": [("dledger", "checkpoint", "dledger-n0/checkpoint", None, None)],   # a warning
    "uncommitted_tail": [],                 # committedIndex below the data's end: the leader re-commits it
    "no_consumequeue": [],
    "torn_tail": [("commitlog", "record-fields", "dledger-n0/data/00000000000001048576", 132204, "CORRUPT")],
    "torn_header": [("dledger", "entry-header", "dledger-n0/data/00000000000001048576", 132156, "size"),
                    ("dledger", "checkpoint", "dledger-n0/checkpoint", None, "749"),
                    ("dledger", "checkpoint", "dledger-n0/checkpoint", None, "749")],
    "garbage_tail": [("dledger", "entry-header", "dledger-n0/data/00000000000001048576", 131277, "magic"),
                     ("dledger", "checkpoint", "dledger-n0/checkpoint", None, "749"),
                     ("dledger", "checkpoint", "dledger-n0/checkpoint", None, "749")],
    "cq_ahead": [("dledger", "entry-header", "dledger-n0/data/00000000000001048576", 128411, "pos"),
                 ("dledger", "checkpoint", "dledger-n0/checkpoint", None, "749"),
                 ("dledger", "checkpoint", "dledger-n0/checkpoint", None, "749")],
    "no_dledger_index": [("dledger", "index-missing", "dledger-n0/index", None, "0")],
}


def dledger_stores() -> list[Path]:
    return [c / "store" for c in corpora() if is_dledger(c)] + [c / "store" for c in crash_cases() if is_dledger(c)]


@pytest.mark.skipif(jvm_command() is None, reason="the JVM walk needs the rmq jar and java")
@pytest.mark.parametrize("store", dledger_stores(), ids=lambda p: case_id(p.parent))
def test_jvm_walk_of_a_dledger_store_ends_where_the_engine_recovered(store):
    """The JVM walk's valid end is the engine's commitLogMaxOffset after recovery, and it names each damage
    of the DLedger crash cases at its data file and entry (entry header, torn record, index, checkpoint)."""
    case = store.parent
    corpus = case if (case / "inputs.jsonl").is_file() else corpus_of(case)
    config = load_config(corpus)
    args = [str(store), "", str(config.max_hash_slot_num), str(config.max_index_num),
            ",".join(str(ms) for ms in config.message_delay_levels_ms), "", "true", ""]
    proc = subprocess.run(jvm_command() + args, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    found = [(p["area"], p["check"], p["file"], p["offset"], p["found"]) for p in (m["problem"] for m in lines
             if "problem" in m) if p["area"] in ("dledger", "commitlog")]
    assert found == DLEDGER_CASE_PROBLEMS["store" if case == corpus else case.name]
    stats = lines[-1]["stats"]
    if case == corpus:
        recovered = json.loads((corpus / "expected" / "recover.json").read_text())["summary"]["confirmOffset"]
    else:
        recovered = json.loads((case / "case.json").read_text())["checks"]["commitLogMaxOffset"]
    assert stats["commitLogEnd"] == recovered


def _set_checkpoint_past_int64(store: Path) -> None:
    (store / "dledger-n0" / "checkpoint").write_text("committedIndex=99999999999999999999\nendIndex=749\n")


def _unknown_record_magic(store: Path) -> None:
    data = store / "dledger-n0" / "data" / "00000000000000786432"
    raw = bytearray(data.read_bytes())
    raw[48 + 4:48 + 8] = (90).to_bytes(4, "big")          # the magic of the file's first record
    data.write_bytes(bytes(raw))


def _short_middle_data_file(store: Path) -> None:
    data = store / "dledger-n0" / "data" / "00000000000000786432"
    data.write_bytes(data.read_bytes()[:20])


def _record_size_zero_and_a_cut_queue(store: Path) -> None:
    data = store / "dledger-n0" / "data" / "00000000000000524288"
    raw = bytearray(data.read_bytes())
    raw[35387:35391] = bytes(4)                               # the totalSize of a record inside its entry
    data.write_bytes(bytes(raw))
    cq = store / "consumequeue" / "OrderTopic" / "0" / "00000000000000001200"
    cq.write_bytes(cq.read_bytes()[:1188])                    # a unit cut: garbage after the last whole one


def _stray_index_file(store: Path) -> None:
    (store / "dledger-n0" / "index" / "00000000000000000020").write_bytes(bytes(range(100)))


@pytest.mark.skipif(jvm_command() is None, reason="the JVM walk needs the rmq jar and java")
@pytest.mark.parametrize("damage", [_set_checkpoint_past_int64, _unknown_record_magic, _short_middle_data_file,
                                    _record_size_zero_and_a_cut_queue, _stray_index_file],
                         ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("corpus", [c for c in corpora() if is_dledger(c)], ids=case_id)
def test_both_walks_list_the_same_problems_of_a_damaged_dledger_store(corpus, damage, tmp_path):
    """Damage the differential fuzz tier found the two walks reading apart: each walk lists the same problems,
    in the same order, and at least one of them names the damage."""
    from fuzz_stores import verify_both_walks
    from golden import copy_store
    from rmqsource.store.verify import verify_store
    store = copy_store(corpus / "store", tmp_path / "store")
    damage(store)
    config = load_config(corpus)
    verify_both_walks(store, config)
    problems = [(p.area, p.check, p.file) for p in verify_store(store, config).problems]
    touched = {"set_checkpoint_past_int64": ("dledger", "checkpoint", "dledger-n0/checkpoint"),
               "unknown_record_magic": ("commitlog", "record-fields", "dledger-n0/data/00000000000000786432"),
               "short_middle_data_file": ("dledger", "entry-header", "dledger-n0/data/00000000000000786432"),
               "record_size_zero_and_a_cut_queue": ("commitlog", "record-length",
                                                    "dledger-n0/data/00000000000000524288"),
               "stray_index_file": ("dledger", "index-missing", "dledger-n0/index")}[damage.__name__.strip("_")]
    assert touched in problems, problems
