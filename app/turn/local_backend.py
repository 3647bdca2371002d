"""A reply from a model file of this machine: check the file (a stat; hashed again if it
changed), load it in the engine host if needed (blocking), start the reply."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from app.engine.client import EngineClient, EngineError, Generation, LoadedModel
from app.engine.request import ReplyRequest
from app.load_options import LoadOptions
from models.gguf_validate import InvalidModelFile
from models.library import FileRecheck, InstalledModel, recheck_file
from models.projector_files import check_projector_unchanged


class LocalBackend:
    """`options`: the model's load settings (None: Cove chooses); drafting off there holds for
    every reply of the model. `loaded_as_is`: the engine has this model loaded already (another's
    engine, lent): keep its settings rather than load it again. `load`: how to load it instead
    (an API pool's settings). `n_ctx`: the context a load here asks for (None: the engine's)."""

    def __init__(
        self,
        model: InstalledModel,
        engine: EngineClient | None,
        *,
        options: LoadOptions | None = None,
        load: Callable[[], LoadedModel] | None = None,
        loaded_as_is: bool = False,
        n_ctx: int | None = None,
    ) -> None:
        self.model = model
        self.engine = engine
        self.options = options
        self._load = load
        self._loaded_as_is = loaded_as_is
        self.n_ctx = n_ctx

    @property
    def installed(self) -> InstalledModel:
        return self.model

    @property
    def ran_on(self) -> dict[str, Any] | None:
        return None

    def start(
        self,
        request: ReplyRequest,
        *,
        on_loaded: Callable[[LoadedModel], None] | None = None,
        on_recheck: Callable[[FileRecheck], None] | None = None,
    ) -> Generation:
        engine, model = self.engine, self.model
        assert engine is not None, "a model of this machine needs the engine client"
        try:
            recheck = recheck_file(model)
            if request.images():  # a projector gone or replaced is said, not loaded as nothing
                check_projector_unchanged(model)
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
            loaded = engine.load(model.path, n_ctx=self.n_ctx, **options.load_arguments())
        if on_loaded is not None:
            on_loaded(loaded)
        if options.speculative != "auto":  # the model's own setting: no drafting for any of its replies
            request = request.but(speculative=options.speculative)
        return engine.generate(request)
