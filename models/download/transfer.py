"""One Hub file into its partial file: metadata HEAD, ranged GETs, retries with backoff, hashing.

Built on huggingface_hub's own helpers (`hf_hub_url`, `get_hf_file_metadata`,
`build_hf_headers`, its shared httpx2 session), because huggingface_hub 2.x itself only
resumes within one process: here the resume point is the partial file on disk, so a
download survives a killed process or a restart. Import only after
`models.network.prepare_hub_import()` (the child process does that first).

Token invariant: the token goes only to the Hub's own origin. When the metadata HEAD
says the bytes live elsewhere (a CDN), the GET to that location carries no token, and
httpx2 drops it on any cross-origin redirect as well, exactly as huggingface_hub does.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO, TypeVar
from urllib.parse import urlsplit

import httpx2
from huggingface_hub import get_hf_file_metadata, hf_hub_url
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

from models.download.partial import is_sha256
from models.download.protocol import TransferPolicy
from models.hub_errors import HubError
from models.hub_files import check_repo_path
from models.network import hub_endpoint

T = TypeVar("T")
_READ_BLOCK = 1 << 20
_RETRY_STATUS = {408, 429, 500, 502, 503, 504}


@dataclass(frozen=True)
class RemoteFile:
    repo: str
    filename: str
    commit: str
    size: int
    sha256: str  # the LFS hash the finished file must have
    url: str  # where the bytes are (the CDN location when the Hub redirects)
    with_token: bool  # whether `url` is on the Hub's own origin


class Corrupted(Exception):
    """The bytes do not match what the Hub promised; the partial file must go."""


class _Incomplete(Exception):
    """The body ended before the whole range arrived (retried like a dropped connection)."""


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def resolve(repo: str, filename: str, revision: str | None, token: str | None, policy: TransferPolicy) -> RemoteFile:
    """One metadata HEAD: size, sha256, commit and the location of the bytes.

    A name that is not a plain path inside the repo is refused before any request
    (hf_hub_url keeps `..` segments, and the HTTP client collapses them out of the pinned path).
    """
    check_repo_path(filename)
    url = hf_hub_url(repo, filename, revision=revision or "main", endpoint=hub_endpoint())
    meta = get_hf_file_metadata(url, token=token or False, timeout=policy.connect_timeout)
    if not meta.commit_hash:
        raise HubError(f"{hub_endpoint()} did not answer like the Hugging Face Hub (no commit for {filename}).")
    if not is_sha256(meta.etag):
        raise HubError(f"The Hub gave no sha256 for {filename}, so Cove cannot verify it and did not download it.")
    if meta.size is None:
        raise HubError(f"The Hub did not say how big {filename} is, so Cove did not download it.")
    location = meta.location or url
    on_hub = _origin(location) == _origin(url)
    if on_hub:  # fetch the bytes of exactly this commit, even if the branch moves meanwhile
        location = hf_hub_url(repo, filename, revision=meta.commit_hash, endpoint=hub_endpoint())
    return RemoteFile(
        repo=repo,
        filename=filename,
        commit=meta.commit_hash,
        size=int(meta.size),
        sha256=str(meta.etag),
        url=location,
        with_token=on_hub,
    )


def retry_reason(exc: BaseException, policy: TransferPolicy) -> str | None:
    """A short phrase if `exc` is worth another attempt, else None."""
    if isinstance(exc, httpx2.ReadTimeout):
        return f"no data for {policy.stall_timeout:g} s"
    if isinstance(exc, (httpx2.ConnectError, httpx2.ConnectTimeout)):
        return "could not connect"
    if isinstance(exc, (httpx2.TimeoutException,)):
        return "the server did not answer in time"
    if isinstance(exc, (httpx2.RemoteProtocolError, httpx2.ReadError, httpx2.WriteError, _Incomplete)):
        return "the connection dropped"
    if isinstance(exc, HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status in _RETRY_STATUS:
            return "too many requests" if status == 429 else f"server error {status}"
    return None


def with_retries(
    attempt: Callable[[], T],
    policy: TransferPolicy,
    on_retry: Callable[[int, str, float], None],
    progress: Callable[[], int] = lambda: 0,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run `attempt` until it succeeds, waiting base * 2^n (capped) between failed attempts.

    The count of failures starts again whenever an attempt moved `progress()` forward, so
    a long download over a flaky line keeps going as long as bytes keep arriving.
    """
    failures = 0
    while True:
        before = progress()
        try:
            return attempt()
        except Exception as exc:
            reason = retry_reason(exc, policy)
            if reason is None:
                raise
            failures = 1 if progress() > before else failures + 1
            if failures >= policy.max_attempts:
                if isinstance(exc, HfHubHTTPError):
                    raise
                raise HubError(
                    f"The download kept failing ({reason}) after {failures} attempts; "
                    "run it again later and it will continue where it stopped."
                ) from exc
            wait = min(policy.backoff_max, policy.backoff_base * 2 ** (failures - 1))
            on_retry(failures, reason, wait)
            sleep(wait)


