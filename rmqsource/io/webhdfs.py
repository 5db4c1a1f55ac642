"""A ``webhdfs://host:port/path`` (or ``swebhdfs://``, over https) destination: HDFS through its REST API.

WebHDFS is served by every NameNode (``dfs.namenode.http-address``, 9870 by default) and needs nothing on
this side but HTTP (the standard library here); pyarrow's ``hdfs://`` needs the native libhdfs and a Hadoop
client instead.  The URI is the one Hadoop's own ``WebHdfsFileSystem`` takes; a Spark job reads the folder
as ``hdfs://host:rpcPort/path`` (pyspark's shaded Hadoop client cannot read ``webhdfs://``: it lacks the
Jersey runtime WebHdfsFileSystem needs).

Operations (Hadoop's WebHDFS REST API): ``CREATE`` (a PUT to the NameNode answered by a 307 to a DataNode,
which takes the bytes; ``overwrite=true``), ``OPEN``, ``GETFILESTATUS``, ``LISTSTATUS``, ``MKDIRS``,
``RENAME``, ``DELETE``.  The user is simple authentication's ``user.name``: the URI's user part
(``webhdfs://alice@nn:9870/x``), else ``-O user.name=...``, else ``HADOOP_USER_NAME``, else the login name
(what Hadoop's client sends).  Kerberos (SPNEGO) and delegation tokens are not spoken.

A file is published whole: uploaded under ``DEST/.rmq-snapshot-staging/`` (emptied at each open), then
renamed over its name with ``renameoptions=OVERWRITE``: the NameNode's ``rename2``, one atomic namespace
step, so a reader sees the old file or the new one.  The option is the NameNode's (``WebHdfsFileSystem``
sends it for ``FileContext.rename(..., OVERWRITE)``) though the REST documentation omits it; a server that
ignores it (its plain rename answers ``false`` when the name is taken) gets a DELETE then a plain RENAME:
for that instant the file is absent, never half-written.
"""

from __future__ import annotations

import getpass
import http.client
import json
import os
import shutil
import ssl
import tempfile
import threading
import urllib.parse
from typing import Iterator, Mapping, Optional

from ..errors import OptionError, StoreError
from .destinations import STAGING_DIR, MemorySpan, RemoteDestination, SourceSpan, StagedFile, send_staged

SCHEMES = {"webhdfs": "http", "swebhdfs": "https"}
DEFAULT_PORT = {"webhdfs": 9870, "swebhdfs": 9871}       # Hadoop 3's dfs.namenode.http(s)-address
OPTIONS = ("user.name", "timeout")
DEFAULT_TIMEOUT_S = 60.0
MAX_REDIRECTS = 3


class WebHdfsError(StoreError):
    """A WebHDFS request failed: the server's RemoteException (``exception``) or the HTTP status."""

    def __init__(self, message: str, exception: str = ""):
        super().__init__(message)
        self.exception = exception


