"""Child process for the killed-snapshot tests: runs ``snapshot_store`` and SIGKILLs itself at a chosen call.

usage: snapshot_child.py STORE DEST CONFIG_JSON OP N
OP is ``replace`` (a file made visible in DEST: killed just before the N-th one) or ``pwrite`` (a staged
write: killed before the N-th), through the fault-injection seam (rmqsource.io.files.ops).  N = 0 runs to
the end and prints how many of each call the run made, as JSON.
"""

import json
import os
import signal
import sys

from rmqsource.io import files
from rmqsource.store.config import StoreConfig
from rmqsource.store.snapshot import snapshot_store


class KillAt(files.FileOps):
    def __init__(self, op: str, n: int):
        self.op, self.n = op, n
        self.calls = {"replace": 0, "pwrite": 0}

    def _count(self, op: str) -> None:
        self.calls[op] += 1
        if op == self.op and self.calls[op] == self.n:
            os.kill(os.getpid(), signal.SIGKILL)

    def replace(self, src, dst):
        self._count("replace")
        super().replace(src, dst)

    def pwrite(self, fd, data, offset):
        self._count("pwrite")
        return super().pwrite(fd, data, offset)


def main() -> None:
    store, dest, config_json, op, n = sys.argv[1:6]
    ops = KillAt(op, int(n))
    with files.installed(ops):
        snapshot_store(store, dest, StoreConfig.from_mapping(json.loads(config_json)))
    print(json.dumps(ops.calls), flush=True)


if __name__ == "__main__":
    main()
