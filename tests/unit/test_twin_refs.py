"""Every "twin of X" a Java source names exists on the Python side.

The Java sources (``rmqsource/**/*.java``, wherever they sit) say which Python code each class
mirrors.  The forms in use, after "twin of" (javadoc continuation lines are joined; the reference
ends at ``)``, ``,``, ``;``, ``:`` or the end of a sentence):

* a path, ``rmqsource/format/record.py``, ``io/durable.py`` (under ``rmqsource/``) or a bare file
  name ``batch.py`` (the one file of that name under ``rmqsource/``; when there are several, the one
  that defines the named symbol or sits in a folder named like the Java package);
* a symbol in a file, ``SYMBOL in PATH``, ``PATH SYMBOL`` or ``PATH {@code SYMBOL}``;
* a symbol alone, ``InMemoryConsumeQueue`` (looked up in the files the same Java file names
  elsewhere, else anywhere under ``rmqsource/``);
* prose around a path, ``the read part of PATH``, ``PATH's ops and io/durable.py``: each path checked.

A symbol is a code name (it has an underscore or two capitals) and must be defined in the module, by
AST: a function, class or assignment at module level, or a method/attribute of a class there
(``Class.method`` works too).  Imports do not count: a reference names where the code lives.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "rmqsource"
JAVA_FILES = sorted(PKG.glob("**/*.java"))

MOVED_HINT = ("the Python side may have moved or been split (e.g. cli.py into commands/, spark/sink.py and "
              "store/verify.py into several modules): point the Java comment at where it lives now")

_TWIN = re.compile(r"\btwin of\b", re.I)
_PATH = re.compile(r"(?<![\w/.])((?:[A-Za-z_]\w*/)*[A-Za-z_]\w*\.py)\b")
_DOTTED = re.compile(r"\brmqsource(?:\.[A-Za-z_]\w*)+")
_END = re.compile(r"[(),;:]|\*/|\.(?=\s|$)")
_IDENT = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?"


def code_name(word: str) -> bool:
    """An identifier that reads as code (``_by_phy``, ``StoreWatcher``), not an English word."""
    return bool(re.fullmatch(_IDENT, word)) and ("_" in word or sum(c.isupper() for c in word) >= 2)


@dataclass
class Ref:
    java: Path
    line: int
    text: str                                   # what follows "twin of", up to its end

    def where(self) -> str:
        return f"{self.java.relative_to(ROOT)}:{self.line}"


def _comment_text(line: str) -> str:
    s = line.strip()
    for lead in ("/**", "/*", "//", "*"):
        if s.startswith(lead) and not s.startswith("*/"):
            return s[len(lead):].strip()
    return s


def twin_refs(path: Path) -> list[Ref]:
    lines = path.read_text(encoding="utf-8").splitlines()
    refs = []
    for i, line in enumerate(lines):
        for m in _TWIN.finditer(line):
            rest = line[m.end():]
            # a reference may go on in the next comment lines
            for nxt in lines[i + 1:i + 3]:
                if not nxt.strip().startswith(("*", "//")) or nxt.strip().startswith("*/"):
                    break
                rest += " " + _comment_text(nxt)
            rest = rest.replace("*/", " */")
            end = _END.search(rest)
            refs.append(Ref(path, i + 1, re.sub(r"\s+", " ", rest[:end.start() if end else len(rest)]).strip()))
    return refs


# --------------------------------------------------------------------------- the Python side

@lru_cache(maxsize=None)
def py_files() -> tuple[Path, ...]:
    return tuple(sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts))


@lru_cache(maxsize=None)
def defined_names(path: Path) -> frozenset[str]:
    """Functions, classes and assignments of a module, and ``Class.member`` / ``member`` of its classes."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()

    def targets(t) -> list[str]:
        if isinstance(t, ast.Name):
            return [t.id]
        if isinstance(t, (ast.Tuple, ast.List)):
            return [n for e in t.elts for n in targets(e)]
        return []

    def walk(body, owner: Optional[str]) -> None:
        for node in body:
            found: list[str] = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found = [node.name]
            elif isinstance(node, ast.Assign):
                found = [n for t in node.targets for n in targets(t)]
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                found = targets(node.target)
            for n in found:
                names.add(n)
                if owner:
                    names.add(f"{owner}.{n}")
            if isinstance(node, ast.ClassDef):
                walk(node.body, node.name if owner is None else f"{owner}.{node.name}")
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                for part in ("body", "orelse", "finalbody"):
                    walk(getattr(node, part, []) or [], owner)
                for h in getattr(node, "handlers", []) or []:
                    walk(h.body, owner)

    walk(tree.body, None)
    return frozenset(names)


