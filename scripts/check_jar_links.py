#!/usr/bin/env python
"""Checks that the rmq jar links against a Spark: every class, method and field it names outside itself
and the JDK exists, with the same descriptor, in the given Spark's jars (or their supertypes).

One jar runs on Spark 3.5 and 4.0 to 4.3: the wheel's jar is compiled against one of them, and the JVM resolves
each member reference by name and descriptor when it first runs it, so a member another version lacks
fails only on the code path that reaches it (NoSuchMethodError). This reads the jar's constant pools
(``javap -v``) and each named class of the target Spark (``javap -p -s``) and lists what does not resolve.
Version-dependent classes and members (Spark 4's Python data sources, ReadMaxBytes, 4.2's putByteArray from
a buffer) are reached by reflection or method handles in io.rmqsource.spark.compat and never named in a
constant pool, so nothing is exempt: every name the jar holds must link on every supported Spark.

Usage: check_jar_links.py --jar rmqsource-spark.jar --spark-jars <pyspark>/jars   (exit 1 when a link fails)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import zipfile
from pathlib import Path

OWN = ("io/rmqsource/",)
OBJECT = "java/lang/Object"
JDK = ("java/", "javax/", "jdk/", "sun/")          # the JDK is 17 everywhere; Spark's jars do not change it
REF = re.compile(r"= (Methodref|InterfaceMethodref|Fieldref|Class)\s+\S+\s+// (.+)$")
MEMBER = re.compile(r'^(?P<owner>[^".:]+)\.(?P<name>"[^"]+"|[^:]+):(?P<desc>.+)$')
HEADER = re.compile(r"^(?:[\w$]+ )*(?:class|interface) (?P<name>[\w.$]+)(?:<.*?>)?"
                    r"(?: extends (?P<extends>[^{]+?))?(?: implements (?P<implements>[^{]+?))? \{$")
BATCH = 200                                        # classes per javap run (one JVM start each)


def jar_references(jar: Path) -> tuple[set[str], set[tuple[str, str, str]]]:
    """(classes, (owner, name, descriptor) members) the jar's classes name outside the jar and the JDK."""
    with zipfile.ZipFile(jar) as z:
        names = [n[:-6].replace("/", ".") for n in z.namelist() if n.endswith(".class")]
    classes, members = set(), set()
    for i in range(0, len(names), BATCH):
        out = _javap(["-v", "-cp", str(jar)] + names[i:i + BATCH])
        for line in out.splitlines():
            m = REF.search(line)
            if not m:
                continue
            kind, text = m.groups()
            if kind == "Class":
                owner = text.strip('"').lstrip("[")
                if owner.startswith("L") and owner.endswith(";"):
                    owner = owner[1:-1]
                if "/" in owner and not owner.startswith(OWN + JDK):
                    classes.add(owner)
                continue
            mm = MEMBER.match(text)
            if mm and not mm["owner"].startswith(OWN + JDK):
                members.add((mm["owner"], mm["name"].strip('"'), mm["desc"]))
                classes.add(mm["owner"])
    return classes, members


class Classpath:
    """Declared members and supertypes of classes on a classpath, read with javap on demand."""

    def __init__(self, classpath: str):
        self.classpath = classpath
        self.members: dict[str, set[tuple[str, str]]] = {}     # class -> {(name, descriptor)}
        self.supers: dict[str, list[str]] = {}
        self.missing: set[str] = set()

    def load(self, classes: set[str]) -> None:
        todo = sorted(c for c in classes if c not in self.members and c not in self.missing)
        while todo:
            for i in range(0, len(todo), BATCH):
                self._read(todo[i:i + BATCH])
            todo = sorted({s for c in todo for s in self.supers.get(c, ())} - set(self.members) - self.missing)

    def _read(self, classes: list[str]) -> None:
        out = _javap(["-p", "-s", "-cp", self.classpath] + [c.replace("/", ".") for c in classes])
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
            if (name, desc) in self.members.get(c, ()):
                return True
            todo.extend(self.supers.get(c, ()))
            if c != OBJECT:
                todo.append(OBJECT)            # javap omits `extends Object`; the JVM still looks there
            if c.startswith(JDK) and c not in self.members:
                self.load({c})
                if (name, desc) in self.members.get(c, ()):
                    return True
                todo.extend(self.supers.get(c, ()))
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
    cp = Classpath(str(spark_jars / "*"))
    cp.load(classes)
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
