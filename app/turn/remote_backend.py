"""A reply from a model on one of the person's own servers: no file to check, nothing to load;
the server holds the model and its context. The stream runs on the RemoteEngine's thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from app.engine.client import EngineError, Generation, LoadedModel
from app.engine.request import ReplyRequest
from app.remote.remote_model import RemoteModel
from models.library import FileRecheck

if TYPE_CHECKING:
    from app.remote.engine import RemoteEngine


def where(model: RemoteModel) -> dict[str, Any]:
    """Where a reply of this model runs, as its row's metrics and the record name it."""
    return {
        "connection": model.connection,
        "host": model.host,
        "kind": model.kind,
        "model_id": model.model_id,
        "fingerprint": model.fingerprint,
        # Another Cove's model file, and why Cove chose that machine (app/placement/), when known.
        **{key: value for key, value in (("sha256", model.file_sha256), ("placement", model.placement)) if value},
    }


class RemoteBackend:
    """`remote`: the connection's RemoteEngine (its key and gate), built on the thread that reads
    the connections; None makes `start` say that no connection was given."""

    installed = None

    def __init__(self, model: RemoteModel, remote: RemoteEngine | None) -> None:
        self.model = model
        self.remote = remote

    @property
    def ran_on(self) -> dict[str, Any] | None:
        return where(self.model)

    def start(
        self,
        request: ReplyRequest,
        *,
        on_loaded: Callable[[LoadedModel], None] | None = None,
        on_recheck: Callable[[FileRecheck], None] | None = None,
    ) -> Generation:
        """Returns at once (a thread streams the reply into the Generation; faults end it as
        "error" or, after some text, "interrupted" with the reason). Raises ConsentNeeded when
        the host is not private and the person has not agreed to send it messages,
        NetworkRefused when Cove is offline. Touches neither the database nor Qt. What of the
        request a server is sent is the RemoteEngine's to say; the tools offered go with it and
        their calls come back to run here. `on_loaded` and `on_recheck` are never called:
        there is no file here and nothing to load."""
        if self.remote is None:
            raise EngineError(f"{self.model.name} runs on a server, and no connection to it was given")
        return self.remote.generate(request, model=self.model)
