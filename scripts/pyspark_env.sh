#!/usr/bin/env bash
# The environment of one pyspark version that the compatibility and lake tiers install rmqsource into:
# ${RMQ_COMPAT_CACHE:-~/.cache/rmqsource/compat}/pyspark-VERSION, created once (pyspark and rmqsource's
# dependencies, pytest), then reused; prints its path.
#   scripts/pyspark_env.sh VERSION
#   PYTHON  the Python that creates it (default: python3.11 or python3)
set -euo pipefail
version=$1
cache="${RMQ_COMPAT_CACHE:-$HOME/.cache/rmqsource/compat}"
py="${PYTHON:-$(command -v python3.11 || command -v python3)}"
venv="$cache/pyspark-$version"
if [ ! -x "$venv/bin/python" ]; then
  echo "== creating $venv" >&2
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet "pyspark==$version" "pyarrow>=18" py4j "numpy>=1.26" "tqdm>=4.60" \
    pytest "pandas>=2.2,<3" >&2
fi
echo "$venv"
