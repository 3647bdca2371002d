"""What a server says of itself: its kind, version and models (`probe`, a blocking call the
window runs on a worker thread)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ServerInfo:
    kind: str  # "llama-server" | "ollama" | "vllm" | "cove" | "llama-cpp-python" | "openai-compatible"
    version: str | None
    models: list[dict[str, Any]] = field(default_factory=list, hash=False)  # [{"id", "fingerprint", "context_length"}]
    private: bool | None = None  # whether the host is on this machine or a private network (None: unknown)
