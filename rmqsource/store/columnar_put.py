"""The columnar put path: ``put_arrow_batch``, ``put_json_lines`` and ``put_columns``.

``put_columns`` encodes a whole batch with numpy/pyarrow (rmqsource.format.batch_encode,
rmqsource.store.columnar_encode).  It produces exactly the bytes of ``put_messages``:
rows it cannot prove equivalent for (IPv6 hosts, magic v2 topics, the 4.9 delay
rewrite, ``__CRC32#`` in the input, verbatim properties strings, refused messages,
...) are prepared by the per-message ``PutChecks.prepare`` and encoded one by one,
then merged back in order.  Offsets, queue offsets, segment rolls, writes,
ConsumeQueue units, IndexFile entries and results are columnar for all rows.
tests/test_writer_batch.py checks both golden corpora and randomized mixed batches
against ``put_messages``, byte for byte.
"""

from __future__ import annotations

import numpy as np

from .. import limits
from ..errors import UnsupportedMessageError
from ..format.javahash import tags_code as tags_code_of
from ..format.message import MessageExtBrokerInner
from ..io import files
from ..format.record import BLANK_MAGIC, BORNHOST_V6_FLAG, STOREHOST_V6_FLAG, TRANSACTION_COMMIT_TYPE, \
    TRANSACTION_MASK, TRANSACTION_NOT_TYPE
from .batch_results import OBJ, STATUS_CODE, BatchPutResults
from .columnar_encode import encode_fast, hosts_of, index_entries
from .commitlog_append import BLANK
from .dispatch import compute_tags_code
from .json_lines import columns_of_messages, messages_from_json_block
from .put_checks import CRC_PLACEHOLDER, PROPS_MAX, Prepared, input_view
from .put_result import AppendMessageResult, AppendMessageStatus, PutMessageResult, PutMessageStatus, failed_result

__all__ = ["ColumnarPut"]


