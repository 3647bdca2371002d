"""`cove chat --model auto`: the installed model Auto (app/routing/auto.py) chooses for the message,
said on stderr before the reply ("cove: auto → NAME: why") and kept with the reply in the history
and the record. A conversation that continues stays on the model that holds it unless the task
says otherwise (app/routing/auto.py weighs reading it all again)."""

from __future__ import annotations

from typing import Any

from app.routing.auto import AutoChoice, NoModelCan, choose
from app.routing.candidates import Needs
from app.routing.installed import installed_candidates
from app.serve.api.auto_model import CHARS_PER_TOKEN
from models.library import InstalledModel


class AutoRefused(ValueError):
    """No installed model can serve the message: the sentence says what is missing."""


def auto_model(
    core: Any,
    text: str,
    *,
    conversation_id: str | None,
    images: bool = False,
    tools: bool = False,
    max_tokens: int | None = None,
    n_ctx: int | None = None,
) -> tuple[InstalledModel, AutoChoice]:
    """The installed model for `text` in the conversation `conversation_id` (None: a new one), and
    the choice. Raises AutoRefused."""
    before = core.history.messages(conversation_id) if conversation_id else []
    chars = sum(len(m.content or "") for m in before)
    replies = [m for m in before if m.role == "assistant" and m.model_name]
    holds = replies[-1].model_name if replies else None
    metrics = (replies[-1].metrics or {}) if replies else {}
    held = int(metrics.get("prompt_tokens") or 0) + int(metrics.get("gen_tokens") or 0)
    needs = Needs(
        images=images,
        tools=tools,
        tokens=(chars + len(text)) // CHARS_PER_TOKEN + 16 * (len(before) + 1),
        reply=max_tokens or 0,
    )
    candidates = installed_candidates(core.library, core.db, set(), n_ctx)
    try:
        choice = choose(text, needs, candidates, holds=holds, conversation_tokens=held, conversation_chars=chars)
    except NoModelCan as exc:
        raise AutoRefused(str(exc)) from None
    return core.library.get(choice.model), choice


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
