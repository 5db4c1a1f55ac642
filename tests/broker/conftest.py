"""The broker tier: Apache RocketMQ's own NameServer and Broker, started in a JVM of their own.

The harness (tests/broker/harness: a Maven project, package io.rmqsource.brokertest) is built
(tests/support/broker_harness.py, shared with scripts/bench_broker_read.py) once per RocketMQ version into a
cache outside the repository, ``~/.cache/rmqsource/broker/<version>/``
(``RMQ_BROKER_CACHE`` moves it): ``lib/`` holds the RocketMQ jars Maven resolved from Maven Central,
``classes/`` the harness compiled with javac against them. Without Maven the tier is skipped; with Maven a
failed fetch or build is an error. A user of rmqsource never needs any of this.

Each scenario starts one broker (``run_broker``): a temporary store with small files (1 MiB CommitLog files,
60-unit ConsumeQueue files, small IndexFiles), a workload through the official client, then a clean
shutdown (or SIGKILL after the acknowledged sends, ``kill=True``); ``broker_run`` and ``killed_broker_run`` run
once per version and broker variant (``VARIANTS``: default settings, RocksDB ConsumeQueues with config v2).
``RMQ_BROKER_RUN`` / ``RMQ_BROKER_KILLED_RUN`` re-check a finished run folder (the other variants skip). A run's
folder has the layout of ../shared/golden-broker's runs: ``store/``, ``broker.properties``,
``expected/{sent,consumed}.jsonl``, ``expected/admin.json``, ``harness.log``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from broker_harness import DEFAULT_VERSION, JVM_OPENS, HarnessUnavailable
from broker_harness import build_harness as _build_harness
from broker_harness import java as _java

MAIN_CLASS = "io.rmqsource.brokertest.RealBroker"
RUN_TIMEOUT_S = 300


def build_harness(version: str) -> str:
    """The harness's class path for ``version`` (tests/support/broker_harness.py); skips without Maven or a JDK."""
    try:
        return _build_harness(version)
    except HarnessUnavailable as e:
        pytest.skip(str(e))


def _log_tail(run_dir: Path, n: int = 60) -> str:
    log = run_dir / "harness.log"
    if not log.is_file():
        return ""
    lines = [l for l in log.read_text(errors="replace").splitlines() if not l.startswith(("\t", "    at "))]
    lines = [l for l in lines if "|-INFO in" not in l]
    return "\n".join(lines[-n:])


def _harness_jvm(classpath: str, run_dir: Path) -> list[str]:
    """The command line of a harness JVM up to its arguments."""
    return [_java(), "-Xmx512m", "-XX:+UseSerialGC", *JVM_OPENS, f"-Duser.home={run_dir / 'home'}", "-cp", classpath,
            MAIN_CLASS]


def run_broker(classpath: str, run_dir: Path, *, seed: int = 7, messages: int = 400, kill: bool = False,
               kill_after: int = 150, settings: dict | None = None) -> Path:
    """One broker run into ``run_dir``; with ``kill`` SIGKILLs the JVM once ``kill_after`` sends were acked."""
    run_dir.mkdir(parents=True, exist_ok=True)
    cmd = [*_harness_jvm(classpath, run_dir),
           "--store", str(run_dir / "store"), "--out", str(run_dir), "--seed", str(seed),
           "--messages", str(messages)]
    if kill:
        cmd += ["--kill", "--kill-after", str(kill_after)]
    for k, v in (settings or {}).items():
        cmd += ["--set", f"{k}={v}"]
    with open(run_dir / "harness.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=run_dir, start_new_session=True)
        try:
            if kill:
                acked = run_dir / "expected" / "ACKED"
                deadline = time.monotonic() + RUN_TIMEOUT_S
                while not acked.exists():
                    if proc.poll() is not None:
                        raise RuntimeError(f"the harness exited ({proc.returncode}) before ACKED:\n{_log_tail(run_dir)}")
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"no ACKED after {RUN_TIMEOUT_S} s:\n{_log_tail(run_dir)}")
                    time.sleep(0.05)
                time.sleep(0.3)                     # sends go on: the kill lands among them
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(30)
                (run_dir / "expected" / "KILLED").write_text(str(proc.returncode))
            else:
                rc = proc.wait(RUN_TIMEOUT_S)
                if rc != 0 or not (run_dir / "expected" / "DONE").exists():
                    raise RuntimeError(f"the broker harness failed (exit {rc}):\n{_log_tail(run_dir)}")
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(30)
    return run_dir


