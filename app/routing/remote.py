"""The models on the person's own servers and paired machines as Auto's candidates
(`remote_candidates`): what each server listed at its last answer (app/remote/remote_model.py),
whether it answers now, and the speeds Cove measured in earlier replies from it. No network here:
the window asks every server at start and every minute (ui/chat/reachability.py), `cove chat`
asks before it chooses (app/cli/chat_auto.py).

What a server does not say is taken the safe way: it cannot see images (a server does not say
whether a model can), it knows tools (the server's API takes OpenAI `tools` and returns
`tool_calls`), its context is what it listed (4,096 when it did not say), and its size comes from
the model's name ("qwen2.5-coder-1.5b-instruct" is 1.5B); memory is the other machine's to judge."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from app.remote.connections import Connection
from app.remote.privacy import is_private_host
from app.remote.remote_model import RemoteModel
from app.routing.candidates import Candidate, Speed

UNSAID_CONTEXT = 4096  # tokens, when a server does not list a model's context
UNSAID_PARAMS_B = 7.0  # billions, when a model's name does not say: the size servers most often run

_SIZE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*([bm])(?![a-z])", re.IGNORECASE)


def size_from_name(model_id: str) -> float | None:
    """Billions of parameters a model's name gives ("…-1.5b-…" 1.5, "smollm2-135m" 0.135,
    "llama3.1:8b" 8.0), the last such figure in it; None when it gives none."""
    found = _SIZE.findall(model_id)
    if not found:
        return None
    number, unit = found[-1]
    return float(number) / (1000 if unit.lower() == "m" else 1)


def away_from(connections: Sequence[Connection], unanswered: Mapping[str, str]) -> dict[str, str]:
    """{connection: why Auto may not send there now}: `unanswered` {connection: the sentence why it
    did not answer when last asked}; a server outside the person's network that they never agreed
    to send messages to is left out too, since Auto sends nowhere the person was not asked about."""
    away: dict[str, str] = {}
    for connection in connections:
        problem = unanswered.get(connection.name)
        if problem:
            away[connection.name] = f"{connection.name} cannot be reached now ({problem.rstrip('.')})"
        elif not (connection.public_ok or is_private_host(connection.host)):
            away[connection.name] = f"{connection.host} is outside your network and you have not agreed to send messages there"
    return away


def remote_candidates(models: Sequence[RemoteModel], speeds: Mapping[str, Speed], away: Mapping[str, str]) -> list[Candidate]:
    """Each server model as a candidate; `speeds`: the measured speeds by model name (its
    `id@connection`); `away`: {connection: why it cannot be asked now} (`away_from`), whose
    models cannot serve."""
    found = []
    for model in models:
        found.append(
            Candidate(
                name=model.name,
                params_b=size_from_name(model.model_id) or UNSAID_PARAMS_B,
                context=model.context_length or UNSAID_CONTEXT,
                vision=False,
                tools="native",
                reasons=False,
                loaded=bool(model.loaded),
                speed=speeds.get(model.name) or Speed(),
                unreachable=away.get(model.connection),
            )
        )
    return found
