"""One sentence for every way a Hub call can fail (never a traceback, never the token).

Every Hub-facing module (search, file listings, header reads, downloads) turns what
huggingface_hub or the HTTP client raised into `HubError(describe_hub_error(exc, ...))`.
"""

from __future__ import annotations

import re

from models.network import DEFAULT_ENDPOINT, NetworkRefused, hub_endpoint

_TOKEN = re.compile(r"hf_[A-Za-z0-9]{8,}")


class HubError(RuntimeError):
    """A Hub call failed; str() is one sentence meant for the person."""


def redact(text: str) -> str:
    """Remove anything that looks like a Hugging Face token."""
    return _TOKEN.sub("hf_***", text)


def access_url(repo_id: str) -> str:
    """Where a person requests access to a gated repo (on the configured endpoint)."""
    endpoint = hub_endpoint()
    return f"{endpoint}/{repo_id}" if endpoint != DEFAULT_ENDPOINT else f"https://huggingface.co/{repo_id}"


def describe_hub_error(exc: BaseException, repo_id: str | None = None, filename: str | None = None) -> str:
    """The sentence to show for `exc`, raised by a Hub call about `repo_id`/`filename`."""
    if isinstance(exc, (HubError, NetworkRefused)):
        return str(exc)
    # Imported here: huggingface_hub must only be imported after models.network.prepare_hub_import().
    from huggingface_hub import errors as hf_errors

    what = repo_id or "the repository"
    if isinstance(exc, hf_errors.GatedRepoError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status == 403:
            return f"{what} is gated and your Hugging Face account has not been given access yet: request it at {access_url(what)}."
        return (
            f"{what} is gated: request access at {access_url(what)}, then sign in with `cove auth login` (or the token field in Settings)."
        )
    if isinstance(exc, hf_errors.RepositoryNotFoundError):
        return f"There is no model repository called {what} on the Hub (or it is private)."
    if isinstance(exc, (hf_errors.EntryNotFoundError, getattr(hf_errors, "RemoteEntryNotFoundError", ()))):
        return f"{what} has no file called {filename}." if filename else f"{what}: file not found."
    if isinstance(exc, hf_errors.RevisionNotFoundError):
        return f"{what} has no such revision."
    if isinstance(exc, hf_errors.OfflineModeIsEnabled):
        return "Hub access is switched off (HF_HUB_OFFLINE is set)."
    if isinstance(exc, hf_errors.HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status == 401:
            return "The Hub did not accept the sign-in token; check it with `cove auth status`."
        if status == 429:
            return "The Hub says too many requests; wait a minute and try again."
        if status and status >= 500:
            return f"The Hub had a server error ({status}); try again in a moment."
        return f"The Hub refused the request ({status or 'no status'})."
    name = type(exc).__name__
    if name in {"ConnectError", "ConnectTimeout"} or isinstance(exc, ConnectionError):
        return f"Could not connect to {hub_endpoint()}; check the network connection."
    if "Timeout" in name:
        return f"{hub_endpoint()} stopped answering; check the network connection and try again."
    if isinstance(exc, OSError) and exc.strerror:
        return redact(f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror)
    text = redact(str(exc).strip().splitlines()[0] if str(exc).strip() else name)
    return f"The Hub call failed: {text}"
