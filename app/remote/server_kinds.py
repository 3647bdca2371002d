"""The names a person reads for the kinds of server app.remote.probe recognises (its KINDS, less
"openai-compatible", which has no name of its own). Qt-free and importing nothing: the
Connections tab's sentences and the performance panel's "where it ran" both name a server
from here."""

from __future__ import annotations

KIND_NAMES = {
    "llama-server": "llama.cpp's llama-server",
    "ollama": "Ollama",
    "vllm": "vLLM",
    "cove": "Cove",
    "llama-cpp-python": "llama-cpp-python",
}
