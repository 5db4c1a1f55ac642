#!/usr/bin/env bash
# A real HDFS for the object-store tier: Hadoop's mini cluster of the Hadoop version of the pyspark under
# test (org.apache.hadoop:hadoop-client-minicluster:<version>, its NameNode and DataNode in one JVM; the
# rest of the Hadoop client is pyspark's jars/) and the JUnit API its MiniDFSCluster calls, at the version
# Hadoop's parent pom sets; fetched once from Maven Central, checked by SHA-1; prints the jars' paths.
#   RMQ_HDFS_CACHE  where the jars are kept (default ~/.cache/rmqsource/hdfs)
#   PYTHON          the Python whose pyspark is under test (default: python)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/maven_jar.sh"
export RMQ_MAVEN_CACHE="${RMQ_HDFS_CACHE:-$HOME/.cache/rmqsource/hdfs}"
hadoop="$(bash "$here/hadoop_version.sh")"
remembered="$RMQ_MAVEN_CACHE/minicluster-$hadoop.junit"
if [ ! -s "$remembered" ]; then
  project="$(curl -fsSL --retry 3 "$(maven_url org.apache.hadoop hadoop-project "$hadoop" .pom)")"
  jupiter="$(sed -n 's|.*<junit.jupiter.version>\(.*\)</junit.jupiter.version>.*|\1|p' <<<"$project")"
  junit4="$(sed -n 's|.*<junit.version>\(.*\)</junit.version>.*|\1|p' <<<"$project")"
  if [ -n "$jupiter" ]; then junit="org.junit.jupiter junit-jupiter-api $jupiter"
  elif [ -n "$junit4" ]; then junit="junit junit $junit4"
  else echo "hdfs_jars: no JUnit version in hadoop-project-$hadoop.pom" >&2; exit 1
  fi
  mkdir -p "$RMQ_MAVEN_CACHE"
  echo "$junit" >"$remembered.part" && mv -f "$remembered.part" "$remembered"
fi
read -r group artifact version <"$remembered"
maven_jar org.apache.hadoop hadoop-client-minicluster "$hadoop"
maven_jar "$group" "$artifact" "$version"