def store_checksums(store: Path) -> dict[str, str]:
    out = {}
    for p in sorted(store.rglob("*")):
        if p.is_file():
            out[p.relative_to(store).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def versions() -> list[str]:
    return [v for v in os.environ.get("RMQ_BROKER_VERSIONS", DEFAULT_VERSION).split(",") if v]


# The broker settings of each variant of ``broker_run`` and ``killed_broker_run`` (``--set`` on top of the
# harness's own, RealBroker.run): every check of test_real_broker.py runs once per version and variant.
# ``rocksdb-v2`` is the broker of ../shared/golden-broker/rmq550-b2-rocksdb-v2-lmq without LMQ: ConsumeQueues in
# RocksDB (store/consumequeue/ is one database) and topics, groups and consumer offsets in RocksDB (config/rdb/).
# RMQ_BROKER_VARIANTS (comma-separated names) runs some of them.
VARIANTS: dict[str, dict[str, str]] = {
    "default": {},
    "rocksdb-v2": {"storeType": "defaultRocksDB", "configManagerVersion": "v2"},
}
# The first RocketMQ version a variant's settings exist in (configManagerVersion=v2: 5.3.2; RocksDB queues: 5.2):
# an older broker ignores settings it does not know and would run the defaults under the variant's name.
VARIANT_SINCE: dict[str, tuple[int, ...]] = {"rocksdb-v2": (5, 3, 2)}


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("-")[0].split(".") if x.isdigit())


def variants() -> list[str]:
    names = [v for v in os.environ.get("RMQ_BROKER_VARIANTS", ",".join(VARIANTS)).split(",") if v]
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        raise pytest.UsageError(f"RMQ_BROKER_VARIANTS: unknown {unknown}, known {sorted(VARIANTS)}")
    return names


def broker_params() -> list:
    """(version, variant) of every broker run, with ids such as ``5.5.0-default`` and ``5.5.0-rocksdb-v2``: the
    variants each version has (``VARIANT_SINCE``)."""
    return [pytest.param((v, name), id=f"{v}-{name}") for v in versions() for name in variants()
            if version_tuple(v) >= VARIANT_SINCE.get(name, ())]


def variant_of(run_dir: Path) -> str:
    """The variant whose settings a finished run's broker.properties has (for RMQ_BROKER_RUN and friends)."""
    props = {}
    for line in (run_dir / "broker.properties").read_text(encoding="utf-8").splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            props[k.strip()] = v.strip()
    matching = [n for n, s in VARIANTS.items() if s and all(props.get(k) == v for k, v in s.items())]
    return matching[0] if matching else "default"


def _reused_run(env: str, variant: str):
    """The run folder named by ``env`` when its variant is ``variant``; skips the other variants."""
    reuse = os.environ.get(env)
    if not reuse:
        return None
    run_dir = Path(reuse)
    if variant_of(run_dir) != variant:
        pytest.skip(f"{env} is a {variant_of(run_dir)} run")
    return run_dir


@pytest.fixture(scope="session")
def broker_classpath():
    built: dict[str, str] = {}

    def get(version: str) -> str:
        if version not in built:
            built[version] = build_harness(version)
        return built[version]
    return get


def _shared_runs_dir(tmp_path_factory) -> Path | None:
    """Where runs are shared: ``RMQ_BROKER_RUNS_DIR`` (scripts/test.sh sets it for its two passes: the broker's
    answers do not depend on the Spark mode), else, under pytest-xdist, a folder of the run's base temporary
    folder (the modules using ``broker_run`` may be on different workers); None: not shared."""
    shared = os.environ.get("RMQ_BROKER_RUNS_DIR")
    if shared:
        return Path(shared)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return tmp_path_factory.getbasetemp().parent / "broker-runs"
    return None


def run_once(tmp_path_factory, name: str, make, complete: str) -> Path:
    """The run folder ``name``, made by ``make(folder)``; where runs are shared (``_shared_runs_dir``) the first
    process makes it and the others reuse it once it holds ``complete``; else a fresh temporary folder."""
    root = _shared_runs_dir(tmp_path_factory)
    if root is None:
        run_dir = tmp_path_factory.mktemp(name)
        make(run_dir)
        return run_dir
    root.mkdir(parents=True, exist_ok=True)
    run_dir = root / name
    with open(root / f"{name}.lock", "w") as lock:     # xdist workers and passes make a run one at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (run_dir / complete).is_file():
            shutil.rmtree(run_dir, ignore_errors=True)    # a run that failed half-way
            make(run_dir)
    return run_dir


def _write_checksums(run_dir: Path) -> None:
    run_dir.joinpath("checksums.txt").write_text(
        "".join(f"{d}  {p}\n" for p, d in store_checksums(run_dir / "store").items()))


@pytest.fixture(scope="session", params=broker_params())
def broker_run(request, broker_classpath, tmp_path_factory):
    """A broker run of one variant, shut down cleanly; ``checksums.txt``: its store files right after."""
    version, variant = request.param
    run_dir = _reused_run("RMQ_BROKER_RUN", variant)   # re-check a finished run without starting a broker
    if run_dir is not None:
        if not (run_dir / "checksums.txt").is_file():
            _write_checksums(run_dir)
        return run_dir

    def make(run_dir: Path) -> None:
        run_broker(broker_classpath(version), run_dir, settings=VARIANTS[variant])
        _write_checksums(run_dir)
    return run_once(tmp_path_factory, f"broker-{version}-{variant}", make, "checksums.txt")


