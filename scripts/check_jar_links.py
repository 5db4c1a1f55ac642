#!/usr/bin/env python
"""Checks that the rmq jar links against a Spark: every class, method and field it names outside itself
and the JDK exists, with the same descriptor, in the given Spark's jars (or their supertypes).

One jar runs on Spark 3.5 and 4.0 to 4.3: the wheel's jar is compiled against one of them, and the JVM resolves
each member reference by name and descriptor when it first runs it, so a member another version lacks
fails only on the code path that reaches it (NoSuchMethodError). This reads the jar's constant pools and
each named class of the target Spark (and its supertypes) and lists what does not resolve.
Version-dependent classes and members (Spark 4's Python data sources, ReadMaxBytes, 4.2's putByteArray from
a buffer) are reached by reflection or method handles in io.rmqsource.spark.compat and never named in a
constant pool, so nothing is exempt: every name the jar holds must link on every supported Spark.
Class files are parsed here (JVMS chapter 4); only the JDK's classes are read with ``javap``, a level of
supertypes per run.

Usage: check_jar_links.py --jar rmqsource-spark.jar --spark-jars <pyspark>/jars   (exit 1 when a link fails)
"""

from __future__ import annotations

import argparse
import re
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

OWN = ("io/rmqsource/",)
OBJECT = "java/lang/Object"
JDK = ("java/", "javax/", "jdk/", "sun/")          # the JDK is 17 everywhere; Spark's jars do not change it
HEADER = re.compile(r"^(?:[\w$]+ )*(?:class|interface) (?P<name>[\w.$]+)(?:<.*?>)?"
                    r"(?: extends (?P<extends>[^{]+?))?(?: implements (?P<implements>[^{]+?))? \{$")


def jar_references(jar: Path) -> tuple[set[str], set[tuple[str, str, str]]]:
    """(classes, (owner, name, descriptor) members) the jar's classes name outside the jar and the JDK."""
    classes, members = set(), set()
    with zipfile.ZipFile(jar) as z:
        for entry in z.namelist():
            if not entry.endswith(".class"):
                continue
            info = ClassFile(z.read(entry))
            for owner in info.class_refs:
                owner = owner.lstrip("[")
                if owner.startswith("L") and owner.endswith(";"):
                    owner = owner[1:-1]
                if "/" in owner and not owner.startswith(OWN + JDK):
                    classes.add(owner)
            for owner, name, desc in info.member_refs:
                if not owner.startswith(("[",) + OWN + JDK):
                    members.add((owner, name, desc))
                    classes.add(owner)
    return classes, members


class ClassFile:
    """What a class file declares and names (JVMS chapter 4): its supertypes and members, and the classes and
    members its constant pool refers to."""

    _SIZES = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2, 17: 4, 18: 4, 19: 2, 20: 2}

    def __init__(self, data: bytes):
        count = struct.unpack_from(">H", data, 8)[0]
        tags, values, pos, i = [None] * count, [None] * count, 10, 1
        while i < count:
            tag = data[pos]
            tags[i] = tag
            if tag == 1:                                         # Utf8 (modified UTF-8; names here are plain)
                n = struct.unpack_from(">H", data, pos + 1)[0]
                values[i] = data[pos + 3:pos + 3 + n].decode("utf-8", "replace")
                pos += 3 + n
            else:
                size = self._SIZES[tag]
                values[i] = struct.unpack_from(">HH", data, pos + 1) if size == 4 and tag >= 9 else \
                    struct.unpack_from(">H", data, pos + 1)[0] if size == 2 else None
                pos += 1 + size
            i += 2 if tag in (5, 6) else 1                       # a Long or Double takes two entries
        utf = lambda k: values[k]                                # noqa: E731
        cls = lambda k: values[values[k]]                        # noqa: E731
        self.class_refs = [cls(k) for k in range(1, count) if tags[k] == 7]
        self.member_refs = []
        for k in range(1, count):
            if tags[k] in (9, 10, 11):
                owner, nat = values[k]
                name, desc = values[nat]
                self.member_refs.append((cls(owner), utf(name), utf(desc)))
        _access, _this, sup, n = struct.unpack_from(">HHHH", data, pos)
        self.supers = ([cls(sup)] if sup else []) + \
            [cls(x) for x in struct.unpack_from(f">{n}H", data, pos + 8)]
        pos += 8 + 2 * n
        self.members: set[tuple[str, str]] = set()
        for _ in range(2):                                       # fields, then methods
            (n,) = struct.unpack_from(">H", data, pos)
            pos += 2
            for _ in range(n):
                _flags, name, desc, attrs = struct.unpack_from(">HHHH", data, pos)
                self.members.add((utf(name), utf(desc)))
                pos += 8
                for _ in range(attrs):
                    pos += 6 + struct.unpack_from(">I", data, pos + 2)[0]


