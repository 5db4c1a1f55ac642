"""Progress bars for long CLI work: tqdm on a terminal, nothing when output goes to a pipe or file."""

from __future__ import annotations

import sys
from typing import Optional


def _interactive() -> bool:
    try:
        return sys.stdout.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """``update(n)`` advances by n units; a no-op unless stdout and stderr are terminals."""

    def __init__(self, total: Optional[int], desc: str, unit: str = "B", *, enabled: Optional[bool] = None):
        self._bar = None
        if enabled if enabled is not None else _interactive():
            try:
                from tqdm import tqdm
            except ImportError:            # the bar is a convenience, never a requirement
                return
            self._bar = tqdm(total=total, desc=desc, unit=unit, unit_scale=True, unit_divisor=1024 if unit == "B"
                             else 1000, leave=False, file=sys.stderr, dynamic_ncols=True)

    def update(self, n: int) -> None:
        if self._bar is not None and n:
            self._bar.update(n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
