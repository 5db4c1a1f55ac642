"""The 4096-byte ``checkpoint`` file (spec §7.1).

int64 @0 physicMsgTimestamp, @8 logicsMsgTimestamp, @16 indexMsgTimestamp;
5.x adds @24 masterFlushedOffset and @32 confirmPhyOffset.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

CHECKPOINT_FILE_SIZE = 4096
_FIELDS = struct.Struct(">qqqqq")


@dataclass(frozen=True)
class Checkpoint:
    physic_msg_timestamp_ms: int = 0
    logics_msg_timestamp_ms: int = 0
    index_msg_timestamp_ms: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0

    @classmethod
    def decode(cls, buf) -> "Checkpoint":
        data = bytes(buf[:40]).ljust(40, b"\0")
        return cls(*_FIELDS.unpack(data))

    def encode(self, *, v5: bool = True) -> bytes:
        data = _FIELDS.pack(self.physic_msg_timestamp_ms, self.logics_msg_timestamp_ms,
                            self.index_msg_timestamp_ms,
                            self.master_flushed_offset if v5 else 0,
                            self.confirm_phy_offset if v5 else 0)
        return data.ljust(CHECKPOINT_FILE_SIZE, b"\0")

    def min_timestamp_ms(self) -> int:
        """Start bound of abnormal recovery: ``max(0, min(physic, logics) - 3000)``."""
        return max(0, min(self.physic_msg_timestamp_ms, self.logics_msg_timestamp_ms) - 3000)

    def min_timestamp_index_ms(self) -> int:
        return min(self.min_timestamp_ms(), self.index_msg_timestamp_ms)
