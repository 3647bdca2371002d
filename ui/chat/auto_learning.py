"""What Auto learns from the person in the window (app/routing/preferences.py keeps it in the
settings file): a reply regenerated "with the other model" that the person kept (the reply the
conversation goes on from when they send their next message), and "Always MODEL for KIND" asked
on a reply. It also says which reply offers "Always …" (`always_offer`). A settings file that
cannot be written is a sentence (`failed`); the message being sent still goes. UI thread only."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.routing.auto import AUTO, KIND_WORDS
from app.routing.preferences import kept_regeneration, learn, learned


def always_offer(params: dict[str, Any] | None, preferred: Mapping[str, str]) -> tuple[str, str] | None:
    """(model, kind in words) for "Always MODEL for KIND" on a reply whose model Auto chose (or the
    person chose instead), unless that model is already the one Auto uses for that kind."""
    choice = (params or {}).get(AUTO)
    if not isinstance(choice, dict):
        return None
    kind, model = choice.get("kind"), choice.get("chosen")
    if not isinstance(kind, str) or kind not in KIND_WORDS or not isinstance(model, str) or preferred.get(kind) == model:
        return None
    return model, KIND_WORDS[kind]


class AutoLearning(QObject):
    """`learn_kept(conversation_id)` before a message is sent, `learn_asked(reply_id)` for "Always …".
    Emits `changed()` after the settings changed, `told(sentence)` for the person and
    `failed(sentence)` when the settings could not be written."""

    changed = Signal()
    told = Signal(str)
    failed = Signal(str)

    def __init__(self, core: Any, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.core = core
        self._kept: set[str] = set()  # replies learned from in this run (once each is enough)

    def learn_kept(self, conversation_id: str) -> bool:
        """Learn from the reply the conversation goes on from when it is a regeneration with another
        model (`kept_regeneration`); True when something was learned. What the person chose after
        that reply was written (an "Always …", a later regeneration) stays."""
        if self.core.read_only:
            return False
        reply = self._last_reply(conversation_id)
        kept = kept_regeneration(reply.params) if reply is not None else None
        if reply is None or kept is None or reply.id in self._kept:
            return False
        self._kept.add(reply.id)
        kind, model = kept
        current = next((item for item in learned(self.core.settings) if item.kind == kind), None)
        if current is not None and (current.model == model or _later(current.when, reply.created_at)):
            return False
        return self._learn(kind, model, "regenerated")

    def learn_asked(self, reply_id: str) -> bool:
        """The person chose "Always MODEL for KIND" on the reply `reply_id`: Auto uses its model for its kind of task."""
        params = self.core.history.get_message(reply_id).params
        offer = always_offer(params, {})
        if offer is None:
            return False
        if self.core.read_only:
            self.failed.emit("Cove's files are open read-only, so Auto cannot learn this now.")
            return False
        model, words = offer
        if not self._learn(params[AUTO]["kind"], model, "asked"):
            return False
        self.told.emit(f"Auto uses {model} for {words} from now on. Models → Settings shows it and can forget it.")
        return True

    def _learn(self, kind: str, model: str, how: str) -> bool:
        try:
            learn(self.core.paths.settings_file, self.core.settings, kind, model, how)
        except OSError as exc:
            self.failed.emit(f"Auto could not keep what it learned: the settings file could not be written ({exc.strerror or exc}).")
            return False
        self.changed.emit()
        return True

    def _last_reply(self, conversation_id: str) -> Any:
        """The current branch's last reply (from the light outline: one message's text is read)."""
        outline = self.core.history.branch_outline(conversation_id)
        last = next((message_id for message_id, role, _n, _count in reversed(outline) if role == "assistant"), None)
        return self.core.history.get_message(last) if last is not None else None


def _later(learned_when: str, written: str) -> bool:
    """Whether what was learned (`learned_when`, to the second) came after the reply was written
    (`written`); a time that cannot be read counts as later, so nothing is overwritten on a guess."""
    try:
        return datetime.fromisoformat(learned_when) >= datetime.fromisoformat(written).replace(microsecond=0)
    except ValueError:
        return True
