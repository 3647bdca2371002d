"""What an engine host's environment may hold: no credentials, Hugging Face offline, telemetry off."""

from __future__ import annotations

from collections.abc import MutableMapping


def scrub_environment(env: MutableMapping[str, str]) -> None:
    """Remove every credential-like variable from `env` and turn Hugging Face's network off."""
    for key in list(env):
        upper = key.upper()
        if "TOKEN" in upper or "SECRET" in upper or "PASSWORD" in upper or upper.endswith("API_KEY"):
            del env[key]
    env["HF_HUB_OFFLINE"] = "1"
    env["HF_HUB_DISABLE_TELEMETRY"] = "1"
    env["DO_NOT_TRACK"] = "1"
