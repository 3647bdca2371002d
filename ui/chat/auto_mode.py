"""The window's Auto mode: whether the person chose "Auto" in the model picker (remembered as the
settings' last model, so the next start reopens on it), and, for each message sent in it, the
model Auto (app/routing/auto.py) chooses and why, among the installed models and the models on the
person's own servers that answer now. The choice reads the library and the history, so it runs on
the UI thread, which owns the database; a model file's header is read once per library entry
(app/routing/installed.py)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from app.remote.remote_model import RemoteModel
from app.routing.auto import AUTO, AutoChoice, is_auto
from app.routing.for_message import AutoRefused, auto_model
from app.settings import SamplingParams, save_settings
from models.library import InstalledModel
from ui.chat.image_send import branch_has_images


def auto_note(params: dict[str, Any] | None) -> str:
    """'auto → MODEL: why' for a reply whose model Auto chose (its params keep the choice), else ""."""
    chosen = (params or {}).get(AUTO)
    if not isinstance(chosen, dict) or not isinstance(chosen.get("chosen"), str):
        return ""
    why = chosen.get("why")
    return f"auto → {chosen['chosen']}" + (f": {why}" if isinstance(why, str) and why else "")


class AutoMode:
    """Whether the window is on Auto, and Auto's model for each message sent while it is."""

    def __init__(self, core: Any) -> None:
        self.core = core
        self.on = False

    def restore(self) -> None:
        """At window start: on Auto when Auto was the last choice."""
        self.on = is_auto(self.core.settings.last_model)

    def choose(self) -> None:
        """The person chose Auto: on from the next message, and at the next start."""
        self.on = True
        if not self.core.read_only:
            save_settings(self.core.paths.settings_file, self.core.settings.with_last_model(AUTO))

    def for_message(
        self,
        text: str,
        images: Sequence[object],
        conversation_id: str | None,
        params: SamplingParams,
        *,
        tools: bool,
        loaded: str | None = None,
        remote: Sequence[RemoteModel] = (),
        away: Mapping[str, str] | None = None,
    ) -> tuple[InstalledModel | RemoteModel, AutoChoice]:
        """The model for this message (with its `images`) in the conversation (None: a new one),
        with the turn's sampling `params`; `loaded`: the path of the model loaded now; `remote`: the
        models on the person's servers, `away`: {connection: why it does not answer now}, whose
        models Auto passes over. Raises AutoRefused with the sentence."""
        started = time.perf_counter()
        seen = bool(images) or (conversation_id is not None and branch_has_images(self.core.history, conversation_id))
        try:
            model, choice = auto_model(
                self.core,
                text,
                conversation_id=conversation_id,
                images=seen,
                tools=tools,
                max_tokens=params.max_tokens,
                n_ctx=params.n_ctx,
                loaded={loaded} if loaded else set(),
                remote=remote,
                away=dict(away or {}),
            )
        except AutoRefused:
            raise
        except Exception as exc:  # noqa: BLE001 - a library or model file that cannot be read: a sentence
            raise AutoRefused(f"Auto could not choose a model: {exc}") from None
        return model, replace(choice, took_ms=round((time.perf_counter() - started) * 1000, 1))