def java_package_dirs(java: Path) -> set[str]:
    """Folder names the Java file's package implies (io.rmqsource.spark.store.write -> spark, store, write)."""
    m = re.search(r"^\s*package\s+([\w.]+)\s*;", java.read_text(encoding="utf-8"), re.M)
    parts = m.group(1).split(".") if m else []
    return {p for p in parts if p not in ("io", "rmqsource")}


def resolve_path(token: str, java: Path, base: Optional[Path], symbol: Optional[str]) -> tuple[Optional[Path], str]:
    """The Python file a path token names, or (None, why)."""
    if token.startswith("rmqsource/"):
        p = ROOT / token
        return (p, "") if p.is_file() else (None, f"no file {token}")
    if "/" in token:
        for cand in ([base / token] if base else []) + [PKG / token]:
            if cand.is_file():
                return cand, ""
        return None, f"no file {token} under rmqsource/"
    if base is not None and (base / token).is_file():
        return base / token, ""
    found = [p for p in py_files() if p.name == token]
    if not found:
        return None, f"no file named {token} under rmqsource/"
    if len(found) > 1 and symbol:
        found = [p for p in found if symbol in defined_names(p)] or found
    if len(found) > 1:
        dirs = java_package_dirs(java)
        found = [p for p in found if p.parent.name in dirs] or found
    if len(found) > 1:
        return None, (f"{token} is ambiguous ({', '.join(str(p.relative_to(ROOT)) for p in found)}): name its "
                      f"folder")
    return found[0], ""


def resolve_dotted(dotted: str) -> tuple[Optional[Path], Optional[str], str]:
    """``rmqsource.pkg.module[.symbol]`` -> (module file, symbol or None, why)."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:k])
        for cand in (base.with_suffix(".py"), base / "__init__.py"):
            if cand.is_file():
                return cand, ".".join(parts[k:]) or None, ""
    return None, None, f"no module {dotted}"


def check_ref(ref: Ref, sibling_files: list[Path]) -> list[str]:
    """Problems of one reference ([] when everything it names exists)."""
    text = ref.text
    problems: list[str] = []
    named: list[tuple[Path, Optional[str]]] = []
    paths = list(_PATH.finditer(text))
    if not paths and not _DOTTED.search(text):
        first = text.split(" ")[0] if text else ""
        if code_name(first):
            homes = sibling_files or list(py_files())
            if not any(first in defined_names(p) for p in homes):
                scope = ", ".join(str(p.relative_to(ROOT)) for p in sibling_files) if sibling_files \
                    else "any module under rmqsource/"
                problems.append(f"symbol {first} is defined in none of {scope}")
            return problems
        return [f"names no Python file, module or symbol ({text!r})"]
    for m in _DOTTED.finditer(text):
        path, symbol, why = resolve_dotted(m.group(0))
        if path is None:
            problems.append(why)
        else:
            named.append((path, symbol))
    base = None
    for i, m in enumerate(paths):
        token = m.group(1)
        before = text[:m.start()]
        after = text[m.end():]
        symbol = None
        sym_before = re.search(rf"(?:^|\s)({_IDENT}) in\s*$", before)
        sym_after = re.match(rf"\s*(?:{{@code\s+({_IDENT})\s*}}|({_IDENT})\b)", after)
        if sym_before and code_name(sym_before.group(1)):
            symbol = sym_before.group(1)
        elif sym_after and code_name(sym_after.group(1) or sym_after.group(2)):
            symbol = sym_after.group(1) or sym_after.group(2)
        path, why = resolve_path(token, ref.java, base, symbol)
        if path is None:
            problems.append(why)
            continue
        if base is None:
            base = path.parent
        named.append((path, symbol))
    for path, symbol in named:
        if symbol and symbol not in defined_names(path):
            problems.append(f"{path.relative_to(ROOT)} defines no {symbol} (function, class, assignment or "
                            f"class member)")
    return problems


def all_refs() -> list[Ref]:
    return [r for p in JAVA_FILES for r in twin_refs(p)]


def files_named(refs: list[Ref]) -> list[Path]:
    out = []
    for r in refs:
        for m in _PATH.finditer(r.text):
            path, _ = resolve_path(m.group(1), r.java, None, None)
            if path is not None and path not in out:
                out.append(path)
    return out


# --------------------------------------------------------------------------- tests

@pytest.mark.skipif(not JAVA_FILES, reason="no Java sources under rmqsource/")
def test_every_twin_reference_exists():
    refs = all_refs()
    assert len(refs) >= 40, f"only {len(refs)} 'twin of' references found: is the parser still reading them?"
    by_file: dict[Path, list[Ref]] = {}
    for r in refs:
        by_file.setdefault(r.java, []).append(r)
    bad = []
    for java, rs in by_file.items():
        siblings = files_named(rs)
        for r in rs:
            for problem in check_ref(r, siblings):
                bad.append(f"{r.where()}: 'twin of {r.text}': {problem}")
    assert not bad, (f"{len(bad)} Java 'twin of' reference(s) name Python code that does not exist ({MOVED_HINT}):"
                     "\n  " + "\n  ".join(bad))


@pytest.fixture
def fake_repo(tmp_path, monkeypatch):
    """A small rmqsource/ tree of Python files, so the forms are tested apart from the real code's moves."""
    files = {
        "spark/batch.py": "def _read_lookup(spec):\n    pass\n",
        "format/msgid.py": "X = 1\n",
        "format/record.py": "MAGIC_V1, MAGIC_V2 = 1, 2\n\ndef decode_record(buf):\n    pass\n",
        "format/message.py": "class MessageExtBrokerInner:\n    def encode(self):\n        pass\n",
        "format/consumequeue.py": "UNIT = 20\n",
        "store/consumequeue.py": "class ConsumeQueue:\n    pass\n\n\nclass InMemoryConsumeQueue(ConsumeQueue):\n"
                                 "    size: int = 0\n",
        "store/writer.py": "class MessageStoreWriter:\n    pass\n",
        "store/commitlog_append.py": "",
        "store/index_service.py": "",
    }
    pkg = tmp_path / "rmqsource"
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text, encoding="utf-8")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    monkeypatch.setattr(__import__(__name__), "PKG", pkg)
    py_files.cache_clear()
    yield tmp_path
    py_files.cache_clear()


