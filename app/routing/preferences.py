"""What Auto learned from the person, kept in Cove's settings file on this machine and nowhere else:
a model per kind of task (`Learned`), taken when the person regenerated an Auto reply with another
model and kept that version (`kept_regeneration`), or asked for a model for that kind of task. Auto
(app/routing/auto.py `choose(preferred=...)`) then chooses that model for the kind while it can
serve the request. Settings shows each one and forgets one or all (`forget`).

Writing goes through app/settings.py's atomic save; call these on the thread that owns the
settings (the window's, or `cove chat`'s)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.routing.auto import AUTO, KIND_WORDS
from app.settings import Settings, save_settings

HOW_WORDS = {
    "regenerated": "you regenerated a reply with it and kept that one",
    "asked": "you asked for it",
}


@dataclass(frozen=True)
class Learned:
    kind: str  # a key of KIND_WORDS: "math", "code", "fix", "fact", "writing", "long", "chat"
    model: str
    how: str  # a key of HOW_WORDS
    when: str  # ISO 8601, UTC

    def sentence(self) -> str:
        """For Settings: "For maths: qwen2.5-coder-1.5b (you asked for it, 2026-12-07)"."""
        how = HOW_WORDS.get(self.how, self.how)
        return f"For {KIND_WORDS.get(self.kind, self.kind)}: {self.model} ({how}, {self.when[:10]})"


def learned(settings: Settings) -> list[Learned]:
    """Everything Auto learned, in the order of KIND_WORDS."""
    order = list(KIND_WORDS)
    found = [
        Learned(kind, entry["model"], entry.get("how", "asked"), entry.get("when", ""))
        for kind, entry in settings.auto_learned.items()
        if kind in KIND_WORDS
    ]
    return sorted(found, key=lambda item: order.index(item.kind))


def preferred(settings: Settings) -> dict[str, str]:
    """{kind: model} for `choose(preferred=...)`."""
    return {item.kind: item.model for item in learned(settings)}


def learn(path: Path, settings: Settings, kind: str, model: str, how: str) -> Settings:
    """Auto chooses `model` for `kind` from now on (saved in `path`); the settings as saved."""
    if kind not in KIND_WORDS:
        raise ValueError(f"Auto does not know the kind of task {kind!r}; it knows {', '.join(KIND_WORDS)}.")
    when = datetime.now(UTC).replace(microsecond=0).isoformat()
    entries = dict(settings.auto_learned)
    entries[kind] = {"model": model, "how": how, "when": when}
    updated = replace(settings, auto_learned=entries)
    save_settings(path, updated)
    return updated


def forget(path: Path, settings: Settings, kind: str | None = None) -> Settings:
    """Auto forgets what it learned for `kind` (None: for every kind); the settings as saved."""
    entries = {} if kind is None else {k: v for k, v in settings.auto_learned.items() if k != kind}
    updated = replace(settings, auto_learned=entries)
    save_settings(path, updated)
    return updated


def regeneration_params(choice: dict[str, Any], model: str) -> dict[str, Any]:
    """The `auto` object kept with a reply the person regenerated with `model` instead of Auto's
    choice (`choice`: the regenerated reply's `auto` object)."""
    return {
        **{k: v for k, v in choice.items() if k in ("kind", "difficulty", "able")},
        "chosen": model,
        "why": f"you asked for it instead of {choice.get('chosen')}",
        "instead_of": choice.get("chosen"),
        "passed_over": [],
    }


def kept_regeneration(params: dict[str, Any] | None) -> tuple[str, str] | None:
    """(kind, model) when a reply's params say the person regenerated an Auto reply with another
    model (`regeneration_params`): the caller asks this of the reply the conversation goes on from,
    so the version the person kept is the one that counts."""
    chosen = (params or {}).get(AUTO)
    if not isinstance(chosen, dict) or not isinstance(chosen.get("instead_of"), str):
        return None
    kind, model = chosen.get("kind"), chosen.get("chosen")
    if kind not in KIND_WORDS or not isinstance(model, str) or model == chosen["instead_of"]:
        return None
    return kind, model


def alternatives(choice: dict[str, Any] | None) -> list[str]:
    """The models other than the reply's own that could have served a reply Auto chose (its `auto`
    object), for "Regenerate with …": every model that met the request's hard needs (Auto's choice
    too, after the person regenerated with another), in the candidates' order."""
    if not isinstance(choice, dict) or not isinstance(choice.get("able"), list):
        return []
    return [name for name in choice["able"] if isinstance(name, str) and name != choice.get("chosen")]
