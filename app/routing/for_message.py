"""Auto's model for a message of a conversation in the history (`auto_model`), for the window and
`cove chat`: the conversation so far says which model holds it and how much it holds, the message
and its images and tools say what it needs; the candidates are the installed models and those on the
person's servers (app/routing/remote.py). A conversation that continues stays on the model that
holds it unless the task says otherwise (app/routing/auto.py weighs reading it all again).
Blocking: reads the history and the library, on the thread that owns the database."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.remote.remote_model import RemoteModel
from app.routing.auto import AutoChoice, NoModelCan, choose
from app.routing.candidates import Needs, history_speeds
from app.routing.installed import installed_candidates
from app.routing.preferences import preferred
from app.routing.remote import away_from, remote_candidates
from models.library import InstalledModel

CHARS_PER_TOKEN = 4  # the prompt's size before it is tokenized: about 4 characters a token (English)


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
    loaded: set[str] | None = None,
    remote: Sequence[RemoteModel] = (),
    away: Mapping[str, str] | None = None,
) -> tuple[InstalledModel | RemoteModel, AutoChoice]:
    """The model for `text` in the conversation `conversation_id` (None: a new one), and the
    choice. `loaded`: the paths of the models loaded now; `remote`: the models on the person's
    servers, as they listed them last; `away`: {connection: why it did not answer when last asked}.
    Raises AutoRefused."""
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
    speeds = history_speeds(core.db)
    candidates = installed_candidates(core.library, core.db, loaded or set(), n_ctx, speeds)
    if remote:
        connections = {c.name: c for c in core.connections.list()}  # one removed since it was listed is no candidate
        remote = [m for m in remote if m.connection in connections]
        candidates += remote_candidates(remote, speeds, away_from(list(connections.values()), away or {}))
    try:
        choice = choose(
            text, needs, candidates, holds=holds, conversation_tokens=held, conversation_chars=chars, preferred=preferred(core.settings)
        )
    except NoModelCan as exc:
        raise AutoRefused(str(exc)) from None
    on_server = {model.name: model for model in remote}
    return on_server.get(choice.model) or core.library.get(choice.model), choice
