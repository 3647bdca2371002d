"""One model's load settings as a load uses them: the person's ModelPlacement (app/settings.py)
with its draft model's name looked up in the library. A draft model that is no longer installed
(or is the model itself) is left out, and `notice` says so in a sentence; the load goes on.

Thread invariant: `load_options` reads the library, so it runs on the thread that owns the
history database; the LoadOptions it returns is frozen and may go to any thread.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import TypedDict

from app.settings import ModelPlacement
from models.library import InstalledModel, ModelLibrary, ModelNotFound


class LoadArguments(TypedDict):
    """EngineClient.load's keyword arguments for a model's load settings (n_ctx and the threads
    are the caller's)."""

    n_gpu_layers: int | None
    kv_on_gpu: bool | None
    type_k: str
    type_v: str
    flash_attn: bool | None
    draft_model_path: str | None
    parallel: int
    mmproj_path: str | None


@dataclass(frozen=True)
class LoadOptions:
    """A ModelPlacement resolved for one load."""

    placement: ModelPlacement = field(default_factory=ModelPlacement)
    draft_model_path: str | None = None  # the draft model's file, when one is set and installed
    notice: str = ""  # a sentence for the person when the set draft model was left out
    parallel: int = 1  # the engine's slots (replies at once): more only while the API shares the window's engine
    mmproj_path: str | None = None  # the model's vision projector (InstalledModel.mmproj_path)

    @property
    def speculative(self) -> str:
        """EngineClient.generate's `speculative` for replies of this model."""
        return self.placement.speculative

    def load_arguments(self) -> LoadArguments:
        p = self.placement
        return LoadArguments(
            n_gpu_layers=p.gpu_layers,
            kv_on_gpu=p.kv_on_gpu,
            type_k=p.type_k,
            type_v=p.type_v,
            flash_attn=p.flash_attn,
            draft_model_path=self.draft_model_path,
            parallel=self.parallel,
            mmproj_path=self.mmproj_path,
        )


def load_options(library: ModelLibrary | None, model: InstalledModel, placement: ModelPlacement) -> LoadOptions:
    """`placement` of `model` with its draft model's file found in `library`, and its vision
    projector. Drafting off needs no draft model, so none is loaded then."""
    options = _load_options(library, model, placement)
    mmproj = getattr(model, "mmproj_path", None)
    return replace(options, mmproj_path=mmproj) if mmproj else options


def _load_options(library: ModelLibrary | None, model: InstalledModel, placement: ModelPlacement) -> LoadOptions:
    name = placement.draft_model
    if not name or placement.speculative == "off" or library is None:
        return LoadOptions(placement)
    try:
        draft = library.get(name)
    except ModelNotFound:
        return LoadOptions(
            placement,
            notice=f"The draft model {name} is no longer installed, so {model.name} "
            "loads without it (drafting from the conversation still works).",
        )
    if os.path.abspath(draft.path) == os.path.abspath(model.path):
        return LoadOptions(placement)  # a model cannot draft for itself
    if not os.path.isfile(draft.path):
        return LoadOptions(placement, notice=f"The draft model {name}'s file is missing ({draft.path}), so {model.name} loads without it.")
    return LoadOptions(placement, draft_model_path=draft.path)
