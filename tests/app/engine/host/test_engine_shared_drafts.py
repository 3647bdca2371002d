"""Drafts verified in a step shared with other replies (app/engine/host/reply.py: add_run, take_run),
in this process on the tiny model: a drafter that knows each reply's tokens (from a run alone)
proposes them, so every draft is ruled on in the shared batch, and the replies are the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from app.engine.protocol import Finished, Generate, Load

pytestmark = pytest.mark.timeout(120)

PROMPTS = ["the first question", "a second, longer question about birds", "three", "and a fourth one here"]


class Oracle:
    """Proposes the continuation of whichever known token sequence the history is a prefix of."""

    cheap = True
    kind = "long"
    mode = "lookup"

    def __init__(self) -> None:
        self.known: list[np.ndarray] = []
        self.proposed = 0

    def draft(self, history: np.ndarray, last: int, k: int) -> list[int]:
        seen = np.append(np.asarray(history, dtype=np.intc), last)
        for tokens in self.known:
            if len(tokens) > len(seen) and np.array_equal(tokens[: len(seen)], seen):
                out = [int(t) for t in tokens[len(seen) : len(seen) + k]]
                self.proposed += len(out)
                return out
        return []


@pytest.fixture(scope="module")
def session(tiny_gguf_with_template: Path) -> Iterator[object]:
    from app.engine.host.session import ModelSession

    s = ModelSession(Load("l", str(tiny_gguf_with_template), n_ctx=512, n_threads=1, parallel=4, state_cache_mb=0))
    yield s
    s.close()


def _run(session: object, reqs: list[Generate]) -> list[Finished]:
    from app.engine.host.scheduler import Scheduler

    out: list[Finished] = []
    scheduler = Scheduler(session, lambda _line: None, out.append)  # type: ignore[arg-type]
    for req in reqs:
        scheduler.submit(req)
    while len(out) < len(reqs):
        scheduler.step()
    assert all(isinstance(o, Finished) for o in out)
    return sorted(out, key=lambda f: f.request_id)


def _req(i: int, speculative: str) -> Generate:
    return Generate(
        f"g{i}",
        None,
        [{"role": "user", "content": PROMPTS[i]}],
        max_tokens=40,
        temperature=0.5,
        seed=i,
        ignore_eos=True,
        no_cache=True,
        speculative=speculative,
    )


def test_drafts_verified_beside_other_replies_keep_each_reply_as_it_is_alone(session: object) -> None:
    s = session
    oracle = Oracle()
    alone = []
    for i in range(len(PROMPTS)):
        alone.append(_run(s, [_req(i, "off")])[0])
        slot = max(s.slots.all, key=lambda x: x.last_used)  # type: ignore[attr-defined]
        oracle.known.append(np.array(slot.tokens(), dtype=np.intc))
    s.drafting.lookup = oracle  # type: ignore[attr-defined]
    s.drafting.costs.step_s = 0.01  # type: ignore[attr-defined]  (a plain step's cost, as if measured)
    together = _run(s, [_req(i, "auto") for i in range(len(PROMPTS))])
    assert [f.text for f in together] == [f.text for f in alone]
    assert oracle.proposed > 0
    assert sum(f.metrics["draft"]["accepted"] for f in together) > 0
    assert min(f.metrics["batch"]["mean_sequences"] for f in together) > 1
