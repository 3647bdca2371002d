"""A documents question on a real model (issue 45 item 1): `cove chat --docs` with
Qwen2.5-Coder-0.5B-Instruct at temperature 0 answers from a small collection the test writes,
citing the passage it used as [1]; the reply's sources, the history and the record agree."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from app.docs.turn_sources import cited_numbers
from tests.support.cli import cove

pytestmark = [pytest.mark.real_model, pytest.mark.timeout(600)]

FACT = "The Zorblat festival is held every March in Quenby."


def test_a_documents_question_is_answered_with_a_citation(tmp_path: Path, qwen05_gguf: Path) -> None:
    home, folder = tmp_path / "home", tmp_path / "town"
    folder.mkdir()
    (folder / "zorblat.txt").write_text(FACT + "\n")
    (folder / "library.txt").write_text("The Quenby library opens at nine in the morning and closes at six.\n")
    for args in (("models", "import", str(qwen05_gguf)), ("docs", "add", "town", str(folder))):
        done = cove(home, *args)
        assert done.returncode == 0, done.stderr

    done = cove(
        home,
        "chat",
        "--new",
        "--model",
        qwen05_gguf.stem,
        "--temperature",
        "0",
        "--max-tokens",
        "48",
        "--docs",
        "town",
        "--json",
        "When is the Zorblat festival held?",
        timeout=540,
    )
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    text = reply["text"]
    assert reply["status"] == "complete", reply
    assert "[1]" in text and "March" in text, text
    sources = reply["sources"]
    assert sources[0]["n"] == 1 and sources[0]["path"] == str(folder / "zorblat.txt")
    assert sources[0]["excerpt"] == FACT and sources[0]["cited"] is True
    assert 1 in cited_numbers(text, len(sources))

    entries = [json.loads(line) for line in cove(home, "record", "export").stdout.splitlines()]
    entry = next(e for e in entries if e["conversation_id"] == reply["conversation_id"] and e["endpoint"] == "chat")
    kept = json.loads(entry["params"])["documents"]
    assert kept[0]["n"] == 1 and kept[0]["hash"] == hashlib.sha256(FACT.encode()).hexdigest()
    assert FACT in json.loads(entry["messages"])[-1]["content"]  # the passage went to the model with its number
    assert entry["reply"] == text
