"""Locating, building and choosing the JVM scan's jar (rmqsource.spark.jar, `rmq jar`)."""

from __future__ import annotations

import io
import shutil
import zipfile

import pytest

from rmqsource import cli
from rmqsource.spark import jar

pytestmark = pytest.mark.unit

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
