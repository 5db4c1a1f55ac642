#!/usr/bin/env bash
# The test command: creates the environment if needed, installs, runs the default test tiers.
# Extra arguments go to pytest (e.g. scripts/test.sh -m slow for the long tiers).
set -euo pipefail
source "$(dirname "$0")/env.sh"
if [ "$#" -eq 0 ]; then
  set -- -m "not slow"
fi
exec python -m pytest "$@"
