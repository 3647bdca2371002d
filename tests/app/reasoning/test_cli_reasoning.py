"""`cove chat` keeps a reply's reasoning apart: the tiny model with the DeepSeek-R1 distill's
template (whose prompt opens `<think>`, so all the tiny model writes is reasoning) prints it on
standard error after a "Thinking…" line, never on standard output, and `--json` carries it as its
own field."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import cove
from tests.support.tiny_model import write_tiny_gguf

TEMPLATES = Path(__file__).resolve().parents[2] / "data" / "chat_templates"


def test_cove_chat_shows_the_reasoning_apart_and_json_carries_it(tmp_path: Path) -> None:
    model = write_tiny_gguf(tmp_path / "r1.gguf", chat_template=(TEMPLATES / "deepseek-r1-distill.jinja").read_text())
    done = cove(tmp_path, "chat", "--model", str(model), "--new", "--max-tokens", "10", "--json", "hello")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["reasoning"] and out["text"] == "" and out["metrics"]["reasoning_ms"] >= 0
    shown = cove(tmp_path, "chat", "--model", str(model), "--new", "--max-tokens", "10", "hello")
    assert shown.returncode == 0, shown.stderr
    assert "Thinking…" in shown.stderr and "Thinking" not in shown.stdout
    assert shown.stdout.strip() == ""  # the answer alone: the tiny model never got past its reasoning
