"""The messages between the UI/CLI process and the engine host, and their wire format.

Wire format (an invariant shared by both processes): models/json_lines.py's JSON lines, with a
"type" tag naming the dataclass. JSON, never pickle: the host runs native code on untrusted
model files, so nothing it sends may be able to run code in the parent. Unknown keys are
ignored on decode, so either side may add optional fields.

Every request carries a `request_id`; every event names the request it belongs to, and the
client drops events whose id is not the one it is waiting for.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from models.json_lines import LineError, TaggedCodec


class ProtocolError(LineError):
    """A line that is not a valid message (a ValueError)."""


# ---- down: parent -> host -------------------------------------------------------------


@dataclass(frozen=True)
class Load:
    request_id: str
    model_path: str
    n_ctx: int | None = None  # None: min(training context, 8192), at least 256
    n_threads: int | None = None  # None: physical cores
    n_gpu_layers: int | None = None  # None: as many as the memory estimate says fit on the GPU; -1: all
    flash_attn: bool | None = None  # None: llama.cpp's "auto"
    kv_on_gpu: bool | None = None  # None: with the layers it belongs to (on the GPU when they are)
    use_model_template: bool = True  # False: skip the GGUF template, use the fallback
    fallback_reason: str | None = None  # why the GGUF template is skipped (for the note)
    state_cache_mb: int = 256  # RAM for earlier conversations' KV state (app/engine/host/state_cache.py); 0: off
    type_k: str = "f16"  # the KV cache's K type: "f16", "q8_0" or "q4_0" (KV_CACHE_CHOICES)
    type_v: str = "f16"  # the KV cache's V type; quantized V needs flash attention
    state_dir: str | None = None  # the folder of conversations' KV state saved to disk; None: none saved
    state_disk_mb: int = 0  # the most those files may take together (least recently used out first)
    draft_model_path: str | None = None  # a small model with the same vocabulary that drafts tokens
    parallel: int = 1  # slots: sequences decoded together in one batch, each with its own n_ctx of KV cache
    mmproj_path: str | None = None  # the model's vision projector: replies may then hold images


# The KV cache types a person may pick (llama.cpp's names).
KV_CACHE_CHOICES = ("f16", "q8_0", "q4_0")

# How a reply may draft tokens to verify in one batch (app/engine/host/speculative.py): "auto" drafts from
# the conversation (prompt lookup) or with the loaded draft model, and stops when it does not pay.
SPECULATIVE_MODES = ("auto", "off")

# The sampler's defaults, the one place they are written: a turn's SamplingParams
# (app/settings.py), EngineClient.generate and this request start from them.
TEMPERATURE = 0.8
TOP_P = 0.95
TOP_K = 40
MIN_P = 0.05
REPEAT_PENALTY = 1.0
PRESENCE_PENALTY = 0.0  # OpenAI's presence_penalty and frequency_penalty, over llama.cpp's
FREQUENCY_PENALTY = 0.0  # penalty window (the reply's and prompt's last 64 tokens)


@dataclass(frozen=True)
class Generate:
    request_id: str
    conversation_id: str | None
    messages: list[dict[str, Any]]
    max_tokens: int | None = None
    temperature: float = TEMPERATURE
    top_p: float = TOP_P
    top_k: int = TOP_K
    min_p: float = MIN_P
    repeat_penalty: float = REPEAT_PENALTY
    seed: int | None = None
    presence_penalty: float = PRESENCE_PENALTY
    frequency_penalty: float = FREQUENCY_PENALTY
    logit_bias: list[list[float]] = field(default_factory=list)  # [token id, bias] pairs added to the logits
    stop: list[str] = field(default_factory=list)
    # Benchmarks: do not stop on end-of-generation tokens nor on the chat format's end-of-turn
    # strings (a base model's "\nQ:"), so a reply runs to max_tokens; `stop` still applies.
    ignore_eos: bool = False
    prompt_tokens: list[int] | None = None  # benchmarks: raw token ids, no template
    raw_prompt: str | None = None  # a text completion: this text as it is, no chat template
    no_cache: bool = False  # benchmarks: clear the KV cache first
    grammar: str | None = None  # GBNF text constraining the reply (app/engine/grammar.py); None: free text
    keep_all_turns: bool = False  # API requests: never drop turns; Failed(kind="context") if the prompt does not fit
    speculative: str = "auto"  # SPECULATIVE_MODES
    # Tools the model may call (OpenAI's shape: {"type": "function", "function": {name, description,
    # parameters}}); None: none. The host renders them with the chat template and constrains calls
    # with a grammar (app/tools/): "required" from the first token (only `tool_name`'s with one),
    # "auto" from the family's opener on.
    tools: list[dict[str, Any]] | None = None
    tool_choice: str = "auto"  # "auto" | "required"
    tool_name: str | None = None
    parallel_tool_calls: bool = True
    priority: str = "normal"  # PRIORITIES: "window" gets its token every step while API replies share the batch
    # The reasoning switch (app/reasoning/switch.py ASKS): "" the template's default, "none", "on",
    # "low" | "medium" | "high"; what the template cannot do is Failed(kind="reasoning").
    reasoning: str = ""
    # The files of the messages' images, by SHA-256 (app/images/store.py): the host reads each one,
    # checks it still hashes to its name, and decodes it with the same limits as the front ends.
    images: dict[str, str] = field(default_factory=dict)


# How a reply shares the engine's batch with others (app/engine/host/scheduler.py).
PRIORITIES = ("normal", "window")


@dataclass(frozen=True)
class Cancel:
    request_id: str


@dataclass(frozen=True)
class Unload:
    request_id: str


@dataclass(frozen=True)
class Shutdown:
    request_id: str = ""


@dataclass(frozen=True)
class Embed:
    """Embed texts with the loaded model, between replies (answered by Embedded or Failed)."""

    request_id: str
    texts: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ListDevices:
    """Which devices llama.cpp sees here (loads its backends; no model needed)."""

    request_id: str


# ---- up: host -> parent ---------------------------------------------------------------


@dataclass(frozen=True)
class Ready:
    """Sent once when the host has started and can take requests."""

    request_id: str = ""
    pid: int = 0


@dataclass(frozen=True)
class Loaded:
    request_id: str
    model_path: str
    n_ctx: int
    n_ctx_train: int
    n_threads: int
    n_gpu_layers: int
    backend: str
    template_source: str  # "gguf" or "fallback:<name>"
    template_note: str
    load_ms: float
    n_batch: int = 0
    n_ubatch: int = 0
    flash_attn: str = "auto"  # "auto" | "on" | "off", as llama-bench spells it
    architecture: str = ""
    n_vocab: int = 0
    placement: dict[str, Any] = field(default_factory=dict)  # app/engine/host/placement_run.py: PlacementReport
    embeddings: bool = False  # the file declares a pooling type: Embed works
    type_k: str = "f16"
    type_v: str = "f16"
    kv_bytes: int = 0  # the KV cache buffers llama.cpp allocated (its own log lines; 0: not reported)
    compute_bytes: int = 0  # the compute buffers llama.cpp allocated
    draft_model: str = ""  # the draft model's file name; "" for none
    draft_note: str = ""  # why the draft model asked for is not used ("" when it is, or none was asked for)
    slots: int = 1  # sequences the engine decodes together (n_ctx is each one's)
    vision: bool = False  # a projector is open: replies may hold images
    projector: str = ""  # the projector's file name ("" for none)


@dataclass(frozen=True)
class Unloaded:
    request_id: str


@dataclass(frozen=True)
class Devices:
    request_id: str
    devices: list[dict[str, Any]] = field(default_factory=list)  # app/engine/host/backends.py: Device.to_dict()


@dataclass(frozen=True)
class Embedded:
    request_id: str
    vectors: list[list[float]] = field(default_factory=list)  # one unit-length vector per text, in order
    prompt_tokens: int = 0  # tokens read, over all the texts


@dataclass(frozen=True)
class Started:
    """Sent when the first token has been sampled (the prompt is evaluated)."""

    request_id: str
    prompt_tokens: int
    cached_tokens: int
    dropped_turns: int
    prefill_ms: float | None = None
    template_source: str = ""
    tool_format: str = ""  # the tool-call family the reply is written in (app/tools/families.py); "" without tools
    reasoning: str = ""  # what the reply starts in (app/reasoning/style.py MODES): "", "think", "think-open", "harmony"


@dataclass(frozen=True)
class Token:
    request_id: str
    text: str


@dataclass(frozen=True)
class Serving:
    """Sent about twice a second while the engine has replies to run, and once when it falls idle."""

    request_id: str = ""
    sequences: int = 0  # replies being decoded now
    waiting: int = 0  # replies waiting for a free slot
    tokens_per_s: float = 0.0  # tokens generated over all replies, per second, over the last ~2 s
    slots: int = 1


@dataclass(frozen=True)
class Finished:
    request_id: str
    text: str
    stop_reason: str  # "stop" | "length" | "cancelled"
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Failed:
    request_id: str
    message: str  # one readable sentence, never a traceback
    kind: (
        str  # "load" | "generate" | "template" | "context" | "grammar" | "reasoning" | "image" | "embed" | "protocol" | "busy" | "internal"
    )
    # kind "context": the prompt's tokens (a lower bound when at_least), the context, the reply's reserve
    prompt_tokens: int | None = None
    n_ctx: int | None = None
    reserve: int | None = None
    at_least: bool = False


Request = Load | Generate | Cancel | Unload | Shutdown | ListDevices | Embed
Event = Ready | Loaded | Unloaded | Devices | Embedded | Started | Token | Serving | Finished | Failed
Message = Request | Event

_TYPES: dict[str, type] = {
    "load": Load,
    "generate": Generate,
    "cancel": Cancel,
    "unload": Unload,
    "shutdown": Shutdown,
    "list_devices": ListDevices,
    "embed": Embed,
    "ready": Ready,
    "loaded": Loaded,
    "unloaded": Unloaded,
    "devices": Devices,
    "embedded": Embedded,
    "started": Started,
    "token": Token,
    "serving": Serving,
    "finished": Finished,
    "failed": Failed,
}
_CODEC: TaggedCodec[Message] = TaggedCodec("type", _TYPES, error=ProtocolError)

# Bound once: the parent's reader decodes every Token line with it.
encode: Callable[[Message], bytes] = _CODEC.encode  # one line of JSON (ending in a newline) for a message
decode: Callable[[bytes | str], Message] = _CODEC.decode  # a line back into its dataclass; raises ProtocolError on anything else


def token_line_prefix(request_id: str) -> bytes:
    """The constant start of every Token line of one request (built once per turn)."""
    return b'{"type":"token","request_id":%s,"text":' % json.dumps(request_id).encode("ascii")


def token_line(prefix: bytes, text: str) -> bytes:
    """The hot path: a Token line without building a dataclass (same bytes as encode())."""
    return prefix + json.dumps(text).encode("ascii") + b"}\n"
