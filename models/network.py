"""The one door to the network: every Hub call goes through a `NetworkGate`.

Cove touches the network only for things the person starts: Hub search, listing a repo's
files, reading a remote GGUF header, downloading, and talking to the person's own servers
(listing their models, chatting on them; app/remote). Each of them runs inside
`gate.use(kind, url)`, which
  * refuses with `NetworkRefused` (one sentence) when Cove is offline (the setting, or
    `COVE_OFFLINE=1`), before any socket is opened;
  * tells listeners (the window's network indicator, the CLI's stderr line) that a call to
    that host started and, later, ended.

`hub_environment()` is the environment huggingface_hub must see *before it is imported*
(its constants are read at import time): no telemetry side call, no implicit token file,
no Xet transfer path (which can't be cancelled and keeps a second copy on disk).
Chatting with an installed model never passes through here, and the engine host never imports
huggingface_hub.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_ENDPOINT = "https://huggingface.co"

# What each kind of call is called in sentences and in the indicator.
KINDS = {
    "search": "searching the Hub",
    "files": "listing the model's files",
    "header": "reading the model's header",
    "download": "downloading",
    "remote": "chatting on your server",
    "remote-models": "listing your server's models",
}
# The kinds that reach the person's own servers rather than the Hub (the refusal names them).
REMOTE_KINDS = frozenset({"remote", "remote-models"})


class NetworkRefused(RuntimeError):
    """Raised instead of opening a connection while Cove is offline."""


@dataclass(frozen=True)
class NetworkActivity:
    id: int
    kind: str  # one of KINDS
    host: str

    @property
    def label(self) -> str:
        return f"{KINDS.get(self.kind, self.kind)} ({self.host})"


# listener(activity, started): started=True when the call begins, False when it ends.
Listener = Callable[[NetworkActivity, bool], None]


def offline_from_environment(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return env.get("COVE_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def hub_endpoint(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return (env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def host_of(url: str) -> str:
    parts = urlsplit(url)
    return parts.netloc or url


def hub_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables huggingface_hub must be imported with (see the module docstring)."""
    env = dict(os.environ if environ is None else environ)
    env.update(
        {
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "DO_NOT_TRACK": "1",
            "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
            "HF_HUB_DISABLE_XET": "1",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        }
    )
    # A token is handed to the one call that needs it, never through the environment.
    env.pop("HF_TOKEN", None)
    env.pop("HUGGING_FACE_HUB_TOKEN", None)
    return env


def prepare_hub_import() -> None:
    """Set `hub_environment()` in this process; call before the first huggingface_hub import."""
    os.environ.update({k: v for k, v in hub_environment().items() if k.startswith(("HF_HUB_", "DO_NOT_TRACK"))})
    os.environ.pop("HF_TOKEN", None)
    os.environ.pop("HUGGING_FACE_HUB_TOKEN", None)
    # huggingface_hub logs each retry as a warning; Cove reports the outcome in one sentence.
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)


class NetworkGate:
    """Refuses calls while offline and reports calls in flight; safe to use from any thread."""

    def __init__(self, offline: bool = False, environ: Mapping[str, str] | None = None) -> None:
        self._forced_offline = offline_from_environment(environ)
        self._offline = offline
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._active: dict[int, NetworkActivity] = {}
        self._listeners: list[Listener] = []

    @property
    def offline(self) -> bool:
        return self._offline or self._forced_offline

    @property
    def offline_reason(self) -> str:
        if self._forced_offline:
            return "COVE_OFFLINE is set"
        return "offline mode is on in Settings" if self._offline else ""

    def set_offline(self, offline: bool) -> None:
        self._offline = offline

    def add_listener(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def active(self) -> list[NetworkActivity]:
        with self._lock:
            return list(self._active.values())

    def check(self, kind: str) -> None:
        """Raise `NetworkRefused` if offline; otherwise do nothing."""
        if self.offline:
            what = KINDS.get(kind, kind)
            target = "your server" if kind in REMOTE_KINDS else "the Hub"
            raise NetworkRefused(
                f"Cove is offline ({self.offline_reason}), so it did not connect for {what}. "
                f"Turn offline mode off to use {target}; chatting with installed models works either way."
            )

    @contextmanager
    def use(self, kind: str, url: str) -> Iterator[NetworkActivity]:
        self.check(kind)
        activity = NetworkActivity(next(self._ids), kind, host_of(url))
        with self._lock:
            self._active[activity.id] = activity
            listeners = list(self._listeners)
        for listener in listeners:
            listener(activity, True)
        try:
            yield activity
        finally:
            with self._lock:
                self._active.pop(activity.id, None)
                listeners = list(self._listeners)
            for listener in listeners:
                listener(activity, False)
