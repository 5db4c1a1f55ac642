#!/usr/bin/env bash
# One jar from Maven Central, fetched once into a cache folder and reused; prints its path.
#   maven_jar.sh GROUP ARTIFACT VERSION [CLASSIFIER]
#   RMQ_MAVEN_CACHE  the cache folder (default ~/.cache/rmqsource/maven)
# The jar is checked against Maven Central's own .sha1 file and renamed into place only when whole and
# checked: an interrupted fetch leaves nothing half-written. Sourced, it defines the function only.
set -euo pipefail
CENTRAL="${RMQ_MAVEN_CENTRAL:-https://repo1.maven.org/maven2}"

maven_url() {   # GROUP ARTIFACT VERSION FILE-SUFFIX: the URL of a file of that artifact
  echo "$CENTRAL/${1//.//}/$2/$3/$2-$3$4"
}

maven_jar() {
  local group="$1" artifact="$2" version="$3" classifier="${4:-}"
  local cache="${RMQ_MAVEN_CACHE:-$HOME/.cache/rmqsource/maven}"
  local name="$artifact-$version${classifier:+-$classifier}.jar"
  if [ ! -s "$cache/$name" ]; then
    mkdir -p "$cache"
    local url part want got
    url="$(maven_url "$group" "$artifact" "$version" "${classifier:+-$classifier}.jar")"
    part="$(mktemp "$cache/.$name.XXXXXX")"
    echo "maven_jar: downloading $url (once) into $cache" >&2
    if ! curl -fsSL --retry 3 -o "$part" "$url" || ! want="$(curl -fsSL --retry 3 "$url.sha1")"; then
      rm -f "$part"
      echo "maven_jar: cannot fetch $url" >&2
      return 1
    fi
    want="${want%% *}"
    got="$(sha1sum "$part" | cut -d' ' -f1)"
    if [ "$got" != "$want" ]; then
      rm -f "$part"
      echo "maven_jar: $url has SHA-1 $got, Maven Central says $want" >&2
      return 1
    fi
    chmod 644 "$part"
    mv -f "$part" "$cache/$name"
  fi
  echo "$cache/$name"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  maven_jar "$@"
fi
