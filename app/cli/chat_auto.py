"""`cove chat --model auto`: the installed model Auto chooses for the message (app/routing/for_message.py),
said on stderr before the reply ("cove: auto → NAME: why") and kept with the reply in the history
and the record."""

from __future__ import annotations

from typing import Any

from app.routing.auto import AutoChoice
from app.routing.for_message import auto_model
from models.library import InstalledModel


def chosen_for_message(core: Any, args: Any, prompt: str | None, params: Any, *, images: bool) -> tuple[InstalledModel, AutoChoice]:
    """Auto's model for `cove chat`'s message `prompt` (with `args`' --conversation, --new and
    --tools, and the turn's sampling `params`). Raises ValueError for an interactive chat, where
    there is no message yet, and AutoRefused."""
    if prompt is None:
        raise ValueError(
            'Auto chooses the model for each message from what it asks: give the message too, as in: cove chat --model auto "your question"'
        )
    continuing = args.conversation or (None if args.new else getattr(core.history.last_conversation(), "id", None))
    return auto_model(
        core,
        prompt,
        conversation_id=continuing,
        images=images,
        tools=bool(args.tools),
        max_tokens=params.max_tokens,
        n_ctx=params.n_ctx,
    )


def for_each_message(core: Any, conversation_id: str, text: str, params: Any, *, tools: bool) -> tuple[InstalledModel, AutoChoice, Any]:
    """An interactive chat's message on Auto: (the model, the choice, its load settings)."""
    from app.load_options import load_options

    model, choice = auto_model(core, text, conversation_id=conversation_id, tools=tools, max_tokens=params.max_tokens, n_ctx=params.n_ctx)
    return model, choice, load_options(core.library, model, core.settings.placement_for(model.name))


def auto_line(choice: AutoChoice) -> str:
    return f"cove: auto → {choice.model}: {choice.why}"
