#!/usr/bin/env bash
# The test command. Creates the environment (and the JVM scan's jar when a JDK is present), then:
#   scripts/test.sh            the default run: every tier but `e2e`, `slow`, `objectstore`, `broker` and `lake`
#   scripts/test.sh --unit     the inner loop: tests/unit and tests/golden less what starts a JVM or Spark
#   scripts/test.sh --e2e      the end-to-end tier: Spark applications of their own with killed tasks and
#                              drivers, full disks and restarts; a standalone cluster, Spark Connect, notebooks
#   scripts/test.sh --slow     the slow tier: long fuzz runs, the 1M-message kill, 1,000 disk faults per corpus,
#                              200k-message streams, ... in one run so that its two workers share the cores
#   scripts/test.sh --broker   the broker tier: Apache RocketMQ's own NameServer and Broker on loopback
#                              (Maven fetches them once into ~/.cache/rmqsource/broker), checked against rmq
#   scripts/test.sh ARGS...    pytest with ARGS: a -m or a path picks the tests (e.g. -m slow tests/spark,
#                              tests/spark/test_x.py -k y); options alone (--durations=20, -x) keep the default run
# With the jar built, pytest runs twice: everything with the jar on spark.jars (RMQ_SPARK_MODE=jvm),
# then, on the pure Python data source (RMQ_SPARK_MODE=python), the selected Spark tests whose answer
# depends on the mode (not those whose child sessions pick their own modes: marker own_modes).
# Setting RMQ_SPARK_MODE runs one pass.
# Each pass runs its test files in RMQ_TEST_WORKERS processes (default 2; 0 runs them in this process):
# much of a Spark test's time is JVM start-up and scheduling, so two processes share two cores well.
set -euo pipefail
source "$(dirname "$0")/env.sh"
workers=${RMQ_TEST_WORKERS:-2}
parallel=()
[ "$workers" -gt 0 ] && parallel=(-n "$workers" --dist loadfile)
if [ "${1:-}" = "--unit" ]; then
  shift
  exec python -m pytest "${parallel[@]}" \
    -m "not spark and not jvm and not slow and not cluster and not connect and not notebook" tests/unit tests/golden "$@"
fi
if [ "${1:-}" = "--e2e" ]; then
  shift
  set -- -m "e2e and not slow and not objectstore" "$@"
elif [ "${1:-}" = "--slow" ]; then
  shift
  # The long fuzz run first (the longest file: one worker runs it while the other takes the rest), then
  # every other folder of tests.
  dirs=(tests/fuzz)
  for d in tests/*/; do d=${d%/}; case $d in tests/fuzz|tests/support) ;; *) dirs+=("$d") ;; esac; done
  set -- -m "slow and not broker and not objectstore and not lake" "${dirs[@]}" "$@"
elif [ "${1:-}" = "--broker" ]; then
  shift
  set -- -m "broker and not slow" "$@"
else
  # Options alone (e.g. --durations=20, -x) still mean the default run; a -m or a path picks tests itself.
  picks=0
  for a in "$@"; do case $a in -m|-m*|tests*|*.py|*::*) picks=1 ;; esac; done
  [ "$picks" -eq 1 ] || set -- -m "not e2e and not slow and not objectstore and not broker and not lake" "$@"
fi
if [ -n "${RMQ_SPARK_MODE:-}" ] || ! rmq jar >/dev/null 2>&1; then
  exec python -m pytest "${parallel[@]}" "$@"
fi
jvm=0 py=0
# Both passes check the same broker runs of the broker tier (tests/broker/conftest.py): what the broker answered
# does not depend on the Spark mode, so the second pass starts no broker the first one ran.
if [ -z "${RMQ_BROKER_RUNS_DIR:-}" ]; then
  RMQ_BROKER_RUNS_DIR="$(mktemp -d "${TMPDIR:-/tmp}/rmq-broker-runs.XXXXXX")"
  export RMQ_BROKER_RUNS_DIR
  trap 'rm -rf "$RMQ_BROKER_RUNS_DIR"' EXIT
fi
RMQ_SPARK_MODE=jvm python -m pytest "${parallel[@]}" "$@" || jvm=$?
echo "== Spark tests again on the Python data source (RMQ_SPARK_MODE=python) =="
RMQ_SPARK_MODE=python RMQ_SPARK_TESTS_ONLY=1 python -m pytest "${parallel[@]}" "$@" || py=$?
[ "$py" -eq 5 ] && py=0   # 5: the arguments selected no Spark test
[ "$jvm" -ne 0 ] && exit "$jvm"
exit "$py"
