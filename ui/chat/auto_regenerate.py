"""Regenerate an Auto reply "with the other model": the models a reply offers (every model Auto
found able to serve its request, other than the reply's own: app/routing/preferences.py
`alternatives`), what such a name means (an installed model, or a model on one of the person's
servers for a `MODEL_ID@CONNECTION` name), the person's message the new version answers, and the
`auto` object it keeps (`regeneration_params`), whose line reads "auto → MODEL: you asked for it
instead of X". Reads the history and the library: UI thread only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.remote.connections import ConnectionProblem
from app.remote.remote_model import RemoteModel
from app.routing.auto import AUTO
from app.routing.preferences import alternatives, regeneration_params
from app.store.history import History
from models.library import InstalledModel, ModelNotFound
from ui.chat.remote_models import RemoteModels


class CannotRegenerate(ValueError):
    """The reply cannot be regenerated with that model now: one sentence."""


@dataclass(frozen=True)
class Regeneration:
    """What a "Regenerate with MODEL" turn needs: the model, the person's message it answers and
    the `auto` object the new version keeps."""

    model: InstalledModel | RemoteModel
    user_message_id: str
    auto: dict[str, Any]


def other_models(params: dict[str, Any] | None) -> tuple[str, ...]:
    """The models "Regenerate with …" offers for a reply with these params (none unless Auto chose its model)."""
    return tuple(alternatives((params or {}).get(AUTO)))


def replied_to(history: History, reply_id: str) -> str | None:
    """The person's message a reply answers (after tool calls a reply's parent is a tool result:
    the walk goes up to the person's message); None when there is none."""
    parent_id = history.get_message(reply_id).parent_id
    while parent_id is not None:
        parent = history.get_message(parent_id)
        if parent.role == "user":
            return parent.id
        parent_id = parent.parent_id
    return None


def regeneration(core: Any, remote: RemoteModels, reply_id: str, name: str) -> Regeneration:
    """How to regenerate the Auto reply `reply_id` with the model `name` instead. Raises
    CannotRegenerate with the sentence."""
    reply = core.history.get_message(reply_id)
    choice = (reply.params or {}).get(AUTO)
    if not isinstance(choice, dict) or name not in alternatives(choice):
        raise CannotRegenerate(f"Auto did not find {name} able to answer this message, so the reply is not regenerated with it.")
    try:
        model = remote.resolve(name) or core.library.get(name)
    except ModelNotFound:
        raise CannotRegenerate(f"{name} is no longer installed, so the reply is not regenerated with it.") from None
    except ConnectionProblem as exc:
        raise CannotRegenerate(f"The reply cannot be regenerated with {name}. {exc}") from None
    user_id = replied_to(core.history, reply.id)
    if user_id is None:
        raise CannotRegenerate("Only a reply to one of your messages can be regenerated.")
    return Regeneration(model, user_id, regeneration_params(choice, name))
