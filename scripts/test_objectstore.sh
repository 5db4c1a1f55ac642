#!/usr/bin/env bash
# Object-store tier: the tests marked `objectstore` (tests/spark/test_objectstore.py): every golden, crash and
# DLedger store uploaded to a bucket of a real S3 API server on loopback (moto's server mode, started by
# the tests) and read by the JVM scan through Hadoop's S3A connector, judged by the engines' answers and
# by the same reads from disk; and the batch and stream tests run again on local files through the positioned
# reader that object stores take (the copies in tests/spark/test_positioned_reader.py). Needs the jar (a JDK).
# Test-only dependencies, installed here into the project's .venv rather than by the package's `test`
# extra, since no other tier uses them: moto[server] and boto3 (the server and the uploads); the S3A
# connector's jars are fetched once into ${RMQ_S3_CACHE:-~/.cache/rmqsource/s3} by scripts/s3_jars.sh.
# Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "$0")/env.sh"
start=$SECONDS
python -m pip install --quiet "moto[server]>=5,<6" "boto3>=1.28"
bash scripts/s3_jars.sh >/dev/null
rc=0
RMQ_SPARK_MODE=jvm python -m pytest -m objectstore tests/spark/test_objectstore.py tests/spark/test_positioned_reader.py "$@" || rc=$?
echo "== object-store tier ($(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s)"
exit "$rc"
