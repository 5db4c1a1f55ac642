"""Fetching and building the real-broker harness (tests/broker/harness), shared by the broker tier and the benchmarks.

The harness (a Maven project, package io.rmqsource.brokertest) is built once per RocketMQ version into a cache
outside the repository, ``~/.cache/rmqsource/broker/<version>/`` (``RMQ_BROKER_CACHE`` moves it): ``lib/`` holds
the RocketMQ jars Maven resolved from Maven Central, ``classes/`` the harness compiled with javac against them
(``src/main/java`` with ``src/main/java4`` for a 4.x version, ``src/main/java5`` otherwise: ``harness_sources``).
``build_harness`` raises ``HarnessUnavailable`` without Maven or a JDK (the broker tier skips on it); a failed
fetch or build is a ``RuntimeError``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

HARNESS = Path(__file__).resolve().parent.parent / "broker" / "harness"
DEFAULT_VERSION = "5.5.0"


class HarnessUnavailable(RuntimeError):
    """Maven or a JDK is missing: the harness cannot be fetched or compiled here."""


def cache_root() -> Path:
    return Path(os.environ.get("RMQ_BROKER_CACHE") or Path.home() / ".cache" / "rmqsource" / "broker")


def harness_line(version: str) -> str:
    """The RocketMQ line of ``version``: ``"4"`` for 4.x, else ``"5"``."""
    return "4" if version.split(".")[0] == "4" else "5"


def harness_sources(version: str) -> list[Path]:
    """The harness's Java sources for ``version``: ``src/main/java`` (both lines) and ``src/main/java4`` or
    ``src/main/java5`` (class ``Compat``: what differs between the lines, such as timer messages, 5.x only)."""
    main = HARNESS / "src" / "main"
    return sorted([*(main / "java").rglob("*.java"), *(main / f"java{harness_line(version)}").rglob("*.java")])


def _sources_digest(version: str) -> str:
    h = hashlib.sha256(version.encode())
    for p in [HARNESS / "pom.xml", *harness_sources(version)]:
        h.update(p.relative_to(HARNESS).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def _run(cmd, what: str, cwd=None) -> None:
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        tail = (p.stdout + p.stderr)[-4000:]
        raise RuntimeError(f"{what} failed (exit {p.returncode}): {' '.join(map(str, cmd))}\n{tail}")


def build_harness(version: str = DEFAULT_VERSION) -> str:
    """The harness's class path for ``version``: Maven resolves the jars once, javac compiles on change."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise HarnessUnavailable(
            "the broker harness needs Maven (mvn on PATH) to fetch Apache RocketMQ from Maven Central")
    javac = shutil.which("javac")
    if javac is None:
        raise HarnessUnavailable("the broker harness needs a JDK (javac on PATH) to compile")
    root = cache_root() / version
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:          # xdist workers build one at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        lib = root / "lib"
        if not (lib / ".complete").is_file():
            tmp = root / "lib.partial"
            shutil.rmtree(tmp, ignore_errors=True)
            _run([mvn, "-q", "-B", "-f", str(HARNESS / "pom.xml"), f"-Drocketmq.version={version}",
                  "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={tmp}"],
                 f"fetching RocketMQ {version} from Maven Central")
            if not any(tmp.glob("rocketmq-broker-*.jar")):
                raise RuntimeError(f"Maven resolved no rocketmq-broker jar for {version} into {tmp}")
            shutil.rmtree(lib, ignore_errors=True)
            tmp.rename(lib)
            (lib / ".complete").write_text(version + "\n")
        classes = root / "classes"
        digest = _sources_digest(version)
        stamp = classes / ".digest"
        if not (stamp.is_file() and stamp.read_text() == digest):
            shutil.rmtree(classes, ignore_errors=True)
            classes.mkdir()
            _run([javac, "-encoding", "UTF-8", "--release", "17", "-nowarn", "-cp", f"{lib}/*", "-d", str(classes),
                  *map(str, harness_sources(version))], f"compiling the broker harness against {version}")
            stamp.write_text(digest)
    return f"{classes}{os.pathsep}{lib}/*"


# RocketMQ 4.x unmaps its files through DirectByteBuffer's cleaner by reflection (MappedFile.clean): without these a
# 4.9.7 broker fails to shut down on JDK 17. 5.x frees them through Netty and needs none; harmless there.
JVM_OPENS = ["--add-opens", "java.base/java.nio=ALL-UNNAMED", "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
             "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED"]


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java") or "java"
