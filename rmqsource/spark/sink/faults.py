"""The sink's test fault seam (the JVM twin: SinkFaults.java)."""

from __future__ import annotations

import contextlib
import os

from ...io import files
from ..spill import RowSpill

# Fault injection for the replay tests, outside the store: only when this environment variable names a
# file (test code sets it before Spark starts its workers) holding "<point> <store root>", where point is
# "mid-append:<batchId>" or "commit:<batchId>" (stream sink), "kill:<partitionId>" (the batch sink's
# worker is SIGKILLed half-way through its append) or "disk-full:<partitionId>" (the disk fills half-way
# through the append and stays full until the task has failed), does that step fail once (the file is
# removed first).  Nothing in a store can trigger it.
FAULT_ENV = "RMQSOURCE_TEST_SINK_FAULT_FILE"


def take_fault(root: str, point: str) -> bool:
    path = os.environ.get(FAULT_ENV)
    if not path:
        return False
    try:
        with open(path, "r", encoding="utf-8") as f:
            spec = f.read().strip()
    except OSError:
        return False
    if spec != f"{point} {os.path.realpath(root)}":
        return False
    try:
        os.unlink(path)
    except OSError:
        return False
    return True


@contextlib.contextmanager
def injected_disk_fault(root: str, pid: int, rows: RowSpill):
    """Test hook (FAULT_ENV "disk-full:<partition>"): the disk fills after about half of the task's
    bytes, for every file operation of this attempt (the close's checkpoint too); freed afterwards."""
    if not take_fault(root, f"disk-full:{pid}"):
        yield
        return
    from ...io.faults import FaultyFileOps, disk_space
    total = sum(t.column("body").nbytes for t in rows.tables())
    with files.installed(FaultyFileOps(disk_space(total // 2))):
        yield
