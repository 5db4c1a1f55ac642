"""What ``rmq verify`` found: problems (file, offset, expected vs found), notes, counts.

A :class:`Problem` is an inconsistency a RocketMQ broker (or rmqsource) would
trip over or silently mis-serve: a body CRC that does not match, a
ConsumeQueue unit pointing where no record starts, a broken IndexFile chain.
A *warning* is something worth knowing that no reader gets wrong (an unclean
shutdown, a checkpoint ahead of the data); only errors make verify fail.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional

ERROR = "error"
WARNING = "warning"
MAX_PROBLEMS_KEPT = 1000          # details kept per report; every problem is still counted


@dataclass(frozen=True)
class Problem:
    area: str                      # commitlog | consumequeue | index | checkpoint | config | layout
    check: str                     # short name of the failed check, e.g. body-crc, cq-size, index-chain
    file: str                      # path relative to the store root
    offset: Optional[int]          # byte offset inside ``file``
    message: str
    expected: Optional[str] = None
    found: Optional[str] = None
    severity: str = ERROR

    def to_json(self) -> dict:
        return {"severity": self.severity, "area": self.area, "check": self.check, "file": self.file,
                "offset": self.offset, "expected": self.expected, "found": self.found, "message": self.message}

    def text(self) -> str:
        where = self.file if self.offset is None else f"{self.file} @ {self.offset}"
        detail = ""
        if self.expected is not None or self.found is not None:
            detail = f" (expected {self.expected}, found {self.found})"
        return f"{where}: {self.message}{detail}"


@dataclass
class VerifyReport:
    root: str
    problems: list[Problem] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)          # (severity, check) -> number found
    stats: dict[str, Any] = field(default_factory=dict)

    def add(self, problem: Problem) -> None:
        self.counts[(problem.severity, problem.check)] += 1
        if len(self.problems) < MAX_PROBLEMS_KEPT:
            self.problems.append(problem)

    def add_all(self, problems, total: int) -> None:
        """The first problems of a batch of ``total`` found together (the rest are counted, not built)."""
        listed = 0
        check = severity = None
        for p in problems:
            self.add(p)
            listed += 1
            check, severity = p.check, p.severity
        if check is not None and total > listed:
            self.counts[(severity, check)] += total - listed

    def rel(self, path: str | os.PathLike) -> str:
        """A store file's path relative to the root (as problems name them)."""
        p = os.fspath(path)
        try:
            rel = os.path.relpath(p, self.root)
        except ValueError:
            return p
        return p if rel.startswith("..") else rel

    @property
    def errors(self) -> int:
        return sum(n for (sev, _), n in self.counts.items() if sev == ERROR)

    @property
    def warnings(self) -> int:
        return sum(n for (sev, _), n in self.counts.items() if sev == WARNING)

    @property
    def ok(self) -> bool:
        return self.errors == 0

    def summary_json(self) -> dict:
        by_check: dict[str, int] = {}
        for (_, check), n in sorted(self.counts.items()):
            by_check[check] = by_check.get(check, 0) + n
        return {"store": self.root, "ok": self.ok, "errors": self.errors, "warnings": self.warnings,
                "byCheck": by_check, "problemsListed": len(self.problems), **self.stats}
