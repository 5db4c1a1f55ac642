#!/usr/bin/env bash
# Hadoop's S3A connector for the object-store tier, matching the Hadoop client of the pyspark under test;
# fetched once from Maven Central and reused; prints the jars' paths, one a line (for spark.jars).
# pyspark's jars/ has the Hadoop client (hadoop-client-api-<version>.jar) but not S3A: this takes
# org.apache.hadoop:hadoop-aws:<version> and the jars its pom names for run time: the AWS SDK bundle (the
# SDK v2 software.amazon.awssdk:bundle from Hadoop 3.4 on, com.amazonaws:aws-java-sdk-bundle before) and,
# from Hadoop 3.5, the S3 analytics accelerator, at the versions Hadoop's parent pom (hadoop-project)
# sets. Each jar is checked against Maven Central's .sha1.
#   RMQ_S3_CACHE  where the jars are kept (default ~/.cache/rmqsource/s3)
#   PYTHON        the Python whose pyspark is under test (default: python)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/maven_jar.sh"
export RMQ_MAVEN_CACHE="${RMQ_S3_CACHE:-$HOME/.cache/rmqsource/s3}"
hadoop="$(bash "$here/hadoop_version.sh")"

# What this hadoop-aws needs at run time, remembered beside the jars (two pom reads on first use only):
# its pom's compile-scope dependencies outside Hadoop (the AWS SDK bundle; from Hadoop 3.5 also the S3
# analytics accelerator), at the versions Hadoop's parent pom sets, one "group artifact version" a line.
remembered="$RMQ_MAVEN_CACHE/hadoop-aws-$hadoop.deps"
if [ ! -s "$remembered" ]; then
  mkdir -p "$RMQ_MAVEN_CACHE"
  work="$(mktemp -d "$RMQ_MAVEN_CACHE/.poms-XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  curl -fsSL --retry 3 -o "$work/aws.pom" "$(maven_url org.apache.hadoop hadoop-aws "$hadoop" .pom)"
  curl -fsSL --retry 3 -o "$work/project.pom" "$(maven_url org.apache.hadoop hadoop-project "$hadoop" .pom)"
  "${PYTHON:-python}" - "$work/aws.pom" "$work/project.pom" >"$work/deps" <<'EOF_PY'
import re, sys
aws, project = (open(p).read() for p in sys.argv[1:])
props = dict(re.findall(r"<([\w.-]+)>([^<$]+)</\1>", re.search(r"<properties>(.*?)</properties>", project, re.S).group(1)))
managed = {}
for d in re.findall(r"<dependency>(.*?)</dependency>", project, re.S):
    g, a, v = (re.search(rf"<{t}>(.*?)</{t}>", d) for t in ("groupId", "artifactId", "version"))
    if g and a and v:
        managed.setdefault((g.group(1), a.group(1)), v.group(1))
body = aws[aws.index("</dependencyManagement>") if "</dependencyManagement>" in aws else 0:]
for d in re.findall(r"<dependency>(.*?)</dependency>", re.search(r"<dependencies>(.*)</dependencies>", body, re.S).group(1), re.S):
    g, a = (re.search(rf"<{t}>(.*?)</{t}>", d).group(1) for t in ("groupId", "artifactId"))
    scope = re.search(r"<scope>(.*?)</scope>", d)
    if g == "org.apache.hadoop" or (scope and scope.group(1) != "compile") or "<optional>true" in d:
        continue
    print(g, a, re.sub(r"\$\{(.*?)\}", lambda m: props[m.group(1)], managed[(g, a)]))
EOF_PY
  if ! grep -q . "$work/deps"; then
    echo "s3_jars: no run-time dependency of hadoop-aws $hadoop found in its pom" >&2
    exit 1
  fi
  mv -f "$work/deps" "$remembered"
fi
maven_jar org.apache.hadoop hadoop-aws "$hadoop"
while read -r group artifact version; do
  maven_jar "$group" "$artifact" "$version"
done <"$remembered"
