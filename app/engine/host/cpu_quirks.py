"""What Cove works around in the llama.cpp build it runs on this CPU: today, the AMX weight
buffers, whose batched matrix multiply crashes the engine (llama.cpp issue #20824), so where the
build would use them the weights stay in llama.cpp's plain CPU buffers.

Runs only in the engine host (it imports llama_cpp); call after the backends are loaded.
"""

from __future__ import annotations

import os

import llama_cpp

# "1": let llama.cpp use its extra weight buffers (AMX, repacked layouts) even where the build has
# AMX (for a llama.cpp where it is fixed); "0": keep them off everywhere; unset: Cove decides.
EXTRA_BUFFERS_ENV = "COVE_LLAMA_AMX"

AMX_NOTE = (
    "llama.cpp's AMX weight path is off on this processor: in this llama.cpp version it crashes "
    "when reading a prompt (llama.cpp issue #20824)"
)
OFF_NOTE = f"llama.cpp's extra weight buffers (AMX, repacked) are off ({EXTRA_BUFFERS_ENV}=0)"


def amx_in_build() -> bool:
    """Whether the CPU backend llama.cpp runs with here was built with AMX int8 (so it would move
    weights into AMX buffers on this processor)."""
    info = (llama_cpp.llama_print_system_info() or b"").decode("utf-8", "replace")
    return "AMX_INT8 = 1" in info


def extra_buffers() -> tuple[bool, str]:
    """Whether llama.cpp may move weights into its extra CPU buffer types, and the sentence that
    says why not ("" when it may)."""
    choice = os.environ.get(EXTRA_BUFFERS_ENV)
    if choice == "1":
        return True, ""
    if choice == "0":
        return False, OFF_NOTE
    return (False, AMX_NOTE) if amx_in_build() else (True, "")
