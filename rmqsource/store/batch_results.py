"""Results of a columnar put (``put_arrow_batch``, ``put_json_lines``, ``put_columns``): numpy columns
with a lazy per-row :class:`PutMessageResult` view and bulk ``put.jsonl`` rendering."""

from __future__ import annotations

import struct
from typing import Sequence

import numpy as np

from .put_result import AppendMessageResult, AppendMessageStatus, PutMessageResult, PutMessageStatus

__all__ = ["BatchPutResults", "OBJ", "STATUS_CODE", "STATUSES"]

STATUSES = list(PutMessageStatus)
STATUS_CODE = {s: i for i, s in enumerate(STATUSES)}
OBJ = -1                                      # result held as an object (refused / failed rows)
class BatchPutResults(Sequence):
    """Results of one columnar put: numpy columns, with a lazy per-row :class:`PutMessageResult` view.

    ``results[i]`` builds the PutMessageResult of row i; ``ok_mask``/``ok_count``,
    ``commit_log_offsets``, ``queue_offsets``, ``sizes``, ``store_timestamps`` are
    arrays; :meth:`to_put_jsonl` renders the CLI's put.jsonl lines in bulk.
    """

    def __init__(self, n: int):
        self.n = n
        self.status = np.full(n, OBJ, np.int8)
        self.commit_log_offsets = np.full(n, -1, np.int64)
        self.queue_offsets = np.full(n, -1, np.int64)
        self.sizes = np.zeros(n, np.int64)
        self.store_timestamps = np.zeros(n, np.int64)
        self.topic_code = np.zeros(n, np.int64)
        self.queue_ids = np.zeros(n, np.int64)
        self.sys_flags = np.zeros(n, np.int64)
        self.host_code = np.zeros(n, np.int64)
        self.topics: list[str] = []
        self.hosts: list[tuple[bytes, int]] = []
        self.objects: dict[int, PutMessageResult] = {}
        # put.jsonl input view: (tagsCode, propertiesString) per row
        self.input_rows = np.zeros(0, np.int64)        # rows covered by input_props (vectorized)
        self.input_props = None                        # pyarrow string array aligned with input_rows
        self.input_tags_code = np.zeros(n, np.int64)
        self.input_objects: dict[int, tuple[int, str]] = {}

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        code = int(self.status[i])
        if code == OBJ:
            return self.objects[i]
        addr, port = self.hosts[int(self.host_code[i])]
        return PutMessageResult(
            STATUSES[code],
            AppendMessageResult(AppendMessageStatus.PUT_OK, int(self.commit_log_offsets[i]), int(self.sizes[i]),
                                addr, int(self.store_timestamps[i]), int(self.queue_offsets[i]), port),
            self.topics[int(self.topic_code[i])], int(self.queue_ids[i]), int(self.sys_flags[i]))

    def __setitem__(self, i: int, result: PutMessageResult) -> None:
        """Row i's result replaced (its status changed after the row was written)."""
        self.objects[i] = result
        self.status[i] = OBJ

    def __iter__(self):
        for i in range(self.n):
            yield self[i]

    @property
    def ok_mask(self) -> np.ndarray:
        return self.status == STATUS_CODE[PutMessageStatus.PUT_OK]

    @property
    def ok_count(self) -> int:
        return int(np.count_nonzero(self.ok_mask))

    def input_view(self, i: int) -> tuple[int, str]:
        """(tagsCode, propertiesString) of row i's input, as the corpora's put.jsonl holds them."""
        if i in self.input_objects:
            return self.input_objects[i]
        j = int(np.searchsorted(self.input_rows, i))
        return int(self.input_tags_code[i]), self.input_props[j].as_py()

    def to_put_jsonl(self, first_i: int = 0) -> bytes:
        """The put.jsonl lines of these results (``{"i": first_i + row, ...}`` + tagsCode and
        propertiesString of the input, "reason" when refused), UTF-8, each ending in a newline.

        PUT_OK rows are rendered element-wise in Arrow; others one by one with the
        same encoder as the CLI (``ensure_ascii=False``, compact separators)."""
        import json
        import pyarrow as pa
        import pyarrow.compute as pc
        from ..format import batch_encode as be
        from .put_jsonl import hex_fixed, json_escape_props, render_put_jsonl
        dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
        n = self.n
        if n == 0:
            return b""
        vec = np.zeros(n, bool)
        if self.input_props is not None and len(self.input_rows):
            vec[self.input_rows] = True
        vec &= self.ok_mask
        props_all = None
        if vec.any():
            sel = np.flatnonzero(vec[self.input_rows])
            props_all = self.input_props if len(sel) == len(self.input_props) else \
                self.input_props.take(pa.array(sel))
            esc, bad = json_escape_props(props_all)
            topic_bad = np.array([dumps(t)[1:-1] != t for t in self.topics] or [False])
            rows = self.input_rows[sel]
            bad |= topic_bad[self.topic_code[rows]]
            if bad.any():
                vec[rows[bad]] = False
                keep = np.flatnonzero(~bad)
                rows, esc = rows[keep], esc.take(pa.array(keep))
        vec_rows = np.flatnonzero(vec)
        other = np.flatnonzero(~vec)
        parts = []
        if vec_rows.size:
            host_hex = [(addr + struct.pack(">i", port)).hex().upper() for addr, port in self.hosts]
            phy = self.commit_log_offsets[vec_rows]
            ids = hex_fixed(phy, 16)
            prefix = pc.take(pa.array(host_hex), pa.array(self.host_code[vec_rows]))
            msg_ids = pc.binary_join_element_wise(prefix, be.fixed_binary(ids.reshape(-1), len(vec_rows), 16)
                                                  .cast(pa.string()), "")
            topics = pc.take(pa.array(self.topics, pa.string()), pa.array(self.topic_code[vec_rows]))
            parts.append(render_put_jsonl(first_i, vec_rows, msg_ids, phy, self.queue_offsets[vec_rows],
                                          self.sizes[vec_rows], self.store_timestamps[vec_rows], topics,
                                          self.queue_ids[vec_rows], self.sys_flags[vec_rows],
                                          self.input_tags_code[vec_rows], esc, newline=True))
        if other.size:
            lines = []
            for i in other.tolist():
                r = self[i]
                doc = {"i": first_i + i}
                doc.update(r.to_json_dict())
                doc["tagsCode"], doc["propertiesString"] = self.input_view(i)
                if r.reason:
                    doc["reason"] = r.reason
                text = dumps(doc)
                if not _is_utf8_text(text):      # a refused lone surrogate: keep the output UTF-8
                    text = json.dumps(doc, ensure_ascii=True, separators=(",", ":"))
                lines.append(text + "\n")
            parts.append(pa.array(lines, pa.string()))
        allv = pa.concat_arrays(parts) if len(parts) > 1 else parts[0]
        if len(parts) > 1:
            perm = np.empty(n, np.int64)
            perm[vec_rows] = np.arange(len(vec_rows))
            perm[other] = len(vec_rows) + np.arange(len(other))
            allv = allv.take(pa.array(perm))
        off, data = be.binary_offsets(allv)
        return data[off[0]:off[-1]].tobytes()

    @staticmethod
    def concat(parts: Sequence["BatchPutResults"]) -> "BatchPutResults":
        """One result object for consecutive batches (topic/host tables merged).

        Lazy: counts, rows and put.jsonl come from the parts; the merged numpy
        columns are built on first access of one of them."""
        return _ConcatResults(list(parts))

    @staticmethod
    def _concat_into(out: "BatchPutResults", parts: Sequence["BatchPutResults"]) -> None:
        n = out.n
        BatchPutResults.__init__(out, n)
        tmap: dict[str, int] = {}
        hmap: dict[tuple, int] = {}
        rows_all, props_all = [], []
        base = 0
        for p in parts:
            sl = slice(base, base + p.n)
            for name in ("status", "commit_log_offsets", "queue_offsets", "sizes", "store_timestamps",
                         "queue_ids", "sys_flags", "input_tags_code"):
                getattr(out, name)[sl] = getattr(p, name)
            tc = np.array([tmap.setdefault(t, len(tmap)) for t in p.topics] or [0], np.int64)
            hc = np.array([hmap.setdefault(h, len(hmap)) for h in p.hosts] or [0], np.int64)
            out.topic_code[sl] = tc[p.topic_code]
            out.host_code[sl] = hc[p.host_code]
            out.objects.update({base + k: v for k, v in p.objects.items()})
            out.input_objects.update({base + k: v for k, v in p.input_objects.items()})
            if p.input_props is not None and len(p.input_rows):
                rows_all.append(p.input_rows + base)
                props_all.append(p.input_props)
            base += p.n
        out.topics = list(tmap)
        out.hosts = list(hmap)
        if rows_all:
            import pyarrow as pa
            out.input_rows = np.concatenate(rows_all)
            out.input_props = pa.concat_arrays(props_all)


