"""``rmq verify`` with its CommitLog / ConsumeQueue / IndexFile walk on the JVM (the project's jar).

The walk is ``io.rmqsource.tools.VerifyMain``: the checks, windows, order and messages of
:mod:`rmqsource.store.verify` (tests compare the two reports on every golden and crash store), with
Java's intrinsic CRC32 and a per-record loop instead of numpy passes.  The unclean-shutdown note,
the checkpoint and the config JSON checks read a few small files and run here, in Python, as in
the Python walk.  One JVM per run: start-up costs about 0.1 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from typing import Callable, Optional

from ..errors import FormatError, NotAStoreError, RmqError
from ..spark.jar import JarError, find_java, jar_path, pyspark_jars_dir
from ..store.config import StoreConfig
from ..store.layout import StoreLayout
from ..store.verify import check_checkpoint, check_config, note_unclean_shutdown
from ..store.verify_report import Problem, VerifyReport

MAIN_CLASS = "io.rmqsource.tools.VerifyMain"
# Serial GC and a small young generation: one thread walks, the heap holds a window and an IndexFile's chains.
JVM_FLAGS = ["-XX:+UseSerialGC", "-Xshare:auto", "-XX:-UsePerfData"]


def jvm_command(*, rocksdb: bool = False) -> Optional[list[str]]:
    """``java -cp <jar>`` for the walk, or None when the jar is not built or no ``java`` is found.  ``rocksdb``:
    the store's ConsumeQueues are a RocksDB database, read through the rocksdbjni Spark ships (pyspark's jars/)."""
    jar, java = jar_path(), find_java()
    if jar is None or java is None:
        return None
    classpath = [jar, *(_rocksdbjni() if rocksdb else [])]
    return [java, *JVM_FLAGS, "-cp", os.pathsep.join(classpath), MAIN_CLASS]


def _rocksdbjni() -> list[str]:
    try:
        found = sorted(pyspark_jars_dir().glob("rocksdbjni-*.jar"))
    except JarError:
        found = []
    if not found:
        raise RmqError("the JVM verify of RocksDB ConsumeQueues (storeType=defaultRocksDB) needs the rocksdbjni jar "
                       "pyspark ships (pip install pyspark), or use --engine python")
    return [str(found[-1])]


def verify_store_jvm(root: str | os.PathLike, config: Optional[StoreConfig] = None, *,
                     progress: Optional[Callable[[int], None]] = None) -> VerifyReport:
    """:func:`rmqsource.store.verify.verify_store`, with the walk on the JVM (RmqError when it cannot run)."""
    config = config or StoreConfig()
    root = os.fspath(root)
    layout = StoreLayout.for_config(root, config)
    layout.check_is_store()
    command = jvm_command(rocksdb=layout.rocksdb_queues)
    if command is None:
        raise RmqError("the JVM verify needs the rmq jar (rmq jar --build) and java (JAVA_HOME or PATH)")
    report = VerifyReport(os.path.abspath(root))
    note_unclean_shutdown(layout, report)
    args = [root, config.store_path_commit_log or "", str(config.max_hash_slot_num), str(config.max_index_num),
            ",".join(str(ms) for ms in config.message_delay_levels_ms),
            config.read_only_commit_log_store_paths or "", "true" if config.enable_dleger_commit_log else "false",
            config.store_path_dledger_commit_log or "", config.dleger_self_id or ""]
    figures = _run(command + args, report, progress or (lambda n: None))
    check_checkpoint(layout, config, report, figures["stats"]["commitLogEnd"], figures["stats"]["records"],
                     figures["maxStoreTimestamp"])
    check_config(layout, config, report, {(t, q): m for t, q, m in figures["queueMaxOffsets"]})
    report.stats.update(figures["stats"])
    return report


def _run(command: list[str], report: VerifyReport, progress: Callable[[int], None]) -> dict:
    """Run the walk, feeding progress as it comes; its problems and counts go into ``report``."""
    listed = {}
    figures = error = None
    with tempfile.TemporaryFile() as err, subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True,
                                                           encoding="utf-8") as proc:
        for line in proc.stdout:
            msg = json.loads(line)
            if "progress" in msg:
                progress(msg["progress"])
            elif "problem" in msg:
                p = msg["problem"]
                report.add(Problem(p["area"], p["check"], p["file"], p["offset"], p["message"], p["expected"],
                                   p["found"], p["severity"]))
                listed[(p["severity"], p["check"])] = listed.get((p["severity"], p["check"]), 0) + 1
            elif "counts" in msg:
                for severity, check, n in msg["counts"]:
                    report.counts[(severity, check)] += n - listed.get((severity, check), 0)
            elif "error" in msg:
                error = msg["error"]
            else:
                figures = msg
        code = proc.wait()
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    if error is not None:
        kind = NotAStoreError if error["type"] == "NotAStoreError" else FormatError
        raise kind(error["message"])
    if code != 0 or figures is None:
        raise RmqError(f"the JVM verify failed (exit {code}): {stderr.strip()[-2000:] or 'no output'}")
    return figures