@pytest.fixture(scope="session", params=broker_params())
def killed_broker_run(request, broker_classpath, tmp_path_factory):
    """A broker run of one variant, SIGKILLed while the producer still sends."""
    version, variant = request.param
    run_dir = _reused_run("RMQ_BROKER_KILLED_RUN", variant)
    if run_dir is not None:
        return run_dir
    return run_once(tmp_path_factory, f"broker-killed-{version}-{variant}",
                    lambda d: run_broker(broker_classpath(version), d, kill=True, settings=VARIANTS[variant]),
                    "expected/KILLED")


# The store settings of every harness broker (RealBroker.run): a store handed to a broker must use the same.
BROKER_STORE_SETTINGS = {"mappedFileSizeCommitLog": "1048576", "mappedFileSizeConsumeQueue": "1200",
                         "maxIndexNum": "256", "maxHashSlotNum": "64"}


def serve_store(classpath: str, run_dir: Path, store: Path, topics: list[str], *, expect: int,
                wait_ms: int = 60_000, settings: dict | None = None, groups: list[str] = ()) -> Path:
    """Start a broker on ``store`` (written by someone else) and drain ``topics`` with the official lite pull
    consumer (RealBroker --serve): ``run_dir/expected/consumed.jsonl`` and ``routes.json``; with ``groups``,
    their committed offsets as the broker reports them in ``groups.json``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    cmd = [*_harness_jvm(classpath, run_dir), "--store", str(store), "--out", str(run_dir), "--serve",
           "--topics", ",".join(topics), "--expect", str(expect), "--wait-ms", str(wait_ms)]
    if groups:
        cmd += ["--groups", ",".join(groups)]
    for k, v in (settings or {}).items():
        cmd += ["--set", f"{k}={v}"]
    with open(run_dir / "harness.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=run_dir, start_new_session=True)
        try:
            rc = proc.wait(RUN_TIMEOUT_S)
            if rc != 0 or not (run_dir / "expected" / "DONE").exists():
                raise RuntimeError(f"the broker harness failed (exit {rc}):\n{_log_tail(run_dir)}")
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(30)
    return run_dir


def start_live_broker(classpath: str, run_dir: Path, *, send_for: float, rate: float = 40, seed: int = 11,
                      hold: bool = False, settings: dict | None = None) -> subprocess.Popen:
    """A broker that keeps sending (RealBroker --send-for) while the test reads its store: returns once the
    first sends were acknowledged (``expected/SENDING``); ``finish_live_broker`` waits for its clean shutdown.
    Every SEND_OK is a line of ``expected/sent.jsonl`` as soon as the client has it. With ``hold`` it returns
    once the broker runs with its topics routed (``expected/READY``) and sends only after ``release_live_broker``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    cmd = [*_harness_jvm(classpath, run_dir), "--store", str(run_dir / "store"), "--out", str(run_dir),
           "--seed", str(seed), "--send-for", str(send_for), "--rate", str(rate)]
    if hold:
        cmd += ["--hold-until", str(run_dir / "GO")]
    for k, v in (settings or {}).items():
        cmd += ["--set", f"{k}={v}"]
    with open(run_dir / "harness.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=run_dir, start_new_session=True)
    _wait_live(proc, run_dir, "READY" if hold else "SENDING")
    return proc


def release_live_broker(proc: subprocess.Popen, run_dir: Path) -> None:
    """Let a held live broker send; returns once its first sends were acknowledged."""
    (run_dir / "GO").write_text("")
    _wait_live(proc, run_dir, "SENDING")


def _wait_live(proc: subprocess.Popen, run_dir: Path, marker: str) -> None:
    sending = run_dir / "expected" / marker
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not sending.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_live_broker(proc)
            raise RuntimeError(f"no expected/{marker} from the live broker (exit {proc.returncode}):\n"
                               f"{_log_tail(run_dir)}")
        time.sleep(0.1)


def finish_live_broker(proc: subprocess.Popen, run_dir: Path) -> Path:
    """Wait for the live broker's clean shutdown (``expected/DONE``)."""
    try:
        rc = proc.wait(RUN_TIMEOUT_S)
    finally:
        stop_live_broker(proc)
    if rc != 0 or not (run_dir / "expected" / "DONE").exists():
        raise RuntimeError(f"the live broker failed (exit {rc}):\n{_log_tail(run_dir)}")
    return run_dir


def stop_live_broker(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)


def store_state(store: Path) -> dict[str, tuple]:
    """Every file of ``store`` with (sha256, size, mtime_ns), and every folder: what a read must not change."""
    out = {}
    for p in sorted(store.rglob("*")):
        st = p.stat()
        key = p.relative_to(store).as_posix()
        if p.is_file():
            out[key] = (hashlib.sha256(p.read_bytes()).hexdigest(), st.st_size, st.st_mtime_ns)
        else:
            out[key + "/"] = ("dir", st.st_mtime_ns)
    return out
