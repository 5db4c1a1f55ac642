#!/usr/bin/env bash
# Hadoop's S3A connector for the object-store tier, fetched once and reused; prints the two jars'
# paths, one a line (for spark.jars). pyspark's jars/ has the Hadoop client but not S3A; the package
# index carries hadoop-aws-3.3.1.jar and aws-java-sdk-bundle-1.11.901.jar inside the source
# distribution of sagemaker-pyspark==1.4.5 (deps/jars/, 181 MB): downloaded with pip, the two jars
# taken out and checked against their SHA-256, the archive dropped.
#   RMQ_S3_CACHE  where the jars are kept (default ~/.cache/rmqsource/s3)
#   PYTHON        the Python whose pip downloads (default: python3.11 or python3)
set -euo pipefail
cache="${RMQ_S3_CACHE:-$HOME/.cache/rmqsource/s3}"
sdist=sagemaker-pyspark==1.4.5
folder=sagemaker_pyspark-1.4.5/deps/jars
declare -A sha256=(
  [hadoop-aws-3.3.1.jar]=6be50ad8a8b445d2802381b085b2a3ede5c29d353450a6a21f16b2fefa962b6e
  [aws-java-sdk-bundle-1.11.901.jar]=b87175b32a16544cc1b37cf40390eb375833e62bed67f8ce6cde4b7ad6429ead
)
names=(hadoop-aws-3.3.1.jar aws-java-sdk-bundle-1.11.901.jar)

have_all() {
  local n
  for n in "${names[@]}"; do [ -s "$cache/$n" ] || return 1; done
}

if ! have_all; then
  py="${PYTHON:-$(command -v python3.11 || command -v python3)}"
  mkdir -p "$cache"
  work="$(mktemp -d "$cache/.fetch-XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  echo "s3_jars: downloading $sdist (181 MB, once) for the S3A connector into $cache" >&2
  "$py" -m pip download --quiet --no-deps --no-binary :all: "$sdist" -d "$work" >&2
  archive="$(ls "$work"/sagemaker_pyspark-*.tar.gz)"
  tar -xzf "$archive" -C "$work" "${names[@]/#/$folder/}"
  for n in "${names[@]}"; do
    got="$(sha256sum "$work/$folder/$n" | cut -d' ' -f1)"
    if [ "$got" != "${sha256[$n]}" ]; then
      echo "s3_jars: $n from $sdist has SHA-256 $got, expected ${sha256[$n]}" >&2
      exit 1
    fi
  done
  # Renamed into place only when whole and checked: an interrupted fetch leaves nothing half-written.
  for n in "${names[@]}"; do mv -f "$work/$folder/$n" "$cache/$n"; done
fi
for n in "${names[@]}"; do echo "$cache/$n"; done
