"""`cove models search` and `cove models files` through app.cli.main.main against the fake Hub:
catalog first and marked by fit, then Hub rows; split models as one entry; offline and missing
repos as one `cove:` line with exit status 1; the saved token reaches the Hub only as a header."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli.main import main
from models.catalog import load_catalog
from tests.support.fake_hub import VALID_TOKEN

FITS = {"fits", "tight", "too large"}


@pytest.fixture
def cli(fake_hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """Run `cove ...` in-process with COVE_HOME under tmp_path; returns (exit status, stdout, stderr)."""
    monkeypatch.setenv("COVE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr("app.hub_token.load_token", lambda: None, raising=False)  # never the real keyring

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    fake_hub.add_repo(
        "bartowski/Qwen2.5-7B-Instruct-GGUF",
        {
            "Qwen2.5-7B-Instruct-Q4_K_M.gguf": b"q" * 400,
            "Qwen2.5-7B-Instruct-Q8_0.gguf": b"e" * 700,
            "Qwen2.5-7B-Instruct-IQ2_XXS.gguf": b"i" * 200,
            "Qwen2.5-7B-Instruct-f16-00001-of-00003.gguf": b"1" * 500,
            "Qwen2.5-7B-Instruct-f16-00002-of-00003.gguf": b"2" * 500,
            "Qwen2.5-7B-Instruct-f16-00003-of-00003.gguf": b"3" * 100,
            "Qwen2.5-7B-Instruct-bf16-00001-of-00002.gguf": b"b" * 600,
            "README.md": b"card",
        },
        downloads=900,
        likes=40,
        last_modified="2025-02-01T10:00:00.000Z",
    )
    fake_hub.add_repo(
        "unsloth/Qwen3-8B-GGUF",
        {"Qwen3-8B-Q4_K_M.gguf": b"u" * 10},
        downloads=500,
        likes=300,
        last_modified="2026-01-05T08:30:00.000Z",
    )
    fake_hub.add_repo(
        "meta/qwen-gated-GGUF",
        {"g-Q4_K_M.gguf": b"g" * 10},
        downloads=3,
        likes=1,
        gated=True,
        license="llama3.1",
    )
    fake_hub.add_repo("ggml-org/gemma-3-1b-it-GGUF", {"gemma-3-1b-it-Q4_K_M.gguf": b"d" * 10}, downloads=10_000)
    run.hub = fake_hub  # type: ignore[attr-defined]
    return run


def test_search_json_lists_matching_catalog_entries_then_hub_results(cli) -> None:
    code, out, err = cli("models", "search", "qwen", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["query"] == "qwen" and data["sort"] == "downloads"
    assert data["catalog"], "the catalog has Qwen models"
    for entry in data["catalog"]:
        assert "qwen" in (entry["name"] + entry["repo_id"]).lower()
        assert entry["fit"] in FITS
        assert entry["memory_needed_bytes"] > entry["size_bytes"]
    assert [m["repo_id"] for m in data["hub"]] == [
        "bartowski/Qwen2.5-7B-Instruct-GGUF",
        "unsloth/Qwen3-8B-GGUF",
        "meta/qwen-gated-GGUF",
    ]
    first, _, gated = data["hub"]
    assert first == {
        "repo_id": "bartowski/Qwen2.5-7B-Instruct-GGUF",
        "author": "bartowski",
        "downloads": 900,
        "likes": 40,
        "last_modified": "2025-02-01T10:00:00Z",
        "license": "apache-2.0",
        "gated": False,
    }
    assert gated["gated"] is True and gated["license"] == "llama3.1"
    assert data["machine"]["ram_bytes"] > 0


def test_search_sorted_by_likes_and_limited(cli) -> None:
    code, out, _ = cli("models", "search", "qwen", "--sort", "likes", "--limit", "2", "--json")
    assert code == 0
    assert [m["repo_id"] for m in json.loads(out)["hub"]] == ["unsloth/Qwen3-8B-GGUF", "bartowski/Qwen2.5-7B-Instruct-GGUF"]


def test_search_without_a_query_shows_the_whole_catalog_and_top_hub_repos(cli) -> None:
    code, out, _ = cli("models", "search", "--json")
    assert code == 0
    data = json.loads(out)
    assert len(data["catalog"]) == len(load_catalog())
    assert data["hub"][0]["repo_id"] == "ggml-org/gemma-3-1b-it-GGUF"  # most downloaded GGUF repo
    assert len(data["hub"]) == 4


def test_search_text_puts_the_catalog_first_with_fit_marks(cli) -> None:
    code, out, err = cli("models", "search", "qwen")
    assert code == 0, err
    curated, hub = out.index("Curated models"), out.index("Hugging Face Hub")
    assert curated < hub
    catalog_part = out[curated:hub]
    assert "Qwen2.5 7B Instruct" in catalog_part and "Llama" not in catalog_part
    assert any(line.strip().startswith(("fits", "tight", "too large")) for line in catalog_part.splitlines())
    hub_part = out[hub:]
    assert hub_part.index("bartowski/Qwen2.5-7B-Instruct-GGUF") < hub_part.index("unsloth/Qwen3-8B-GGUF")
    assert "[gated" in hub_part and "2025-02-01" in hub_part and "apache-2.0" in hub_part


def test_files_json_groups_split_models(cli) -> None:
    code, out, err = cli("models", "files", "bartowski/Qwen2.5-7B-Instruct-GGUF", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["repo_id"] == "bartowski/Qwen2.5-7B-Instruct-GGUF" and data["commit"]
    entries = {e["name"]: e for e in data["entries"]}
    assert set(entries) == {
        "Qwen2.5-7B-Instruct-IQ2_XXS.gguf",
        "Qwen2.5-7B-Instruct-Q4_K_M.gguf",
        "Qwen2.5-7B-Instruct-Q8_0.gguf",
        "Qwen2.5-7B-Instruct-f16.gguf",
        "Qwen2.5-7B-Instruct-bf16.gguf",
    }
    f16 = entries["Qwen2.5-7B-Instruct-f16.gguf"]
    assert (f16["quant"], f16["total_size"], f16["part_count"], f16["complete"]) == ("F16", 1100, 3, True)
    assert [p["filename"] for p in f16["parts"]][0] == "Qwen2.5-7B-Instruct-f16-00001-of-00003.gguf"
    bf16 = entries["Qwen2.5-7B-Instruct-bf16.gguf"]
    assert (bf16["complete"], bf16["part_count"], bf16["expected_parts"]) == (False, 1, 2)
    assert entries["Qwen2.5-7B-Instruct-IQ2_XXS.gguf"]["quant"] == "IQ2_XXS"


def test_files_text_shows_sizes_quants_and_parts(cli) -> None:
    code, out, _ = cli("models", "files", "https://huggingface.co/bartowski/Qwen2.5-7B-Instruct-GGUF")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("bartowski/Qwen2.5-7B-Instruct-GGUF at commit ")
    f16 = next(line for line in lines if "-f16.gguf" in line)
    assert "F16" in f16 and "1.1 KB" in f16 and "3 parts" in f16
    assert "INCOMPLETE: 1 of 2 parts" in next(line for line in lines if "-bf16.gguf" in line)
    assert "README" not in out


@pytest.mark.parametrize("argv", [("models", "search", "qwen"), ("models", "files", "bartowski/Qwen2.5-7B-Instruct-GGUF")])
def test_offline_is_one_line_exit_1_and_no_request(cli, monkeypatch: pytest.MonkeyPatch, argv) -> None:
    monkeypatch.setenv("COVE_OFFLINE", "1")
    code, out, err = cli(*argv)
    assert code == 1
    # Search still shows the curated catalog (no network needed); a listing shows nothing.
    assert ("Qwen2.5 7B Instruct" in out) if argv[1] == "search" else out == ""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("cove: Cove is offline (COVE_OFFLINE is set)")
    assert cli.hub.requests == []


def test_a_missing_repo_is_one_line_exit_1(cli) -> None:
    code, out, err = cli("models", "files", "nobody/missing-GGUF")
    assert code == 1 and out == ""
    announce, sentence = err.strip().splitlines()  # the network line, then what went wrong
    assert announce.startswith("cove: listing the model's files (127.0.0.1:")
    assert sentence == "cove: There is no model repository called nobody/missing-GGUF on the Hub (or it is private)."


def test_the_saved_token_is_sent_as_a_header_only(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("app.hub_token.load_token", lambda: VALID_TOKEN, raising=False)
    code, out, err = cli("models", "search", "qwen", "--json")
    assert code == 0
    assert VALID_TOKEN not in out + err
    (request,) = cli.hub.requests
    assert request.headers["authorization"] == f"Bearer {VALID_TOKEN}"
    assert VALID_TOKEN not in request.path


def test_bad_arguments_are_usage_errors(cli) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli("models", "search", "qwen", "--sort", "stars")
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        cli("models", "search", "--limit", "0")
    assert exit_info.value.code == 2
    assert cli.hub.requests == []
