"""Cove's small settings file (JSON in the data dir): last used model, default sampling, where
models load, tool limits and which embedding model new document collections use.

The settings file is written atomically (temp file + rename) so a crash never leaves a
half-written file; an unreadable file is moved aside under a name of its own
(`settings.json.corrupt-<UTC stamp>`, never over an earlier copy), defaults are used, and
`read_settings` returns a sentence saying so.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from app.atomic_file import write_text_whole
from app.engine import protocol
from app.engine.request import Sampling
from app.set_aside import aside_name, utc_stamp


@dataclass(frozen=True)
class SamplingParams:
    """Sampling and context settings for one turn; stored with every assistant message."""

    temperature: float = protocol.TEMPERATURE
    top_p: float = protocol.TOP_P
    top_k: int = protocol.TOP_K
    min_p: float = protocol.MIN_P
    repeat_penalty: float = protocol.REPEAT_PENALTY
    max_tokens: int | None = 512
    seed: int | None = None
    n_ctx: int | None = None
    presence_penalty: float = protocol.PRESENCE_PENALTY
    frequency_penalty: float = protocol.FREQUENCY_PENALTY
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, added to its logit) pairs

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def sampling(self) -> Sampling:
        """These settings as a reply request's sampling (app/engine/request.py); n_ctx is the load's."""
        return Sampling(
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            min_p=self.min_p,
            repeat_penalty=self.repeat_penalty,
            seed=self.seed,
            presence_penalty=self.presence_penalty,
            frequency_penalty=self.frequency_penalty,
            logit_bias=self.logit_bias,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> SamplingParams:
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in (data or {}).items() if k in known}
        if "logit_bias" in values:  # stored as JSON: a list of [id, bias] lists
            values["logit_bias"] = tuple((int(t), float(b)) for t, b in values["logit_bias"] or ())
        return cls(**values)


# A model's load settings beyond where it runs, as the person may choose them.
KV_CACHE_TYPES = protocol.KV_CACHE_CHOICES  # "f16", "q8_0", "q4_0"
DRAFTING_MODES = protocol.SPECULATIVE_MODES  # "auto", "off"


@dataclass(frozen=True)
class ModelPlacement:
    """The person's choice of how one model loads. `gpu_layers` None: as many as Cove's memory
    estimate says fit on the GPU; 0: the CPU only; -1: all of them; N: that many. `kv_on_gpu`
    None: the KV cache goes with its layers; False: it stays in RAM. `type_k`/`type_v`: the KV
    cache's types (KV_CACHE_TYPES; a quantized V needs flash attention). `flash_attn` None:
    llama.cpp's auto. `speculative` "auto": draft tokens where it pays (from the conversation, or
    with `draft_model`, the name of an installed model with the same vocabulary); "off": never.
    The default object means "nothing set": Cove chooses everything."""

    gpu_layers: int | None = None
    kv_on_gpu: bool | None = None
    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: bool | None = None
    speculative: str = "auto"
    draft_model: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def problem(self) -> str | None:
        """Why llama.cpp would refuse this combination, in a sentence; None when it is fine."""
        if self.type_v != "f16" and self.flash_attn is False:
            return f"A {self.type_v} V cache needs flash attention: set flash attention to auto or on, or the V cache to f16."
        return None

    def describe(self) -> str:
        """In words, e.g. "as many GPU layers as fit, the KV cache with its layers"; the load
        settings beyond those only when they are not the defaults."""
        layers = {None: "as many GPU layers as fit", -1: "all layers on the GPU", 0: "the CPU only"}.get(
            self.gpu_layers, f"{self.gpu_layers} layers on the GPU"
        )
        kv = {None: "the KV cache with its layers", True: "the KV cache on the GPU", False: "the KV cache in RAM"}[self.kv_on_gpu]
        parts = [layers, kv]
        if (self.type_k, self.type_v) != ("f16", "f16"):
            parts.append(f"a {self.type_k} KV cache" if self.type_k == self.type_v else f"K cache {self.type_k}, V cache {self.type_v}")
        if self.flash_attn is not None:
            parts.append("flash attention on" if self.flash_attn else "flash attention off")
        if self.speculative == "off":
            parts.append("no drafting")
        elif self.draft_model:
            parts.append(f"drafting with {self.draft_model}")
        return ", ".join(parts)

    @classmethod
    def from_dict(cls, data: object) -> ModelPlacement:
        """The placement in `data`; each value that is missing or not one Cove knows is the default."""
        if not isinstance(data, dict):
            return cls()
        layers, kv, fa, draft = data.get("gpu_layers"), data.get("kv_on_gpu"), data.get("flash_attn"), data.get("draft_model")
        return cls(
            gpu_layers=layers if isinstance(layers, int) and not isinstance(layers, bool) and layers >= -1 else None,
            kv_on_gpu=kv if isinstance(kv, bool) else None,
            type_k=_choice(data.get("type_k"), KV_CACHE_TYPES),
            type_v=_choice(data.get("type_v"), KV_CACHE_TYPES),
            flash_attn=fa if isinstance(fa, bool) else None,
            speculative=_choice(data.get("speculative"), DRAFTING_MODES),
            draft_model=draft if isinstance(draft, str) and draft.strip() else None,
        )


def _choice(value: object, choices: tuple[str, ...]) -> str:
    """`value` when it is one of `choices`, else the first (the default)."""
    return value if isinstance(value, str) and value in choices else choices[0]


# The default limit of the conversations' KV state saved to disk (least recently used out first).
SAVED_STATE_MB = 4096
TOOL_TIMEOUT_S = 60  # app/mcp/results.py DEFAULT_CALL_TIMEOUT
TOOL_RESULT_CHARS = 20_000  # app/mcp/results.py DEFAULT_RESULT_CAP


@dataclass(frozen=True)
class Settings:
    last_model: str | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    offline: bool = False  # refuse every Hub call (search, listings, header reads, downloads)
    models_dir: str | None = None  # where downloads go; None = the default under the data dir
    placements: dict[str, ModelPlacement] = field(default_factory=dict)  # by model name; absent: Cove chooses
    saved_state_mb: int = SAVED_STATE_MB  # disk for conversations' saved KV state (app/engine/host/state_files.py); 0: none
    tool_timeout_s: int = TOOL_TIMEOUT_S  # how long a tool server may take to start or answer one call
    tool_result_chars: int = TOOL_RESULT_CHARS  # a tool's result is cut past this, and the model is told
    # While the API server shares the engine: the window's reply gets its token every step (True), or
    # every reply is treated alike (False); the window's turn asks generate() for priority "window".
    window_first: bool = True
    # The embedding model new document collections are embedded with, by name (app/docs/embedding.py
    # embedding_model); None: the person has not chosen (the default embedder, else the first by name).
    embedding_model: str | None = None
    # What Auto learned from the person, by kind of task (app/routing/preferences.py): {kind: {"model",
    # "how", "when"}}; kept as read, so a kind or field this version does not know survives a save.
    auto_learned: dict[str, dict[str, str]] = field(default_factory=dict)

    def with_last_model(self, name: str) -> Settings:
        return replace(self, last_model=name)

    def placement_for(self, model_name: str) -> ModelPlacement:
        return self.placements.get(model_name, ModelPlacement())

    def with_placement(self, model_name: str, placement: ModelPlacement) -> Settings:
        placements = {k: v for k, v in self.placements.items() if k != model_name}
        if placement != ModelPlacement():
            placements[model_name] = placement
        return replace(self, placements=placements)


@dataclass(frozen=True)
class LoadedSettings:
    settings: Settings
    # A sentence for the person when the file could not be read, else None.
    notice: str | None = None


def read_settings(path: Path) -> LoadedSettings:
    """The settings in `path` (defaults when there is no file). A file that is not readable
    settings is moved aside, never deleted or overwritten, and `notice` says where it went."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return LoadedSettings(Settings())
    except (OSError, ValueError):
        raw = None
    if not isinstance(raw, dict):
        return LoadedSettings(Settings(), _set_aside(path))
    return LoadedSettings(
        Settings(
            last_model=raw.get("last_model") if isinstance(raw.get("last_model"), str) else None,
            sampling=SamplingParams.from_dict(raw.get("sampling") if isinstance(raw.get("sampling"), dict) else None),
            offline=raw.get("offline") is True,
            models_dir=raw.get("models_dir") if isinstance(raw.get("models_dir"), str) and raw.get("models_dir") else None,
            placements={name: ModelPlacement.from_dict(value) for name, value in raw["placements"].items() if isinstance(name, str)}
            if isinstance(raw.get("placements"), dict)
            else {},
            saved_state_mb=_whole(raw.get("saved_state_mb"), SAVED_STATE_MB),
            tool_timeout_s=_whole(raw.get("tool_timeout_s"), TOOL_TIMEOUT_S) or TOOL_TIMEOUT_S,
            tool_result_chars=_whole(raw.get("tool_result_chars"), TOOL_RESULT_CHARS) or TOOL_RESULT_CHARS,
            window_first=raw.get("window_first") is not False,
            embedding_model=_name(raw.get("embedding_model")),
            auto_learned=_learned(raw.get("auto_learned")),
        )
    )


