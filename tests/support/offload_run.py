"""One greedy reply from the engine's model session in a process of its own, for the offload tests
(tests/e2e/test_vulkan_offload.py): the llama.cpp libraries come from LLAMA_CPP_LIB_PATH (the
Vulkan wheel's), which must be set before llama_cpp is imported, so it cannot run in pytest's
process. Prints one JSON object: the placement report, and per token its id, its logit and its lead
over the next best logit (how near a tie it was).

    python -m tests.support.offload_run MODEL PROMPT MAX_TOKENS [N_CTX [N_GPU_LAYERS]]
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any


def main(argv: list[str]) -> int:
    from app.engine.host import token_pick
    from app.engine.host.llama_open import LoadError
    from app.engine.host.session import ModelSession
    from app.engine.protocol import Load
    from app.engine.request import ReplyRequest, Sampling, generate_message

    model, prompt, max_tokens = Path(argv[0]), argv[1], int(argv[2])
    n_ctx = int(argv[3]) if len(argv) > 3 else 2048
    layers = int(argv[4]) if len(argv) > 4 else None  # None: the automatic placement
    try:
        session = ModelSession(Load("load", str(model), n_ctx=n_ctx, n_threads=2, n_gpu_layers=layers))
    except LoadError as exc:
        print(json.dumps({"error": str(exc)}))
        return 0
    picks: list[dict[str, Any]] = []
    plain = token_pick.GreedyPick.pick

    def recording(self: token_pick.GreedyPick, llm: Any, idx: int) -> int:
        token = plain(self, llm, idx)
        row = token_pick.logits_row(llm, idx).copy()
        top = float(row[token])
        row[token] = -float("inf")
        picks.append({"token": token, "logit": top, "lead": top - float(row.max())})
        return token

    token_pick.GreedyPick.pick = recording  # type: ignore[method-assign]
    try:
        asked = ReplyRequest(
            sampling=Sampling(max_tokens=max_tokens, temperature=0.0), raw_prompt=prompt, no_cache=True, speculative="off", ignore_eos=True
        )
        req = generate_message(asked, "g")
        done = session.generate(req, lambda _line: None, threading.Event())
        print(json.dumps({"placement": session.placement.to_dict(), "text": done.text, "picks": picks, "metrics": done.metrics}))
    finally:
        session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
