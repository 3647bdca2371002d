"""A scripted engine host for UI tests and the UI benchmark: it speaks the real pipe protocol
(app/engine/protocol.py) but generates words instead of running llama.cpp.

Run as the real host is: `python tests/support/fake_host.py --in-fd N --out-fd M`.
What it does is steered by the last user message and by environment variables:

- default: streams FAKE_HOST_WORDS (default 40, at most max_tokens) words (not "..._TOKENS":
  the engine scrubs every variable with TOKEN in its name from the host environment) at FAKE_HOST_TPS
  tokens per second (default 400), then finishes with 'stop'.
- "#crash": SIGKILLs itself after 5 tokens (an engine killed mid-reply).
- "#hang": never answers and ignores Cancel (a long prefill llama.cpp cannot interrupt).
- "#markdown": streams a reply with a heading, a list, a table and a code block.
- a model path containing "broken": the load fails with a sentence.
- FAKE_HOST_KEEP_TURNS=k: the context "holds" only the newest k user turns; the rest are
  reported as dropped (as the real host's context policy does).
- FAKE_HOST_PIECES=path: a JSON list of strings streamed one per token instead of words (a
  recorded reply of a real model, for benches of what the window costs per token);
- FAKE_HOST_TIMES=path: appends "index perf_counter" per token sent (for latency benches;
  perf_counter is CLOCK_MONOTONIC on Linux, shared by all processes).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.engine.protocol import (  # noqa: E402
    Cancel,
    Failed,
    Finished,
    Generate,
    Load,
    Loaded,
    Ready,
    Shutdown,
    Started,
    Token,
    Unload,
    Unloaded,
    decode,
    encode,
)

MARKDOWN_REPLY = (
    "## A small plan\n\nHere is a list:\n\n- first **bold** point\n- second point with `code`\n\n"
    "| name | value |\n|---|---|\n| alpha | 1 |\n| beta | 2 |\n\n"
    "```python\ndef greet(name):\n    return f'hello {name}'\n```\n\n> A quote to finish.\n"
)


def _text(content: object) -> str:
    """A message's text: its content, or the text parts of a list of parts (images left out)."""
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content or "")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--in-fd", type=int, required=True)
    parser.add_argument("--out-fd", type=int, required=True)
    args = parser.parse_args()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out_lock = threading.Lock()
    cancelled: set[str] = set()
    times_path = os.environ.get("FAKE_HOST_TIMES")
    times = open(times_path, "a", buffering=1) if times_path else None  # noqa: SIM115 - open for the process's life
    tps = float(os.environ.get("FAKE_HOST_TPS", "400"))
    loaded_path = ""

    def send(msg: object) -> None:
        data = encode(msg)  # type: ignore[arg-type]
        with out_lock:
            os.write(args.out_fd, data)

    requests: list = []
    ready = threading.Condition()

    def read() -> None:
        with os.fdopen(args.in_fd, "rb") as reader:
            for line in reader:
                msg = decode(line)
                if isinstance(msg, Cancel):
                    cancelled.add(msg.request_id)
                    continue
                with ready:
                    requests.append(msg)
                    ready.notify()
        with ready:
            requests.append(None)
            ready.notify()

    threading.Thread(target=read, daemon=True).start()
    send(Ready(pid=os.getpid()))
    while True:
        with ready:
            while not requests:
                ready.wait()
            req = requests.pop(0)
        if req is None or isinstance(req, Shutdown):
            return 0
        if isinstance(req, Load):
            if "broken" in req.model_path:
                send(Failed(req.request_id, f"llama.cpp could not load {Path(req.model_path).name}: the file is damaged", "load"))
                continue
            loaded_path = req.model_path
            send(Loaded(req.request_id, req.model_path, req.n_ctx or 4096, 8192, 2, 0, "cpu", "fallback:plain", "fake host", 1.0))
        elif isinstance(req, Unload):
            send(Unloaded(req.request_id))
        elif isinstance(req, Generate):
            last = next((_text(m["content"]) for m in reversed(req.messages) if m["role"] == "user"), "")
            if "#hang" in last:
                time.sleep(3600)
            words = MARKDOWN_REPLY.split(" ") if "#markdown" in last else None
            pieces_path = os.environ.get("FAKE_HOST_PIECES")
            pieces = json.loads(Path(pieces_path).read_text()) if pieces_path else None
            n = len(pieces) if pieces else len(words) if words else int(os.environ.get("FAKE_HOST_WORDS", "40"))
            if req.max_tokens:
                n = min(n, req.max_tokens)
            prompt_tokens = sum(len(_text(m["content"]).split()) + 4 for m in req.messages)
            keep = int(os.environ.get("FAKE_HOST_KEEP_TURNS", "0") or 0)
            user_turns = sum(1 for m in req.messages if m["role"] == "user")
            dropped = max(0, user_turns - keep) if keep else 0
            t0 = time.perf_counter()
            send(Started(req.request_id, prompt_tokens, 0, dropped, 1.0, "fallback:plain"))
            parts: list[str] = []
            reason = "stop"
            next_at = time.perf_counter()
            for i in range(n):
                if req.request_id in cancelled:
                    reason = "cancelled"
                    break
                if "#crash" in last and i == 5:
                    os.kill(os.getpid(), signal.SIGKILL)
                next_at += 1.0 / tps
                delay = next_at - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                if pieces:
                    piece = pieces[i]
                else:
                    piece = (words[i] + (" " if i < n - 1 else "")) if words else f"w{i} "
                parts.append(piece)
                send(Token(req.request_id, piece))
                if times is not None:
                    times.write(f"{i} {time.perf_counter()!r}\n")
            gen_s = max(time.perf_counter() - t0, 1e-9)
            metrics = {
                "prompt_tokens": prompt_tokens,
                "cached_tokens": 0,
                "prefill_ms": 1.0,
                "prompt_tps": 1000.0,
                "gen_tokens": len(parts),
                "gen_ms": gen_s * 1000,
                "gen_tps": len(parts) / gen_s,
                "stop_reason": reason,
                "n_ctx": 4096,
                "context_used": prompt_tokens + len(parts),
                "dropped_turns": dropped,
                "template_source": "fallback:plain",
                "model_path": loaded_path,
            }
            send(Finished(req.request_id, "".join(parts), reason, metrics))


if __name__ == "__main__":
    sys.exit(main())
