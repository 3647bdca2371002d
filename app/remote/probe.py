"""What a server says of itself: its kind, version and models (`probe`, a blocking call the
window runs on a worker thread).

The models come from the OpenAI listing (GET /v1/models); the kind from what each server
adds to it or answers besides: Cove's entries are owned by "cove", vLLM's by "vllm" with the
model's "root", llama.cpp's llama-server's by "llamacpp" (and it answers GET /props),
llama-cpp-python's by "me" (its OpenAPI title names it), and Ollama answers GET /api/version
(and GET /api/tags gives each model's digest, kept as its fingerprint). Anything else that
lists models the OpenAI way is "openai-compatible".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.remote.connections import Connection, pinned_file
from app.remote.errors import RemoteProblem, problem_from_status
from app.remote.http_client import RemoteHttp, Reply
from app.remote.privacy import is_private_host
from models.network import NetworkGate

Found = tuple[str, str | None, list[dict[str, Any]]]  # (kind, version, models)
KINDS = ("llama-server", "ollama", "vllm", "cove", "llama-cpp-python", "openai-compatible")
PROBE_READ_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class ServerInfo:
    kind: str  # one of KINDS
    version: str | None
    models: list[dict[str, Any]] = field(default_factory=list, hash=False)  # [{"id", "fingerprint", "context_length"}]
    private: bool | None = None  # whether the host is on this machine or a private network (None: unknown)


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _is_zero(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value == 0


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _side_json(http: RemoteHttp, url: str) -> Any:
    """A secondary question's JSON answer, or None for any failure (only the listing must work)."""
    try:
        reply = http.get(url, read_timeout_s=PROBE_READ_TIMEOUT_S, max_bytes=1 << 20)
    except RemoteProblem:
        return None
    return reply.json() if reply.status == 200 else None


def _listing(http: RemoteHttp) -> list[dict[str, Any]]:
    url = http.api_url("/models")
    host = http.connection.host
    reply: Reply = http.get(url, read_timeout_s=PROBE_READ_TIMEOUT_S)
    if reply.status >= 400:
        paired = http.connection.name if pinned_file(http.connection.ca_file) else None
        raise problem_from_status(reply.status, reply.headers, reply.body, host=host, key=http.key, paired=paired)
    data = reply.json()
    entries = data.get("data") if isinstance(data, dict) else None
    if reply.status != 200 or not isinstance(entries, list):
        raise RemoteProblem(
            f"{host} did not answer like an OpenAI-compatible server: GET {url} gave no list of models "
            f"(HTTP {reply.status}); check that the address ends in the API root, such as /v1.",
            "protocol",
            status=reply.status,
        )
    return [e for e in entries if isinstance(e, dict) and _text(e.get("id"))]


def _model(entry: dict[str, Any], **extra: Any) -> dict[str, Any]:
    model = {"id": str(entry["id"]).strip(), "fingerprint": None, "context_length": None}
    model.update({k: v for k, v in extra.items() if v is not None})
    return model


def probe(connection: Connection, key: str | None, gate: NetworkGate, *, connect_timeout_s: float = 5.0) -> ServerInfo:
    """Ask the server what it is and which models it has. Blocking (run it off the window's
    thread). Raises RemoteProblem (kind "offline" when Cove is offline)."""
    from models.network import NetworkRefused

    http = RemoteHttp(connection, key, gate, connect_timeout_s=connect_timeout_s, read_timeout_s=PROBE_READ_TIMEOUT_S)
    try:
        try:
            entries = _listing(http)
            kind, version, models = _identify(http, entries)
        except NetworkRefused as exc:
            raise RemoteProblem(str(exc), "offline") from None
    finally:
        http.close()
    return ServerInfo(kind, version, models, is_private_host(connection.host))


