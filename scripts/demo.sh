#!/usr/bin/env bash
# The main job on an embedded default: writes a sample RocketMQ store and queries it with Spark.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec python -m rmqsource demo "$@"
