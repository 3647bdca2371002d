"""A turn loads its model as the person set it (Settings.placements): the GPU layers, the KV
cache's place and types, flash attention and the draft model reach the engine's load, drafting
reaches the reply, and a model never set loads with Cove's choice. A draft model that is gone
is left out with one sentence, and the turn goes on."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from app.engine.generation import Generation
from app.engine.request import ReplyRequest
from app.load_options import LoadOptions, load_options
from app.settings import ModelPlacement, SamplingParams
from app.statuses import MessageStatus
from app.turn.backend import backend_for
from app.turn.service import ChatService


class RecordingEngine:
    """Stands in for EngineClient at the boundary: records load()'s arguments and generate()'s
    requests; each reply ends at once, empty."""

    def __init__(self) -> None:
        self.loads: list[dict] = []
        self.generates: list[ReplyRequest] = []

    def load(self, path: str, **settings: object) -> object:
        self.loads.append({"path": path, **settings})
        return object()

    def generate(self, request: ReplyRequest) -> Generation:
        self.generates.append(request)
        generation = Generation(f"g{len(self.generates)}", lambda g: None)
        generation.end("", MessageStatus.COMPLETE, {}, None)
        return generation


def _turn(core: Any, engine: RecordingEngine, params: SamplingParams, options: LoadOptions | None = None) -> None:
    """A turn of `cove chat` with the person's sampling settings and the model's load settings."""
    model = core.library.list()[0]
    conversation = core.history.create_conversation()
    service = ChatService(core.history, engine, library=core.library)  # type: ignore[arg-type]
    result = service.send(conversation.id, "hi", model=model, params=params, options=options)
    assert result.status == MessageStatus.COMPLETE, result.error


def _start(engine: RecordingEngine, model: Any, options: LoadOptions) -> None:
    """A reply behind the model's backend, with the load settings `options`."""
    backend = backend_for(model, engine=engine, options=options)  # type: ignore[arg-type]
    backend.start(ReplyRequest.chat([{"role": "user", "content": "hi"}], conversation_id="c"))


DEFAULTS = {
    "n_gpu_layers": None,
    "kv_on_gpu": None,
    "type_k": "f16",
    "type_v": "f16",
    "flash_attn": None,
    "draft_model_path": None,
    "parallel": 1,
    "mmproj_path": None,
}


def test_the_models_settings_reach_the_engines_load_and_the_reply(cove_core) -> None:
    model = cove_core.library.list()[0]
    engine = RecordingEngine()
    chosen = ModelPlacement(gpu_layers=12, kv_on_gpu=False, type_k="q8_0", type_v="q4_0", flash_attn=True, speculative="off")
    _turn(cove_core, engine, SamplingParams(n_ctx=512), LoadOptions(chosen))
    _turn(cove_core, engine, SamplingParams())
    assert engine.loads == [
        {
            "path": model.path,
            "n_ctx": 512,
            "n_gpu_layers": 12,
            "kv_on_gpu": False,
            "type_k": "q8_0",
            "type_v": "q4_0",
            "flash_attn": True,
            "draft_model_path": None,
            "parallel": 1,
            "mmproj_path": None,
        },
        {"path": model.path, "n_ctx": None, **DEFAULTS},  # never set: Cove chooses
    ]
    assert [g.speculative for g in engine.generates] == ["off", "auto"]


def test_an_installed_draft_model_is_loaded_beside_the_model(cove_core, tmp_path: Path) -> None:
    model = cove_core.library.list()[0]
    copy = tmp_path / "draft.gguf"
    shutil.copyfile(model.path, copy)
    draft = cove_core.library.import_file(copy, name="tiny-draft")
    options = load_options(cove_core.library, model, ModelPlacement(draft_model="tiny-draft"))
    assert (options.draft_model_path, options.notice) == (draft.path, "")
    engine = RecordingEngine()
    _start(engine, model, options)
    assert engine.loads[0]["draft_model_path"] == draft.path and engine.generates[0].speculative == "auto"
    # Drafting off: no draft model is loaded at all.
    assert load_options(cove_core.library, model, ModelPlacement(speculative="off", draft_model="tiny-draft")) == LoadOptions(
        ModelPlacement(speculative="off", draft_model="tiny-draft")
    )


def test_a_draft_model_that_is_gone_is_left_out_with_a_sentence(cove_core, tmp_path: Path) -> None:
    model = cove_core.library.list()[0]
    gone = load_options(cove_core.library, model, ModelPlacement(type_k="q8_0", draft_model="removed-one"))
    assert gone.draft_model_path is None and gone.placement.type_k == "q8_0"
    assert gone.notice == (
        f"The draft model removed-one is no longer installed, so {model.name} loads without it "
        "(drafting from the conversation still works)."
    )
    copy = tmp_path / "vanishing.gguf"
    shutil.copyfile(model.path, copy)
    cove_core.library.import_file(copy, name="vanishing")
    copy.unlink()  # still in the library, its file deleted behind Cove's back
    missing = load_options(cove_core.library, model, ModelPlacement(draft_model="vanishing"))
    assert missing.draft_model_path is None and missing.notice.startswith("The draft model vanishing's file is missing")
    itself = load_options(cove_core.library, model, ModelPlacement(draft_model=model.name))
    assert itself.draft_model_path is None and itself.notice == ""  # a model never drafts for itself
    engine = RecordingEngine()
    _start(engine, model, gone)
    assert engine.loads[0]["draft_model_path"] is None and engine.generates  # the turn went on


def test_a_vision_model_loads_with_its_projector(cove_core) -> None:
    from dataclasses import replace

    from app.load_options import load_options

    model = replace(cove_core.library.list()[0], mmproj_path="/models/mmproj-x.gguf")
    options = load_options(cove_core.library, model, ModelPlacement())
    assert options.load_arguments()["mmproj_path"] == "/models/mmproj-x.gguf"
    assert load_options(cove_core.library, cove_core.library.list()[0], ModelPlacement()).mmproj_path is None
