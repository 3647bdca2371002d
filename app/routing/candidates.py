"""What Auto knows of each model it may choose (`Candidate`), and what a request needs of one
(`Needs`): read from the installed model's file and library entry, from what is loaded now, and
from the speeds Cove measured on this machine in earlier replies (`measured_speeds`).

Blocking: `local_candidate` reads the model file's header (its chat template) and
`measured_speeds` reads the history; run them on the thread that owns the database, never on the
API server's event loop or the window's thread."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.reasoning.style import style_of
from app.tools.families import family_of
from models.library import InstalledModel

SPEED_TURNS = 50  # the most recent replies of each model its measured speed is read from


@dataclass(frozen=True)
class Speed:
    """A model's measured speed here: tokens per second writing (tg) and reading the prompt (pp);
    None where no reply measured it yet."""

    tg: float | None = None
    pp: float | None = None


@dataclass(frozen=True)
class Candidate:
    name: str
    params_b: float  # billions of parameters (from the file; estimated from its size when it does not say)
    context: int  # the most tokens a conversation with it can hold
    vision: bool
    tools: str  # "native" (its template knows tools), "generic" (Cove's generic format) or "" (no chat template)
    reasons: bool  # its template thinks (<think>, gpt-oss channels)
    loaded: bool
    speed: Speed
    memory_needed: int | None = None  # bytes to load it with the conversation's context, when estimated
    memory_free: int | None = None  # bytes the machine can give it (its RAM, less what other programs hold)
    unreachable: str | None = None  # why it cannot be asked now (a server that did not answer), else None


@dataclass(frozen=True)
class Needs:
    """What a request needs of the model that answers it."""

    images: bool = False
    tools: bool = False
    tokens: int = 0  # the prompt, estimated
    reply: int = 0  # the reply's token limit
    reasoning: bool = False  # the request asks the model to reason


def params_b(model: InstalledModel) -> float:
    """Billions of parameters: the file's count, else its size at about 4.8 bits per weight
    (Q4_K_M's average)."""
    if model.parameter_count:
        return model.parameter_count / 1e9
    return max(model.size * 8 / 4.8 / 1e9, 0.01)


def local_candidate(
    model: InstalledModel,
    template: str | None,
    *,
    loaded: bool,
    speed: Speed | None = None,
    memory_needed: int | None = None,
    memory_free: int | None = None,
) -> Candidate:
    """An installed model as Auto sees it; `template`: its chat template's source (None: none)."""
    if template is None:
        tools = ""
    else:
        tools = "native" if family_of(template).native else "generic"
    return Candidate(
        name=model.name,
        params_b=params_b(model),
        context=model.context_length or 2048,
        vision=model.vision,
        tools=tools,
        reasons=style_of(template).thinks,
        loaded=loaded,
        speed=speed or Speed(),
        memory_needed=memory_needed,
        memory_free=memory_free,
    )


def measured_speeds(rows: Sequence[Mapping[str, Any]]) -> dict[str, Speed]:
    """{model name: its median speeds} from replies' rows ({"model_name", "metrics": dict}),
    newest first; at most SPEED_TURNS replies of each model count."""
    tg: dict[str, list[float]] = {}
    pp: dict[str, list[float]] = {}
    for row in rows:
        name, metrics = row.get("model_name"), row.get("metrics")
        if not isinstance(name, str) or not isinstance(metrics, dict):
            continue
        gen = _positive(metrics.get("gen_tps"))
        if gen is not None and len(tg.setdefault(name, [])) < SPEED_TURNS:
            tg[name].append(gen)
        prompt, ms = _positive(metrics.get("prompt_tokens")), _positive(metrics.get("prefill_ms"))
        read = prompt - (_positive(metrics.get("cached_tokens")) or 0) if prompt is not None else 0
        if ms is not None and read >= 16 and len(pp.setdefault(name, [])) < SPEED_TURNS:
            pp[name].append(read / (ms / 1000))
    names = set(tg) | set(pp)
    return {n: Speed(_median(tg.get(n)), _median(pp.get(n))) for n in names}


SPEED_FIELDS = ("gen_tps", "prompt_tokens", "prefill_ms", "cached_tokens")  # what measured_speeds reads of a reply's metrics


def history_speeds(db: Any, limit: int = 600) -> dict[str, Speed]:
    """measured_speeds over the newest `limit` replies in the history (`db`: sqlite_utils.Database).
    SQLite picks the four figures out of each reply's metrics (a reply's metrics that are not JSON
    give none), and the newest replies come from the (role, created_at) index: a few ms for a
    history of any length."""
    picked = ", ".join(f"CASE WHEN json_valid(metrics) THEN json_extract(metrics, '$.{f}') END" for f in SPEED_FIELDS)
    query = f"SELECT model_name, {picked} FROM messages WHERE role = 'assistant' AND metrics IS NOT NULL ORDER BY created_at DESC LIMIT ?"
    rows = [
        {"model_name": name, "metrics": {f: v for f, v in zip(SPEED_FIELDS, values, strict=True) if v is not None}}
        for name, *values in db.execute(query, [limit]).fetchall()
    ]
    return measured_speeds(rows)


def _positive(value: Any) -> float | None:
    """`value` when it is a finite number above 0, else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return float(value)
    return None


def _median(values: list[float] | None) -> float | None:
    return statistics.median(values) if values else None