def test_reference_parsing_forms(fake_repo):
    java = fake_repo / "Foo.java"
    java.write_text("package io.rmqsource.spark.store;\n"
                    "/**\n"
                    " * One (twin of _read_lookup in\n"
                    " * batch.py).  Two, twin of rmqsource/format/msgid.py.\n"
                    " * Three (twin of rmqsource/store/writer.py MessageStoreWriter with commitlog_append.py).\n"
                    " * Four: twin of rmqsource/format/message.py {@code MessageExtBrokerInner}.\n"
                    " * Five (twin of InMemoryConsumeQueue). Six (twin of the read part of\n"
                    " * rmqsource/store/index_service.py). Seven (twin of rmqsource.format.record.decode_record)\n"
                    " * Eight (twin of ConsumeQueue in consumequeue.py), nine (twin of\n"
                    " * MessageExtBrokerInner.encode in\n"
                    " * rmqsource/format/message.py, ...)\n"
                    " */\n", encoding="utf-8")
    refs = twin_refs(java)
    assert [r.text for r in refs] == [
        "_read_lookup in batch.py", "rmqsource/format/msgid.py",
        "rmqsource/store/writer.py MessageStoreWriter with commitlog_append.py",
        "rmqsource/format/message.py {@code MessageExtBrokerInner}", "InMemoryConsumeQueue",
        "the read part of rmqsource/store/index_service.py", "rmqsource.format.record.decode_record",
        "ConsumeQueue in consumequeue.py", "MessageExtBrokerInner.encode in rmqsource/format/message.py"]
    assert [r.line for r in refs] == [3, 4, 5, 6, 7, 7, 8, 9, 9]     # where each "twin of" starts
    for r in refs:
        assert check_ref(r, []) == [], r.text
    broken = {"no_such_function in batch.py": "defines no no_such_function",
              "rmqsource/format/nothing.py": "no file rmqsource/format/nothing.py",
              "NoSuchClass": "symbol NoSuchClass is defined in none of",
              "rmqsource/format/message.py {@code Nope_x}": "defines no Nope_x",
              "rmqsource.format.record.no_such": "defines no no_such",
              "rmqsource/store/writer.py MessageStoreWriter with gone.py": "no file named gone.py",
              "UNIT in consumequeue.py": "",                  # two files of that name: the one defining UNIT
              # defined in neither: the file in the folder the Java package names (store) is the one meant
              "Class_x in consumequeue.py": "rmqsource/store/consumequeue.py defines no Class_x",
              "MessageExtBrokerInner.decode in rmqsource/format/message.py": "defines no MessageExtBrokerInner.decode",
              "nothing that names code": "names no Python file"}
    for text, why in broken.items():
        problems = check_ref(Ref(java, 1, text), [])
        if text.startswith("UNIT "):
            assert problems == [], problems
            continue
        assert problems and why in problems[0], (text, problems)
