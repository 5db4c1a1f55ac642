"""The JVM twins of Python classes, driven through py4j from the test session's JVM.

Tests that hold one contract for both implementations take a fixture that
yields the Python class or one of these adapters, which speak the Python API:

* ``JvmStreamReader``: ``io.rmqsource.spark.stream.RmqMicroBatchStream`` as an
  ``RmqStreamReader`` (offsets as dicts, pyspark ReadLimit objects, partitions
  with ``topic``/``queue_id``/``start``/``end``, ``read`` yielding batches with
  ``num_rows`` and ``column(name).to_pylist()``);
* ``JvmConsumerOffsets``: ``io.rmqsource.store.ConsumerOffsetsFile`` as a
  ``ConsumerOffsets``;
* ``jvm_loads`` / ``jvm_dumps``: ``io.rmqsource.format.FastJson`` as
  ``loads_fastjson`` / ``dumps_fastjson``.

Java errors come back as the Python error classes of the same name, with the
same message (and file/offset for FormatError).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any, Optional

import pytest

from rmqsource import errors

JVM_ERRORS = "io.rmqsource.errors."      # the Java twin of rmqsource.errors


def jvm_or_skip(request):
    """The session JVM with the rmq jar loaded, else skip (python mode: no jar on spark.jars)."""
    from rmqsource.spark.jar import session_jar
    if session_jar() is None:           # decided without starting Spark
        pytest.skip("the rmq jar is not on this session's spark.jars (RMQ_SPARK_MODE=python)")
    spark = request.getfixturevalue("spark")
    jvm = spark._jvm
    try:
        jvm.java.lang.Class.forName("io.rmqsource.spark.stream.RmqMicroBatchStream", True,
                                    jvm.java.lang.Thread.currentThread().getContextClassLoader())
    except Exception:       # noqa: BLE001 - py4j raises its own error for a missing class
        pytest.skip("the rmq jar is not on this session's spark.jars (RMQ_SPARK_MODE=python)")
    return jvm


def python_error(exc):
    """The Python twin of a Java RmqError raised through py4j (the exception itself otherwise)."""
    from py4j.protocol import Py4JJavaError
    if not isinstance(exc, Py4JJavaError):
        return exc
    java = exc.java_exception
    name = java.getClass().getName()
    if not name.startswith(JVM_ERRORS):
        return exc
    cls = getattr(errors, name.rsplit(".", 1)[1], errors.RmqError)
    message = java.getMessage()
    if issubclass(cls, errors.FormatError) and name.endswith("FormatError"):
        err = errors.FormatError.__new__(errors.FormatError)
        Exception.__init__(err, message)
        err.file = java.file()
        err.offset = java.offset() if java.offset() >= 0 else None
        err.reason = message
        return err
    return cls(message)


class _Call:
    """Context manager turning Java RmqErrors into their Python twins.

    Inside it, py4j answers without pyspark's SQL error conversion: for every Java exception that
    converter asks the JVM some 80 questions (about 50-100 ms a call), only to hand a non-Spark
    exception back unconverted, as Py4JJavaError, which is what python_error takes.
    """

    def __enter__(self):
        import py4j.java_gateway
        import py4j.protocol
        self._patched = py4j.java_gateway.get_return_value
        py4j.java_gateway.get_return_value = py4j.protocol.get_return_value
        return self

    def __exit__(self, kind, exc, tb):
        import py4j.java_gateway
        py4j.java_gateway.get_return_value = self._patched
        if exc is not None:
            twin = python_error(exc)
            if twin is not exc:
                raise twin from None
        return False


# --------------------------------------------------------------------------- stream

class _Column:
    def __init__(self, values):
        self._values = values

    def to_pylist(self):
        return list(self._values)


class _Batch:
    """The rows of a Java ColumnarBatch, column by column, read through py4j."""

    def __init__(self, batch, schema):
        self.num_rows = batch.numRows()
        self._batch = batch
        self._schema = schema

    def column(self, name: str) -> _Column:
        i = self._schema.fieldIndex(name)
        vec = self._batch.column(i)
        kind = self._schema.fields()[i].dataType().typeName()
        values = []
        for r in range(self.num_rows):
            if vec.isNullAt(r):
                values.append(None)
            elif kind == "string":
                values.append(vec.getUTF8String(r).toString())
            elif kind == "integer":
                values.append(vec.getInt(r))
            else:
                values.append(vec.getLong(r))
        return _Column(values)


class _Part:
    def __init__(self, java, topic, queue_id, start, end):
        self.java, self.topic, self.queue_id, self.start, self.end = java, topic, queue_id, start, end


class JvmStreamReader:
    """RmqMicroBatchStream behind the RmqStreamReader API (see the module docstring)."""

    def __init__(self, jvm, root, **options):
        self.jvm = jvm
        m = jvm.java.util.HashMap()
        m.put("path", str(root))
        for k, v in options.items():
            m.put(k, str(v))
        self.schema = jvm.io.rmqsource.spark.Contract.SCHEMA
        with _Call():
            self.stream = jvm.io.rmqsource.spark.stream.RmqMicroBatchStream(
                jvm.org.apache.spark.sql.util.CaseInsensitiveStringMap(m), self.schema)

    def _offset(self, doc):
        return self.stream.deserializeOffset(json.dumps(doc))

    def _limit(self, limit):
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxRows, ReadMinRows
        rl = self.jvm.org.apache.spark.sql.connector.read.streaming.ReadLimit
        if isinstance(limit, ReadAllAvailable):
            return rl.allAvailable()
        if isinstance(limit, ReadMaxRows):
            return rl.maxRows(limit.max_rows)
        if isinstance(limit, ReadMaxBytes):
            return rl.maxBytes(limit.max_bytes)
        if isinstance(limit, ReadMinRows):
            return rl.minRows(limit.min_rows, 2**63 - 1)   # the delay is the stream's own option
        raise TypeError(limit)

    def initialOffset(self) -> dict:
        with _Call():
            return json.loads(self.stream.initialOffset().json())

    def latestOffset(self, start: dict, limit) -> dict:
        with _Call():
            return json.loads(self.stream.latestOffset(self._offset(start), self._limit(limit)).json())

    def getDefaultReadLimit(self):
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxRows, ReadMinRows
        lim = self.stream.getDefaultReadLimit()
        name = lim.getClass().getSimpleName()
        if name == "ReadMaxRows":
            return ReadMaxRows(lim.maxRows())
        if name == "ReadMaxBytes":
            return ReadMaxBytes(lim.maxBytes())
        if name == "ReadMinRows":
            return ReadMinRows(lim.minRows())
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.stream.prepareForTriggerAvailableNow()

    def reportLatestOffset(self) -> Optional[dict]:
        off = self.stream.reportLatestOffset()
        return None if off is None else json.loads(off.json())

    def metrics(self, consumed: dict) -> dict:
        opt = self.jvm.java.util.Optional.of(self._offset(consumed))
        return dict(self.stream.metrics(opt))

    def partitions(self, start: dict, end: dict) -> list:
        from py4j.java_gateway import get_field
        return [_Part(p, get_field(p, "topic"), get_field(p, "queueId"), get_field(p, "start"), get_field(p, "end"))
                for p in self.stream.planInputPartitions(self._offset(start), self._offset(end))]

    def read(self, partition):
        factory = self.stream.createReaderFactory()
        with _Call():
            reader = factory.createColumnarReader(partition.java)
            try:
                while reader.next():
                    yield _Batch(reader.get(), self.schema)
            finally:
                reader.close()

    def commit(self, end: dict) -> None:
        with _Call():
            self.stream.commit(self._offset(end))

    def stop(self) -> None:
        self.stream.stop()


# --------------------------------------------------------------------------- config JSON

def _key_tag(k: Any) -> tuple[str, Any]:
    if isinstance(k, str):
        return "s", k
    if isinstance(k, int) and not isinstance(k, bool):
        return "i", str(k)
    return "x", repr(k)          # no JSON key: FastJson must refuse it


def _to_tagged(value: Any) -> Any:
    """A Python document as plain data that keeps int keys apart from str keys and sets from lists."""
    from rmqsource.format.configjson import JavaList
    if isinstance(value, dict):
        return {"m": [[*_key_tag(k), _to_tagged(v)] for k, v in value.items()]}
    if isinstance(value, (set, frozenset)):
        return {"set": [_to_tagged(v) for v in value]}
    if isinstance(value, JavaList):
        return {"pretty": [_to_tagged(v) for v in value]}
    if isinstance(value, (list, tuple)):
        return {"list": [_to_tagged(v) for v in value]}
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return {"v": value}
    if isinstance(value, int):
        return {"int": str(value)}
    if isinstance(value, float):
        return {"float": repr(value)}
    return {"other": repr(value)}


def _java_value(jvm, tagged: Any):
    """Builds the Java object FastJson writes from the tagged data (maps keep insertion order)."""
    kind, body = next(iter(tagged.items()))
    if kind == "m":
        m = jvm.java.util.LinkedHashMap()
        for t, k, v in body:
            key = k if t == "s" else _java_value(jvm, {"int": k}) if t == "i" else jvm.java.lang.Object()
            m.put(key, _java_value(jvm, v))
        return m
    if kind in ("list", "pretty", "set"):
        items = jvm.java.util.ArrayList()
        for v in body:
            items.add(_java_value(jvm, v))
        if kind == "set":
            return jvm.java.util.LinkedHashSet(items)
        return jvm.io.rmqsource.format.FastJson.PrettyList(items) if kind == "pretty" else items
    if kind == "v":
        return body
    if kind == "int":
        n = int(body)
        return jvm.java.lang.Long.valueOf(body) if -2**63 <= n < 2**63 else jvm.java.math.BigInteger(body)
    if kind == "float":
        return jvm.java.lang.Double.valueOf(float(body))
    return jvm.java.lang.Object()


def _python_value(obj) -> Any:
    """A Java value FastJson parsed, as the Python value loads_fastjson gives."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    name = obj.getClass().getName()
    if name == "java.math.BigInteger":
        return int(obj.toString())
    if name == "java.lang.Double":
        return float(obj.doubleValue())
    if name == "java.util.LinkedHashMap":
        out = {}
        for e in obj.entrySet().toArray():
            k = e.getKey()
            if not isinstance(k, (str, int)):
                k = int(k.toString())
            out[k] = _python_value(e.getValue())
        return out
    if name == "java.util.ArrayList":
        return [_python_value(v) for v in obj.toArray()]
    raise TypeError(name)


