"""Locating, building and choosing the JVM scan's jar (rmqsource.spark.jar, `rmq jar`)."""

from __future__ import annotations

import io
import shutil
import zipfile

import pytest

from rmqsource import cli
from rmqsource.spark import jar

pytestmark = pytest.mark.jvm

HELLO = """package io.rmqsource.spark.probe;
public final class Hello { public static String hi() { return "%s"; } }
"""


@pytest.fixture
def no_jar(tmp_path, monkeypatch):
    monkeypatch.setattr(jar, "JAR_DIR", tmp_path / "jars")
    monkeypatch.delenv(jar.MODE_ENV, raising=False)
    return tmp_path


def test_missing_jar_says_how_to_build(no_jar, monkeypatch):
    assert jar.jar_path() is None
    with pytest.raises(jar.JarError, match="rmq jar --build"):
        jar.jar_path(required=True)
    assert jar.spark_mode() == "python" and jar.session_jar() is None
    monkeypatch.setenv(jar.MODE_ENV, "jvm")
    with pytest.raises(jar.JarError, match="not built"):
        jar.spark_mode()
    monkeypatch.setenv(jar.MODE_ENV, "scala")
    with pytest.raises(jar.JarError, match="expected jvm or python"):
        jar.spark_mode()


def test_cli_jar_exit_codes(no_jar, capsys):
    out = io.StringIO()
    assert cli.main(["jar"], stdout=out) == cli.EXIT_STORE_ERROR
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "not built" in err and "rmq jar --build" in err
    (no_jar / "jars").mkdir()
    (no_jar / "jars" / jar.JAR_NAME).write_bytes(b"PK\x05\x06" + bytes(18))
    out = io.StringIO()
    assert cli.main(["jar"], stdout=out) == cli.EXIT_OK
    assert out.getvalue().strip() == str(no_jar / "jars" / jar.JAR_NAME)


def test_python_mode_ignores_a_built_jar(no_jar, monkeypatch):
    (no_jar / "jars").mkdir()
    (no_jar / "jars" / jar.JAR_NAME).write_bytes(b"PK\x05\x06" + bytes(18))
    assert jar.spark_mode() == "jvm" and jar.session_jar() == jar.jar_path()
    monkeypatch.setenv(jar.MODE_ENV, "python")
    assert jar.session_jar() is None
    assert jar.session_conf() == {jar.PYTHON_PUSHDOWN: "true"}


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK")
def test_build_packs_classes_and_resources_and_skips_when_unchanged(tmp_path):
    src, out = tmp_path / "java", tmp_path / "jars"
    (src / "io/rmqsource/spark/probe").mkdir(parents=True)
    (src / "META-INF/services").mkdir(parents=True)
    source = src / "io/rmqsource/spark/probe/Hello.java"
    source.write_text(HELLO % "one")
    (src / "META-INF/services/org.apache.spark.sql.sources.DataSourceRegister").write_text("x.Y\n")
    (src / "io/rmqsource/spark/probe/limits.json").write_text('{"a": 1}')

    built = jar.build_jar(src, out)
    with zipfile.ZipFile(built) as z:
        names = set(z.namelist())
    assert {"META-INF/MANIFEST.MF", "io/rmqsource/spark/probe/Hello.class",
            "META-INF/services/org.apache.spark.sql.sources.DataSourceRegister",
            "io/rmqsource/spark/probe/limits.json"} <= names
    assert not any(n.endswith(".java") for n in names)

    before = (out / jar.JAR_NAME).stat().st_mtime_ns
    logged = []
    assert jar.build_jar(src, out, log=logged.append) == built
    assert logged == [] and (out / jar.JAR_NAME).stat().st_mtime_ns == before   # unchanged: no javac

    source.write_text("class Broken {")
    with pytest.raises(jar.JarError, match="javac failed"):
        jar.build_jar(src, out)
    assert (out / jar.JAR_NAME).stat().st_mtime_ns == before   # a failed build keeps the last good jar


# --------------------------------------------------------------------------- links to a Spark's members

STUB = """package org.apache.spark.sql.types;
public final class DataTypes {  // two members the real class has (same descriptors), one it has not
    public static final DataType IntegerType = null;
    public static ArrayType createArrayType(DataType elementType) { return null; }
    public static int rmqNoSuchMember(long x) { return 0; }
    // Declared here, inherited from Object by the real class: as Aggregation.toString in Spark 4 and 3.5.
    @Override public String toString() { return ""; }
}
"""
CALLER = """package io.rmqsource.spark.probe;
public final class Caller {
    public static Object call() {
        org.apache.spark.sql.types.DataTypes.rmqNoSuchMember(1L);
        return org.apache.spark.sql.types.DataTypes.createArrayType(org.apache.spark.sql.types.DataTypes.IntegerType);
    }
    public static String text(org.apache.spark.sql.types.DataTypes t) {
        return t.toString();   // DataTypes.toString in the constant pool, resolved to Object's in the real class
    }
}
"""


def _spark_jars():
    import pyspark
    from pathlib import Path
    return Path(pyspark.__file__).parent / "jars"


@pytest.mark.skipif(shutil.which("javac") is None or shutil.which("javap") is None, reason="needs a JDK")
def test_link_check_names_what_a_spark_lacks(tmp_path):
    """scripts/check_jar_links.py: a member the target Spark does not have (compiled against a stub of a real
    Spark class) and a class it does not have are listed; the members it has (Object's included) are not."""
    import subprocess
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    from check_jar_links import check
    src = tmp_path / "src"
    for rel, text in (("org/apache/spark/sql/types/DataTypes.java", STUB),
                      ("io/rmqsource/spark/probe/Caller.java", CALLER)):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    classes = tmp_path / "classes"
    subprocess.run(["javac", "--release", "17", "-d", str(classes), "-cp", str(_spark_jars() / "*"),
                    str(src / "org/apache/spark/sql/types/DataTypes.java"),
                    str(src / "io/rmqsource/spark/probe/Caller.java")], check=True, capture_output=True)
    probe = tmp_path / "probe.jar"
    with zipfile.ZipFile(probe, "w") as z:
        z.write(classes / "io/rmqsource/spark/probe/Caller.class", "io/rmqsource/spark/probe/Caller.class")
    assert check(probe, _spark_jars()) == [
        "member org/apache/spark/sql/types/DataTypes.rmqNoSuchMember:(J)I"]
    empty = tmp_path / "no-spark"
    empty.mkdir()
    assert check(probe, empty) == ["class org/apache/spark/sql/types/DataTypes"]


@pytest.mark.skipif(jar.jar_path() is None or shutil.which("javap") is None, reason="needs the built jar and a JDK")
def test_the_built_jar_links_against_the_installed_spark():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    from check_jar_links import check
    assert check(Path(jar.jar_path()), _spark_jars()) == []
