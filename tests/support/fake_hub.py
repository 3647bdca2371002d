"""A local fake Hugging Face Hub for tests: search, file listings, LFS headers, ranged files, faults.

It speaks the subset of the Hub's HTTP protocol that huggingface_hub 2.x uses, on
127.0.0.1 (reached through `HF_ENDPOINT`), with a second "CDN" server on 127.0.0.2 for
redirects. Every request is recorded with its host and headers, so a test can assert
what reached where (a token must never reach the CDN).

Faults are set per file with `FakeHub.set_fault(repo, filename, Fault(...))`:
  drop_after   close the connection after this many body bytes (`times` times, -1 = always)
  stall_after  send this many body bytes, then stop sending (hold the socket) for `stall_s`
  status       answer this HTTP status (`times` times, -1 = always) instead of the body
  corrupt      flip one byte of the body (same size, so only a hash check notices)
  ignore_range answer 200 with the whole body even when a Range was asked for
  redirect     GET and HEAD answer 302 to the CDN host, as the real Hub does for LFS files
"""

from __future__ import annotations

import hashlib
import http.server
import json
import socketserver
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

COMMIT = "c0ffee" + "0" * 34
VALID_TOKEN = "hf_CANARYtokenForTests0123456789abcdef"


@dataclass
class Fault:
    drop_after: int | None = None
    stall_after: int | None = None
    stall_s: float = 60.0
    status: int | None = None
    corrupt: bool = False
    ignore_range: bool = False
    redirect: bool = False
    times: int = -1  # how many requests the fault applies to; -1 = every request

    def consume(self) -> bool:
        """Whether the fault applies to this request (and count it)."""
        if self.times == 0:
            return False
        if self.times > 0:
            self.times -= 1
        return True


@dataclass
class FakeRepo:
    repo_id: str
    files: dict[str, bytes] = field(default_factory=dict)
    gated: bool = False
    downloads: int = 0
    likes: int = 0
    last_modified: str = "2026-01-01T00:00:00.000Z"
    license: str | None = "apache-2.0"
    commit: str = COMMIT

    @property
    def author(self) -> str:
        return self.repo_id.split("/", 1)[0]


@dataclass
class RecordedRequest:
    host: str
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased

    @property
    def range_start(self) -> int | None:
        rng = self.headers.get("range")
        if not rng or not rng.startswith("bytes="):
            return None
        return int(rng[6:].split("-", 1)[0] or 0)