class PartialWriter:
    """Appends to an open partial file and keeps the running sha256 of everything in it."""

    def __init__(self, f: BinaryIO, size: int) -> None:
        self.f = f
        self.size = size
        self.pos = 0
        self._hash = hashlib.sha256()

    def rehash_existing(self) -> int:
        """Hash the prefix already on disk (a resume); returns its length."""
        self.f.seek(0, 2)
        existing = self.f.tell()
        if existing > self.size:  # not a prefix of this file: start over
            self.restart()
            return 0
        self.f.seek(0)
        while block := self.f.read(_READ_BLOCK):
            self._hash.update(block)
            self.pos += len(block)
        return self.pos

    def restart(self) -> None:
        self.f.seek(0)
        self.f.truncate(0)
        self.pos = 0
        self._hash = hashlib.sha256()

    def write(self, chunk: bytes) -> None:
        if self.pos + len(chunk) > self.size:
            raise Corrupted("the server sent more data than the file has")
        view = memoryview(chunk)
        while view:  # an unbuffered write may be short
            view = view[self.f.write(view) or 0 :]
        self._hash.update(chunk)
        self.pos += len(chunk)

    @property
    def complete(self) -> bool:
        return self.pos == self.size

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def fetch_rest(
    remote: RemoteFile, writer: PartialWriter, token: str | None, policy: TransferPolicy, on_bytes: Callable[[int], None]
) -> None:
    """One GET of `remote` from `writer.pos` to the end, appended to the partial file.

    A server that answers a ranged request with 200 sends the whole file: the partial
    file is emptied and filled from byte 0 instead. Raises what the transport raised
    (`retry_reason` decides whether it is worth another attempt).
    """
    if writer.complete:
        return
    headers = build_hf_headers(token=(token or False) if remote.with_token else False)
    headers["Accept-Encoding"] = "identity"  # the bytes as stored, so offsets and the hash line up
    start = writer.pos
    if start:
        headers["Range"] = f"bytes={start}-"
    timeout = httpx2.Timeout(policy.stall_timeout, connect=policy.connect_timeout)
    with get_session().stream("GET", remote.url, headers=headers, timeout=timeout, follow_redirects=True) as response:
        hf_raise_for_status(response)
        if start and response.status_code != 206:
            on_bytes(-writer.pos)
            writer.restart()
        elif start and not response.headers.get("Content-Range", "").startswith(f"bytes {start}-"):
            raise Corrupted(f"the server sent a different part of the file than asked for ({response.headers.get('Content-Range')})")
        writer.f.seek(writer.pos)
        for chunk in response.iter_bytes():
            if chunk:
                writer.write(chunk)
                on_bytes(len(chunk))
    if not writer.complete:
        raise _Incomplete()
