"""Discovery of the real-engine corpora in ../shared/golden and ../shared/golden-dledger, read in place.

``RMQ_GOLDEN_ROOT`` points elsewhere (a checkout that is not beside ``shared/``); the DLedger corpora are
its sibling ``golden-dledger`` unless ``RMQ_GOLDEN_DLEDGER_ROOT`` says otherwise.  Default-layout corpora
come first (tests that take one corpus take ``corpora()[0]``), then the DLedger-mode ones.

Every folder holding an ``inputs.jsonl`` is a corpus; its crash cases are the
folders under ``crash/``.  New corpora are picked up without code changes.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from urllib.parse import unquote

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# Columns, options and error texts for both read paths; the JVM scan reads it from its jar.
CONTRACT_JSON = PROJECT_ROOT / "rmqsource" / "jvm" / "io" / "rmqsource" / "spark" / "contract.json"
GOLDEN_ROOT = Path(os.environ.get("RMQ_GOLDEN_ROOT") or PROJECT_ROOT.parent / "shared" / "golden")
DLEDGER_GOLDEN_ROOT = Path(os.environ.get("RMQ_GOLDEN_DLEDGER_ROOT") or GOLDEN_ROOT.parent / "golden-dledger")
GOLDEN_ROOTS = (GOLDEN_ROOT, DLEDGER_GOLDEN_ROOT)
# Stores written by a real broker and its clients, with what they answered (their README).
GOLDEN_BROKER_ROOT = Path(os.environ.get("RMQ_GOLDEN_BROKER_ROOT") or GOLDEN_ROOT.parent / "golden-broker")


def corpora() -> list[Path]:
    # A missing corpus folder is an error, never a quietly skipped tier.
    found = []
    for root in GOLDEN_ROOTS:
        if not root.is_dir():
            raise FileNotFoundError(f"golden corpora not found at {root}: ../shared/golden and "
                                    f"../shared/golden-dledger must sit beside the checkout (or set "
                                    f"RMQ_GOLDEN_ROOT / RMQ_GOLDEN_DLEDGER_ROOT)")
        found.extend(sorted(p for p in root.iterdir() if (p / "inputs.jsonl").is_file()))
    return found


def broker_corpora() -> list[Path]:
    """The runs of a real broker (``store/`` and ``broker.properties`` beside ``expected/``), by name; none
    when the folder is absent."""
    if not GOLDEN_BROKER_ROOT.is_dir():
        return []
    return [p for p in sorted(GOLDEN_BROKER_ROOT.iterdir())
            if (p / "store").is_dir() and (p / "broker.properties").is_file()]


def default_layout_corpora() -> list[Path]:
    """Corpora of the file CommitLog layout (the ones rmqsource can also write)."""
    return [c for c in corpora() if not is_dledger(c)]


def dledger_corpora() -> list[Path]:
    """Corpora written in DLedger CommitLog mode (under ../shared/golden-dledger)."""
    return [c for c in corpora() if is_dledger(c)]


def is_dledger(path: Path) -> bool:
    """Whether a corpus, crash case or store path lies under the DLedger corpora."""
    return Path(path).is_relative_to(DLEDGER_GOLDEN_ROOT)


DLEDGER_WRITE_SKIP = ("DLedger corpus: a DLedger store is written and recovered by its Raft group; rmqsource "
                      "refuses put, the sinks and recover on it (test_layouts.py and test_recovery_golden.py "
                      "assert the refusal)")


def crash_cases() -> list[Path]:
    cases = []
    for corpus in corpora():
        crash = corpus / "crash"
        if crash.is_dir():
            cases.extend(sorted(p for p in crash.iterdir() if (p / "store").is_dir()))
    return cases


def corpus_of(case: Path) -> Path:
    return case.parent.parent


def case_id(path: Path) -> str:
    root = DLEDGER_GOLDEN_ROOT if is_dledger(path) else GOLDEN_ROOT
    return str(path.relative_to(root))


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# The golden corpora were written by the bare store engine (no broker put hook before it: a 5.x DELAY message
# stays in its topic), so their replays turn the writer's broker hooks off.
ENGINE_ONLY = {"brokerPutHooks": "false"}
ENGINE_ONLY_ARGS = ["-C", "brokerPutHooks=false"]


def load_config(corpus: Path):
    from rmqsource.store.config import StoreConfig
    return StoreConfig.from_properties_file(corpus / "store.properties", ENGINE_ONLY)


def expected_get_files(expected_dir: Path) -> list[tuple[str, int, Path]]:
    """(topic, queueId, file) for every ``expected/get/<topic>/<queueId>.jsonl``."""
    out = []
    get_dir = expected_dir / "get"
    for topic_dir in sorted(get_dir.iterdir()):
        for f in sorted(topic_dir.glob("*.jsonl")):
            out.append((topic_dir.name, int(f.stem), f))
    return out


def tag_expression_from_file_name(stem: str) -> str:
    """Inverse of the corpus file-name encoding: ``_or_`` -> ``||``, ``%XX`` -> bytes."""
    return "||".join(unquote(part) for part in stem.split("_or_"))


def copy_store(src: Path, dst: Path) -> Path:
    """Writable copy of a store (links dereferenced, read-only bits dropped)."""
    shutil.copytree(src, dst, symlinks=False, copy_function=shutil.copyfile)
    for path in [dst, *dst.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
        else:
            path.chmod(0o644)
    return dst


def corpus_names() -> list[str]:
    return [p.name for p in corpora()]


def writable_names() -> list:
    """Corpus names as pytest parameters for tests that write stores, a DLedger one skipped with the reason."""
    import pytest
    return [pytest.param(p.name, id=p.name, marks=pytest.mark.skip(reason=DLEDGER_WRITE_SKIP)) if is_dledger(p)
            else p.name for p in corpora()]


def tree_bytes(base: Path) -> dict[str, bytes]:
    """Every file under ``base`` (relative path -> bytes), to compare two stores' files."""
    base = Path(base)
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


