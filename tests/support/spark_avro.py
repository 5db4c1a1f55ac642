"""Spark's own Avro support (``spark-avro``, the package users add for ``from_avro``) for the test session.

pyspark's ``jars/`` does not carry it. :func:`spark_avro_jar` fetches the jar for the installed pyspark's
Scala version from Maven Central once, checks its SHA-1, and keeps it in ``~/.cache/rmqsource/spark-avro``
(``RMQ_SPARK_AVRO_CACHE``). The version is pyspark's own when Maven Central serves it, else the newest
served release of the same major version not newer than pyspark (4.3.0 is not served: 4.2.0 works with it).
Returns None when Maven Central cannot be reached: the Avro tests then skip saying so.
"""

from __future__ import annotations

import hashlib
import os
import re
import urllib.request
from pathlib import Path

CENTRAL = "https://repo1.maven.org/maven2/org/apache/spark"
FAILURE: list[str] = []          # why the last fetch gave None (for the skip reason)


def _pyspark():
    import pyspark
    jars = Path(pyspark.__file__).parent / "jars"
    scala = "2.13" if any(jars.glob("spark-core_2.13-*.jar")) else "2.12"
    return pyspark.__version__, scala


def _version_key(v: str):
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def _pick(served: list[str], wanted: str) -> str | None:
    if wanted in served:
        return wanted
    major = _version_key(wanted)[0]
    older = [v for v in served if re.fullmatch(r"\d+\.\d+\.\d+", v)
             and _version_key(v)[0] == major and _version_key(v) <= _version_key(wanted)]
    return max(older, key=_version_key) if older else None


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.read()


def spark_avro_jar() -> str | None:
    version, scala = _pyspark()
    artifact = f"spark-avro_{scala}"
    cache = Path(os.environ.get("RMQ_SPARK_AVRO_CACHE", Path.home() / ".cache" / "rmqsource" / "spark-avro"))
    chosen = cache / f"{artifact}-for-pyspark-{version}.txt"     # remembers the version picked for this pyspark
    if chosen.exists():
        jar = cache / chosen.read_text().strip()
        if jar.is_file():
            return str(jar)
    try:
        meta = _get(f"{CENTRAL}/{artifact}/maven-metadata.xml").decode()
        served = re.findall(r"<version>([^<]+)</version>", meta)
        pick = _pick(served, version)
        if pick is None:
            FAILURE[:] = [f"Maven Central serves no {artifact} release for pyspark {version}"]
            return None
        name = f"{artifact}-{pick}.jar"
        url = f"{CENTRAL}/{artifact}/{pick}/{name}"
        data = _get(url)
        sha1 = _get(url + ".sha1").decode().split()[0]
        if hashlib.sha1(data).hexdigest() != sha1:
            FAILURE[:] = [f"{url}: SHA-1 differs from Maven Central's"]
            return None
    except OSError as e:
        FAILURE[:] = [f"Maven Central not reachable for {artifact}: {e}"]
        return None
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / (name + ".part")
    tmp.write_bytes(data)
    os.replace(tmp, cache / name)          # whole or absent: an interrupted fetch leaves nothing half-written
    chosen.write_text(name)
    return str(cache / name)