class JvmFastJson:
    """FastJson behind loads_fastjson / dumps_fastjson / loads_fastjson_value."""

    def __init__(self, jvm):
        self.jvm = jvm
        self.cls = jvm.io.rmqsource.format.FastJson

    def loads_value(self, text, *, file=None, max_depth=64):
        file = None if file is None else str(file)
        with _Call():
            if isinstance(text, (bytes, bytearray)):
                text = self.cls.decodeUtf8(bytearray(text), file)
            return _python_value(self.cls.parseValue(text, file, max_depth))

    def loads(self, text, *, file=None):
        file = None if file is None else str(file)
        with _Call():
            if isinstance(text, (bytes, bytearray)):
                return _python_value(self.cls.parse(bytearray(text), file))
            return _python_value(self.cls.parse(text, file))

    carries_lone_surrogates = False      # py4j sends strings as UTF-8

    def reemit(self, text):
        """Parse and write again, all inside the JVM (insertion order kept)."""
        with _Call():
            return self.cls.write(self.cls.parse(text, None), False)

    def dumps(self, obj, *, sort_keys=True):
        with _Call():
            return self.cls.write(_java_value(self.jvm, _to_tagged(obj)), sort_keys)


# --------------------------------------------------------------------------- consumerOffset.json

class JvmConsumerOffsets:
    """ConsumerOffsetsFile behind the ConsumerOffsets API (commit, offsets_for_group, paths)."""

    def __init__(self, jvm, store_root, *, config=None, lock_timeout_ms=30_000, clock_ms=None):
        self.jvm = jvm
        v5 = bool(config is not None and config.is_v5)
        with _Call():
            self.file = jvm.io.rmqsource.store.ConsumerOffsetsFile(str(store_root), v5, lock_timeout_ms)
        if clock_ms is not None:
            self.file.withClockMs(clock_ms())

    @property
    def path(self) -> str:
        return self.file.path().toString()

    @property
    def lock_path(self) -> str:
        return self.file.lockPath().toString()

    def offsets_for_group(self, group):
        with _Call():
            doc = json.loads(self.file.offsetsForGroupJson(group))
        return {t: {int(q): v for q, v in qs.items()} for t, qs in doc.items()}

    def all_entries(self):
        from rmqsource.store.consumer_offsets import OffsetEntry
        with _Call():
            rows = self.file.load().entries()
        return [OffsetEntry(r[1], r[0], int(r[2]), int(r[3])) for r in rows]

    def commit(self, group, offsets, *, allow_rewind=False):
        from py4j.protocol import Py4JError
        try:
            with _Call():
                got = self.file.commit(group, offsets, allow_rewind)
        except Py4JError as exc:        # a value py4j cannot send (e.g. 2**63): refused like a bad argument
            if isinstance(exc, Exception) and "Java" not in type(exc).__name__:
                raise errors.OptionError(str(exc)) from None
            raise
        return {t: {int(q): int(v) for q, v in qs.items()} for t, qs in dict(got).items()}


