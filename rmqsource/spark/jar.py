"""The JVM side of ``format("rmq")``: locate, build and choose the jar.

The Java sources ship inside the package (``rmqsource/jvm``); they are
compiled against the installed pyspark's own ``jars/`` (no Maven) into
``rmqsource/spark/jars/rmqsource-spark.jar``. On ``spark.jars`` that jar's
provider named ``rmq`` takes precedence over the Python data source of the
same name. Nothing here imports pyspark, so ``import rmqsource.spark`` stays light.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Optional

from ..errors import RmqError

PACKAGE_DIR = Path(__file__).resolve().parent
JAVA_DIR = PACKAGE_DIR.parent / "jvm"
JAR_DIR = PACKAGE_DIR / "jars"
JAR_NAME = "rmqsource-spark.jar"
RELEASE = "17"
# RMQ_SPARK_MODE=python runs Spark on the Python data source even when the jar is built;
# =jvm insists on the jar (an error when it is missing); unset uses the jar when built.
MODE_ENV = "RMQ_SPARK_MODE"
PYTHON_PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
JVM_PACKAGE = "io.rmqsource.spark."
NATIVE_SCAN_CLASS = "io/rmqsource/spark/read/RmqScanBuilder.class"   # in the jar: batch reads are native
BUILD_HINT = "build it with `rmq jar --build` (needs a JDK 17: javac on PATH or JAVA_HOME)"


class JarError(RmqError):
    """The JVM scan's jar is not built, cannot be built, or the mode asks for what is not there."""


def jar_path(required: bool = False) -> Optional[str]:
    """Path of the built jar, or None when it is not built (``required=True``: a JarError saying how)."""
    path = JAR_DIR / JAR_NAME
    if path.is_file():
        return str(path)
    if required:
        raise JarError(f"the rmq JVM jar is not built ({path}): {BUILD_HINT}")
    return None


def spark_mode() -> str:
    """``jvm`` or ``python``: which implementation of ``format("rmq")`` Spark sessions made here load."""
    mode = os.environ.get(MODE_ENV, "").strip().lower()
    if mode not in ("", "jvm", "python"):
        raise JarError(f"{MODE_ENV}={mode!r}: expected jvm or python")
    if mode == "jvm":
        jar_path(required=True)
    return mode or ("jvm" if jar_path() else "python")


def session_jar() -> Optional[str]:
    """The jar a new Spark session should put on ``spark.jars`` (None: the pure Python path; on a pyspark
    without Python data sources (3.5) that is one line saying the jar is required there)."""
    jar = jar_path(required=True) if spark_mode() == "jvm" else None
    if jar is None:
        require_supported_spark(python_source=True)
    return jar


def session_conf() -> dict[str, str]:
    """Spark settings the demo, notebooks and tests start sessions with, for the current mode.

    ``spark.jars`` when the JVM scan is used, with what that Spark needs
    beside it (3.5: the session catalog serving ``USING rmq`` tables). While
    batch reads run on the Python path, also Python filter pushdown: those
    callers start every filtered query from its own ``load()``, which keeps
    clear of Spark 4.3's scan reuse (see the README); the JVM scan pushes
    filters without it.
    """
    require_supported_spark()
    jar = session_jar()
    conf = {"spark.jars": jar} if jar else {}
    if jar:
        from .compat import JAR_SESSION_CONF
        conf.update(JAR_SESSION_CONF)
    if not has_native_scan(jar):
        conf[PYTHON_PUSHDOWN] = "true"
    return conf


def require_supported_spark(python_source: bool = False) -> None:
    """One line (UnsupportedSparkError) naming the found and the supported pyspark, before Spark starts
    or javac runs against an unsupported one (imports pyspark: called only on the way to Spark).
    ``python_source``: the Python data source is asked for (pyspark 3.5 has none: the jar is required)."""
    from . import compat  # the version check runs at its import
    if python_source:
        compat.require_python_data_source()


def has_native_scan(jar: Optional[str]) -> bool:
    """Whether the jar reads batches itself (else its table hands batch reads to Python too)."""
    if not jar:
        return False
    with zipfile.ZipFile(jar) as z:
        return NATIVE_SCAN_CLASS in z.namelist()


def relation_classes(df) -> list[tuple[str, str]]:
    """(table class, scan class) of every DataSource V2 scan in ``df``'s optimized plan."""
    leaves = df._jdf.queryExecution().optimizedPlan().collectLeaves()
    found = []
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        if leaf.getClass().getSimpleName() == "DataSourceV2ScanRelation":
            found.append((leaf.relation().table().getClass().getName(), leaf.scan().getClass().getName()))
    return found


def scan_kind(df) -> str:
    """Which implementation reads ``df``'s rmq batches, in words (for the demo and notebooks)."""
    kinds = set()
    for table, scan in relation_classes(df):
        if not table.startswith(JVM_PACKAGE):
            kinds.add("Python data source")
        elif scan.startswith(JVM_PACKAGE):
            kinds.add("JVM scan")
        else:
            kinds.add("Python scan behind the JVM provider (this jar has no native scan)")
    return ", ".join(sorted(kinds)) or "no DataSource V2 scan"


