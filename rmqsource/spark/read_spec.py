"""What a read task reads: options, pushed filters, columns, and the task's inflate budget (the JVM twin:
ReadSpec.java)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..errors import DecompressionError
from ..format.javahash import java_string_hash
from .options import ReadOptions
from .pushdown import Pushed


class InflateBudget:
    """Bytes one task has inflated (``decompress=true``), against ``maxInflatedTaskBytes``."""

    def __init__(self, cap: int):
        self.cap = cap
        self.used = 0

    def spend(self, n: int, file: str, offset: int) -> None:
        self.used += n
        if self.used > self.cap:
            raise DecompressionError(f"this task has inflated {self.used} bytes of bodies, more than "
                                     f"maxInflatedTaskBytes={self.cap} (raise the option, or read without "
                                     f"decompress)", file=file, offset=offset)


@dataclass(frozen=True)
class ReadSpec:
    options: ReadOptions
    pushed: Pushed
    columns: tuple
    inflated: Optional[InflateBudget] = field(default=None, compare=False)     # set per task by read_partition

    @property
    def tag_codes(self) -> Optional[np.ndarray]:
        if self.pushed.tags is None:
            return None
        return np.array(sorted({java_string_hash(t) for t in self.pushed.tags}), dtype=np.int32)