class Classpath:
    """Declared members and supertypes of classes: those of a folder of jars read from their class files,
    the others (the JDK's) with javap, one run for the classes asked for at once."""

    def __init__(self, spark_jars: Path):
        self.jar_of: dict[str, Path] = {}
        for jar in sorted(spark_jars.glob("*.jar")):
            with zipfile.ZipFile(jar) as z:
                for entry in z.namelist():
                    if entry.endswith(".class"):
                        self.jar_of.setdefault(entry[:-6], jar)
        self.members: dict[str, set[tuple[str, str]]] = {}     # class -> {(name, descriptor)}
        self.supers: dict[str, list[str]] = {}
        self.missing: set[str] = set()

    def load(self, classes: set[str]) -> None:
        """Reads the classes and, level by level, their supertypes."""
        todo = {c for c in classes if c not in self.members and c not in self.missing}
        while todo:
            # Classes of no Spark jar are the JDK's (com/sun/management/... included), or missing.
            platform = {c for c in todo if c.startswith(JDK) or c not in self.jar_of}
            if platform:
                self._read_platform(sorted(platform))
            by_jar: dict[Path, list[str]] = {}
            for c in todo - platform:
                by_jar.setdefault(self.jar_of[c], []).append(c)
            for jar, names in by_jar.items():
                with zipfile.ZipFile(jar) as z:
                    for c in names:
                        info = ClassFile(z.read(c + ".class"))
                        self.members[c] = info.members
                        self.supers[c] = info.supers
            todo = {s for c in todo for s in self.supers.get(c, ())} - set(self.members) - self.missing

    def _read_platform(self, classes: list[str]) -> None:
        out = _javap(["-p", "-s"] + [c.replace("/", ".") for c in classes])
        for line in out.splitlines():
            if line.startswith("Error: class not found: "):
                self.missing.add(line.split(": ", 2)[2].strip().replace(".", "/"))
        current, pending = None, None
        for line in out.splitlines():
            h = HEADER.match(line.strip()) if not line.startswith(" ") else None
            if h:
                current = _internal(h["name"])
                self.members[current] = set()
                supers = [s for part in (h["extends"], h["implements"]) if part for s in _split_types(part)]
                self.supers[current] = [_internal(s) for s in supers]
                continue
            if current is None:
                continue
            stripped = line.strip()
            if stripped.startswith("descriptor: ") and pending is not None:
                self.members[current].add((pending, stripped[len("descriptor: "):]))
                pending = None
            elif stripped.endswith(";") and line.startswith("  ") and not line.startswith("    "):
                pending = _member_name(stripped, current)

    def resolves(self, owner: str, name: str, desc: str) -> bool:
        """JVM resolution: the member in the class or, walking up, in a superclass or superinterface."""
        seen, todo = set(), [owner]
        while todo:
            c = todo.pop()
            if c in seen:
                continue
            seen.add(c)
            if c not in self.members and c not in self.missing:
                self.load({c})
            if (name, desc) in self.members.get(c, ()):
                return True
            todo.extend(self.supers.get(c, ()))
            if c != OBJECT:
                todo.append(OBJECT)            # javap omits `extends Object`; the JVM still looks there
        return False


def _javap(args: list[str]) -> str:
    done = subprocess.run(["javap"] + args, capture_output=True, text=True)
    return done.stdout + done.stderr


def _internal(java_name: str) -> str:
    """org.x.Outer$Inner (generics dropped) -> org/x/Outer$Inner."""
    return re.sub(r"<.*>", "", java_name).strip().replace(".", "/")


def _split_types(text: str) -> list[str]:
    """Top-level comma-separated type names of an extends/implements clause (generic arguments dropped)."""
    depth, cur, out = 0, "", []
    for ch in text:
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        elif depth == 0 and ch != ">":
            cur += ch
    out.append(cur)
    return [t.strip() for t in out if t.strip()]


def _member_name(decl: str, owner: str) -> str:
    """A javap declaration line -> the member's name (constructors <init>, static blocks <clinit>)."""
    if decl.startswith("static {}"):
        return "<clinit>"
    head = decl.split("(", 1)[0] if "(" in decl else decl.split("=", 1)[0].rstrip(";").rstrip()
    name = head.split()[-1]
    simple = owner.rsplit("/", 1)[-1]
    if "(" in decl and (name == owner.replace("/", ".") or name == simple.replace("$", ".")
                        or name.replace(".", "/") == owner):
        return "<init>"
    return name


def check(jar: Path, spark_jars: Path) -> list[str]:
    """What the jar names that the Spark at ``spark_jars`` lacks, one line each (empty: every link holds)."""
    classes, members = jar_references(jar)
    cp = Classpath(spark_jars)
    cp.load(classes | {OBJECT})
    problems = [f"class {c}" for c in sorted(classes & cp.missing)]
    for owner, name, desc in sorted(members):
        if owner not in cp.missing and not cp.resolves(owner, name, desc):
            problems.append(f"member {owner}.{name}:{desc}")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jar", type=Path, required=True)
    ap.add_argument("--spark-jars", type=Path, required=True, help="a pyspark installation's jars/ folder")
    args = ap.parse_args(argv)
    classes, members = jar_references(args.jar)
    problems = check(args.jar, args.spark_jars)
    where = f"{args.jar.name} against {args.spark_jars}"
    if problems:
        print(f"{len(problems)} of {len(classes)} classes / {len(members)} members do not link ({where}):")
        print("\n".join(f"  {p}" for p in problems))
        return 1
    print(f"every link holds: {len(classes)} classes, {len(members)} members ({where})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
