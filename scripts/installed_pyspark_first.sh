#!/usr/bin/env bash
# Makes the Python workers of the environment whose interpreter is $1 import its installed pyspark
# (modules compiled once, by pip) instead of pyspark.zip. Spark puts pyspark.zip and py4j's zip ahead of
# everything on its workers' path, and a zip holds no compiled modules: every new worker (three planner
# processes per Python data source query, and an executor worker after each task that stops reading early,
# as a limit does) compiled pyspark's sources again, about 1.1 s of CPU each. The files are the same; a
# .pth line moves the two zips to the end of the path.
set -euo pipefail
python="$1"
site_packages="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo 'import sys; sys.path.sort(key=lambda p: p.endswith(("pyspark.zip", "-src.zip")))' \
  > "$site_packages/zz_rmqsource_installed_pyspark_first.pth"
