#!/usr/bin/env bash
# Lake tier: the tests marked `lake` (tests/spark/test_lake.py): stores backfilled into Delta Lake and Apache
# Iceberg tables with rmqsource.spark.lake, re-runs appending only what is new (judged by Delta's log and
# Iceberg's snapshots), the golden corpora, and notebooks/lake.ipynb run in a kernel.
# The runtimes are added as users add them: spark.jars.packages, resolved by Ivy from Maven Central into
# ${RMQ_LAKE_IVY:-~/.cache/rmqsource/ivy} (fetched once). They need a Spark with a tested pair
# (rmqsource.spark.lake.TESTED_RUNTIMES; docs/lake.md): the installed 4.3 has none, so this tier runs in the
# compatibility tier's environment of pyspark 4.1.4 (Delta and Iceberg)
# (${RMQ_COMPAT_CACHE:-~/.cache/rmqsource/compat}/pyspark-<version>, created as scripts/test_compat.sh creates
# it when missing), with rmqsource installed as users install it (the wheel built from this checkout, its jar
# inside) and the notebook packages; then the tests run with the jar (RMQ_SPARK_MODE=jvm) and on the Python
# data source (RMQ_SPARK_MODE=python), each pass in a pytest process of its own (the module starts its own
# session); the notebook runs in the first pass. Extra arguments go to pytest.
#   RMQ_LAKE_PYSPARK  pyspark versions (default: 4.1.4; 4.2.1 runs the Delta tests, its Iceberg ones skip)
#   RMQ_LAKE_MODES    modes (default: jvm python)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
versions="${RMQ_LAKE_PYSPARK:-4.1.4}"
modes="${RMQ_LAKE_MODES:-jvm python}"
export RMQ_LAKE_IVY="${RMQ_LAKE_IVY:-$HOME/.cache/rmqsource/ivy}"
py="${PYTHON:-$(command -v python3.11 || command -v python3)}"
start=$SECONDS
work="$(mktemp -d -t rmq-lake-XXXXXX)"
trap 'rm -rf "$work"' EXIT

echo "== building the wheel"
"$py" -m pip wheel --quiet --no-deps -w "$work/dist" "$root"
wheel="$(ls "$work"/dist/rmqsource-*.whl)"

summary=()
failed=0
for version in $versions; do
  venv="$(bash "$root/scripts/pyspark_env.sh" "$version")"
  echo "== pyspark $version: installing the wheel and the notebook packages into $venv"
  "$venv/bin/python" -m pip install --quiet nbformat nbclient ipykernel matplotlib
  "$venv/bin/python" -m pip uninstall --quiet --yes rmqsource >/dev/null 2>&1 || true
  "$venv/bin/python" -m pip install --quiet "$wheel"
  bash "$root/scripts/installed_pyspark_first.sh" "$venv/bin/python"
  have=$("$venv/bin/python" -c "import pyspark; print(pyspark.__version__)")
  if [ "$have" != "$version" ]; then
    echo "installing rmqsource changed pyspark $version to $have" >&2
    exit 1
  fi
  for mode in $modes; do
    if [ "$mode" = jvm ] && ! (cd "$work" && "$venv/bin/rmq" jar >/dev/null 2>&1); then
      summary+=("pyspark $version  $mode    FAILED (no jar in the wheel: a JDK's javac is needed to build it)")
      failed=1
      continue
    fi
    # The notebook does not depend on the mode: it runs in the first pass only.
    only_once=()
    [ "$mode" = "${modes%% *}" ] || only_once=(--deselect tests/spark/test_lake.py::test_lake_notebook_runs)
    echo "== pyspark $version, RMQ_SPARK_MODE=$mode"
    t0=$SECONDS
    rc=0
    # -P and a scratch working directory: the installed rmqsource is imported, not this checkout's. The
    # environment's bin first on PATH: the notebook's kernel is that Python.
    (cd "$work" && PATH="$venv/bin:$PATH" RMQ_SPARK_MODE=$mode "$venv/bin/python" -P -m pytest \
       -c "$root/pyproject.toml" --rootdir "$root" -p no:cacheprovider -m lake "${only_once[@]}" \
       "$root/tests/spark/test_lake.py" "$@") || rc=$?
    took=$((SECONDS - t0))
    if [ "$rc" -eq 0 ]; then
      summary+=("pyspark $version  $mode    passed (${took}s)")
    else
      summary+=("pyspark $version  $mode    FAILED (${took}s)")
      failed=1
    fi
  done
done
echo "== lake tier ($(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s)"
printf '%s\n' "${summary[@]}"
exit "$failed"
