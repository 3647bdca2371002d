"""`cove chat --model auto`: the model Auto chooses for the message (app/routing/for_message.py), among
the installed ones and those on the person's servers (asked first whether they answer), said on
stderr before the reply ("cove: auto → NAME: why") and kept with the reply in the history and the
record."""

from __future__ import annotations

from typing import Any

from app.remote.remote_model import RemoteModel, remote_models
from app.routing.auto import AutoChoice
from app.routing.for_message import auto_model
from models.library import InstalledModel


def chosen_for_message(
    core: Any, args: Any, prompt: str | None, params: Any, *, images: bool
) -> tuple[InstalledModel | RemoteModel, AutoChoice]:
    """Auto's model for `cove chat`'s message `prompt` (with `args`' --conversation, --new and
    --tools, and the turn's sampling `params`). Raises ValueError for an interactive chat, where
    there is no message yet, and AutoRefused."""
    if prompt is None:
        raise ValueError(
            'Auto chooses the model for each message from what it asks: give the message too, as in: cove chat --model auto "your question"'
        )
    continuing = args.conversation or (None if args.new else getattr(core.history.last_conversation(), "id", None))
    remote, away = servers_now(core)
    return auto_model(
        core,
        prompt,
        conversation_id=continuing,
        images=images,
        tools=bool(args.tools),
        max_tokens=params.max_tokens,
        n_ctx=params.n_ctx,
        remote=remote,
        away=away,
    )


def servers_now(core: Any) -> tuple[list[RemoteModel], dict[str, str]]:
    """(the models on the person's servers, {connection: why it did not answer}): every server
    asked at once with a short connect timeout (app/cli/models_servers.py), none when there are
    no connections."""
    from app.cli.models_servers import server_models

    answered = server_models(core)
    remote = [m for c in core.connections.list() for m in remote_models(c)]
    return remote, {s["connection"]: s["problem"] for s in answered if not s["reachable"]}


def for_each_message(
    core: Any, conversation_id: str, text: str, params: Any, *, tools: bool, servers: tuple[list[RemoteModel], dict[str, str]] = ([], {})
) -> tuple[InstalledModel | RemoteModel, AutoChoice, Any]:
    """An interactive chat's message on Auto: (the model, the choice, its load settings: None for a
    server's model). `servers`: servers_now() when the chat began."""
    from app.cli.chat_remote import placed
    from app.load_options import load_options

    remote, away = servers
    model, choice = auto_model(
        core, text, conversation_id=conversation_id, tools=tools, max_tokens=params.max_tokens, n_ctx=params.n_ctx, remote=remote, away=away
    )
    if isinstance(model, RemoteModel):
        return placed(core, model, conversation_id), choice, None
    return model, choice, load_options(core.library, model, core.settings.placement_for(model.name))


def auto_line(choice: AutoChoice) -> str:
    return f"cove: auto → {choice.model}: {choice.why}"
