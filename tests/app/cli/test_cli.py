"""The `cove` command line, run as a person runs it: a subprocess with its own COVE_HOME."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import assert_clean_error, cove


def test_version(tmp_path: Path) -> None:
    done = cove(tmp_path, "--version")
    assert done.returncode == 0
    assert done.stdout.startswith("cove ")


@pytest.mark.parametrize(
    "args",
    [
        ("chat", "--max-tokens", "abc", "hi"),
        ("chat", "--temperature", "-1", "hi"),
        ("models",),
        ("history", "export", "x", "--format", "pdf"),
        ("frobnicate",),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, args: tuple[str, ...]) -> None:
    done = cove(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    assert "usage:" in done.stderr
    assert "Traceback" not in done.stderr


def test_bad_model_file_is_one_sentence_and_not_registered(tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 5)
    line = assert_clean_error(cove(tmp_path / "home", "models", "import", str(bad)))
    assert line.startswith("cove: ") and "GGUF" in line
    listed = cove(tmp_path / "home", "models", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []


def test_missing_things_are_sentences(tmp_path: Path) -> None:
    assert "no such file" in assert_clean_error(cove(tmp_path, "models", "import", str(tmp_path / "nope.gguf")))
    assert "no model named" in assert_clean_error(cove(tmp_path, "models", "info", "nope"))
    assert "no conversation" in assert_clean_error(cove(tmp_path, "history", "show", "zzzzzzzz"))


def test_empty_message_is_refused_without_saving(tmp_path: Path, tiny_gguf: Path) -> None:
    line = assert_clean_error(cove(tmp_path, "chat", "--model", str(tiny_gguf), "   "))
    assert "empty" in line
    listed = cove(tmp_path, "history", "list", "--json")
    assert json.loads(listed.stdout) == []


def test_import_list_info_remove(tmp_path: Path, tiny_gguf: Path) -> None:
    home = tmp_path / "home"
    done = cove(home, "models", "import", str(tiny_gguf), "--copy", "--json")
    assert done.returncode == 0, done.stderr
    imported = json.loads(done.stdout)
    assert Path(imported["path"]).parent == home / "models"
    assert len(imported["sha256"]) == 64
    listed = json.loads(cove(home, "models", "list", "--json").stdout)
    assert [m["name"] for m in listed] == [imported["name"]]
    info = json.loads(cove(home, "models", "info", imported["name"], "--json").stdout)
    assert info["architecture"] == "llama" and info["vocab_size"] > 256
    removed = cove(home, "models", "remove", imported["name"], "--delete-file")
    assert removed.returncode == 0, removed.stderr
    assert not Path(imported["path"]).exists()
    assert tiny_gguf.exists(), "the original file is never touched"


METRIC_NAMES = {
    "prompt_tokens",
    "cached_tokens",
    "prefill_ms",
    "prompt_tps",
    "ttft_ms",
    "gen_tokens",
    "gen_ms",
    "gen_tps",
    "stop_reason",
    "n_ctx",
    "context_used",
    "engine_uss_bytes",
    "engine_rss_bytes",
}


def test_chat_json_saves_both_messages_and_follow_up_reuses_cache(tmp_path: Path, tiny_gguf: Path) -> None:
    first = cove(tmp_path, "chat", "--model", str(tiny_gguf), "--new", "--max-tokens", "12", "--seed", "1", "--json", "hello there")
    assert first.returncode == 0, first.stderr
    one = json.loads(first.stdout)
    assert one["status"] in {"complete", "length"}
    assert set(one["metrics"]) >= METRIC_NAMES, METRIC_NAMES - set(one["metrics"])
    assert one["metrics"]["gen_tokens"] >= 1 and one["metrics"]["engine_uss_bytes"] > 0
    # Follow-up in the same conversation, read from stdin: only the new text is evaluated...
    second = cove(tmp_path, "chat", "--conversation", one["conversation_id"], "--max-tokens", "8", "--json", stdin="and again")
    assert second.returncode == 0, second.stderr
    two = json.loads(second.stdout)
    assert two["conversation_id"] == one["conversation_id"]
    # ...but each `cove chat` is a fresh engine process, so nothing is cached across commands.
    assert two["metrics"]["prompt_tokens"] > one["metrics"]["prompt_tokens"]

    shown = json.loads(cove(tmp_path, "history", "show", one["conversation_id"][:8], "--json").stdout)
    roles = [m["role"] for m in shown["messages"]]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert shown["messages"][0]["content"] == "hello there"
    assert shown["messages"][2]["content"] == "and again"
    reply = shown["messages"][1]
    assert reply["content"] == one["text"] and reply["status"] == one["status"]
    assert reply["model_sha256"] and reply["params"]["max_tokens"] == 12 and reply["params"]["seed"] == 1
    assert reply["metrics"]["gen_tokens"] == one["metrics"]["gen_tokens"]

    hits = json.loads(cove(tmp_path, "history", "search", "again", "--json").stdout)
    assert [h["message_id"] for h in hits] == [two["message_ids"]["user"]]
    for odd in ['"', "NEAR(", "*", "OR", "🙂", "a AND"]:
        done = cove(tmp_path, "history", "search", odd)
        assert done.returncode == 0 and "Traceback" not in done.stderr

    out = tmp_path / "chat.md"
    exported = cove(tmp_path, "history", "export", one["conversation_id"], "--format", "md", "-o", str(out))
    assert exported.returncode == 0 and "hello there" in out.read_text()
    as_json = json.loads(cove(tmp_path, "history", "export", one["conversation_id"], "--format", "json").stdout)
    assert len(as_json["messages"]) == 4

    assert cove(tmp_path, "history", "delete", one["conversation_id"]).returncode == 0
    assert json.loads(cove(tmp_path, "history", "list", "--json").stdout) == []


def test_chat_streams_text_to_stdout_and_metrics_to_stderr(tmp_path: Path, tiny_gguf: Path) -> None:
    done = cove(tmp_path, "chat", "--model", str(tiny_gguf), "--max-tokens", "6", "--temperature", "0", "hi")
    assert done.returncode == 0, done.stderr
    assert "tok/s" in done.stderr and "TTFT" in done.stderr
    last = json.loads(cove(tmp_path, "history", "list", "--json").stdout)[0]
    shown = json.loads(cove(tmp_path, "history", "show", last["id"], "--json").stdout)
    assert done.stdout.rstrip("\n") == shown["messages"][1]["content"].rstrip("\n")


def test_no_model_at_all_says_how_to_get_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import app.core
    from app.cli.main import main

    monkeypatch.setenv("COVE_HOME", str(tmp_path))
    monkeypatch.setattr(app.core, "starter_available", lambda: False)
    assert main(["chat", "hello"]) == 1
    err = capsys.readouterr().err
    assert "no model is installed" in err and "cove models import" in err
    # The person's message was not lost in a conversation nobody can see: nothing was half-written.
    assert main(["history", "list", "--json"]) == 0
