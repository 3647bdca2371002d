"""One reply's drafting figures, read from its metrics (`metrics["draft"]`: the mode, tokens
drafted and accepted, verification steps, and why drafting was switched off during the reply), in
the words the reply footers and the performance panel show. Replies saved before drafting existed,
and replies that drafted nothing, have none."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MODE_NAMES = {"lookup": "from the conversation", "model": "with the draft model"}


@dataclass(frozen=True)
class DraftFigures:
    mode: str  # "lookup" | "model" (a reply with mode "off" drafted nothing)
    drafted: int
    accepted: int
    steps: int
    stopped: str | None  # why drafting was switched off during the reply, if it was

    @property
    def acceptance(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    def short(self) -> str:
        """For a reply's footer: "drafted 64 · accepted 40"."""
        return f"drafted {self.drafted:,} · accepted {self.accepted:,}"

    def sentence(self) -> str:
        """For the performance panel: "40 of 64 drafted tokens accepted (62%), from the conversation"
        and, when drafting was switched off during the reply, why."""
        text = f"{self.accepted:,} of {self.drafted:,} drafted tokens accepted ({self.acceptance:.0%})"
        how = MODE_NAMES.get(self.mode)
        if how:
            text += f", {how}"
        if self.stopped:
            text += f"; then off: {self.stopped}"
        return text


def draft_figures(metrics: dict[str, Any]) -> DraftFigures | None:
    """The reply's drafting figures when it drafted at least one token, else None (also for
    metrics without them or with values that are not counts)."""
    draft = metrics.get("draft")
    if not isinstance(draft, dict):
        return None
    counts = [draft.get(key) for key in ("drafted", "accepted", "steps")]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts[:2]):
        return None
    drafted, accepted, steps = (int(n) if isinstance(n, int) and not isinstance(n, bool) else 0 for n in counts)
    if drafted <= 0:
        return None
    stopped = draft.get("stopped")
    mode = draft.get("mode")
    return DraftFigures(
        mode if isinstance(mode, str) else "",
        drafted,
        min(accepted, drafted),
        steps,
        stopped if isinstance(stopped, str) and stopped else None,
    )
