#!/usr/bin/env bash
# Compatibility tier: the representative subset (tests marked `compat`: every golden corpus through both
# read paths, a tag filter, a msgId lookup, an availableNow stream with a consumer group, rate limits,
# sink appends read back, SQL tables) on the older Sparks users run, each in its own environment:
#   ${RMQ_COMPAT_CACHE:-$HOME/.cache/rmqsource/compat}/pyspark-<version>   (created once, then reused)
# rmqsource goes into each as a user installs it: the wheel built from this checkout (it carries the jar),
# `pip install` keeping the environment's pyspark (checked). Then the subset runs with the wheel's jar on
# spark.jars (RMQ_SPARK_MODE=jvm) and on the pure Python data source (RMQ_SPARK_MODE=python), after
# scripts/check_jar_links.py has checked that every Spark member the jar names exists in that version.
# pyspark 3.5 has no Python Data Source API: there the jar alone serves rmq, so only jvm runs, and the
# python mode is reported as not available with the one line rmqsource gives for it there.
# The default run (scripts/test.sh) covers 4.3 in both modes.
#   RMQ_COMPAT_VERSIONS  pyspark versions (default: 3.5.9 4.0.5 4.1.4 4.2.1)
#   RMQ_COMPAT_MODES     modes (default: jvm python; jvm needs `java`)
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
versions="${RMQ_COMPAT_VERSIONS:-3.5.9 4.0.5 4.1.4 4.2.1}"
modes="${RMQ_COMPAT_MODES:-jvm python}"
py="${PYTHON:-$(command -v python3.11 || command -v python3)}"
start=$SECONDS
work="$(mktemp -d -t rmq-compat-XXXXXX)"
trap 'rm -rf "$work"' EXIT

echo "== building the wheel (its jar compiled in the build environment)"
"$py" -m pip wheel --quiet --no-deps -w "$work/dist" "$root"
wheel="$(ls "$work"/dist/rmqsource-*.whl)"
has_jar=$("$py" -c "import sys, zipfile; print(any(n.endswith('/rmqsource-spark.jar') for n in zipfile.ZipFile(sys.argv[1]).namelist()))" "$wheel")
echo "   $wheel (jar inside: $has_jar)"

# Test files holding compat tests (collecting the whole suite in every environment would cost minutes).
mapfile -t files < <(grep -rl --include="test_*.py" "pytest.mark.compat" tests | sort)

summary=()
failed=0
for v in $versions; do
  venv="$(bash "$root/scripts/pyspark_env.sh" "$v")"
  "$venv/bin/python" -m pip install --quiet "fastavro>=1.9"     # the typed-body tests write Avro bodies
  echo "== pyspark $v: installing the wheel into $venv"
  "$venv/bin/python" -m pip uninstall --quiet --yes rmqsource >/dev/null 2>&1 || true
  "$venv/bin/python" -m pip install --quiet "$wheel"
  bash "$root/scripts/installed_pyspark_first.sh" "$venv/bin/python"
  have=$("$venv/bin/python" -c "import pyspark; print(pyspark.__version__)")
  if [ "$have" != "$v" ]; then
    echo "installing rmqsource changed pyspark $v to $have" >&2
    exit 1
  fi
  # Every class and member the wheel's jar names must exist in this Spark (a missing one fails only
  # on the code path that reaches it, so the tests below could miss it).
  if jar=$(cd "$work" && "$venv/bin/rmq" jar 2>/dev/null); then
    spark_jars=$("$venv/bin/python" -c "import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), 'jars'))")
    if "$venv/bin/python" "$root/scripts/check_jar_links.py" --jar "$jar" --spark-jars "$spark_jars"; then
      summary+=("pyspark $v  links   passed")
    else
      summary+=("pyspark $v  links   FAILED")
      failed=1
    fi
  fi
  # Whether this pyspark has the Python data source (rmqsource's own answer, from the installed package).
  python_source=$(cd "$work" && "$venv/bin/python" -P -c "from rmqsource.spark import compat; print(compat.PYTHON_DATA_SOURCE)")
  for mode in $modes; do
    if [ "$mode" = jvm ] && ! (cd "$work" && "$venv/bin/rmq" jar >/dev/null 2>&1); then
      summary+=("pyspark $v  $mode    skipped (no jar in the wheel)")
      continue
    fi
    if [ "$mode" = python ] && [ "$python_source" != True ]; then
      # Not a skipped run: this mode does not exist here. What a user asking for it gets is checked instead.
      said=$(cd "$work" && RMQ_SPARK_MODE=python "$venv/bin/python" -P -c \
             "from rmqsource.spark.jar import session_conf; session_conf()" 2>&1 | tail -n 1) || true
      if [[ "$said" == *"UnsupportedSparkError: the rmq jar is required on Spark"* ]]; then
        summary+=("pyspark $v  $mode not available (no Python Data Source API; RMQ_SPARK_MODE=python says: ${said#*: })")
      else
        summary+=("pyspark $v  $mode FAILED (RMQ_SPARK_MODE=python should say the jar is required; said: $said)")
        failed=1
      fi
      continue
    fi
    echo "== pyspark $v, RMQ_SPARK_MODE=$mode"
    t0=$SECONDS
    rc=0
    # -P and a scratch working directory: the installed rmqsource is imported, not this checkout's.
    (cd "$work" && RMQ_SPARK_MODE=$mode "$venv/bin/python" -P -m pytest -c "$root/pyproject.toml" \
       --rootdir "$root" -p no:cacheprovider -m compat "${files[@]/#/$root/}" "$@") || rc=$?
    took=$((SECONDS - t0))
    if [ "$rc" -eq 0 ]; then
      summary+=("pyspark $v  $mode    passed (${took}s)")
    else
      summary+=("pyspark $v  $mode    FAILED (${took}s)")
      failed=1
    fi
  done
done
echo "== compatibility tier ($(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s)"
printf '%s\n' "${summary[@]}"
exit "$failed"
