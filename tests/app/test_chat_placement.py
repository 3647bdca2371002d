"""A turn loads its model where the person said it runs (Settings.placements): the GPU layers
and the KV cache reach the engine's load, and a model never set loads with Cove's choice."""

from __future__ import annotations

from app.chat import start_generation
from app.settings import ModelPlacement, SamplingParams


class RecordingEngine:
    """Stands in for EngineClient at the boundary: records load()'s arguments."""

    def __init__(self) -> None:
        self.loads: list[dict] = []

    def load(self, path: str, **settings: object) -> object:
        self.loads.append({"path": path, **settings})
        return object()

    def generate(self, messages: list, **_kw: object) -> str:
        return "generation"


def test_the_models_placement_reaches_the_engines_load(cove_core) -> None:
    model = cove_core.library.list()[0]
    engine = RecordingEngine()
    start_generation(engine, [{"role": "user", "content": "hi"}], model=model, params=SamplingParams(n_ctx=512),  # type: ignore[arg-type]
                     conversation_id="c", placement=ModelPlacement(gpu_layers=12, kv_on_gpu=False))
    start_generation(engine, [{"role": "user", "content": "hi"}], model=model, params=SamplingParams(),  # type: ignore[arg-type]
                     conversation_id="c")
    assert engine.loads == [
        {"path": model.path, "n_ctx": 512, "n_gpu_layers": 12, "kv_on_gpu": False},
        {"path": model.path, "n_ctx": None, "n_gpu_layers": None, "kv_on_gpu": None},  # never set: Cove chooses
    ]
