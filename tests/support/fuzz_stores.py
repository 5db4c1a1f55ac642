"""Hostile stores: every read path over one store, and a seeded mutation fuzzer over copies of the golden stores.

A *case* is (seed, index): a random generator seeded with both picks a corpus,
one to three mutations (record-aware: a CommitLog record field, a ConsumeQueue
unit, an IndexFile header/slot/entry field set to a hostile value; or raw: bit
flips, byte runs, zeroed ranges, truncations, deleted files, mutated config
JSON) and one read path:

* ``reader``: MessageStoreReader queue infos, getMessage loops (with and
  without a tag filter), view by msgId, query by key;
* ``spark_commitlog`` / ``spark_queues`` / ``spark_lookup``: the Spark batch
  decode of the whole-store path, the ConsumeQueue path and the point-read
  path, by :func:`rmqsource.spark.batch.read_partition` over the planned
  partitions (no Spark session: the task side runs in this process);
* ``jvm_commitlog`` / ``jvm_queues`` / ``jvm_lookup``: the same three reads by the JVM scan in a
  local Spark session the worker starts once (``format("rmq")`` with the jar; the rows are
  collected as Arrow, so every chosen column is decoded); a task or planning error is typed when
  its Java class is in ``io.rmqsource.errors``.  Then the differential check: the Python
  path reads the store with the same options, columns and pushed filter, and where both succeed
  the rows must be equal (outcome ``differ`` otherwise).  Without the jar these cases run the
  Python twin of the path;
* ``recovery``: ``recover_store`` on a full copy, then getMessage over the result;
* ``verify``: ``rmq verify``'s Python walk, and with the jar its JVM walk, whose report must equal
  the Python one problem for problem;
* ``config``: consumerOffset.json, ``rmq lag`` rows, the sink log.

Cases run in worker processes, one at a time each, under a per-case deadline.
Outcomes: ``ok``, ``typed`` (an :class:`~rmqsource.errors.RmqError` with a
bounded message), ``differ`` (the JVM scan's rows are not the Python path's), ``untyped`` (any other exception), ``hang`` (deadline
passed: the worker is killed and replaced), ``crash`` (the worker died, e.g.
by a signal).  Read paths run with a guard that fails any open-for-writing
of a file inside the store (readers never write).
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import io
import json
import multiprocessing as mp
import os
import random
import resource
import shutil
import struct
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.connection import wait as wait_conns
from pathlib import Path
from typing import Optional

MAX_ERROR_MESSAGE_CHARS = 4096          # a longer message quotes data it should not
WORKER_ADDRESS_SPACE_BYTES = 6 << 30    # an allocation sized by a hostile length field fails here
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


# --------------------------------------------------------------------------- read paths

def read_whole_store(store: Path, corpus: Path, *, topics: Optional[str] = None, decompress: bool = False,
                     pushed=None, columns: Optional[tuple] = None, pick=None, **options) -> int:
    """Plan a Spark batch read and decode every partition in this process (no Spark session); rows read.

    ``pick(partitions)`` may choose the partitions to decode (default: all).
    """
    if topics is not None:
        options["topics"] = topics
    if decompress:
        options["decompress"] = "true"
    return sum(b.num_rows for b in planned_batches(store, corpus, pushed=pushed, columns=columns, pick=pick,
                                                   **options))


def planned_batches(store: Path, corpus: Path, *, pushed=None, columns: Optional[tuple] = None, pick=None,
                    **options):
    """The record batches of a Spark batch read planned and decoded in this process (the Python source's tasks)."""
    from rmqsource.spark.batch import ReadSpec, read_partition
    from rmqsource.spark.options import parse_options
    from rmqsource.spark.planning import plan
    from rmqsource.spark.pushdown import Pushed
    from rmqsource.spark.schema import COLUMNS
    opts = parse_options({"path": str(store), "config": str(corpus / "store.properties"), **options})
    pushed = pushed if pushed is not None else Pushed()
    spec = ReadSpec(opts, pushed, columns or COLUMNS)
    parts = plan(opts, pushed)
    for part in (pick(parts) if pick is not None else parts):
        yield from read_partition(spec, part)


class StoreWriteAttempt(AssertionError):
    """A read path opened a file of the store for writing."""


@contextlib.contextmanager
def no_writes_under(root: Path):
    """Fail any ``os.open``/``open`` of a path under ``root`` with a writing mode, while the body runs.

    The seam covers what rmqsource uses to open files (``os.open`` for
    segments, locks, mmaps; ``open``/``Path.open`` for JSON and checkpoint).
    """
    base = os.path.realpath(root) + os.sep

    def inside(path) -> bool:
        try:
            return os.path.realpath(os.fspath(path)).startswith(base)
        except TypeError:       # an fd
            return False

    real_os_open, real_open = os.open, builtins.open

    def guarded_os_open(path, flags, *args, **kwargs):
        if flags & _WRITE_FLAGS and inside(path):
            raise StoreWriteAttempt(f"a reader opened {path} with flags 0x{flags:x}")
        return real_os_open(path, flags, *args, **kwargs)

    def guarded_open(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wax+") and inside(file):
            raise StoreWriteAttempt(f"a reader opened {file} with mode {mode!r}")
        return real_open(file, mode, *args, **kwargs)

    os.open, builtins.open, io.open = guarded_os_open, guarded_open, guarded_open
    try:
        yield
    finally:
        os.open, builtins.open, io.open = real_os_open, real_open, real_open


# --------------------------------------------------------------------------- corpus facts

@dataclass
class RecordFacts:
    segment: str                 # path relative to the store
    pos: int                     # position in the segment file
    fields: dict                 # name -> (offset in record, width)


@dataclass
class CorpusFacts:
    name: str
    corpus: str                  # golden corpus folder (store.properties)
    pristine: str                # a private copy of its store, never mutated
    records: list = field(default_factory=list)
    msg_ids: list = field(default_factory=list)
    keys: list = field(default_factory=list)          # (topic, key)
    uniq_keys: list = field(default_factory=list)
    queues: list = field(default_factory=list)        # (topic, queueId)
    files: dict = field(default_factory=dict)         # kind -> [relative paths]
    entries: list = field(default_factory=list)       # DLedger entry headers: (data file, position)
    blanks: list = field(default_factory=list)        # DLedger blanks: (data file, position)


def _record_fields(rec) -> dict:
    from rmqsource.format.record import BORNHOST_V6_FLAG, MAGIC_V2, STOREHOST_V6_FLAG
    b = 20 if rec.sys_flag & BORNHOST_V6_FLAG else 8
    s = 20 if rec.sys_flag & STOREHOST_V6_FLAG else 8
    tw = 2 if rec.magic == MAGIC_V2 else 1
    body_len_at = 68 + b + s
    topic_len_at = body_len_at + 4 + len(rec.body)
    props_len_at = topic_len_at + tw + len(rec.topic.encode("utf-8", "surrogatepass"))
    return {"totalSize": (0, 4), "magic": (4, 4), "bodyCRC": (8, 4), "queueId": (12, 4), "flag": (16, 4),
            "queueOffset": (20, 8), "phyOffset": (28, 8), "sysFlag": (36, 4), "bornTimestamp": (40, 8),
            "storeTimestamp": (48 + b, 8), "reconsumeTimes": (56 + b + s, 4),
            "preparedOffset": (60 + b + s, 8), "bodyLength": (body_len_at, 4),
            "body": (body_len_at + 4, len(rec.body)), "topicLength": (topic_len_at, tw),
            "topic": (topic_len_at + tw, props_len_at - topic_len_at - tw), "propsLength": (props_len_at, 2),
            "props": (props_len_at + 2, len(rec.properties_raw))}


EXTRA_CONFIG = {
    "consumerOffset.json": {"offsetTable": {"TopicTest@g1": {"0": 5, "1": 7, "2": 0}, "OrderTopic@g2": {"0": 3},
                                            "TopicTest@g2": {"3": 1}}},
    "rmqsourceSinkLog.json": {"queries": {"q1": {"committedBatch": 2, "tasks": {"3:0": {"start": 0, "done": False,
                                                                                        "rows": 3}}}}},
}


def prepare_corpora(work: Path) -> list[CorpusFacts]:
    """Private pristine copies of every golden store (plus config JSON to mutate) and the facts cases need."""
    from golden import copy_store, corpora, load_config
    from rmqsource.format.record import Kind
    from rmqsource.store.commitlog import CommitLog
    from rmqsource.store.layout import StoreLayout
    out = []
    for corpus in corpora():
        pristine = work / "pristine" / corpus.name
        if pristine.exists():
            shutil.rmtree(pristine)
        copy_store(corpus / "store", pristine)
        (pristine / "config").mkdir(exist_ok=True)
        for name, doc in EXTRA_CONFIG.items():
            (pristine / "config" / name).write_text(json.dumps(doc, indent=1))
        facts = CorpusFacts(corpus.name, str(corpus), str(pristine))
        cl = CommitLog(StoreLayout.for_root(pristine))
        try:
            for step in cl.walk(cl.min_offset):
                if step.decoded.kind is not Kind.MESSAGE:
                    continue
                rec = step.decoded.record
                facts.records.append(RecordFacts(os.path.relpath(step.segment.path, pristine),
                                                 step.phy_offset - step.segment.start_offset, _record_fields(rec)))
                facts.msg_ids.append(rec.msg_id)
                if rec.uniq_key:
                    facts.uniq_keys.append(rec.uniq_key)
                    facts.keys.append((rec.topic, rec.uniq_key))
                for k in (rec.keys or "").split(" "):
                    if k:
                        facts.keys.append((rec.topic, k))
            if cl.divided_offset is not None:
                from rmqsource.format.dledger import EntryKind
                first = next(i for i, s in enumerate(cl.segments) if s.dledger)
                for step in cl.dledger_entries(first):
                    where = (os.path.relpath(step.segment.path, pristine), step.entry_offset - step.segment.start_offset)
                    if step.kind is EntryKind.ENTRY:
                        facts.entries.append(where)
                    elif step.kind is EntryKind.BLANK:
                        facts.blanks.append(where)
        finally:
            cl.close()
        facts.queues = StoreLayout.for_root(pristine).list_queues()
        for p in sorted(pristine.rglob("*")):
            if not p.is_file():
                continue
            rel = str(p.relative_to(pristine))
            kind = rel.split(os.sep)[0] if os.sep in rel else rel
            facts.files.setdefault(kind, []).append(rel)
        load_config(corpus)      # fail early on a bad corpus
        out.append(facts)
    return out


# --------------------------------------------------------------------------- mutations

def _interesting(rng: random.Random, width: int, orig: int) -> int:
    bits = 8 * width
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    pool = [0, 1, -1, lo, hi, orig + 1, orig - 1, orig * 2, -orig, rng.randint(lo, hi)]
    if width >= 4:
        pool += [7, 8, 90, 91, 92, 1 << 16, (1 << 20) + 3, 262144, 262144 - orig, 1 << 30]
    if width == 8:
        pool += [1 << 40, orig + 262144, orig - 262144, 1 << 62]
    v = rng.choice(pool)
    return ((v - lo) % (1 << bits)) + lo       # wrap into the field's range


def _put_int(data: bytearray, at: int, width: int, value: int) -> None:
    if 0 <= at and at + width <= len(data):
        data[at:at + width] = value.to_bytes(width, "big", signed=True)


def _get_int(data: bytearray, at: int, width: int) -> int:
    return int.from_bytes(data[at:at + width], "big", signed=True) if at + width <= len(data) else 0


def _raw_mutation(rng: random.Random, data: bytearray) -> str:
    n = len(data)
    op = rng.choice(["bitflip", "byterun", "zero", "truncate", "extend", "bitflip", "byterun"])
    if n == 0 or op == "extend":
        extra = rng.randbytes(rng.choice([1, 7, 20, 100, 5000]))
        data += extra
        return f"extend+{len(extra)}"
    if op == "bitflip":
        k = rng.randint(1, 8)
        for _ in range(k):
            i = rng.randrange(n)
            data[i] ^= 1 << rng.randrange(8)
        return f"bitflip x{k}"
    if op == "byterun":
        at = rng.randrange(n)
        run = rng.randbytes(min(rng.choice([1, 2, 4, 8, 64, 512]), n - at))
        data[at:at + len(run)] = run
        return f"byterun@{at}+{len(run)}"
    if op == "zero":
        at = rng.randrange(n)
        length = min(rng.choice([4, 8, 20, 100, 4096, n]), n - at)
        data[at:at + length] = bytes(length)
        return f"zero@{at}+{length}"
    cut = rng.choice([rng.randrange(n), n - rng.randint(1, min(n, 200)), rng.randrange(0, n, 20) if n >= 20 else 0])
    del data[cut:]
    return f"truncate@{cut}"


def _mutate_commitlog(rng, facts: CorpusFacts, store: Path) -> tuple[str, bytearray, str]:
    if facts.records and rng.random() < 0.65:
        r = rng.choice(facts.records)
        name = rng.choice(list(r.fields))
        at, width = r.fields[name]
        path = store / r.segment
        data = bytearray(path.read_bytes())
        at += r.pos
        if width in (1, 2, 4, 8) and name not in ("body", "topic", "props"):
            v = _interesting(rng, width, _get_int(data, at, width))
            _put_int(data, at, width, v)
            return r.segment, data, f"{name}={v}@{r.pos}"
        if width == 0:
            return r.segment, data, f"{name} (empty)"
        choice = rng.choice(["zero", "random", "separators", "ff"])
        chunk = {"zero": bytes(width), "random": rng.randbytes(width), "ff": b"\xff" * width,
                 "separators": bytes(rng.choice(b"\x00\x01\x02/.") for _ in range(width))}[choice]
        data[at:at + width] = chunk
        return r.segment, data, f"{name} {choice}@{r.pos}"
    rel = rng.choice(facts.files["commitlog"])
    data = bytearray((store / rel).read_bytes())
    return rel, data, _raw_mutation(rng, data)


_DLEDGER_HEADER = [("magic", 0, 4), ("size", 4, 4), ("index", 8, 8), ("term", 16, 8), ("pos", 24, 8),
                   ("channel", 32, 4), ("chainCrc", 36, 4), ("bodyCrc", 40, 4), ("bodyLen", 44, 4)]
_DLEDGER_INDEX_ENTRY = [("magic", 0, 4), ("pos", 4, 8), ("size", 12, 4), ("index", 16, 8), ("term", 24, 8)]
_DLEDGER_CHECKPOINTS = [b"", b"committedIndex=\nendIndex=\n", b"committedIndex=abc\n", b"committedIndex=-1\nendIndex=-1\n",
                        b"committedIndex=99999999999999999999\n", b"committedIndex=1e3\n", b"\xff\xfe\x00=\x01\n",
                        b"endIndex=100000\ncommittedIndex=100000\n", b"committedIndex=0\n" * 1000]


def _mutate_dledger(rng, facts: CorpusFacts, store: Path) -> tuple[str, bytearray, str]:
    """DLedger files: an entry header field, a DLedger blank, the entry index, the checkpoint, raw bytes.

    IndexError on a corpus without DLedger files (the case then skips this mutation)."""
    kind = rng.choice(["header", "header", "header", "blank", "index", "checkpoint", "raw"])
    if kind == "header":
        rel, pos = rng.choice(facts.entries)
        name, at, width = rng.choice(_DLEDGER_HEADER)
        data = bytearray((store / rel).read_bytes())
        v = _interesting(rng, width, _get_int(data, pos + at, width))
        _put_int(data, pos + at, width, v)
        return rel, data, f"entry {name}={v}@{pos}"
    if kind == "blank":
        rel, pos = rng.choice(facts.blanks)
        at = rng.choice([0, 4])
        data = bytearray((store / rel).read_bytes())
        v = _interesting(rng, 4, _get_int(data, pos + at, 4))
        _put_int(data, pos + at, 4, v)
        return rel, data, f"blank {'magic' if at == 0 else 'length'}={v}@{pos}"
    dledger = next((k for k in facts.files if k.startswith("dledger-")), None)
    if dledger is None:
        raise IndexError("no DLedger files in this corpus")
    files = facts.files[dledger]
    if kind == "index":
        rel = rng.choice([f for f in files if f.split(os.sep)[1:2] == ["index"]])
        data = bytearray((store / rel).read_bytes())
        if rng.random() < 0.3:
            return rel, data, _raw_mutation(rng, data)
        k = rng.randrange(max(1, len(data) // 32))
        name, at, width = rng.choice(_DLEDGER_INDEX_ENTRY)
        v = _interesting(rng, width, _get_int(data, k * 32 + at, width))
        _put_int(data, k * 32 + at, width, v)
        return rel, data, f"index entry {k} {name}={v}"
    if kind == "checkpoint":
        rel = os.path.join(dledger, "checkpoint")
        return rel, bytearray(rng.choice(_DLEDGER_CHECKPOINTS)), "DLedger checkpoint"
    rel = rng.choice([f for f in files if f.split(os.sep)[1:2] == ["data"]])
    data = bytearray((store / rel).read_bytes())
    return rel, data, _raw_mutation(rng, data)


def _mutate_consumequeue(rng, facts: CorpusFacts, store: Path) -> tuple[str, bytearray, str]:
    rel = rng.choice(facts.files["consumequeue"])
    data = bytearray((store / rel).read_bytes())
    units = len(data) // 20
    if units and rng.random() < 0.6:
        u = rng.randrange(units)
        name, off, width = rng.choice([("phyOffset", 0, 8), ("size", 8, 4), ("tagsCode", 12, 8)])
        at = u * 20 + off
        if name == "phyOffset" and facts.records and rng.random() < 0.5:
            r = rng.choice(facts.records)
            v = int(r.segment.rsplit(os.sep, 1)[-1]) + r.pos + rng.choice([0, 0, 1, -1, 8])
        elif name == "size" and rng.random() < 0.2:
            v = 0x7FFFFFFF                       # pre-blank
        else:
            v = _interesting(rng, width, _get_int(data, at, width))
        _put_int(data, at, width, v)
        return rel, data, f"unit {u} {name}={v}"
    return rel, data, _raw_mutation(rng, data)


_INDEX_HEADER = [("beginTimestamp", 0, 8), ("endTimestamp", 8, 8), ("beginPhyOffset", 16, 8),
                 ("endPhyOffset", 24, 8), ("hashSlotCount", 32, 4), ("indexCount", 36, 4)]


def _mutate_index(rng, facts: CorpusFacts, store: Path, slots: int = 512) -> tuple[str, bytearray, str]:
    rel = rng.choice(facts.files["index"])
    data = bytearray((store / rel).read_bytes())
    what = rng.random()
    if what < 0.3:
        name, at, width = rng.choice(_INDEX_HEADER)
    elif what < 0.5:
        s = rng.randrange(slots)
        name, at, width = f"slot {s}", 40 + 4 * s, 4
    elif what < 0.8:
        entries = max(1, (len(data) - 40 - 4 * slots) // 20)
        e = rng.randrange(entries)
        fname, off, width = rng.choice([("hash", 0, 4), ("phy", 4, 8), ("timeDiff", 12, 4), ("prev", 16, 4)])
        name, at = f"entry {e} {fname}", 40 + 4 * slots + 20 * e + off
    else:
        return rel, data, _raw_mutation(rng, data)
    v = _interesting(rng, width, _get_int(data, at, width))
    _put_int(data, at, width, v)
    return rel, data, f"{name}={v}"


def _mutate_checkpoint(rng, facts, store: Path) -> tuple[str, bytearray, str]:
    rel = "checkpoint"
    data = bytearray((store / rel).read_bytes()) if (store / rel).exists() else bytearray(4096)
    if rng.random() < 0.6:
        at = 8 * rng.randrange(5)
        v = _interesting(rng, 8, _get_int(data, at, 8))
        _put_int(data, at, 8, v)
        return rel, data, f"checkpoint field@{at}={v}"
    return rel, data, _raw_mutation(rng, data)


_HOSTILE_JSON_VALUES = ['"--5"', '"\u00b2"', '"1e400"', "1e400", '"99999999999999999999999"', "-1", "null", "[]",
                        '{"a":1}', '"\\ud800"', "true", '"+-7"', "9223372036854775808", '"0x10"', '""']
_HOSTILE_JSON_KEYS = ['"../../etc@g1"', '"@"', '"a@b@c"', '"\\u0000@g"', '"T@"', '"@g"', '"%RETRY%x@g"',
                      '"' + "t" * 300 + '@g"']


def _mutate_config(rng, facts: CorpusFacts, store: Path) -> tuple[str, bytearray, str]:
    rel = rng.choice([f for f in facts.files.get("config", []) if f.endswith(".json")])
    data = bytearray((store / rel).read_bytes())
    text = data.decode("utf-8", "replace")
    op = rng.choice(["value", "key", "nest", "raw", "garbage"])
    if op == "value":
        import re
        nums = [m.span() for m in re.finditer(r'"?-?\d+"?', text)]
        if nums:
            a, b = rng.choice(nums)
            v = rng.choice(_HOSTILE_JSON_VALUES)
            return rel, bytearray((text[:a] + v + text[b:]).encode("utf-8", "surrogatepass")), f"value {v}"
    if op == "key":
        i = text.find('"', text.find("{", 1) + 1)
        j = text.find('"', i + 1)
        if 0 <= i < j:
            k = rng.choice(_HOSTILE_JSON_KEYS)
            return rel, bytearray((text[:i] + k + text[j + 1:]).encode("utf-8", "surrogatepass")), f"key {k}"
    if op == "nest":
        depth = rng.choice([100, 1000, 100_000])
        return rel, bytearray(rng.choice(["[", "{\"a\":"]).encode() * depth), f"nest x{depth}"
    if op == "garbage":
        return rel, bytearray(rng.randbytes(rng.choice([1, 50, 1000]))), "garbage"
    return rel, data, _raw_mutation(rng, data)


def _structural(rng, facts: CorpusFacts, store: Path) -> tuple[str, str]:
    kind = rng.choice(["delete", "stray", "abort", "abort", "empty"])
    if kind == "abort":
        (store / "abort").write_bytes(b"")
        return "abort file", "abort"
    rel = rng.choice([f for k in facts.files if k in ("commitlog", "consumequeue", "index", "checkpoint")
                      or k.startswith("dledger-") for f in facts.files[k]])
    path = store / rel
    if kind == "delete":
        path.unlink(missing_ok=True)
        return f"delete {rel}", rel
    if kind == "empty":
        path.unlink(missing_ok=True)
        path.write_bytes(b"")
        return f"empty {rel}", rel
    stray = path.parent / f"{int(path.name) + rng.choice([1, 20, 262144]) if path.name.isdigit() else 1:020d}"
    stray.unlink(missing_ok=True)
    stray.write_bytes(rng.randbytes(rng.choice([0, 7, 20, 100])))
    rel = str(stray.relative_to(store))
    return f"stray {rel}", rel


INT64_EXTREMES = ((1 << 63) - 1, -1, -(1 << 63))


@dataclass
class Applied:
    """A mutation that changed the store's files itself (a rename, a sparse extension): what, and which files."""
    desc: str
    rels: tuple


def _queue_offset_extreme(rng, facts: CorpusFacts, store: Path):
    """A record's queueOffset at an int64 extreme; or a queue's ConsumeQueue files renamed, in order and
    without a gap, so that its units' queue offsets (file start / 20) reach the top of the int64 range;
    or its last file named past the int64 range."""
    if rng.random() < 0.6 or not facts.files.get("consumequeue"):
        r = rng.choice(facts.records)
        at, width = r.fields["queueOffset"]
        data = bytearray((store / r.segment).read_bytes())
        v = rng.choice(INT64_EXTREMES)
        _put_int(data, r.pos + at, width, v)
        return r.segment, data, f"queueOffset={v}@{r.pos}"
    queue = Path(rng.choice(facts.files["consumequeue"])).parent
    files = sorted(p.name for p in (store / queue).iterdir() if p.name.isdigit())
    if not files:
        raise FileNotFoundError(queue)
    size = (store / queue / files[0]).stat().st_size or 1200
    if rng.random() < 0.25:
        names = files[:-1] + ["99999999999999999999"]
    else:       # the last file ends at the highest multiple of the file size below 2^63
        top = (1 << 63) // size * size - len(files) * size
        names = [f"{top + i * size:020d}" for i in range(len(files))]
    staged = []
    for old, new in zip(files, names):
        staged.append((store / queue / f"{new}.moving", new))
        (store / queue / old).rename(staged[-1][0])
    for tmp, new in staged:
        tmp.rename(store / queue / new)
    touched = {str(queue / n) for n in files + names}
    return Applied(f"rename {queue}/{files[0]}.. -> {names[0]}..{names[-1]}", tuple(sorted(touched)))


def _truncate_consumequeue(rng, facts: CorpusFacts, store: Path) -> tuple[str, bytearray, str]:
    """A ConsumeQueue file cut at a unit boundary or inside a unit (after phyOffset, after size, anywhere),
    most often around its last written unit."""
    rel = rng.choice(facts.files["consumequeue"])
    data = bytearray((store / rel).read_bytes())
    units = len(data) // 20
    written = next((u + 1 for u in range(units - 1, -1, -1) if any(data[20 * u:20 * u + 20])), 0)
    unit = rng.randint(max(0, written - 2), written) if rng.random() < 0.6 else rng.randint(0, units)
    cut = min(len(data), 20 * unit + rng.choice([0, 0, 8, 12, rng.randint(1, 19)]))
    del data[cut:]
    return rel, data, f"truncate@{cut} ({written} units written)"


def _append_bytes(rng, facts: CorpusFacts, store: Path) -> tuple[str, bytearray, str]:
    """Bytes appended to a CommitLog segment (any, not only the last) or a ConsumeQueue file: zeros, random
    bytes, or a copy of the file's head (whole-looking units, a record header)."""
    rel = rng.choice(facts.files[rng.choice(["commitlog", "consumequeue"])])
    data = bytearray((store / rel).read_bytes())
    n = rng.choice([1, 8, 19, 20, 21, 40, 4096])
    fill = rng.choice(["zeros", "random", "head"])
    extra = bytes(n) if fill == "zeros" else rng.randbytes(n) if fill == "random" else (data[:n] + bytes(n))[:n]
    data += extra
    return rel, data, f"append {n} bytes ({fill})"


def _sparse_tail(rng, facts: CorpusFacts, store: Path) -> Applied:
    """A CommitLog segment whose tail is a hole: cut after its records (and the blank marker) to a page
    and extended sparse to its size, or extended sparse past its size, or both."""
    present = [rel for rel in facts.files["commitlog"] if (store / rel).exists()]   # a mutation may delete one
    if not present:
        return Applied("no CommitLog file left to make sparse", ())
    rel = rng.choice(present)
    path = store / rel
    data = path.read_bytes()
    how = rng.choice(["hole", "extend", "hole+extend"])
    keep = len(data)
    if how.startswith("hole"):
        ends = [r.pos + max(0, _get_int(bytearray(data), r.pos, 4)) for r in facts.records if r.segment == rel]
        keep = min(len(data), -(-(max(ends, default=0) + 8) // 4096) * 4096)
    size = len(data) + (rng.choice([4096, 1 << 20]) if how.endswith("extend") else 0)
    path.unlink()
    path.write_bytes(data[:keep])
    os.truncate(path, size)
    return Applied(f"{rel}: sparse {how}, data to {keep}, size {size}", (rel,))


MUTATORS = [(_mutate_commitlog, 40), (_mutate_consumequeue, 20), (_mutate_index, 15), (_mutate_checkpoint, 5),
            (_mutate_config, 8), (_mutate_dledger, 12), (None, 12),      # None: structural (delete, stray file, abort ...)
            (_queue_offset_extreme, 6), (_truncate_consumequeue, 5), (_append_bytes, 5), (_sparse_tail, 4)]


class CaseStores:
    """Per-worker case directories: a full copy for cases that write (recovery), else one hard-linked
    tree per corpus that is put back after each case by re-linking only the files the case touched."""

    def __init__(self, work: Path, *, full_disk: bool = False):
        self.work = work
        self.full_disk = full_disk          # fill the file system under the stores while a case reads
        self._linked: dict[str, Path] = {}
        self._listing: dict[str, set] = {}
        self.unfill()                       # left by a worker killed mid-case

    def fill(self) -> None:
        """Fill the work directory's file system (a small tmpfs) with a file beside the stores."""
        fd = os.open(self.work / "filler", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for chunk in (bytes(1 << 20), bytes(4096)):
                try:
                    while True:
                        os.write(fd, chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
        finally:
            os.close(fd)

    def unfill(self) -> None:
        (self.work / "filler").unlink(missing_ok=True)

    @staticmethod
    def _tree(root: Path) -> set:
        return {os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files}

    def fresh(self, facts: CorpusFacts, *, full: bool) -> Path:
        pristine = Path(facts.pristine)
        if full:
            store = self.work / "case-full"
            if store.exists():
                shutil.rmtree(store)
            shutil.copytree(pristine, store, copy_function=shutil.copyfile)
            return store
        store = self._linked.get(facts.name)
        if store is None:
            store = self.work / f"case-{facts.name}"
            if store.exists():
                shutil.rmtree(store)
            for dirpath, _, filenames in os.walk(pristine):
                target = store / os.path.relpath(dirpath, pristine)
                target.mkdir(parents=True, exist_ok=True)
                for f in filenames:
                    os.link(os.path.join(dirpath, f), target / f)
            self._linked[facts.name] = store
            self._listing[facts.name] = self._tree(pristine)
        return store

    def restore(self, facts: CorpusFacts, store: Path, touched: set) -> Optional[str]:
        """Undo a read case's mutations; returns what else changed in the store (a reader wrote), if anything."""
        if facts.name not in self._linked or store != self._linked[facts.name]:
            return None
        pristine = Path(facts.pristine)
        for rel in touched:
            (store / rel).unlink(missing_ok=True)
            if (pristine / rel).exists():
                os.link(pristine / rel, store / rel)
        extra = self._tree(store) ^ self._listing[facts.name]
        if extra:
            del self._linked[facts.name]
            return f"files appeared or vanished in the store: {sorted(extra)[:5]}"
        return None


def mutate(rng: random.Random, facts: CorpusFacts, store: Path) -> tuple[list[str], set]:
    """One to three mutations of the case store; files are rewritten whole (breaking any hard link).

    Returns the descriptions and the relative paths touched.
    """
    descs, touched = [], set()
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        fn = rng.choices([m for m, _ in MUTATORS], weights=[w for _, w in MUTATORS])[0]
        if fn is None:
            desc, rel = _structural(rng, facts, store)
            descs.append(desc)
            touched.add(rel)
            continue
        try:
            result = fn(rng, facts, store)
        except (FileNotFoundError, IndexError):        # an earlier mutation deleted the file
            continue
        if isinstance(result, Applied):
            descs.append(result.desc)
            touched.update(result.rels)
            continue
        rel, data, desc = result
        path = store / rel
        path.unlink(missing_ok=True)
        path.write_bytes(bytes(data))
        descs.append(f"{rel}: {desc}")
        touched.add(rel)
    return descs, touched


# --------------------------------------------------------------------------- paths

PATHS = [("reader", 25), ("spark_commitlog", 16), ("spark_queues", 11), ("spark_lookup", 7), ("recovery", 12),
         ("config", 16), ("jvm_commitlog", 6), ("jvm_queues", 4), ("jvm_lookup", 3), ("verify", 8)]
JVM_TWINS = {"jvm_commitlog": "spark_commitlog", "jvm_queues": "spark_queues", "jvm_lookup": "spark_lookup"}
JVM_ERRORS = "io.rmqsource.errors."


# Paths a full-disk run leaves out, and why.
FULL_DISK_EXCLUDED = {
    "recovery": "it writes: ENOSPC during writes is tests/test_faults.py's subject",
}


def _paths(full_disk: bool = False) -> list:
    """PATHS, or those RMQ_FUZZ_PATHS names (comma-separated) to aim a run at some paths."""
    only = {p for p in os.environ.get("RMQ_FUZZ_PATHS", "").split(",") if p}
    paths = [(p, w) for p, w in PATHS if p in only] if only else PATHS
    return [(p, w) for p, w in paths if not (full_disk and p in FULL_DISK_EXCLUDED)]


def _columns(rng: random.Random) -> Optional[tuple]:
    """All columns for a third of the Spark cases, else a few (decoding every column of every case is slow)."""
    from rmqsource.spark.schema import COLUMNS
    if rng.random() < 0.34:
        return None
    return tuple(c for c in COLUMNS if c in set(rng.sample(COLUMNS, 4)) | {"commitLogOffset"})


def _picker(rng: random.Random, touched: set):
    """Decode the partitions that cover what the case mutated, plus one at random (all of them 1 time in 5).

    Partitions no mutation reaches decode exactly as in every other case; skipping most of them keeps
    a case cheap.  A CommitLog range covers its segment; a queue range covers its queue's files.
    """
    if rng.random() < 0.2:
        return None
    segments = {int(Path(t).name) for t in touched if Path(t).name.isdigit()
                and (t.startswith("commitlog") or (t.startswith("dledger-") and Path(t).parent.name == "data"))}
    queues = {tuple(Path(t).parts[1:3]) for t in touched if t.startswith("consumequeue") and len(Path(t).parts) > 3}

    def covers(part) -> bool:
        if hasattr(part, "segment_start"):
            return part.segment_start in segments
        ranges = part.ranges if hasattr(part, "ranges") else [(getattr(part, "topic", None),
                                                                 getattr(part, "queue_id", None))]
        return any((t, str(q)) in queues for t, q, *_ in ranges)

    def pick(parts: list) -> list:
        if not parts:
            return parts
        chosen = [p for p in parts if covers(p)]
        extra = rng.choice(parts)
        return chosen + ([extra] if extra not in chosen else [])
    return pick


def run_path(path: str, rng: random.Random, facts: CorpusFacts, store: Path,
             touched: frozenset = frozenset(), notes: Optional[list] = None) -> None:
    from golden import load_config
    corpus = Path(facts.corpus)
    config = load_config(corpus)
    if path == "reader":
        from rmqsource.store.reader import MessageStoreReader
        with MessageStoreReader(store, config) as r:
            r.queue_infos()
            for topic, qid in r.queue_keys():
                for _ in r.get_loop("g", topic, qid, 0, rng.choice([1, 8, 32]),
                                    rng.choice([None, "TagA", "TagA || TagB"]), max_calls=400):
                    pass
            for mid in rng.sample(facts.msg_ids, min(5, len(facts.msg_ids))):
                r.view(mid)
            for topic, key in rng.sample(facts.keys, min(5, len(facts.keys))):
                r.query(topic, key, 32)
    elif path == "spark_commitlog":
        read_whole_store(store, corpus, decompress=rng.random() < 0.3, columns=_columns(rng),
                         pick=_picker(rng, touched),
                         batchSize=str(rng.choice([61, 32768, 32768])),
                         maxBytesPerPartition=str(rng.choice([1 << 16, 1 << 26, 1 << 26])))
    elif path == "spark_queues":
        read_whole_store(store, corpus, topicPattern=".*", decompress=rng.random() < 0.3, columns=_columns(rng),
                         pick=_picker(rng, touched),
                         batchSize=str(rng.choice([61, 32768, 32768])),
                         maxRecordsPerPartition=str(rng.choice([50, 120, 1000])))
    elif path == "spark_lookup":
        from rmqsource.spark.pushdown import Pushed
        if rng.random() < 0.5:
            pushed = Pushed(msg_ids=frozenset(rng.sample(facts.msg_ids, min(20, len(facts.msg_ids)))))
        elif facts.uniq_keys:
            pushed = Pushed(uniq_keys=frozenset(rng.sample(facts.uniq_keys, min(5, len(facts.uniq_keys)))))
        else:
            pushed = Pushed(tags=frozenset({"TagA"}))
        read_whole_store(store, corpus, pushed=pushed)
    elif path in JVM_TWINS:
        read_with_jvm_scan(path, rng, facts, store, notes)
    elif path == "verify":
        verify_both_walks(store, config)
    elif path == "recovery":
        from rmqsource.store.reader import MessageStoreReader
        from rmqsource.store.recovery import recover_store
        recover_store(store, config, mark_clean=rng.random() < 0.5)
        with MessageStoreReader(store, config) as r:
            for topic, qid in r.queue_keys():
                for _ in r.get_loop("g", topic, qid, 0, 32, max_calls=400):
                    pass
    elif path == "config":
        from rmqsource.spark.sink import SinkLog
        from rmqsource.store.consumer_offsets import ConsumerOffsets
        from rmqsource.store.lag import group_lag
        ConsumerOffsets(store, config=config).load()
        group_lag(store, config, exact=rng.random() < 0.3)
        SinkLog(str(store)).load()
    else:
        raise ValueError(path)


def verify_both_walks(store: Path, config) -> None:
    """``rmq verify``'s Python walk, and its JVM walk when the jar is built: the same report, problem for problem."""
    from rmqsource.commands.verify_jvm import jvm_command, verify_store_jvm
    from rmqsource.store.verify import verify_store
    python = verify_store(store, config)
    if jvm_command() is None:
        return
    jvm = verify_store_jvm(store, config)
    want, got = verify_facts(python), verify_facts(jvm)
    if want != got:
        diff = [(a, b) for a, b in zip(want[0], got[0]) if a != b][:1] or [(want[1:], got[1:])]
        raise AssertionError(f"the JVM verify differs from the Python verify: {diff[0][0]} != {diff[0][1]}")


def verify_facts(report) -> tuple:
    """What a verify report says: every problem kept (as JSON), the counts by check, the walk's figures."""
    return [p.to_json() for p in report.problems], sorted(report.counts.items()), report.stats


# --------------------------------------------------------------------------- the JVM scan

_jvm_session = None        # the worker's local Spark session with the jar (started before its rlimit)


def start_jvm_session():
    """A small local session with the JVM scan's jar, or None when the jar is not built."""
    global _jvm_session
    from rmqsource.spark.jar import has_native_scan, session_jar
    jar = session_jar()
    if not has_native_scan(jar):
        return None
    import sys
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    _jvm_session = (SparkSession.builder.master("local[1]").appName("rmqsource-fuzz")
                    .config("spark.jars", jar).config("spark.ui.enabled", "false")
                    .config("spark.driver.memory", "1g").config("spark.sql.shuffle.partitions", "1")
                    .config("spark.ui.showConsoleProgress", "false")
                    .getOrCreate())
    _jvm_session.sparkContext.setLogLevel("OFF")
    return _jvm_session


def warm_jvm_session(facts: CorpusFacts) -> None:
    """One read of a pristine corpus before the first deadline: a fresh JVM's first query loads and
    compiles the scan (20 s and more on a busy 2-core machine), which is not what a case measures."""
    corpus = Path(facts.corpus)
    for topics in ({}, {"topicPattern": ".*"}):
        r = _jvm_session.read.format("rmq").option("config", str(corpus / "store.properties"))
        for k, v in topics.items():
            r = r.option(k, v)
        r.load(facts.pristine).write.format("noop").mode("overwrite").save()


def read_with_jvm_scan(path: str, rng: random.Random, facts: CorpusFacts, store: Path,
                       notes: Optional[list] = None) -> None:
    """One JVM-scan read of ``store``, then the Python path's read with the same options and columns.

    Where both succeed, their rows must be equal row for row and column for column (else
    :class:`ScanDifference`); where one fails, the case is that failure and ``notes`` says the
    other succeeded.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.datasource import In
    from rmqsource.errors import RmqError
    from rmqsource.spark.pushdown import push_filters
    from rmqsource.spark.schema import COLUMNS
    corpus = Path(facts.corpus)
    options = {"decompress": "true"} if rng.random() < 0.3 else {}
    if path == "jvm_queues":
        options.update(topicPattern=".*", maxRecordsPerPartition=str(rng.choice([500, 5000])))
    else:
        options.update(maxBytesPerPartition=str(rng.choice([1 << 18, 1 << 26])))
    lookup = None
    if path == "jvm_lookup":
        if rng.random() < 0.5 or not facts.uniq_keys:
            lookup = ("msgId", rng.sample(facts.msg_ids, min(20, len(facts.msg_ids))))
        else:
            lookup = ("uniqKey", rng.sample(facts.uniq_keys, min(5, len(facts.uniq_keys))))
    columns = _columns(rng) or COLUMNS

    r = _jvm_session.read.format("rmq").option("config", str(corpus / "store.properties"))
    for k, v in options.items():
        r = r.option(k, v)
    df = r.load(str(store))
    if lookup is not None:
        df = df.where(F.col(lookup[0]).isin(lookup[1]))
    jvm_error = jvm_rows = None
    try:
        jvm_rows = scan_rows(df.select(*columns).toArrow(), columns)
    except Exception as exc:  # noqa: BLE001 - classified by the case, after the Python read
        jvm_error = exc

    # The Python source's tasks: the same options, the filter pushed as its pushFilters would.
    pushed = push_filters([In((lookup[0],), tuple(lookup[1]))])[0] if lookup is not None else None
    try:
        python_rows = scan_rows(_python_table(store, corpus, pushed, columns, options), columns)
    except RmqError as exc:
        if jvm_error is None and notes is not None:
            notes.append(f"JVM {len(jvm_rows)} rows, Python {type(exc).__name__}")
        raise jvm_error or exc
    if jvm_error is not None:
        if notes is not None:
            notes.append(f"Python {len(python_rows)} rows, JVM {classify_jvm_error(jvm_error)[1][:120]}")
        raise jvm_error
    difference = first_difference(jvm_rows, python_rows, columns)
    if difference:
        raise ScanDifference(f"JVM scan != Python path ({', '.join(f'{k}={v}' for k, v in options.items())}"
                             f"{f', {lookup[0]} in {len(lookup[1])} values' if lookup else ''}): {difference}")


def _python_table(store: Path, corpus: Path, pushed, columns: tuple, options: dict):
    import pyarrow as pa
    from rmqsource.spark.schema import ARROW_SCHEMA
    schema = pa.schema([ARROW_SCHEMA.field(c) for c in columns])
    return pa.Table.from_batches(list(planned_batches(store, corpus, pushed=pushed, columns=columns, **options)),
                                 schema)


# --------------------------------------------------------------------------- the differential check

class ScanDifference(AssertionError):
    """The JVM scan and the Python path both read a store and returned different rows."""


def scan_rows(table, columns: tuple) -> list:
    """Rows of an Arrow table as tuples in ``columns`` order, timestamps as UTC microseconds, ordered by
    commitLogOffset (then by the whole row: a ConsumeQueue read may return one record twice)."""
    import pyarrow as pa
    values = []
    for name in columns:
        a = table.column(name)
        if pa.types.is_timestamp(a.type):        # Spark hands them over in the session time zone
            a = a.cast(pa.int64())
        values.append([_hashable(v) for v in a.to_pylist()])
    rows = list(zip(*values)) if values else []
    at = columns.index("commitLogOffset")
    rows.sort(key=lambda row: (row[at] is None, row[at] or 0, repr(row)))
    return rows


def _hashable(value):
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value


def _short(value, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def first_difference(jvm: list, python: list, columns: tuple) -> Optional[str]:
    """None when both row lists are equal, else the first differing row and column, said plainly."""
    if jvm == python:
        return None
    at = columns.index("commitLogOffset")
    if len(jvm) != len(python):
        only_jvm, only_python = Counter(jvm) - Counter(python), Counter(python) - Counter(jvm)
        side, extra = min([("JVM", r) for r in only_jvm] + [("Python", r) for r in only_python],
                          key=lambda x: (x[1][at] is None, x[1][at] or 0, repr(x[1])))
        return (f"{len(jvm)} JVM rows, {len(python)} Python rows; first row only in the {side} read: "
                + ", ".join(f"{c}={_short(v, 60)}" for c, v in zip(columns, extra)))
    i, (a, b) = next((i, (a, b)) for i, (a, b) in enumerate(zip(jvm, python)) if a != b)
    c = next(k for k in range(len(columns)) if a[k] != b[k])
    return (f"row {i} of {len(jvm)} (commitLogOffset {a[at]}), column {columns[c]}: "
            f"JVM {_short(a[c])}, Python {_short(b[c])}")


def classify_jvm_error(exc: Exception) -> tuple[str, str]:
    """(outcome, detail) of an exception out of a JVM-scan query: typed when its Java cause is ours."""
    import re
    text = str(exc)
    java = getattr(exc, "java_exception", None)
    if java is not None:
        text = f"{java.toString()}\n{text}"
    wrappers = ("org.apache.spark.SparkException", "py4j.protocol.Py4JJavaError")
    for m in re.finditer(r"\b((?:[a-z_]\w*\.)+[A-Z]\w*(?:Exception|Error))(?::|\n|$)", text):
        name = m.group(1)
        if name in wrappers or name.startswith(("org.apache.spark.SparkException", "pyspark.")):
            continue
        message = text[m.end():].split("\n\tat ")[0].split("\n")[0].strip()
        if name.startswith(JVM_ERRORS) and len(message) <= MAX_ERROR_MESSAGE_CHARS:
            return "typed", f"{name.rsplit('.', 1)[1]}: {message[:400]}"
        return "untyped", f"{name}: {message[:300]}"
    return "untyped", f"{type(exc).__name__}: {text[:300]}"


# --------------------------------------------------------------------------- one case

@dataclass
class CaseResult:
    index: int
    outcome: str            # ok | typed | differ | untyped | hang | crash
    path: str = ""
    detail: str = ""
    mutations: tuple = ()
    seconds: float = 0.0
    note: str = ""          # a JVM-twin case where one implementation failed and the other read rows


def run_case(seed: int, index: int, facts_list: list, stores: CaseStores) -> CaseResult:
    from rmqsource.errors import RmqError
    rng = random.Random(f"{seed}:{index}")
    facts = rng.choice(facts_list)
    paths = _paths(stores.full_disk)
    path = rng.choices([p for p, _ in paths], weights=[w for _, w in paths])[0]
    if path in JVM_TWINS and _jvm_session is None:
        path = JVM_TWINS[path]
    t0 = time.monotonic()
    store = stores.fresh(facts, full=(path == "recovery"))
    descs, touched = mutate(rng, facts, store)
    if stores.full_disk:           # every case: a sparse tail no page of which can be backed
        sparse = _sparse_tail(rng, facts, store)
        descs.append(sparse.desc)
        touched.update(sparse.rels)
        stores.fill()
    guard = contextlib.nullcontext() if path == "recovery" else no_writes_under(store)
    outcome, detail, notes = "ok", "", []
    try:
        with guard:
            run_path(path, rng, facts, store, frozenset(touched), notes)
    except ScanDifference as exc:
        outcome, detail = "differ", str(exc).replace(str(store), "<store>")
    except RmqError as exc:
        msg = str(exc)
        if len(msg) > MAX_ERROR_MESSAGE_CHARS:
            outcome, detail = "untyped", f"{type(exc).__name__} message of {len(msg)} chars: {msg[:300]}..."
        else:
            outcome, detail = "typed", f"{type(exc).__name__}: {msg.replace(str(store), '<store>')[:400]}"
    except Exception as exc:  # noqa: BLE001 - the point is to classify it
        if path in JVM_TWINS:
            outcome, detail = classify_jvm_error(exc)
            detail = detail.replace(str(store), "<store>")
        else:
            tb = traceback.extract_tb(exc.__traceback__)[-4:]
            where = " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno}" for f in reversed(tb))
            outcome, detail = "untyped", f"{type(exc).__name__}: {str(exc)[:300]} at {where}"
    if stores.full_disk:
        stores.unfill()
    changed = stores.restore(facts, store, touched)
    if changed and outcome != "untyped":
        outcome, detail = "untyped", f"a read path changed the store: {changed}"
    return CaseResult(index, outcome, f"{facts.name}/{path}", detail, tuple(descs), time.monotonic() - t0,
                      "; ".join(notes).replace(str(store), "<store>"))


def _worker_main(conn, seed: int, facts_list: list, work: str, project_tests: str, jvm: bool,
                 full_disk: bool) -> None:
    import sys
    sys.path.insert(0, project_tests)
    if jvm:
        start_jvm_session()        # before the rlimit: it would bound the JVM's address space too
        warm_jvm_session(facts_list[0])
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = WORKER_ADDRESS_SPACE_BYTES if hard == resource.RLIM_INFINITY else min(hard, WORKER_ADDRESS_SPACE_BYTES)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    work_dir = Path(work)
    work_dir.mkdir(parents=True, exist_ok=True)
    stores = CaseStores(work_dir, full_disk=full_disk)
    import rmqsource.spark.batch  # noqa: F401 - import before the first deadline starts
    conn.send("ready")
    while True:
        index = conn.recv()
        if index is None:
            break
        conn.send(run_case(seed, index, facts_list, stores))


# --------------------------------------------------------------------------- the runner

@dataclass
class FuzzSummary:
    seed: int
    cases: int
    seconds: float
    outcomes: Counter = field(default_factory=Counter)
    per_path: Counter = field(default_factory=Counter)
    path_seconds: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    failures: list = field(default_factory=list)
    one_sided: list = field(default_factory=list)      # JVM-twin cases where only one implementation failed

    def failure_line(self, f: CaseResult) -> str:
        return (f"FAIL case {f.index} (RMQ_FUZZ_SEED={self.seed} RMQ_FUZZ_ONLY={f.index}) {f.outcome} "
                f"{f.path} {list(f.mutations)}: {f.detail}")

    def report(self) -> str:
        lines = [f"fuzz seed={self.seed} cases={self.cases} in {self.seconds:.1f} s "
                 f"({self.cases / max(self.seconds, 1e-9):.0f} cases/s): " +
                 ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items())),
                 "per path (cases, mean ms): " + ", ".join(
                     f"{k} {v} {1000 * self.path_seconds[k] / v:.0f}" for k, v in sorted(self.per_path.items())),
                 "typed errors: " + ", ".join(f"{k} {v}" for k, v in self.errors.most_common())]
        lines += [self.failure_line(f) for f in self.failures[:20]]
        if self.one_sided:
            lines.append(f"one implementation failed where the other read rows: {len(self.one_sided)} cases")
        for f in self.one_sided[:10]:
            lines.append(f"  case {f.index} {f.path} {list(f.mutations)}: {f.note}")
        return "\n".join(lines)


class _Worker:
    def __init__(self, ctx, seed, facts_list, work: Path, k: int, jvm: bool, full_disk: bool):
        self.parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main,
                                args=(child, seed, facts_list, str(work / f"w{k}"), str(Path(__file__).parent), jvm,
                                      full_disk),
                                daemon=True)
        self.proc.start()
        child.close()
        ready = wait_conns([self.parent, self.proc.sentinel], timeout=300 if jvm else 120)
        if self.parent not in ready or self.parent.recv() != "ready":
            self.proc.kill()
            raise RuntimeError(f"fuzz worker did not start (exit code {self.proc.exitcode})")
        self.index: Optional[int] = None
        self.deadline = 0.0

    def give(self, index: int, timeout_s: float) -> None:
        self.index = index
        self.deadline = time.monotonic() + timeout_s
        self.parent.send(index)

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(10)
        self.parent.close()

    def stop(self) -> None:
        try:
            self.parent.send(None)
        except OSError:
            pass
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(10)
        self.parent.close()


def run_fuzz(seed: int, cases: int, work: Path, *, workers: int = 1, timeout_s: float = 20.0,
             only: Optional[int] = None, full_disk: bool = False, progress: int = 0) -> FuzzSummary:
    """Run cases ``range(cases)`` (or just ``only``) of ``seed`` in ``workers`` processes.

    ``full_disk``: ``work`` is on a small file system of its own (a tmpfs); each case adds a sparse
    CommitLog tail to its mutations and fills the file system before the read (no recovery cases).
    ``progress``: print a line every that many cases, and each failure as it happens.
    """
    work.mkdir(parents=True, exist_ok=True)
    facts_list = prepare_corpora(work)
    if not facts_list:
        raise RuntimeError("no golden corpus to fuzz")
    ctx = mp.get_context("spawn")
    from rmqsource.spark.jar import has_native_scan, session_jar
    jar = has_native_scan(session_jar())
    jvm = jar and any(p in JVM_TWINS for p, _ in _paths(full_disk))      # a Spark session per worker
    if jar:
        timeout_s = max(timeout_s, 45.0)     # a Spark query or a JVM verify on a busy machine; a loop still ends it
    todo = [only] if only is not None else list(range(cases))
    summary = FuzzSummary(seed, len(todo), 0.0)
    t0 = time.monotonic()
    pool = [_Worker(ctx, seed, facts_list, work, k, jvm, full_disk) for k in range(max(1, min(workers, len(todo))))]
    respawns = 0
    try:
        nxt = 0
        busy = []
        for w in pool:
            if nxt < len(todo):
                w.give(todo[nxt], timeout_s)
                nxt += 1
                busy.append(w)
        while busy:
            now = time.monotonic()
            ready = wait_conns([w.parent for w in busy] + [w.proc.sentinel for w in busy],
                               timeout=max(0.0, min(w.deadline for w in busy) - now))
            for w in list(busy):
                result = None
                if w.parent in ready or w.proc.sentinel in ready:
                    try:
                        result = w.parent.recv() if w.parent.poll() else None
                    except (EOFError, OSError):
                        result = None
                    if result is None and not w.proc.is_alive():
                        result = CaseResult(w.index, "crash", detail=f"worker exit code {w.proc.exitcode}")
                elif time.monotonic() >= w.deadline:
                    result = CaseResult(w.index, "hang", detail=f"no answer within {timeout_s} s")
                if result is None:
                    continue
                _record(summary, result)
                if progress:
                    if result.outcome not in ("ok", "typed"):
                        print(summary.failure_line(result), flush=True)
                    done = sum(summary.outcomes.values())
                    if done % progress == 0:
                        print(f"{done}/{len(todo)} cases in {time.monotonic() - t0:.0f} s: "
                              + ", ".join(f"{k} {v}" for k, v in sorted(summary.outcomes.items())), flush=True)
                if result.outcome in ("hang", "crash"):
                    w.kill()
                    respawns += 1
                    k = pool.index(w)
                    busy.remove(w)
                    w = pool[k] = _Worker(ctx, seed, facts_list, work, k, jvm, full_disk)
                    busy.append(w)
                if nxt < len(todo):
                    w.give(todo[nxt], timeout_s)
                    nxt += 1
                else:
                    busy.remove(w)
    finally:
        for w in pool:
            w.stop()
    summary.seconds = time.monotonic() - t0
    _check_pristine(facts_list, summary)
    return summary


def _record(summary: FuzzSummary, r: CaseResult) -> None:
    summary.outcomes[r.outcome] += 1
    key = r.path.split("/")[-1] if r.path else r.outcome
    summary.per_path[key] += 1
    summary.path_seconds[key] += r.seconds
    if r.outcome == "typed":
        summary.errors[r.detail.split(":")[0]] += 1
    elif r.outcome != "ok":
        summary.failures.append(r)
    if r.note:
        summary.one_sided.append(r)


def _check_pristine(facts_list: list, summary: FuzzSummary) -> None:
    """The pristine copies (hard-linked into read cases) must be byte-identical to the corpora."""
    for facts in facts_list:
        gold = Path(facts.corpus) / "store"
        for p in gold.rglob("*"):
            if p.is_file() and (Path(facts.pristine) / p.relative_to(gold)).read_bytes() != p.read_bytes():
                summary.failures.append(CaseResult(-1, "untyped", facts.name, f"a read case modified {p.name}"))
                summary.outcomes["untyped"] += 1
