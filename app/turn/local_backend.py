"""A reply from a model file of this machine: check the file (a stat; hashed again if it
changed), load it in the engine host if needed (blocking), start the reply."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from app.engine.client import EngineClient, EngineError, Generation, LoadedModel
from app.load_options import LoadOptions
from app.settings import SamplingParams
from models.gguf_validate import InvalidModelFile
from models.library import FileRecheck, InstalledModel, recheck_file


class LocalBackend:
    """`options`: the model's load settings (None: Cove chooses). `loaded_as_is`: the engine has
    this model loaded already (another's engine, lent): keep its settings rather than load it
    again. `load`: how to load it instead (an API pool's settings). `priority`: the engine's
    priority for the reply (EngineClient.generate): "window" for the window's own reply, which the
    engine serves first while API replies share it; "normal" for everything else."""

    def __init__(
        self,
        model: InstalledModel,
        engine: EngineClient | None,
        *,
        options: LoadOptions | None = None,
        load: Callable[[], LoadedModel] | None = None,
        loaded_as_is: bool = False,
        priority: str = "normal",
    ) -> None:
        self.model = model
        self.engine = engine
        self.options = options
        self._load = load
        self._loaded_as_is = loaded_as_is
        self.priority = priority

    @property
    def installed(self) -> InstalledModel:
        return self.model

    @property
    def ran_on(self) -> dict[str, Any] | None:
        return None

    def start(
        self,
        messages: list[dict],
        params: SamplingParams,
        *,
        conversation_id: str | None,
        stop: Sequence[str] = (),
        on_loaded: Callable[[LoadedModel], None] | None = None,
        on_recheck: Callable[[FileRecheck], None] | None = None,
        grammar: str | None = None,
        keep_all_turns: bool = False,
        raw_prompt: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str = "auto",
        tool_name: str | None = None,
        parallel_tool_calls: bool = True,
        reasoning: str = "",
    ) -> Generation:
        engine, model = self.engine, self.model
        assert engine is not None, "a model of this machine needs the engine client"
        try:
            recheck = recheck_file(model)
        except InvalidModelFile as exc:
            raise EngineError(str(exc)) from None
        if recheck is not None and on_recheck is not None:
            on_recheck(recheck)
        options = self.options or LoadOptions()
        current = engine.loaded if self._loaded_as_is else None
        if current is not None and current.path == os.path.abspath(model.path) and recheck is None:
            loaded = current
        elif self._load is not None:
            loaded = self._load()
        else:
            loaded = engine.load(model.path, n_ctx=params.n_ctx, **options.load_arguments())
        if on_loaded is not None:
            on_loaded(loaded)
        with_tools: dict[str, Any] = (
            {}
            if tools is None
            else {"tools": tools, "tool_choice": tool_choice, "tool_name": tool_name, "parallel_tool_calls": parallel_tool_calls}
        )
        return engine.generate(
            messages,
            conversation_id=conversation_id,
            max_tokens=params.max_tokens,
            stop=stop,
            grammar=grammar,
            keep_all_turns=keep_all_turns,
            raw_prompt=raw_prompt,
            speculative=options.speculative,
            priority=self.priority,
            presence_penalty=params.presence_penalty,
            frequency_penalty=params.frequency_penalty,
            logit_bias=params.logit_bias,
            **params.sampler_arguments(),
            **with_tools,
            reasoning=reasoning,
        )
