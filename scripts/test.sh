#!/usr/bin/env bash
# The test command: creates the environment (and the JVM scan's jar when a JDK is present), then
# runs the default test tiers (every marker but `slow` and `objectstore`). Extra arguments go to
# pytest (e.g. scripts/test.sh -m slow for the long tiers). With the jar built, pytest runs twice:
# everything with the jar on spark.jars (RMQ_SPARK_MODE=jvm), then the Spark tests that were
# selected (markers spark, cluster, notebook) again on the pure Python data source
# (RMQ_SPARK_MODE=python). Setting RMQ_SPARK_MODE runs one pass.
set -euo pipefail
source "$(dirname "$0")/env.sh"
if [ "$#" -eq 0 ]; then
  set -- -m "not slow and not objectstore"
fi
if [ -n "${RMQ_SPARK_MODE:-}" ] || ! rmq jar >/dev/null 2>&1; then
  exec python -m pytest "$@"
fi
jvm=0 py=0
RMQ_SPARK_MODE=jvm python -m pytest "$@" || jvm=$?
echo "== Spark tests again on the Python data source (RMQ_SPARK_MODE=python) =="
RMQ_SPARK_MODE=python RMQ_SPARK_TESTS_ONLY=1 python -m pytest "$@" || py=$?
[ "$py" -eq 5 ] && py=0   # 5: the arguments selected no Spark test
[ "$jvm" -ne 0 ] && exit "$jvm"
exit "$py"