class WebHdfsDestination(RemoteDestination):
    """A folder on HDFS, written file by file over WebHDFS (module doc)."""

    parallel_publish = 4                 # uploads are independent HTTP requests

    def __init__(self, uri: str, options: Optional[Mapping[str, str]] = None):
        super().__init__()
        parts = urllib.parse.urlsplit(uri)
        if parts.scheme not in SCHEMES or not parts.hostname:
            raise OptionError(f"DEST {uri!r}: expected webhdfs://host[:port]/path or swebhdfs://...")
        options = dict(options or {})
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise OptionError(f"DEST {uri!r}: unknown -O {', '.join(unknown)} for a WebHDFS destination "
                              f"(it reads {', '.join(OPTIONS)})")
        self.uri = uri
        self.scheme = SCHEMES[parts.scheme]
        self.host = parts.hostname
        try:
            self.port = parts.port or DEFAULT_PORT[parts.scheme]
            self.timeout = float(options.get("timeout", DEFAULT_TIMEOUT_S))
        except ValueError as e:
            raise OptionError(f"DEST {uri!r}: {e}") from None
        self.user = (urllib.parse.unquote(parts.username or "") or options.get("user.name")
                     or os.environ.get("HADOOP_USER_NAME") or getpass.getuser())
        self.base = "/" + urllib.parse.unquote(parts.path).strip("/")
        self.base = self.base.rstrip("/")            # "" for the root
        self._local = threading.local()              # one keep-alive connection per publishing thread
        self._connections: list[http.client.HTTPConnection] = []
        self.staging_rel = STAGING_DIR
        self.delete(self.staging_rel, recursive=True)    # left by a run that was stopped
        self._call("PUT", self._path(self.staging_rel), "MKDIRS")
        self.local_staging = tempfile.mkdtemp(prefix="rmq-snapshot-")
        self._count = 0
        self._count_lock = threading.Lock()
        self._made_dirs: set[str] = set()            # folders made by this run (one MKDIRS each)

    # -- HTTP -------------------------------------------------------------------------------------------

    def _path(self, rel: str) -> str:
        return f"{self.base}/{rel}" if rel else (self.base or "/")

    def _url(self, path: str, op: str, **params) -> str:
        query = urllib.parse.urlencode({"op": op, "user.name": self.user, **params})
        return f"/webhdfs/v1{urllib.parse.quote(path)}?{query}"

    def _connection(self, scheme: str, host: str, port: int) -> http.client.HTTPConnection:
        if scheme == "https":
            return http.client.HTTPSConnection(host, port, timeout=self.timeout,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(host, port, timeout=self.timeout)

    def _namenode(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connection(self.scheme, self.host, self.port)
            self._connections.append(conn)
        return conn

    def _drop_namenode(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _call(self, method: str, path: str, op: str, *, missing_ok: bool = False, **params):
        """One NameNode request; its JSON answer (None for an empty one, or for a missing file when
        ``missing_ok``); a 307's ``Location`` for CREATE and OPEN, which the DataNode then serves."""
        url = self._url(path, op, **params)
        for attempt in range(2):            # a kept-alive connection the server closed meanwhile: once more
            conn = self._namenode()
            try:
                conn.request(method, url, headers={"Content-Length": "0"} if method in ("PUT", "POST") else {})
                resp = conn.getresponse()
                body = resp.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                self._drop_namenode()
                if attempt:
                    raise self._unreachable(op, path, e) from None
            except (OSError, http.client.HTTPException) as e:
                self._drop_namenode()
                raise self._unreachable(op, path, e) from None
        if resp.status == 307:
            return resp.getheader("Location")
        if resp.status >= 300:
            error = self._error(op, path, resp.status, body)
            if missing_ok and error.exception == "FileNotFoundException":
                return None
            raise error
        return json.loads(body) if body.strip() else None

    def _unreachable(self, op: str, path: str, e: BaseException) -> StoreError:
        reason = " ".join(str(e).split()) or type(e).__name__
        return StoreError(f"{self.uri}: WebHDFS {op} {path} at {self.scheme}://{self.host}:{self.port} got no "
                          f"answer: {reason}")

    def _error(self, op: str, path: str, status: int, body: bytes) -> WebHdfsError:
        """The server's RemoteException ({"RemoteException": {"exception", "message", ...}}), else the status."""
        try:
            remote = json.loads(body)["RemoteException"]
            exception, message = remote.get("exception", ""), remote.get("message", "")
        except (ValueError, KeyError, TypeError, AttributeError):
            exception, message = "", body[:300].decode("utf-8", "replace")
        detail = " ".join(f"{exception}: {message}".strip(": ").split()) or "no details"
        return WebHdfsError(f"{self.uri}: WebHDFS {op} {path} answered HTTP {status}: {detail}", exception)

    def _datanode(self, location: str, op: str, path: str):
        """A connection to the DataNode the NameNode sent us to, and the request target there."""
        where = urllib.parse.urlsplit(location)
        if where.scheme not in ("http", "https") or not where.hostname:
            raise WebHdfsError(f"{self.uri}: WebHDFS {op} {path}: the NameNode redirected to {location!r}")
        target = where.path + (f"?{where.query}" if where.query else "")
        port = where.port or (443 if where.scheme == "https" else 80)
        return self._connection(where.scheme, where.hostname, port), target

    # -- Destination ------------------------------------------------------------------------------------

    def read_bytes(self, rel: str) -> Optional[bytes]:
        path = self._path(rel)
        location = self._call("GET", path, "OPEN", missing_ok=True)
        if location is None:
            return None
        for _ in range(MAX_REDIRECTS):
            conn, target = self._datanode(location, "OPEN", path)
            try:
                conn.request("GET", target)
                resp = conn.getresponse()
                body = resp.read()
            except (OSError, http.client.HTTPException) as e:
                raise self._unreachable("OPEN", path, e) from None
            finally:
                conn.close()
            if resp.status == 307:
                location = resp.getheader("Location")
                continue
            if resp.status == 404:
                return None
            if resp.status >= 300:
                raise self._error("OPEN", path, resp.status, body)
            return body
        raise WebHdfsError(f"{self.uri}: WebHDFS OPEN {path}: more than {MAX_REDIRECTS} redirects")

    def stage(self, rel: str) -> StagedFile:
        with self._count_lock:
            self._count += 1
            name = f"{self._count:08d}"
        return StagedFile(rel, os.path.join(self.local_staging, name), durable=False)

    def publish(self, staged: StagedFile | SourceSpan | MemorySpan, *, sync_dir: bool = True) -> None:
        staged.wait()
        try:
            with self._count_lock:
                self._count += 1
                temp = f"{self.staging_rel}/{self._count:08d}"
            size = staged.size if isinstance(staged, (SourceSpan, MemorySpan)) else os.path.getsize(staged.path)
            self._upload(self._path(temp), size, staged)
            self._replace(temp, staged.rel)
        finally:
            staged.discard()

    def _upload(self, path: str, size: int, staged: StagedFile | SourceSpan | MemorySpan) -> None:
        """CREATE ``path`` (overwrite) with ``size`` bytes of ``staged``, streamed to the DataNode."""
        location = self._call("PUT", path, "CREATE", overwrite="true")
        if not isinstance(location, str):        # noredirect-style answer: {"Location": ...}
            location = (location or {}).get("Location")
        if not location:
            raise WebHdfsError(f"{self.uri}: WebHDFS CREATE {path}: the NameNode named no DataNode")
        conn, target = self._datanode(location, "CREATE", path)
        try:
            conn.putrequest("PUT", target)
            conn.putheader("Content-Type", "application/octet-stream")
            conn.putheader("Content-Length", str(size))
            conn.endheaders()
            sink = _Sink(conn)
            send_staged(staged, sink)
            if sink.sent != size:
                raise WebHdfsError(f"{self.uri}: WebHDFS CREATE {path}: sent {sink.sent} of {size} bytes")
            resp = conn.getresponse()
            body = resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise self._unreachable("CREATE", path, e) from None
        finally:
            conn.close()
        if resp.status >= 300:
            raise self._error("CREATE", path, resp.status, body)

    def _replace(self, temp_rel: str, rel: str) -> None:
        """Rename ``temp_rel`` over ``rel`` in one step (module doc: OVERWRITE, else delete then rename)."""
        source, target = self._path(temp_rel), self._path(rel)
        parent = target.rsplit("/", 1)[0] or "/"
        if parent not in self._made_dirs:
            self._call("PUT", parent, "MKDIRS")
            self._made_dirs.add(parent)
        answer = self._call("PUT", source, "RENAME", destination=target, renameoptions="OVERWRITE")
        if answer is None:                       # rename2 answers with an empty body
            return
        if answer.get("boolean") is not True:    # a server that ran a plain rename: the name was taken
            self.delete(rel)
            answer = self._call("PUT", source, "RENAME", destination=target)
            if not answer or answer.get("boolean") is not True:
                raise WebHdfsError(f"{self.uri}: WebHDFS RENAME {source} to {target} answered {answer}")

    def delete(self, rel: str, *, recursive: bool = False) -> None:
        self._call("DELETE", self._path(rel), "DELETE", missing_ok=True, recursive=str(recursive).lower())

    def holds_store_files(self) -> bool:
        return self.status("commitlog") is not None

    def status(self, rel: str) -> Optional[dict]:
        """The FileStatus (``type``, ``length``, ...) of ``rel``; None when there is none."""
        answer = self._call("GET", self._path(rel), "GETFILESTATUS", missing_ok=True)
        return answer["FileStatus"] if answer else None

    def list_files(self, rel: str = "") -> Iterator[tuple[str, int]]:
        """(relative name, length) of every file under ``rel``, depth first, the staging folder left out."""
        answer = self._call("GET", self._path(rel), "LISTSTATUS", missing_ok=True)
        for entry in (answer or {}).get("FileStatuses", {}).get("FileStatus", []):
            name = f"{rel}/{entry['pathSuffix']}" if rel else entry["pathSuffix"]
            if name == self.staging_rel:
                continue
            if entry["type"] == "DIRECTORY":
                yield from self.list_files(name)
            else:
                yield name, int(entry["length"])

    def close(self) -> None:
        try:
            self.delete(self.staging_rel, recursive=True)
        finally:
            for conn in self._connections:
                conn.close()
            shutil.rmtree(self.local_staging, ignore_errors=True)


class _Sink:
    """``write`` onto an HTTP request body being sent, counting the bytes."""

    def __init__(self, conn: http.client.HTTPConnection):
        self.conn = conn
        self.sent = 0

    def write(self, data) -> None:
        self.conn.send(data)
        self.sent += len(data)


def is_webhdfs_uri(dest: str) -> bool:
    return dest.split("://", 1)[0].lower() in SCHEMES
