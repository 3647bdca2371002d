"""Where a prompt takes its window checkpoints and which one a cut goes back to
(app/engine/host/window_checkpoints.py); the starter's runs are in tests/e2e/test_window_checkpoints_starter.py."""

from __future__ import annotations

import numpy as np

from app.engine.host.slots import Slot
from app.engine.host.window_checkpoints import KEEP, TAIL, Checkpoint, newest_within, point


def ck(n: int) -> Checkpoint:
    return Checkpoint(n, np.zeros(4, dtype=np.uint8))


def test_a_prompt_takes_one_where_its_new_tokens_begin_or_else_before_its_end() -> None:
    assert point(300, 1000) == 300
    assert point(0, 1000) == 1000 - TAIL  # a new conversation: a reply asked again goes back there
    assert point(999, 1000) == 999
    assert point(0, 3) is None  # going back to nothing needs none


def test_a_cut_goes_back_to_the_newest_checkpoint_at_or_before_it() -> None:
    kept = [ck(300), ck(996)]
    assert newest_within(kept, 995).n_tokens == 300  # type: ignore[union-attr]
    assert newest_within(kept, 996).n_tokens == 996  # type: ignore[union-attr]
    assert newest_within(kept, 299) is None


def test_a_slot_keeps_the_newest_and_one_per_position() -> None:
    slot = Slot(llm=None, seq=0, n_ctx=16)
    for n in (10, 20, 20, 30):
        slot.keep_checkpoint(ck(n))
    assert [c.n_tokens for c in slot.checkpoints] == [20, 30][-KEEP:] == [30]