def _identify(http: RemoteHttp, entries: list[dict[str, Any]]) -> Found:
    owners = {str(e.get("owned_by") or "") for e in entries}
    if entries and owners == {"cove"}:
        # Its "auto" entry is left out: this machine's Auto chooses among the models themselves.
        models = [e for e in entries if not (isinstance(e.get("cove"), dict) and e["cove"].get("auto") is True)]
        return "cove", None, [_cove_model(e) for e in models]
    if entries and owners == {"vllm"} and all("root" in e for e in entries):
        version = _side_json(http, http.root_url("/version"))
        models = [_model(e, context_length=_positive_int(e.get("max_model_len")), root=_text(e.get("root"))) for e in entries]
        return "vllm", _text(version.get("version")) if isinstance(version, dict) else None, models
    # The likeliest server first, then the others; each asks one or two more questions.
    order: tuple[Callable[[RemoteHttp, list[dict[str, Any]]], Found | None], ...]
    if owners == {"llamacpp"}:
        order = (_llama_server,)
    elif owners == {"me"}:
        order = (_llama_cpp_python, _ollama, _llama_server)
    else:
        order = (_ollama, _llama_server, _llama_cpp_python)
    for identify in order:
        found = identify(http, entries)
        if found is not None:
            return found
    return "openai-compatible", None, [_model(e) for e in entries]


def _cove_model(entry: dict[str, Any]) -> dict[str, Any]:
    """Another Cove's model: its `cove` object (app/serve/api/model_listing.py) gives the model
    file's SHA-256 (kept as the fingerprint), its context, and whether it is loaded with a free slot."""
    said = entry.get("cove")
    said = said if isinstance(said, dict) else {}
    sha = _text(said.get("sha256"))
    sha = sha.lower() if sha is not None and len(sha) == 64 and all(c in "0123456789abcdefABCDEF" for c in sha) else None
    state = {name: said[name] for name in ("loaded", "vision") if isinstance(said.get(name), bool)}
    slots = {name: said[name] for name in ("slots", "free_slots") if _positive_int(said.get(name)) is not None or _is_zero(said.get(name))}
    return _model(entry, fingerprint=sha, sha256=sha, context_length=_positive_int(said.get("context_length")), **state, **slots)


def _llama_server(http: RemoteHttp, entries: list[dict[str, Any]]) -> Found | None:
    props = _side_json(http, http.root_url("/props"))
    owned = bool(entries) and all(e.get("owned_by") == "llamacpp" for e in entries)
    if not (isinstance(props, dict) and ("default_generation_settings" in props or "build_info" in props)) and not owned:
        return None
    props = props if isinstance(props, dict) else {}
    settings = props.get("default_generation_settings")
    n_ctx = _positive_int(settings.get("n_ctx")) if isinstance(settings, dict) else None
    models = []
    for e in entries:
        meta = e.get("meta")
        meta = meta if isinstance(meta, dict) else {}
        models.append(_model(e, context_length=n_ctx or _positive_int(meta.get("n_ctx_train"))))
    return "llama-server", _text(props.get("build_info")), models


def _ollama(http: RemoteHttp, entries: list[dict[str, Any]]) -> Found | None:
    version = _side_json(http, http.root_url("/api/version"))
    if not (isinstance(version, dict) and _text(version.get("version"))):
        return None
    tags = _side_json(http, http.root_url("/api/tags"))
    digests: dict[str, str] = {}
    for tag in (tags.get("models") if isinstance(tags, dict) else None) or []:
        if isinstance(tag, dict) and _text(tag.get("digest")):
            for name in (tag.get("name"), tag.get("model")):
                if _text(name):
                    digests[str(name).strip()] = str(tag["digest"]).strip()
    models = [_model(e, fingerprint=digests.get(str(e["id"]).strip())) for e in entries]
    return "ollama", _text(version.get("version")), models


def llama_cpp_python_info(spec: Any) -> dict[str, Any] | None:
    """The "info" of llama-cpp-python's OpenAPI document (GET /openapi.json; its title names the
    server), or None when `spec` is not that. Asking for it takes no lock on the server's model."""
    info = spec.get("info") if isinstance(spec, dict) else None
    return info if isinstance(info, dict) and "llama.cpp python" in str(info.get("title") or "").lower() else None


def _llama_cpp_python(http: RemoteHttp, entries: list[dict[str, Any]]) -> Found | None:
    info = llama_cpp_python_info(_side_json(http, http.root_url("/openapi.json")))
    if info is None:
        return None
    return "llama-cpp-python", _text(info.get("version")), [_model(e) for e in entries]
