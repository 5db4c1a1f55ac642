"""Build hook: a wheel carries the JVM scan's jar, compiled in the build environment.

``pip wheel .`` / ``python -m build`` compile ``rmqsource/jvm`` with javac against the build
environment's pyspark jars (pyspark is a build requirement, see pyproject.toml) into the wheel's
``rmqsource/spark/jars/``, so an install on a machine with a Java runtime and no JDK has the JVM scan.
RMQSOURCE_BUILD_JAR: ``auto`` (default: build when javac is found, else a wheel without the jar and a
warning), ``yes`` (fail without javac), ``no`` (never). Editable installs skip it: there
``rmq jar --build`` builds into the source tree.
"""

import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

BUILD_JAR_ENV = "RMQSOURCE_BUILD_JAR"


class BuildPyWithJar(build_py):
    def run(self):
        super().run()
        want = os.environ.get(BUILD_JAR_ENV, "auto").strip().lower()
        if getattr(self, "editable_mode", False) or want == "no":
            return
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from rmqsource.spark.jar import JAR_DIR, JAVA_DIR, JarError, build_jar, find_javac
        try:
            find_javac()
        except JarError as e:
            if want == "yes":
                raise
            print(f"rmqsource: the wheel has no JVM jar ({e})", file=sys.stderr)
            return
        out_dir = os.path.join(self.build_lib, *JAR_DIR.relative_to(JAR_DIR.parents[2]).parts)
        print(build_jar(JAVA_DIR, out_dir, log=lambda m: print(m, file=sys.stderr)), file=sys.stderr)


setup(cmdclass={"build_py": BuildPyWithJar})
