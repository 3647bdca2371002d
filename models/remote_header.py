"""Read a GGUF file's header straight from the Hub, without downloading the model.

One HEAD (through huggingface_hub's `get_hf_file_metadata`) gives the file's size and the
commit it resolves to; then ranged GETs fetch only the start of the file, 256 KiB first and
doubling (or jumping to what the parser says it needs) until the metadata and the tensor
table parse, up to 64 MiB. The bytes are checked by the same bounded parser as a local file
(`read_gguf_header_bytes`), against the file's real size.

Requests go through huggingface_hub's own HTTP client with its headers. The token goes
only to the Hub's own host: when the Hub redirects a file to a CDN, the ranged GETs go to
the CDN address without it (as huggingface_hub's downloads do), and a redirect followed by
the client drops it too. A server that ignores the Range header is read only as far as
needed, then the connection is closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from models.gguf_info import GGUFInfo, info_from_header
from models.gguf_validate import GGUFHeader, InvalidModelFile, NeedMoreBytes, read_gguf_header_bytes
from models.hub_errors import HubError, describe_hub_error
from models.network import NetworkGate, hub_endpoint, prepare_hub_import

FIRST_CHUNK = 256 * 1024
MAX_HEADER = 64 * 1024 * 1024
TIMEOUT_S = 30.0


@dataclass(frozen=True)
class RemoteHeader:
    header: GGUFHeader
    info: GGUFInfo
    file_size: int
    bytes_fetched: int  # body bytes read from the network for the header (not the HEAD)
    commit: str | None = None  # the commit the file was read at


def read_remote_header(
    gate: NetworkGate,
    repo_id: str,
    filename: str,
    token: str | None = None,
    revision: str | None = None,
    *,
    first_chunk: int = FIRST_CHUNK,
    max_bytes: int = MAX_HEADER,
) -> RemoteHeader:
    """The parsed header of `repo_id`/`filename` on the Hub (at `revision`, default branch if None).

    Raises NetworkRefused when offline (before any connection), HubError (one sentence) for
    anything the Hub, the network or the file did wrong.
    """
    gate.check("header")
    prepare_hub_import()
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url

    constants.HF_HUB_DISABLE_TELEMETRY = True  # in case huggingface_hub was imported before prepare_hub_import()
    endpoint = hub_endpoint()
    url = hf_hub_url(repo_id, filename, revision=revision, endpoint=endpoint)
    label = f"{repo_id}/{filename}"
    with gate.use("header", url):
        try:
            meta = get_hf_file_metadata(url, token=token or False, timeout=TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - every failure becomes one sentence
            raise HubError(describe_hub_error(exc, repo_id, filename)) from exc
        size = meta.size
        if not size:
            raise HubError(f"The Hub did not say how large {label} is, so its header cannot be read in parts.")
        # Read the same version the HEAD resolved: the CDN address it pointed to, else the file at that commit.
        pinned = hf_hub_url(repo_id, filename, revision=meta.commit_hash, endpoint=endpoint) if meta.commit_hash else url
        source = meta.location if meta.location and _origin(meta.location) != _origin(url) else pinned
        send_token = token if _origin(source) == _origin(endpoint) else None
        reader = _RangeReader(source, size, send_token, repo_id, filename)
        header = _read_until_parsed(reader, size, label, first_chunk, max_bytes)
    return RemoteHeader(header, info_from_header(header), size, reader.fetched, meta.commit_hash)


def _read_until_parsed(reader: _RangeReader, size: int, label: str, first_chunk: int, max_bytes: int) -> GGUFHeader:
    want = min(max(first_chunk, 64), size)
    while True:
        reader.fill(want)
        try:
            return read_gguf_header_bytes(reader.data, size, label)
        except NeedMoreBytes as more:
            if want >= size:  # cannot happen (the whole file parses or fails), but never loop
                raise HubError(f"{label} could not be read: {more}.") from None
            nxt = max(2 * want, more.needed + 64 * 1024)
            if nxt > max_bytes:
                raise HubError(
                    f"The header of {label} goes on past {max_bytes >> 20} MiB (its metadata is unusually large), "
                    "so Cove will not read it from the Hub; download the file to inspect it."
                ) from None
            want = min(nxt, size)
        except InvalidModelFile as exc:
            raise HubError(f"{label} is not a GGUF model Cove can use: {exc}.") from None


class _RangeReader:
    """The first bytes of one remote file, fetched with ranged GETs on huggingface_hub's client."""

    def __init__(self, url: str, size: int, token: str | None, repo_id: str, filename: str) -> None:
        self.url = url
        self.size = size
        self.token = token
        self.repo_id = repo_id
        self.filename = filename
        self.data = b""
        self.fetched = 0

    def fill(self, want: int) -> None:
        """Make `self.data` the first `want` bytes of the file."""
        if len(self.data) >= want:
            return
        try:
            self._get(len(self.data), want)
        except HubError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes one sentence
            raise HubError(describe_hub_error(exc, self.repo_id, self.filename)) from exc

    def _get(self, start: int, want: int) -> None:
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        headers: dict[str, Any] = build_hf_headers(token=self.token or False, library_name="cove")
        headers["Range"] = f"bytes={start}-{want - 1}"
        headers["Accept-Encoding"] = "identity"  # byte offsets must be offsets in the file
        with get_session().stream("GET", self.url, headers=headers, follow_redirects=True, timeout=TIMEOUT_S) as r:
            if r.status_code >= 400:
                r.read()  # the error body carries the Hub's message
                hf_raise_for_status(r)
            if r.status_code == 206:
                first = _range_start(r.headers.get("Content-Range"))
                if first != start:
                    raise HubError(
                        f"The Hub answered bytes from {first} when asked for bytes from {start} of {self.repo_id}/{self.filename}."
                    )
                need, keep = want - start, self.data
            elif r.status_code == 200:  # Range ignored: the body is the whole file; read its start only
                need, keep = want, b""
            else:
                raise HubError(f"The Hub answered {r.status_code} when asked for part of {self.repo_id}/{self.filename}.")
            chunks: list[bytes] = []
            got = 0
            for chunk in r.iter_bytes():
                chunks.append(chunk)
                got += len(chunk)
                if got >= need:
                    break  # leaving the block closes the connection: the rest is never read
            self.fetched += got
        body = b"".join(chunks)[:need]
        if len(body) < need:
            raise HubError(f"The connection ended after {got} of {need} bytes of {self.repo_id}/{self.filename}; try again.")
        self.data = keep + body


def _range_start(content_range: str | None) -> int | None:
    # "bytes 0-1023/4096"
    if not content_range or not content_range.startswith("bytes "):
        return None
    try:
        return int(content_range[6:].split("-", 1)[0])
    except ValueError:
        return None


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port