class ColumnarPut:
    """Mixin of :class:`~rmqsource.store.writer.MessageStoreWriter` (state lives on the writer)."""

    _ARROW_CHUNK_ROWS = 1 << 18

    def put_arrow_batch(self, batch) -> "BatchPutResults":
        """Put the rows of a pyarrow Table/RecordBatch (columns named like the message fields,
        snake_case or the corpus camelCase: topic, queueId, body (binary or UTF-8 string), tags,
        keys, properties (map<string,string>, struct of strings, or a verbatim string),
        propertiesString, flag, sysFlag, bornTimestamp, bornHost, storeHost, storeTimestamp,
        reconsumeTimes, preparedTransactionOffset).  Nulls take the field defaults.

        Columnar fast path (see ``put_columns``); returns a :class:`BatchPutResults`
        (a sequence of PutMessageResult, plus numpy columns and ``to_put_jsonl``).
        """
        from ..format.message_columns import columns_from_arrow
        parts = []
        for piece in self._arrow_pieces(batch):
            parts.append(self.put_columns(columns_from_arrow(piece)))
        return parts[0] if len(parts) == 1 else BatchPutResults.concat(parts)

    def _arrow_pieces(self, batch) -> list:
        """Slices of at most _ARROW_CHUNK_ROWS rows.  A Table is cut at its chunk boundaries, runs of
        chunks grouped up to that size: big chunks need no copy to become contiguous, small ones are
        combined (fewer, bigger batches are cheaper than copies saved)."""
        import pyarrow as pa
        n = batch.num_rows
        step = self._ARROW_CHUNK_ROWS
        if not isinstance(batch, pa.Table) or n == 0:
            return [batch.slice(lo, min(step, n - lo)) for lo in range(0, max(n, 1), step)]
        pieces, group, rows = [], [], 0
        for rb in batch.to_batches(max_chunksize=step):
            if group and rows + rb.num_rows > step:
                pieces.append(group[0] if len(group) == 1 else pa.Table.from_batches(group))
                group, rows = [], 0
            group.append(rb)
            rows += rb.num_rows
        if group:
            pieces.append(group[0] if len(group) == 1 else pa.Table.from_batches(group))
        return pieces

    def put_json_lines(self, data: bytes, *, what: str = "input", first_line: int = 1) -> "BatchPutResults":
        """Put a block of JSON lines (``inputs.jsonl`` shape: camelCase fields, base64 body) -- the
        bulk entry point for ``rmq put --json``.

        ``data`` is whole lines (``b"\\n"``-separated, blank lines ignored).  The
        block is parsed by pyarrow's multithreaded C++ JSON reader into columns
        and written by ``put_columns``; a block pyarrow cannot type like
        ``from_json_dict`` would (or with invalid base64, a bad line, ...) is
        parsed line by line instead, and a bad line raises OptionError
        ``"{what} line {n}: ..."`` (``first_line`` = number of the first line)
        before anything of the block is written.  Returns a
        :class:`BatchPutResults`; ``results.to_put_jsonl(first_i)`` renders the
        put.jsonl lines.  Bigger blocks are faster (64 MiB is a good size).
        """
        from .json_lines import columns_from_json_lines
        cols = columns_from_json_lines(data)
        if cols is None:
            msgs = messages_from_json_block(data, what, first_line)
            return self.put_columns(columns_of_messages(msgs))
        return self.put_columns(cols)

    def put_columns(self, cols) -> "BatchPutResults":
        """Put a :class:`~rmqsource.format.message_columns.MessageColumns` batch (columnar fast path)."""
        res = BatchPutResults(cols.n)
        with self._put_lock:
            if not self._writable:
                why = "store is closed" if self._closed else f"store is not writable: {files.describe(self._error)}"
                for i in range(cols.n):
                    m = cols.message(i)
                    res.objects[i] = failed_result(m, PutMessageStatus.SERVICE_NOT_AVAILABLE, reason=why)
                    res.input_objects[i] = input_view(m, self._trailing)
                return res
            if cols.n:
                self._put_columns_locked(cols, res)
                self._route_acknowledged(res)
        return res

    def _put_columns_locked(self, c, res: "BatchPutResults") -> None:
        import pyarrow as pa
        import pyarrow.compute as pc
        from ..format import batch_encode as be
        n = c.n
        z = self.segment_size
        trailing = self._trailing
        slow = c.slow.copy()
        if self._append_crc and not trailing:
            slow[:] = True
        # -- per-distinct-value checks: topics, hosts
        tenc = pc.dictionary_encode(c.topic)
        tnames = tenc.dictionary.to_pylist()
        tcode = np.asarray(tenc.indices).astype(np.int64)
        tbad = np.array([self._checks.topic_problem(t) is not None or len(t) > limits.TOPIC_MAX_BYTES_V1
                         for t in tnames] or [True])
        slow |= tbad[tcode]
        tlen = np.array([len(t) for t in tnames] or [0], np.int64)
        bcode, baddr, bport, bbad = hosts_of(c.born_host, n, "127.0.0.1:0")
        scode, saddr, sport, sbad = hosts_of(c.store_host, n, "127.0.0.1:10911")
        shosts = [(int(x).to_bytes(4, "big"), int(y)) for x, y in zip(saddr.tolist(), sport.tolist())]
        slow |= bbad | sbad
        boff, _ = be.binary_offsets(c.body)
        blen = np.diff(boff)
        slow |= blen > self._max_body
        # -- properties (fast rows: TAGS, KEYS, then the map; no separators inside values)
        props = be.serialize_properties(c.tags, c.keys, c.map_part, trailing)
        if getattr(c, "map_checked", False):
            # map keys/values were checked by the column builder; tags/keys here
            slow[be.rows_with_separators(c.tags)] = True
            slow[be.rows_with_separators(c.keys)] = True
        else:
            n_ent = c.map_count + np.asarray(c.tags.is_valid()) + np.asarray(c.keys.is_valid())
            cnt1 = np.asarray(pc.count_substring(props, "\x01"))
            cnt2 = np.asarray(pc.count_substring(props, "\x02"))
            slow |= (cnt1 != n_ent) | (cnt2 != (n_ent if trailing else np.maximum(n_ent - 1, 0)))
        plen = np.asarray(pc.binary_length(props)).astype(np.int64)
        if self._append_crc:
            plen = plen + len(CRC_PLACEHOLDER)
        slow |= plen > PROPS_MAX
        size = be.FIXED_V4_V1 + blen + tlen[tcode] + plen
        slow |= (size > self._max_record) | (size + limits.END_FILE_MIN_BLANK_BYTES > z)
        fast = ~slow
        sys_flag = c.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
        # -- per-message path for the other rows
        topics = list(tnames)
        topic_index = {t: i for i, t in enumerate(topics)}
        shost_index = {h: i for i, h in enumerate(shosts)}
        final_tcode = tcode.copy()
        qid = c.queue_id.copy()
        host_code = scode.copy()
        ok = fast.copy()
        prepared: dict[int, Prepared] = {}
        now = self._clock_ms()
        store_ts = np.where(c.store_ts_valid, c.store_ts, now)
        res.input_objects = {}
        for i in np.flatnonzero(slow).tolist():
            try:
                m = c.message(i)                 # (an Arrow row with invalid UTF-8 fails here)
            except Exception as exc:
                res.objects[i] = failed_result(None, PutMessageStatus.MESSAGE_ILLEGAL,
                                               reason=f"{type(exc).__name__}: {exc}")
                res.input_objects[i] = (0, "")
                continue
            res.input_objects[i] = input_view(m, trailing) if isinstance(m, MessageExtBrokerInner) else (0, "")
            try:
                p = self._checks.prepare(m)
            except UnsupportedMessageError:
                raise
            except Exception as exc:     # malformed input object: refuse it, never half-write
                res.objects[i] = failed_result(m, PutMessageStatus.MESSAGE_ILLEGAL, reason=f"{type(exc).__name__}: {exc}")
                continue
            if isinstance(p, PutMessageResult):
                res.objects[i] = p
                continue
            prepared[i] = p
            ok[i] = True
            size[i] = p.size
            final_tcode[i] = topic_index.setdefault(p.topic, len(topics))
            if final_tcode[i] == len(topics):
                topics.append(p.topic)
            qid[i] = p.queue_id
            sys_flag[i] = p.sys_flag
            hk = (p.store_addr, p.store_port)
            host_code[i] = shost_index.setdefault(hk, len(shosts))
            if host_code[i] == len(shosts):
                shosts.append(hk)
            if p.store_ts is not None:
                store_ts[i] = p.store_ts
        res.topics, res.hosts = topics, shosts
        res.topic_code[:] = final_tcode
        res.queue_ids[:] = qid
        res.sys_flags[:] = sys_flag
        res.host_code[:] = host_code
        rows = np.flatnonzero(ok)                     # rows to write, in order
        if rows.size == 0:
            self._input_view_fast(res, c, fast, props, None)
            return
        # -- positions: segments with the blank rule, then queue offsets
        seg = self._current
        first_open = seg is not None
        seg_of, in_seg, plan = be.segment_positions(size[rows], seg.wrote if seg else 0, z, first_open)
        base0 = seg.start if first_open else self._next_start
        phy = base0 + seg_of * z + in_seg
        tran = sys_flag[rows] & TRANSACTION_MASK
        enters = (tran == TRANSACTION_NOT_TYPE) | (tran == TRANSACTION_COMMIT_TYPE)
        qo = np.zeros(len(rows), np.int64)
        cq = np.flatnonzero(enters)
        if cq.size:
            ug, inv, order, counts = be.group_rows(final_tcode[rows[cq]], qid[rows[cq]])
            starts = np.zeros(len(ug), np.int64)
            np.cumsum(counts[:-1], out=starts[1:])
            rank = np.empty(len(cq), np.int64)
            rank[order] = np.arange(len(cq)) - np.repeat(starts, counts)
            bases = np.array([self._queue_offsets.get((topics[int(g >> 32)], int(g & 0xFFFFFFFF)), 0)
                              for g in ug.tolist()], np.int64)
            qo[cq] = bases[inv] + rank
        ts = store_ts[rows]
        # -- tags codes (ConsumeQueue) and index keys
        tags_code = np.zeros(n, np.int64)
        fast_tags = be.tags_codes(c.tags) if fast.any() else None
        if fast_tags is not None:
            tags_code[fast] = fast_tags[fast]
        levels = self._delay_levels
        rowpos = np.full(n, -1, np.int64)
        rowpos[rows] = np.arange(len(rows))
        for i, p in prepared.items():
            if p.delay is not None:
                tags_code[i] = compute_tags_code(p.topic, {"TAGS": p.tags, "DELAY": p.delay}
                                                 if p.tags is not None else {"DELAY": p.delay}, int(store_ts[i]),
                                                 levels)
            else:
                tags_code[i] = tags_code_of(p.tags)
        entries = index_entries(c, fast, rowpos, tcode, tnames, prepared) \
            if self.index_service is not None else None
        # -- encode: fast rows at once, the others one by one
        frows = np.flatnonzero(fast)
        recs = None
        if frows.size:
            recs = encode_fast(c, frows, rowpos, size, phy, qo, ts, tcode, tnames, bcode, baddr, bport,
                               scode, saddr, sport, sys_flag, props, plen, self._append_crc)
        if prepared:
            slow_recs = []
            srows = np.array(sorted(prepared), np.int64)
            for i in srows.tolist():
                j = int(rowpos[i])
                slow_recs.append(self._encode_one(prepared[i], int(qo[j]), int(phy[j]), int(ts[j])))
            sarr = pa.array(slow_recs, pa.binary())
            if recs is None:
                recs = sarr
            else:
                perm = np.empty(len(rows), np.int64)
                perm[rowpos[frows]] = np.arange(len(frows))
                perm[rowpos[srows]] = len(frows) + np.arange(len(srows))
                recs = pa.concat_arrays([recs, sarr]).take(pa.array(perm))
        roff, rdata = be.binary_offsets(recs)
        # -- write segment by segment; acknowledge and dispatch what was written
        status_ok = STATUS_CODE[PutMessageStatus.PUT_OK]
        for s_idx, (a, b, blank, pos) in enumerate(plan):
            if s_idx > 0 or not first_open:
                try:
                    seg = self._roll()
                except OSError as exc:
                    self._fail_rows(c, res, rows[a:], PutMessageStatus.CREATE_MAPPED_FILE_FAILED, str(exc))
                    break
            chunk = memoryview(rdata)[int(roff[a]):int(roff[b])]
            if blank:
                chunk = bytes(chunk) + BLANK.pack(blank, BLANK_MAGIC)
            try:
                self._write_chunk(seg, chunk, pos)
            except OSError as exc:
                self._fail_rows(c, res, rows[a:], PutMessageStatus.UNKNOWN_ERROR, str(exc))
                break
            # A chunk that is not the last one ends with the END_OF_FILE blank: its segment is full.
            status = self._written(seg, z if s_idx < len(plan) - 1 else pos + len(chunk))
            if b == a:
                if not self._writable:
                    self._fail_rows(c, res, rows[b:], PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                    files.describe(self._error))
                    break
                continue
            r = rows[a:b]
            res.status[r] = STATUS_CODE[status] if status is not PutMessageStatus.PUT_OK else status_ok
            res.commit_log_offsets[r] = phy[a:b]
            res.queue_offsets[r] = qo[a:b]
            res.sizes[r] = size[r]
            res.store_timestamps[r] = ts[a:b]
            cqa = np.flatnonzero(enters[a:b])
            if cqa.size:
                for g, last in zip(*self._last_per_group(final_tcode[r[cqa]], qid[r[cqa]], qo[a:b][cqa])):
                    self._queue_offsets[(topics[g[0]], g[1])] = last + 1
            self._last_store_ts = int(ts[b - 1])
            if status is PutMessageStatus.PUT_OK and self._sync_flush:
                self._physic_ts = self._last_store_ts
            try:
                ent = None
                if entries is not None:
                    e_rec, e_hash = entries
                    lo, hi = np.searchsorted(e_rec, [a, b])
                    ent = (e_rec[lo:hi] - a, e_hash[lo:hi])
                self.dispatcher.dispatch_columns(topics, final_tcode[r], qid[r], phy[a:b], size[r],
                                                 tags_code[r], ts[a:b], qo[a:b], sys_flag[r], ent)
            except Exception as exc:  # the CommitLog holds the data; a reopen re-dispatches it
                self._error = exc
                self._writable = False
            if not self._writable:      # (after a failed fsync nothing more may be acknowledged)
                self._fail_rows(c, res, rows[b:], PutMessageStatus.SERVICE_NOT_AVAILABLE, files.describe(self._error))
                break
        self._input_view_fast(res, c, fast, props, fast_tags)

    @staticmethod
    def _last_per_group(tc: np.ndarray, q: np.ndarray, qo: np.ndarray):
        from ..format import batch_encode as be
        ug, _, order, counts = be.group_rows(tc, q)
        last = qo[order[np.cumsum(counts) - 1]]
        return [(int(g >> 32), int(g & 0xFFFFFFFF)) for g in ug.tolist()], last.tolist()

    def _input_view_fast(self, res, c, fast, props, fast_tags=None) -> None:
        import pyarrow as pa
        from ..format import batch_encode as be
        frows = np.flatnonzero(fast)
        res.input_rows = frows
        res.input_props = props.take(pa.array(frows)) if frows.size != c.n else props
        if frows.size:
            codes = fast_tags if fast_tags is not None else be.tags_codes(c.tags)
            res.input_tags_code[frows] = codes[frows]
        for i, v in res.input_objects.items():
            res.input_tags_code[i] = v[0]

    def _fail_rows(self, c, res, rows: np.ndarray, status: PutMessageStatus, reason: str) -> None:
        for i in rows.tolist():
            res.status[i] = OBJ
            res.objects[i] = PutMessageResult(status, AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR)
                                              if status is PutMessageStatus.UNKNOWN_ERROR else None,
                                              res.topics[int(res.topic_code[i])], int(res.queue_ids[i]),
                                              int(res.sys_flags[i]), reason)
