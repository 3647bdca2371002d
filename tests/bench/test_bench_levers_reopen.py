"""bench/levers_reopen.py on the tiny generated model: the conversation it builds leaves one state
file, the continuation with it restores that file and evaluates only the last message, and the one
without it evaluates everything."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import CHATML_TEMPLATE, CHATML_TOKENS
from tests.support.paths import REPO_ROOT
from tests.support.tiny_model import write_tiny_gguf

sys.path.insert(0, str(REPO_ROOT / "bench"))

import levers_reopen  # noqa: E402

pytestmark = pytest.mark.timeout(180)


def test_the_saved_state_run_evaluates_only_the_last_message(tmp_path: Path) -> None:
    model = write_tiny_gguf(tmp_path / "tiny.gguf", chat_template=CHATML_TEMPLATE, extra_tokens=CHATML_TOKENS, n_ctx_train=4096)
    result = levers_reopen.run(str(model), rounds=2, tokens=800, threads=1, n_ctx=4096)
    assert result["turns"] >= 2 and result["conversation_tokens"] >= 800
    assert result["state_tokens"] >= result["conversation_tokens"] - 1 and result["state_file_bytes"] > 0
    # (The replies may differ: the tiny model's random replies tokenize differently from text than as
    # generated, and the saved run's prompt holds them as generated.)
    assert result["all_disk_hits"]
    saved, recompute = result["saved"], result["recompute"]
    assert len(saved["runs"]) == len(recompute["runs"]) == 2
    assert saved["prompt_tokens"] >= result["conversation_tokens"] and recompute["prompt_tokens"] >= result["conversation_tokens"]
    # Not the whole conversation: the tiny model's random replies hold pieces that end a transcript
    # early (transcript.py kept_reply), so a later turn shares only part of the earlier tokens.
    assert saved["cached_tokens"] > 200 and recompute["cached_tokens"] == 0
    assert saved["evaluated"] == saved["prompt_tokens"] - saved["cached_tokens"]
    assert recompute["evaluated"] == recompute["prompt_tokens"]
    assert result["ratio_ttft"] == round(saved["ttft_ms"] / recompute["ttft_ms"], 4)
