"""Fuzz tier: seeded mutations of the golden stores through every read path (see tests/fuzz_stores.py).

Every case must end ``ok`` or with a typed RmqError; an untyped exception, a
hang (per-case deadline), a crashed worker, or a JVM-scan case whose rows differ
from the Python path's on the same store (``differ``) fails the run.  The
full-disk cases (test_fuzz_full_disk.py: a file of its own, so that the
test runners run it beside the long run here) use a small full tmpfs, each
with a sparse CommitLog tail (root only).  The seed is
fixed per tier and printed; ``RMQ_FUZZ_SEED`` (a number, or ``random``), ``RMQ_FUZZ_CASES``, ``RMQ_FUZZ_ONLY`` (one case
index) and ``RMQ_FUZZ_PATHS`` (read paths, comma-separated) reproduce or aim a run.
"""

from __future__ import annotations

import os
import random

import pytest

from fuzz_stores import run_fuzz
from golden import corpora

pytestmark = pytest.mark.skipif(not corpora(), reason="no golden corpus")

SHORT_CASES = 200
LONG_CASES = 20_000


# Fixed seeds keep CI's verdict about the code, not the draw; RMQ_FUZZ_SEED=random explores.
SHORT_SEED = 3293609874
LONG_SEED = 511763705


def _seed(default: int) -> int:
    env = os.environ.get("RMQ_FUZZ_SEED", "")
    if env == "random":
        return random.SystemRandom().randrange(1 << 32)
    return int(env) if env else default


def fuzz(tmp_path, default_cases: int, workers: int, default_seed: int, full_disk: bool = False):
    seed = _seed(default_seed)
    cases = int(os.environ.get("RMQ_FUZZ_CASES", default_cases))
    only = os.environ.get("RMQ_FUZZ_ONLY")
    print(f"fuzz seed {seed} (RMQ_FUZZ_SEED={seed} to repeat), {cases} cases{', full disk' if full_disk else ''}",
          flush=True)
    summary = run_fuzz(seed, cases, tmp_path, workers=workers, only=int(only) if only else None,
                       full_disk=full_disk, progress=1000 if cases >= 5000 else 0)
    print(summary.report())
    assert not summary.failures, summary.report()
    assert summary.outcomes["ok"] + summary.outcomes["typed"] == summary.cases


@pytest.mark.unit
def test_fuzz_short(tmp_path):
    fuzz(tmp_path, SHORT_CASES, workers=1, default_seed=SHORT_SEED)


@pytest.mark.slow
def test_fuzz_long(tmp_path):
    fuzz(tmp_path, LONG_CASES, workers=2, default_seed=LONG_SEED)


@pytest.mark.unit
def test_differential_names_the_first_differing_row_and_column():
    """The comparison the JVM-scan cases make: order-insensitive, every column, the first difference said."""
    import pyarrow as pa

    from fuzz_stores import first_difference, scan_rows
    columns = ("topic", "commitLogOffset", "tagsCode", "bornTimestamp", "properties")
    ts = pa.array([1_000_000, 2_000_000], pa.timestamp("us", tz="UTC"))
    props = pa.array([[("a", "1")], [("b", None)]], pa.map_(pa.string(), pa.string()))

    def table(offsets, codes, stamps=ts):
        return pa.table({"topic": ["T", "T"], "commitLogOffset": offsets, "tagsCode": codes,
                         "bornTimestamp": stamps, "properties": props})
    python = scan_rows(table([100, 7], [5, None]), columns)
    # Row order and the time zone Spark hands timestamps over in do not count.
    assert first_difference(scan_rows(table([100, 7], [5, None], ts.cast(pa.timestamp("us", tz="Asia/Tokyo"))),
                                      columns), python, columns) is None
    differ = first_difference(scan_rows(table([100, 7], [5, 9]), columns), python, columns)
    assert differ == "row 0 of 2 (commitLogOffset 7), column tagsCode: JVM 9, Python None"
    lost = first_difference(scan_rows(table([100, 7], [5, None]).slice(0, 1), columns), python, columns)
    assert lost.startswith("1 JVM rows, 2 Python rows; first row only in the Python read: topic='T', "
                           "commitLogOffset=7, tagsCode=None"), lost