# --------------------------------------------------------------------------- build

def java_sources(java_dir: Path = JAVA_DIR) -> list[Path]:
    return sorted(p for p in java_dir.rglob("*.java") if p.is_file())


def resource_files(java_dir: Path = JAVA_DIR) -> list[Path]:
    """Files packed as they are (the service registration, JSON resources ...)."""
    return sorted(p for p in java_dir.rglob("*")
                  if p.is_file() and p.suffix not in (".java", ".class") and "__pycache__" not in p.parts)


def pyspark_jars_dir() -> Path:
    """The installed pyspark's ``jars/`` (Spark, Jackson, lz4-java, zstd-jni ...), without importing pyspark."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise JarError("pyspark is not installed: the jar compiles against pyspark's own jars/")
    jars = Path(list(spec.submodule_search_locations)[0]) / "jars"
    if not jars.is_dir():
        raise JarError(f"pyspark has no jars/ directory at {jars}")
    return jars


def find_java() -> Optional[str]:
    """The ``java`` launcher (JAVA_HOME, then PATH), or None."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


def find_javac() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "javac"), os.X_OK):
        return os.path.join(home, "bin", "javac")
    found = shutil.which("javac")
    if found:
        return found
    raise JarError("javac not found (JAVA_HOME or PATH): install a JDK 17 to build the rmq JVM jar; "
                   "without it format(\"rmq\") runs on the Python data source")


def source_hash(java_dir: Path, classpath_dir: Path) -> str:
    """Digest of every source and resource plus the Spark build compiled against."""
    h = hashlib.sha256(f"release={RELEASE}\n".encode())
    for path in java_sources(java_dir) + resource_files(java_dir):
        h.update(path.relative_to(java_dir).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    h.update(",".join(sorted(p.name for p in classpath_dir.glob("spark-*.jar"))).encode())
    return h.hexdigest()


def build_jar(java_dir: Path = JAVA_DIR, out_dir: Path = JAR_DIR, force: bool = False,
              log=None) -> str:
    """Compile ``java_dir`` against pyspark's jars into ``out_dir/rmqsource-spark.jar``.

    Skipped when the jar exists and sources, resources and Spark are unchanged
    since it was built (hash stamp beside the jar). Returns the jar's path.
    """
    java_dir, out_dir = Path(java_dir), Path(out_dir)
    require_supported_spark()
    classpath_dir = pyspark_jars_dir()
    sources = java_sources(java_dir)
    if not sources:
        raise JarError(f"no Java sources under {java_dir}")
    jar = out_dir / JAR_NAME
    stamp = out_dir / (JAR_NAME + ".sha256")
    digest = source_hash(java_dir, classpath_dir)
    if not force and jar.is_file() and stamp.is_file() and stamp.read_text().strip() == digest:
        return str(jar)
    javac = find_javac()
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rmq-javac-") as tmp:
        classes = Path(tmp) / "classes"
        argfile = Path(tmp) / "sources.txt"
        argfile.write_text("\n".join(f'"{p.as_posix()}"' for p in sources) + "\n")
        # C1 only + serial GC: javac is a short run, and this starts it a third faster.
        # -XDstringConcat=inline: string + compiles to StringBuilder code, not invokedynamic, whose first call
        # at each site spins method-handle classes: short JVM runs (rmq verify, a Spark task) start faster.
        cmd = [javac, "-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "--release", RELEASE, "-encoding", "UTF-8",
               "-XDstringConcat=inline",
               "-cp", str(classpath_dir / "*"), "-d", str(classes), f"@{argfile}"]
        if log:
            log(f"compiling {len(sources)} Java sources against {classpath_dir} ...")
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            output = (done.stdout + done.stderr).rstrip()
            if log:
                # javac's report as javac prints it (file:line, the source line, the caret); the error itself
                # stays one line, like every rmq error.
                log(output)
                last = output.splitlines()[-1].strip() if output else "no output"
                raise JarError(f"javac failed ({javac} --release {RELEASE} against {classpath_dir}): {last}; "
                               f"its messages are printed above")
            raise JarError(f"javac failed ({javac} --release {RELEASE} ...):\n{output}")
        if log and (done.stdout or done.stderr).strip():
            log((done.stdout + done.stderr).rstrip())
        partial = out_dir / (JAR_NAME + f".{os.getpid()}.tmp")
        _pack(partial, classes, java_dir)
        os.replace(partial, jar)           # atomic: a running session never sees half a jar
    stamp.write_text(digest + "\n")
    return str(jar)


def _pack(target: Path, classes: Path, java_dir: Path) -> None:
    manifest = "Manifest-Version: 1.0\r\nCreated-By: rmqsource (javac --release 17)\r\n\r\n"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("META-INF/MANIFEST.MF", manifest)
        for path in sorted(classes.rglob("*.class")):
            z.write(path, path.relative_to(classes).as_posix())
        for path in resource_files(java_dir):
            z.write(path, path.relative_to(java_dir).as_posix())
