"""The JVM store writer (``io.rmqsource.store.write``) driven from tests through its entry point
``WriteMain`` run as a subprocess (no Spark needed): put a corpus's inputs, hold the store's lock.

``jvm_writer_or_skip()`` gives the ``java -cp <jar>`` command, or skips when the jar is not built
(RMQ_SPARK_MODE=jvm makes a missing jar an error at session start, so a jvm run never skips here).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Optional, Sequence

import pytest

MAIN = "io.rmqsource.tools.WriteMain"
FLAGS = ["-XX:+UseSerialGC", "-Xshare:auto", "-XX:-UsePerfData"]


def jvm_writer_or_skip() -> list[str]:
    from rmqsource.spark.jar import find_java, jar_path
    jar, java = jar_path(), find_java()
    if jar is None or java is None:
        pytest.skip("the JVM writer needs the rmq jar (rmq jar --build) and java")
    return [java, *FLAGS, "-cp", jar, MAIN]


def put_command(root: Path, config: str | Path, inputs: str | Path, *, batch: int = 8192,
                clock_ms: Optional[int] = None, lines: Optional[tuple[int, int]] = None, overrides: Sequence[str] = (),
                fail_after_bytes: Optional[int] = None, abandon: bool = False, staged: Optional[int] = None,
                chunk_bytes: Optional[int] = None, flush: bool = False, hold: bool = False) -> list[str]:
    """The ``WriteMain put`` command line (options as :func:`jvm_put`; ``flush``: a flush after each batch, as a
    sink's commit; ``hold``: after the results it waits for the end of stdin before shutting down)."""
    cmd = [*jvm_writer_or_skip(), "put", str(root), str(config), str(inputs), "--batch", str(batch)]
    if clock_ms is not None:
        cmd += ["--clock", str(clock_ms)]
    if lines is not None:
        cmd += ["--from", str(lines[0]), "--to", str(lines[1])]
    for o in overrides:
        cmd += ["--override", o]
    if fail_after_bytes is not None:
        cmd += ["--fail-after-bytes", str(fail_after_bytes)]
    if abandon:
        cmd.append("--abandon")
    if staged is not None:
        cmd += ["--staged", str(staged)]
    if chunk_bytes is not None:
        cmd += ["--chunk-bytes", str(chunk_bytes)]
    if flush:
        cmd.append("--flush")
    if hold:
        cmd.append("--hold")
    return cmd


def jvm_put(root: Path, config: str | Path, inputs: str | Path, *, check: bool = True,
            **options) -> tuple[list[dict], dict, int]:
    """Put ``inputs`` (inputs.jsonl lines) into ``root`` with the JVM writer; (results, trailer, returncode).

    The trailer is ``{"maxPhyOffset": N}`` or ``{"error": {...}}``, with the tail of the JVM's stderr under
    ``"stderr"`` (what an uncaught Java exception printed). ``staged``: each batch goes through StagedPuts
    (holding that many bytes in memory, the rest in a spill file) and ``putStaged`` instead of ``putAll``;
    ``batch``, ``clock_ms``, ``lines``, ``overrides``, ``fail_after_bytes``, ``abandon``, ``chunk_bytes``,
    ``flush``: as :func:`put_command` passes them to ``WriteMain put``."""
    cmd = put_command(root, config, inputs, **options)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    out = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    if check and proc.returncode != 0:
        raise AssertionError(f"JVM writer failed ({proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}")
    results = [r for r in out if "status" in r]
    trailers = [r for r in out if "status" not in r]
    trailer = dict(trailers[-1]) if trailers else {}
    trailer["stderr"] = proc.stderr[-3000:]
    return results, trailer, proc.returncode


class JvmLockHolder:
    """A JVM process holding a store's writer lock until ``release()`` (stdin closed)."""

    def __init__(self, root: Path, config: str | Path = "-", timeout_ms: int = 0):
        self.proc = subprocess.Popen([*jvm_writer_or_skip(), "hold", str(root), str(config), "--timeout-ms",
                                      str(timeout_ms)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.first_line = self.proc.stdout.readline().strip()

    @property
    def locked(self) -> bool:
        return self.first_line == "locked"

    def release(self) -> str:
        out, err = self.proc.communicate(timeout=60)
        return self.first_line + "\n" + out + err

    def __enter__(self) -> "JvmLockHolder":
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.release()


def jvm_scan(root: Path, config: str | Path, from_offset: int, *names: str) -> list[dict]:
    """MessageStoreWriter.scan through WriteMain: records from ``from_offset`` carrying one of ``names``."""
    proc = subprocess.run([*jvm_writer_or_skip(), "scan", str(root), str(config), str(from_offset), *names],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"JVM scan failed ({proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
