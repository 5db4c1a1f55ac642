#!/usr/bin/env bash
# Object-store tier: the tests marked `objectstore`. tests/spark/test_objectstore.py: every golden, crash and
# DLedger store uploaded to a bucket of a real S3 API server on loopback (s3proxy over a temp folder, a child
# JVM started by the tests) and read by the JVM scan through Hadoop's S3A connector, judged by the engines'
# answers and by the same reads from disk. tests/spark/test_snapshot_objectstore.py: `rmq snapshot` into a
# bucket of that server. tests/spark/test_hdfs.py: the golden stores on a real HDFS (Hadoop's
# mini cluster, a child JVM) read through hdfs:// URIs, and their partitions' preferred hosts.
# tests/spark/test_snapshot_hdfs.py: `rmq snapshot` into that HDFS over WebHDFS (webhdfs://). And the batch
# and stream tests run again on local files through the positioned reader that object stores take (the
# copies in tests/spark/test_positioned_reader.py). Needs the jar (a JDK).
# Test-only dependency, installed here into the project's .venv rather than by the package's `test` extra,
# since no other tier uses it: boto3 (the uploads). The jars come from Maven Central once, checked against
# its SHA-1: s3proxy into ~/.cache/rmqsource/s3proxy, the S3A connector of pyspark's Hadoop version into
# ${RMQ_S3_CACHE:-~/.cache/rmqsource/s3} (scripts/s3_jars.sh), Hadoop's mini cluster into
# ~/.cache/rmqsource/hdfs (scripts/hdfs_jars.sh). Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "$0")/env.sh"
start=$SECONDS
python -m pip install --quiet "boto3>=1.28"
bash scripts/s3_jars.sh >/dev/null
bash scripts/hdfs_jars.sh >/dev/null
rc=0
# In this order: test_objectstore.py starts its own Spark session (the S3A jars on spark.jars) and stops it
# before the others take the tests' shared one.
RMQ_SPARK_MODE=jvm python -m pytest -m objectstore tests/spark/test_objectstore.py \
  tests/spark/test_snapshot_objectstore.py tests/spark/test_hdfs.py tests/spark/test_snapshot_hdfs.py \
  tests/spark/test_positioned_reader.py "$@" || rc=$?
echo "== object-store tier ($(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s)"
exit "$rc"