def same_message(a: Exception, b: Exception) -> bool:
    """Messages agree, ignoring the error class prefixes py4j may add."""
    def norm(e):
        return re.sub(r"^[\w.]+Error: ", "", str(e)).strip()
    return norm(a) == norm(b)


def jvm_timers(store: Path, *args: str) -> list[dict]:
    """``io.rmqsource.tools.TimersMain`` (store/Timers.java) on ``store``: one dict per entry, in TimerEntry's
    fields; skips without the rmq jar or java."""
    import pyspark
    from rmqsource.spark.jar import find_java, jar_path
    jar, java = jar_path(), find_java()
    if jar is None or java is None:
        pytest.skip("the JVM twin needs the rmq jar (rmq jar --build) and java")
    # Spark's jars for rocksdbjni (RocksDB ConsumeQueues)
    cp = os.pathsep.join([jar, os.path.join(os.path.dirname(pyspark.__file__), "jars", "*")])
    proc = subprocess.run([java, "-XX:+UseSerialGC", "-cp", cp, "io.rmqsource.tools.TimersMain", str(store), *args],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def jvm_queue_view(store: Path) -> tuple[dict, dict]:
    """Every queue of ``store`` as the JVM store layer reads it (``io.rmqsource.tools.QueueDumpMain``, default
    store settings): ({(topic, queueId): (min, max)}, {(topic, queueId, offset): (phy, size, tagsCode)});
    skips without the rmq jar or java."""
    import pyspark
    from rmqsource.spark.jar import find_java, jar_path
    jar, java = jar_path(), find_java()
    if jar is None or java is None:
        pytest.skip("the JVM store layer needs the rmq jar (rmq jar --build) and java")
    cp = os.pathsep.join([jar, os.path.join(os.path.dirname(pyspark.__file__), "jars", "*")])
    proc = subprocess.run([java, "-XX:+UseSerialGC", "-cp", cp, "io.rmqsource.tools.QueueDumpMain", str(store)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    queues, units = {}, {}
    for rec in map(json.loads, proc.stdout.splitlines()):
        key = (rec["topic"], rec["queueId"])
        if rec["record"] == "queue":
            queues[key] = (rec["minOffset"], rec["maxOffset"])
        else:
            units[key + (rec["queueOffset"],)] = (rec["cqPos"], rec["cqSize"], rec["cqTagsCode"])
    return queues, units