def _name(value: object) -> str | None:
    """`value` as a model's name (stripped) when it is text with something in it, else None."""
    return value.strip() if isinstance(value, str) and value.strip() else None


def _learned(value: object) -> dict[str, dict[str, str]]:
    """The entries of `value` that are {kind: {"model": name, ...text fields}}; others are dropped."""
    if not isinstance(value, dict):
        return {}
    return {
        kind: {k: v for k, v in entry.items() if isinstance(k, str) and isinstance(v, str)}
        for kind, entry in value.items()
        if isinstance(kind, str) and isinstance(entry, dict) and _name(entry.get("model"))
    }


def _whole(value: object, default: int) -> int:
    """`value` when it is a whole number >= 0 (not a bool), else `default`."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


def load_settings(path: Path) -> Settings:
    """The settings in `path`; see read_settings for a file that cannot be read."""
    return read_settings(path).settings


_utc_stamp = utc_stamp  # a module attribute, so a test can fix the stamp


def _set_aside(path: Path) -> str:
    """Rename the unreadable file to `<name>.corrupt-<UTC stamp>` (`-2`, `-3`… when that name
    is taken) and return the sentence for the person."""
    target = aside_name(path, _utc_stamp())
    try:
        path.replace(target)
    except OSError as exc:
        return f"The settings file {path} could not be read nor moved aside ({exc.strerror or exc}); the defaults are used."
    return f"The settings file could not be read; it was moved to {target} and the defaults are used."


def save_settings(path: Path, settings: Settings) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "last_model": settings.last_model,
        "sampling": settings.sampling.to_dict(),
        "offline": settings.offline,
        "models_dir": settings.models_dir,
        "placements": {name: placement.to_dict() for name, placement in settings.placements.items()},
        "saved_state_mb": settings.saved_state_mb,
        "tool_timeout_s": settings.tool_timeout_s,
        "tool_result_chars": settings.tool_result_chars,
        "window_first": settings.window_first,
        "embedding_model": settings.embedding_model,
        "auto_learned": settings.auto_learned,
    }
    write_text_whole(path, json.dumps(data, indent=2))
