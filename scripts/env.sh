# Sourced by the set-up scripts: creates .venv with Python 3.11 and installs
# rmqsource with its test extras (idempotent; a second run only re-checks).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
py="${PYTHON:-}"
if [ -z "$py" ]; then
  for cand in python3.11 python3; do
    if command -v "$cand" >/dev/null 2>&1; then py="$cand"; break; fi
  done
fi
"$py" -c 'import sys; assert sys.version_info[:2] >= (3, 11), sys.version' \
  || { echo "rmqsource needs Python 3.11+" >&2; exit 1; }
command -v java >/dev/null 2>&1 || { echo "Spark needs a Java runtime (17) on PATH" >&2; exit 1; }
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv
fi
stamp=.venv/.rmqsource-installed
if [ ! -f "$stamp" ] || [ setup.cfg -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip setuptools wheel
  # A plain editable install puts the project root on sys.path (setup.cfg's package_dir), so Spark's
  # discovery of the top-level pyspark_rmq module (pkgutil.iter_modules) sees it.
  .venv/bin/python -m pip install --quiet -e '.[test]'
  touch "$stamp"
fi
export PATH="$here/.venv/bin:$PATH"
# Spark's Python workers import the installed pyspark, not pyspark.zip's uncompiled sources (see the
# script); the rmqsource modules are compiled here too (this machine may set PYTHONDONTWRITEBYTECODE).
bash scripts/installed_pyspark_first.sh python
python -m compileall -q rmqsource pyspark_rmq.py >/dev/null
# The JVM scan's jar (rebuilt only when its Java sources change). Without a JDK,
# format("rmq") runs on the Python data source and everything else still works.
if command -v javac >/dev/null 2>&1 || [ -x "${JAVA_HOME:-/nonexistent}/bin/javac" ]; then
  python -m rmqsource jar --build >/dev/null
else
  echo "rmqsource: no javac, so Spark reads rmq through the Python path; for the JVM scan install a JDK 17, then run: rmq jar --build" >&2
fi
