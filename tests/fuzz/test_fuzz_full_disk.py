"""Fuzz cases on a full file system: the golden stores' mutations on a small tmpfs that is full before the read,
each with a sparse CommitLog tail (root only). The seeds and checks are test_fuzz.py's."""

from __future__ import annotations

import pytest

from golden import corpora
from test_fuzz import LONG_SEED, SHORT_SEED, fuzz

pytestmark = pytest.mark.skipif(not corpora(), reason="no golden corpus")

SHORT_FULL_DISK_CASES = 30
LONG_FULL_DISK_CASES = 1_000


@pytest.mark.unit
def test_fuzz_full_disk_short(small_tmpfs):
    fuzz(small_tmpfs, SHORT_FULL_DISK_CASES, workers=1, default_seed=SHORT_SEED, full_disk=True)


@pytest.mark.slow
def test_fuzz_full_disk_long(small_tmpfs):
    fuzz(small_tmpfs, LONG_FULL_DISK_CASES, workers=1, default_seed=LONG_SEED, full_disk=True)
