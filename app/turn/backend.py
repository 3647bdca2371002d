"""The one interface a turn's reply runs behind, and the one place that tells a model of this
machine from a model on one of the person's servers.

A `Backend` starts the reply a `ReplyRequest` (app/engine/request.py) asks for, passed as its
front end built it, and returns a `Generation` (TokenEvents, then exactly one FinishedEvent);
`LocalBackend` (app/turn/local_backend.py) checks the file, loads it in an engine host and hands
the request to the engine client, `RemoteBackend` (app/turn/remote_backend.py) streams it from a
connection. Code outside this package asks the helpers below (`on_server`, `ready_without_load`,
...) rather than testing the model's kind itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from app.engine.client import Generation, LoadedModel
from app.engine.request import ReplyRequest
from app.load_options import LoadOptions
from app.remote.remote_model import RemoteModel
from app.turn.local_backend import LocalBackend
from app.turn.remote_backend import RemoteBackend, where
from models.library import FileRecheck, InstalledModel

if TYPE_CHECKING:
    from app.engine.client import EngineClient
    from app.remote.engine import RemoteEngine

ChatModel = InstalledModel | RemoteModel


class Backend(Protocol):
    """What runs one reply. `installed` is the model file of this machine the reply runs on (the
    engine gate lends an engine only for one), None for a server's model; `ran_on` is where a
    server's reply runs, as its row's metrics and the record name it (None here)."""

    @property
    def model(self) -> ChatModel: ...

    @property
    def installed(self) -> InstalledModel | None: ...

    @property
    def ran_on(self) -> dict[str, Any] | None: ...

    def start(
        self,
        request: ReplyRequest,
        *,
        on_loaded: Callable[[LoadedModel], None] | None = None,
        on_recheck: Callable[[FileRecheck], None] | None = None,
    ) -> Generation:
        """Start the reply `request` asks for (blocking while a model loads; a server's returns at
        once). Raises EngineError, or for a server RemoteProblem, ConsentNeeded, NetworkRefused.
        `on_loaded`: told of the model a load gave (this machine's); `on_recheck`: of a model file
        found changed since it was checked."""
        ...


def backend_for(
    model: ChatModel,
    *,
    engine: EngineClient | None = None,
    remote_engine: Callable[[RemoteModel], RemoteEngine] | RemoteEngine | None = None,
    options: Callable[[InstalledModel], LoadOptions | None] | LoadOptions | None = None,
    load: Callable[[], LoadedModel] | None = None,
    loaded_as_is: bool = False,
    n_ctx: int | None = None,
) -> Backend:
    """The backend `model` runs behind. `remote_engine`: a server's RemoteEngine, or how to get
    one (called only for a server's model; it may raise ConnectionProblem). `options`: the load
    settings, or how to read them (called only for a model of this machine). `n_ctx`: the context
    a load of this machine's model asks for (SamplingParams.n_ctx; None: the engine's choice)."""
    if isinstance(model, RemoteModel):
        remote = remote_engine(model) if callable(remote_engine) else remote_engine
        return RemoteBackend(model, remote)
    resolved = options(model) if callable(options) else options
    return LocalBackend(model, engine, options=resolved, load=load, loaded_as_is=loaded_as_is, n_ctx=n_ctx)


def on_server(model: ChatModel | None) -> bool:
    """The model runs on one of the person's servers (no file here, nothing to load)."""
    return isinstance(model, RemoteModel)


def installed_model(model: ChatModel | None) -> InstalledModel | None:
    """The model file of this machine a model is; None for a server's model (or none)."""
    return model if isinstance(model, InstalledModel) else None


def server_connection(model: ChatModel | None) -> str | None:
    """The name of the connection a server's model is reached through; None for this machine's."""
    return model.connection if isinstance(model, RemoteModel) else None


def server_host(model: ChatModel | None) -> str | None:
    """host[:port] of the server a model runs on, as shown to the person; None for this machine's."""
    return model.host if isinstance(model, RemoteModel) else None


def ran_on(model: ChatModel) -> dict[str, Any] | None:
    """Where a turn with this model runs when it is not this machine, as its row's metrics and
    the record name it: connection, host, kind, model id and fingerprint; None for this machine."""
    return where(model) if isinstance(model, RemoteModel) else None


def remote_host(metrics: dict[str, Any]) -> str | None:
    """The host a reply ran on, from its metrics (what `ran_on` named); None for a reply of this machine."""
    remote = metrics.get("remote")
    host = remote.get("host") if isinstance(remote, dict) else None
    return host if isinstance(host, str) and host else None


def reply_identity(model: ChatModel) -> tuple[str | None, str | None]:
    """(sha256, quant) a reply row names for the model: its file's, or the server's fingerprint
    of the weights when it gives one (and no quant)."""
    if isinstance(model, RemoteModel):
        return model.fingerprint, None
    return model.sha256, model.quant


def ready_without_load(model: ChatModel | None, loaded: Any | None) -> bool:
    """The model answers without a load: it is on a server, or its file is the one loaded."""
    if isinstance(model, RemoteModel):
        return True
    return model is not None and loaded is not None and loaded.path == model.path


def server_context_length(model: Any) -> int | None:
    """A server's model's context as its server listed it; None when it did not, or for a model
    of this machine (whose context is the loaded one's)."""
    return model.context_length if isinstance(model, RemoteModel) else None
