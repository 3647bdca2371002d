"""Hub search: GGUF model repositories matching a query, with who made them, how used, what licence.

Every call goes through the `NetworkGate` (offline refusal, activity indicator) and through
one `HfApi` built by `hub_api()`: huggingface_hub is imported only after
`prepare_hub_import()`, the endpoint is passed explicitly (HF_ENDPOINT is honoured even when
huggingface_hub was imported earlier), telemetry stays off (no agent-registry side call),
and a token is sent only when the caller hands one in (never an implicit token file).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from models.hub_errors import HubError, describe_hub_error
from models.network import NetworkGate, hub_endpoint, prepare_hub_import

if TYPE_CHECKING:
    from huggingface_hub import HfApi

# Our sort names -> the Hub's (huggingface_hub spells lastModified "last_modified").
SORTS = {"downloads": "downloads", "likes": "likes", "recent": "last_modified"}
MAX_LIMIT = 100
# Only the fields the result rows show (the Hub's default listing lacks author, lastModified, gated).
_EXPAND = ["author", "downloads", "likes", "lastModified", "gated", "tags", "cardData"]


@dataclass(frozen=True)
class HubModel:
    repo_id: str
    author: str | None
    downloads: int  # the Hub's count for the last 30 days
    likes: int
    last_modified: datetime | None  # last commit, timezone-aware
    license: str | None
    gated: bool  # files need an accepted licence and a sign-in token


def hub_api(token: str | None = None) -> HfApi:
    """An HfApi on the configured endpoint that sends `token` only if one is given."""
    prepare_hub_import()
    from huggingface_hub import HfApi, constants

    # If huggingface_hub was imported before prepare_hub_import() ran, its import-time
    # constant still allows telemetry (the user-agent agent lookup makes a network call).
    constants.HF_HUB_DISABLE_TELEMETRY = True
    return HfApi(endpoint=hub_endpoint(), token=token or False, library_name="cove", library_version=_version())


def search_models(gate: NetworkGate, query: str, sort: str = "downloads", limit: int = 30, token: str | None = None) -> list[HubModel]:
    """GGUF repositories whose id contains `query`, best first by `sort` (downloads, likes, recent).

    Raises NetworkRefused when offline (before any connection) and HubError (one sentence)
    for anything the Hub or the network did wrong.
    """
    if sort not in SORTS:
        raise HubError(f"Cannot sort Hub results by {sort!r}; use one of: {', '.join(SORTS)}.")
    limit = max(1, min(int(limit), MAX_LIMIT))
    endpoint = hub_endpoint()
    gate.check("search")
    api = hub_api(token)
    with gate.use("search", endpoint):
        try:
            found = list(
                api.list_models(
                    search=query.strip() or None,
                    filter="gguf",
                    sort=SORTS[sort],  # type: ignore[arg-type]
                    limit=limit,
                    expand=_EXPAND,  # type: ignore[arg-type]
                )
            )
        except Exception as exc:  # noqa: BLE001 - every failure becomes one sentence
            raise HubError(describe_hub_error(exc)) from exc
    models = [_hub_model(info) for info in found]
    # The Hub already sorts; sorting again (stable, descending) keeps the promise even if it did not.
    key = {
        "downloads": lambda m: m.downloads,
        "likes": lambda m: m.likes,
        "recent": lambda m: m.last_modified.timestamp() if m.last_modified else float("-inf"),
    }[sort]
    models.sort(key=key, reverse=True)
    return models[:limit]


def _hub_model(info: Any) -> HubModel:
    repo_id = str(info.id)
    author = info.author or (repo_id.split("/", 1)[0] if "/" in repo_id else None)
    return HubModel(
        repo_id=repo_id,
        author=author,
        downloads=int(info.downloads or 0),
        likes=int(info.likes or 0),
        last_modified=info.last_modified,
        license=license_of(info),
        gated=bool(info.gated),  # False, or "auto"/"manual"
    )


def license_of(info: Any) -> str | None:
    """The repo's licence id from its card metadata, else from its `license:` tag."""
    card = getattr(info, "card_data", None)
    value = card.get("license") if card is not None and hasattr(card, "get") else None
    if isinstance(value, list):
        value = ", ".join(str(v) for v in value if v) or None
    if isinstance(value, str) and value.strip():
        return value.strip()
    for tag in getattr(info, "tags", None) or ():
        if isinstance(tag, str) and tag.startswith("license:"):
            return tag[len("license:") :] or None
    return None


def _version() -> str | None:
    try:
        from importlib.metadata import version

        return version("cove")
    except Exception:  # noqa: BLE001 - not installed as a distribution (e.g. run from a checkout)
        return None