class _ConcatResults(BatchPutResults):
    """:meth:`BatchPutResults.concat` of several parts, merged only when a column is asked for."""

    def __init__(self, parts: list):
        self._parts = parts
        self.n = sum(p.n for p in parts)
        self._bases = np.cumsum([0] + [p.n for p in parts])

    def __getattr__(self, name):            # a column not merged yet (instance attributes win)
        if name.startswith("__") or name in ("_parts", "_bases", "n", "_merged"):
            raise AttributeError(name)
        if "_merged" not in self.__dict__:
            self._merged = True
            BatchPutResults._concat_into(self, self._parts)
            return getattr(self, name)
        raise AttributeError(name)

    def __getitem__(self, i):
        if isinstance(i, slice) or "_merged" in self.__dict__:
            return BatchPutResults.__getitem__(self, i)
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        k = int(np.searchsorted(self._bases, i, side="right")) - 1
        return self._parts[k][i - int(self._bases[k])]

    @property
    def ok_count(self) -> int:
        return sum(p.ok_count for p in self._parts)

    def input_view(self, i: int) -> tuple[int, str]:
        k = int(np.searchsorted(self._bases, i, side="right")) - 1
        return self._parts[k].input_view(i - int(self._bases[k]))

    def to_put_jsonl(self, first_i: int = 0) -> bytes:
        return b"".join(p.to_put_jsonl(first_i + int(b)) for p, b in zip(self._parts, self._bases.tolist()))


def _is_utf8_text(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False
