"""The window's side of the models on the person's own servers: which remote
models there are (for the picker), what a remembered or chosen `MODEL_ID@CONNECTION` name
means, the RemoteEngine a turn streams through (its connection and key read here, on the UI
thread, before the turn's thread starts) and the one question before messages first go to a
host outside the person's private network.

Runs on the UI thread only: it reads the history's connection (Core.connections).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.remote.connections import ConnectionProblem
from app.remote.remote_model import RemoteModel, remote_models, split_remote_name
from app.settings import save_settings
from app.turn.backend import on_server, server_context_length
from app.turn.events import ConsentEvent
from models.library import InstalledModel, ModelNotFound

AskConsent = Callable[[str, str], bool]  # (connection name, host) -> send?


def context_figures(metrics: dict[str, Any], model: Any, loaded: Any | None) -> tuple[int | None, int | None]:
    """(tokens in use, context size) for the composer's meter after a reply with `metrics`, or
    before any reply (empty metrics). A server's reply counts what its server reported (prompt
    plus reply tokens) against the model's context as the server listed it (hidden when it did
    not), never this machine's loaded context."""
    if isinstance(metrics.get("remote"), dict) or on_server(model) and not metrics:
        size = server_context_length(model)
        if not size:
            return None, None  # a share of an unknown whole: the meter stays hidden
        prompt, reply = metrics.get("prompt_tokens"), metrics.get("gen_tokens")
        return (prompt + reply if isinstance(prompt, int) and isinstance(reply, int) else None), size
    if metrics:
        return metrics.get("context_used"), metrics.get("n_ctx")
    return None, loaded.n_ctx if loaded is not None else None


def declined_sentence(host: str) -> str:
    return f"Not sent: you chose not to send your messages to {host}. Your message is kept; Retry asks again."


class RemoteModels:
    """The models on the person's servers, for the window: `models()` for the picker,
    `resolve(name)`, `engine_for(model)`, `remember(model)`, `consent(event)`. `ask_consent` is
    how the person is asked (the window's dialog)."""

    def __init__(self, core: Any, ask_consent: AskConsent | None = None) -> None:
        self.core = core
        self.ask_consent: AskConsent = ask_consent or _ask_with_dialog
        # {connection name: why it did not answer when last asked}: the window's Reachability
        # (ui/chat/reachability.py) keeps it; empty until it has asked.
        self.away: dict[str, str] = {}

    def models(self) -> list[RemoteModel]:
        """Every connection's models from its last probe, connection by connection."""
        found: list[RemoteModel] = []
        for connection in self.core.connections.list():
            found.extend(remote_models(connection))
        return found

    def resolve(self, name: str | None) -> RemoteModel | None:
        """The remote model `name` means, or None when it names no remote model (an installed
        model of that name wins). Raises ConnectionProblem when its connection is gone."""
        if not name or split_remote_name(name) is None or self._installed(name):
            return None
        model_id, connection_name = split_remote_name(name) or ("", "")
        connection = self.core.connections.get(connection_name)
        for model in remote_models(connection):
            if model.model_id == model_id:
                return model
        # Not in the last listing (which may be old): the server is asked for it all the same.
        kind = connection.server.get("kind") if connection.server else None
        return RemoteModel(
            connection=connection.name, model_id=model_id, host=connection.host, kind=kind if isinstance(kind, str) else None
        )

    def choose(self, name: str) -> InstalledModel | RemoteModel:
        """The model `name` means (a server's, or an installed one), remembered for the next
        start. Raises ConnectionProblem or ModelNotFound (a sentence each)."""
        model = self.resolve(name)
        if model is None:
            installed = self.core.library.get(name)
            self.core.remember_model(installed)
            return installed
        self.remember(model)
        return model

    def last_model(self) -> RemoteModel | None:
        """The remembered model, when it is one on a connection that still exists."""
        try:
            return self.resolve(self.core.settings.last_model)
        except ConnectionProblem:
            return None

    def remember(self, model: RemoteModel) -> None:
        """Use `model` again at the next start (the settings' last model)."""
        if not self.core.read_only:
            save_settings(self.core.paths.settings_file, self.core.settings.with_last_model(model.name))

    def place(self, model: RemoteModel, conversation_id: str) -> RemoteModel:
        """Where a reply of `model` runs: another of the person's machines with the same model
        file when it holds the conversation or would answer first (app/placement/), from what
        each said when last asked; the returned model's `placement` says why. No network here."""
        if not model.file_sha256:
            return model
        from app.placement.gather import decide, reply_metrics

        try:
            return decide(self.core.connections, model, set(self.away), reply_metrics(self.core.history, conversation_id)).model
        except ConnectionProblem:
            return model

    def engine_for(self, model: RemoteModel) -> Any:
        """A RemoteEngine for one turn: the connection as stored now (a consent given since is
        in it) and its key. Raises ConnectionProblem when the connection was removed."""
        return self.core.remote_engine(model)

    def consent(self, event: ConsentEvent) -> bool:
        """Ask the person; a yes is kept for the connection (it is not asked again)."""
        if not self.ask_consent(event.connection, event.host):
            return False
        try:
            self.core.connections.confirm_public(event.connection)
        except ConnectionProblem:
            return False
        return True

    def _installed(self, name: str) -> bool:
        try:
            self.core.library.get(name)
        except ModelNotFound:
            return False
        return True


def _ask_with_dialog(connection: str, host: str) -> bool:
    from PySide6.QtWidgets import QApplication

    from ui.connections.consent import ask_consent

    return ask_consent(QApplication.activeWindow(), connection, host)
