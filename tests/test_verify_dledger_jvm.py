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
