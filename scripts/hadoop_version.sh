#!/usr/bin/env bash
# The Hadoop version of the pyspark under test: the one its jars/hadoop-client-api-<version>.jar carries
# (the connectors and the HDFS mini cluster fetched for the object-store tier must match it).
#   PYTHON  the Python whose pyspark is meant (default: python)
set -euo pipefail
"${PYTHON:-python}" - <<'EOF'
import pathlib, re, sys
import pyspark
jars = pathlib.Path(pyspark.__file__).parent / "jars"
found = sorted(m.group(1) for p in jars.glob("hadoop-client-api-*.jar")
               if (m := re.fullmatch(r"hadoop-client-api-(\d+\.\d+\.\d+)\.jar", p.name)))
if len(found) != 1:
    sys.exit(f"hadoop_version: expected one hadoop-client-api-<version>.jar in {jars}, found {found or 'none'}")
print(found[0])
EOF