def index_file_contents(index_dir: Path) -> list[bytes]:
    """IndexFile contents in name order (names are creation times and differ between runs)."""
    index_dir = Path(index_dir)
    return [p.read_bytes() for p in sorted(index_dir.iterdir())] if index_dir.is_dir() else []


def engine_json(value):
    """An expected answer with an empty body as rmqsource prints it (null).

    The 4.9.7 decoder leaves an empty body null and the g1/g2 harnesses print null; the DLedger
    corpus's harness prints "" for the same bytes (its ``raw`` is compared byte for byte anyway).
    """
    if isinstance(value, list):
        return [engine_json(v) for v in value]
    if isinstance(value, dict):
        return {k: (None if k == "body" and v == "" else engine_json(v)) for k, v in value.items()}
    return value


def writable(paths: list[Path]) -> list:
    """``paths`` as pytest parameters, a DLedger one skipped with the reason (tests that write the store)."""
    import pytest
    return [pytest.param(p, id=case_id(p), marks=pytest.mark.skip(reason=DLEDGER_WRITE_SKIP)) if is_dledger(p)
            else pytest.param(p, id=case_id(p)) for p in paths]


def written_prefix(store: Path, config) -> dict[str, bytes]:
    """A store's files as a sync job copying the written bytes uploads them: the CommitLog up to its
    end, each ConsumeQueue file up to its last unit, other files whole."""
    from rmqsource.store.reader import MessageStoreReader
    with MessageStoreReader(store, config) as r:
        end = r.commit_log_max_offset
    out = {}
    for path in sorted(store.rglob("*")):
        if not path.is_file() or path.name == "lock":
            continue
        rel = path.relative_to(store).as_posix()
        data = path.read_bytes()
        if rel.startswith("commitlog/"):
            data = data[:max(0, end - int(path.name))]
        elif rel.startswith("consumequeue/"):
            units = len(data) // 20
            while units and data[(units - 1) * 20:units * 20] == bytes(20):
                units -= 1
            data = data[:units * 20]
        out[rel] = data
    return out