class FakeHub:
    """Two threaded HTTP servers (hub on 127.0.0.1, CDN on 127.0.0.2) over one set of repos."""

    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.faults: dict[tuple[str, str], Fault] = {}
        self.requests: list[RecordedRequest] = []
        self.valid_tokens = {VALID_TOKEN}
        self._lock = threading.Lock()
        self._release_stalls = threading.Event()
        self._servers: list[socketserver.ThreadingTCPServer] = []
        self.url = ""
        self.cdn_url = ""

    # -- set-up ---------------------------------------------------------------------------

    def add_repo(self, repo_id: str, files: dict[str, bytes], **kw: Any) -> FakeRepo:
        repo = FakeRepo(repo_id=repo_id, files=dict(files), **kw)
        self.repos[repo_id] = repo
        return repo

    def set_fault(self, repo_id: str, filename: str, fault: Fault | None) -> None:
        with self._lock:
            if fault is None:
                self.faults.pop((repo_id, filename), None)
            else:
                self.faults[(repo_id, filename)] = fault

    def release_stalls(self) -> None:
        self._release_stalls.set()

    def start(self) -> FakeHub:
        hub = self._serve("127.0.0.1", is_cdn=False)
        cdn = self._serve("127.0.0.2", is_cdn=True)
        self.url = f"http://127.0.0.1:{hub.server_address[1]}"
        self.cdn_url = f"http://127.0.0.2:{cdn.server_address[1]}"
        return self

    def stop(self) -> None:
        self._release_stalls.set()
        for srv in self._servers:
            srv.shutdown()
            srv.server_close()

    # -- what the tests look at --------------------------------------------------------------

    def requests_for(self, filename: str, method: str | None = None, host: str | None = None) -> list[RecordedRequest]:
        with self._lock:
            return [
                r
                for r in self.requests
                if unquote(urlsplit(r.path).path).endswith("/" + filename)
                and (method is None or r.method == method)
                and (host is None or r.host == host)
            ]

    def bytes_served(self, filename: str) -> int:
        """Bytes sent for `filename`'s GETs. A handler notes them after its last write, which the
        client may have read already: wait (briefly) until every GET was answered."""
        deadline = time.monotonic() + 10
        while True:
            records = self.requests_for(filename, "GET")
            if all(getattr(r, "answered", False) for r in records) or time.monotonic() > deadline:
                return sum(getattr(r, "sent", 0) for r in records)
            time.sleep(0.01)

    # -- serving -------------------------------------------------------------------------

    def _serve(self, host: str, is_cdn: bool) -> socketserver.ThreadingTCPServer:
        hub = self

        class Handler(_HubHandler):
            fake = hub
            cdn = is_cdn

        srv = socketserver.ThreadingTCPServer((host, 0), Handler)
        srv.daemon_threads = True
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True, name=f"fake-hub-{host}").start()
        self._servers.append(srv)
        return srv


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _HubHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeHub
    cdn: bool

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def _record(self) -> RecordedRequest:
        rec = RecordedRequest(self.server.server_address[0], self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
        with self.fake._lock:
            self.fake.requests.append(rec)
        return rec

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, data: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(data).encode(), headers)

    def _error(self, status: int, message: str, code: str | None = None) -> None:
        headers = {"X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self._json({"error": message}, status, headers)

    def _authorized(self, repo: FakeRepo) -> bool:
        if not repo.gated:
            return True
        auth = self.headers.get("Authorization", "")
        return auth.startswith("Bearer ") and auth[7:] in self.fake.valid_tokens

    def _gate(self, repo: FakeRepo) -> bool:
        """Answer 401/403 for a gated repo without access; True when the request may go on."""
        if self._authorized(repo):
            return True
        if self.headers.get("Authorization"):
            self._error(403, f"Access to model {repo.repo_id} is restricted and you are not in the authorized list.", "GatedRepo")
        else:
            self._error(401, f"Access to model {repo.repo_id} is restricted. You must be authenticated to access it.", "GatedRepo")
        return False

    def do_HEAD(self) -> None:
        self._handle()

    def do_GET(self) -> None:
        self._handle()

    def _handle(self) -> None:
        rec = self._record()
        try:
            self._dispatch(rec)
        finally:
            rec.answered = True  # type: ignore[attr-defined]

    def _dispatch(self, rec: RecordedRequest) -> None:
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = parse_qs(parts.query)
        if self.cdn:
            return self._serve_cdn(path, rec)
        if path == "/api/models":
            return self._search(query)
        if path.startswith("/api/models/"):
            return self._api_model(path[len("/api/models/") :], query)
        if "/resolve/" in path:
            repo_id, rest = path.lstrip("/").split("/resolve/", 1)
            _rev, filename = rest.split("/", 1)
            return self._resolve(repo_id, filename, rec)
        self._error(404, "not found")

    # -- API -------------------------------------------------------------------------------

    def _model_json(self, repo: FakeRepo, siblings: bool = False) -> dict[str, Any]:
        tags = ["gguf"] + ([f"license:{repo.license}"] if repo.license else [])
        data: dict[str, Any] = {
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "author": repo.author,
            "downloads": repo.downloads,
            "likes": repo.likes,
            "lastModified": repo.last_modified,
            "gated": "manual" if repo.gated else False,
            "private": False,
            "tags": tags,
            "sha": repo.commit,
            "cardData": {"license": repo.license} if repo.license else {},
        }
        if siblings:
            data["siblings"] = [{"rfilename": name} for name in repo.files]
        return data

    def _search(self, query: dict[str, list[str]]) -> None:
        text = (query.get("search") or [""])[0].lower()
        sort = (query.get("sort") or ["downloads"])[0]
        limit = int((query.get("limit") or ["50"])[0])
        found = [r for r in self.fake.repos.values() if text in r.repo_id.lower()]
        keys = {"downloads": lambda r: r.downloads, "likes": lambda r: r.likes, "lastModified": lambda r: r.last_modified}
        found.sort(key=keys.get(sort, keys["downloads"]), reverse=True)
        self._json([self._model_json(r) for r in found[:limit]])

    def _api_model(self, rest: str, query: dict[str, list[str]]) -> None:
        # /api/models/{org}/{name}, /api/models/{org}/{name}/revision/{rev}, .../tree/{rev}[/{path}]
        segments = rest.split("/")
        repo = self.fake.repos.get("/".join(segments[:2]))
        if repo is None:
            return self._error(404, "Repository not found", "RepoNotFound")
        tail = segments[2:]
        if not tail or tail[0] == "revision":
            return self._json(self._model_json(repo, siblings=True))
        if tail[0] == "tree":
            # Listings of gated repos are public on the Hub; only file bodies need access.
            entries = []
            for name, data in repo.files.items():
                entry: dict[str, Any] = {"type": "file", "path": name, "size": len(data), "oid": sha256_hex(data)[:40]}
                if name.endswith(".gguf"):
                    entry["lfs"] = {"oid": sha256_hex(data), "size": len(data), "pointerSize": 134}
                entries.append(entry)
            return self._json(entries)
        self._error(404, "not found")

    # -- files -----------------------------------------------------------------------------

    def _file_headers(self, repo: FakeRepo, data: bytes) -> dict[str, str]:
        digest = sha256_hex(data)
        return {
            "X-Repo-Commit": repo.commit,
            "ETag": f'"{digest}"',
            "X-Linked-Etag": f'"{digest}"',
            "X-Linked-Size": str(len(data)),
            "Accept-Ranges": "bytes",
        }

    def _resolve(self, repo_id: str, filename: str, rec: RecordedRequest) -> None:
        repo = self.fake.repos.get(repo_id)
        if repo is None:
            return self._error(404, "Repository not found", "RepoNotFound")
        if filename not in repo.files:
            return self._error(404, "Entry not found", "EntryNotFound")
        if not self._gate(repo):
            return
        fault = self.fake.faults.get((repo_id, filename))
        if fault and fault.status and fault.consume():
            return self._error(fault.status, "simulated server error")
        data = repo.files[filename]
        if fault and fault.redirect:
            location = f"{self.fake.cdn_url}/cdn/{repo_id}/{filename}"
            headers = self._file_headers(repo, data)
            headers["Location"] = location
            headers["Content-Length"] = "0"
            self.send_response(302)
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            return
        self._body(repo, filename, data, fault, rec)

    def _serve_cdn(self, path: str, rec: RecordedRequest) -> None:
        if not path.startswith("/cdn/"):
            return self._error(404, "not found")
        org, name, filename = path[len("/cdn/") :].split("/", 2)
        repo = self.fake.repos.get(f"{org}/{name}")
        if repo is None or filename not in repo.files:
            return self._error(404, "not found")
        fault = self.fake.faults.get((repo.repo_id, filename))
        self._body(repo, filename, repo.files[filename], fault, rec)

    def _body(self, repo: FakeRepo, filename: str, data: bytes, fault: Fault | None, rec: RecordedRequest) -> None:
        if fault and fault.corrupt:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        headers = self._file_headers(repo, repo.files[filename])
        start, end = 0, len(data) - 1
        rng = self.headers.get("Range")
        status = 200
        if rng and rng.startswith("bytes=") and not (fault and fault.ignore_range):
            first, _, last = rng[6:].partition("-")
            start = int(first or 0)
            end = min(int(last), len(data) - 1) if last else len(data) - 1
            if start >= len(data):
                return self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"})
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        part = data[start : end + 1]
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(part)))
        self.end_headers()
        if self.command == "HEAD":
            return
        limit = len(part)
        drop = stall = False
        if fault and fault.drop_after is not None and fault.consume():
            limit, drop = min(limit, fault.drop_after), True
        elif fault and fault.stall_after is not None and fault.consume():
            limit, stall = min(limit, fault.stall_after), True
        sent = 0
        try:
            while sent < limit:
                chunk = part[sent : min(limit, sent + 64 * 1024)]
                self.wfile.write(chunk)
                sent += len(chunk)
            self.wfile.flush()
            rec.sent = sent  # type: ignore[attr-defined]
            if stall:
                self.fake._release_stalls.wait(fault.stall_s if fault else 0)
            if drop or stall:
                self.connection.shutdown(2)
                self.close_connection = True
        except OSError:
            rec.sent = sent  # type: ignore[attr-defined]
            self.close_connection = True
