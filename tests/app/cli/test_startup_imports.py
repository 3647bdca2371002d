"""The light commands (`cove --version`, `cove history list`, `cove docs search`) start without
the heavy packages: each runs in a fresh interpreter, doing its real work on a home with saved
conversations and a keyword-only collection, and the modules it imported are checked. How fast
they start is measured by bench/startup.py, not here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import cove
from tests.support.paths import REPO_ROOT

# Packages a light command has no use for; each takes tens of milliseconds or more to import
# (numpy comes with gguf and, unless kept out, with sqlite_utils).
HEAVY = (
    "PySide6",
    "llama_cpp",
    "numpy",
    "gguf",
    "yaml",
    "mcp",
    "starlette",
    "uvicorn",
    "httpx",
    "httpcore",
    "jsonschema",
    "huggingface_hub",
    "jinja2",
    "pygments",
    "markdown_it",
)

# Runs the command line in this interpreter, then writes the names of the modules it imported.
RUN_AND_LIST = """
import json, sys
from app.cli.main import main
try:
    code = main(sys.argv[2:])
except SystemExit as exc:
    code = exc.code
with open(sys.argv[1], "w", encoding="utf-8") as f:
    json.dump(sorted(sys.modules), f)
sys.exit(code)
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("startup")
    notes = root / "notes"
    notes.mkdir()
    (notes / "lighthouse.md").write_text("# Harrow Point\n\nThe keeper counted 417 gulls before the storm.\n", encoding="utf-8")
    (notes / "kettle.txt").write_text("The kettle's warranty lasts seven years.\n", encoding="utf-8")
    fill = (
        "from app.core import open_core\n"
        "core = open_core()\n"
        "for i in range(3):\n"
        "    c = core.history.create_conversation(model='m')\n"
        "    core.history.add_user_message(c.id, f'question {i} about gulls')\n"
        "core.close()\n"
    )
    subprocess.run(
        [sys.executable, "-c", fill],
        cwd=REPO_ROOT,
        check=True,
        timeout=120,
        env={**os.environ, "COVE_HOME": str(root / "home"), "PYTHONPATH": str(REPO_ROOT)},
    )
    added = cove(root / "home", "docs", "add", "notes", str(notes), "--no-embed")
    assert added.returncode == 0, added.stderr
    return root / "home"


def imported_by(home: Path, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    listing = home.parent / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", RUN_AND_LIST, str(listing), *args],
        cwd=REPO_ROOT,
        env={**os.environ, "COVE_HOME": str(home), "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, set(json.loads(listing.read_text(encoding="utf-8")))


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(name for name in modules if name.split(".")[0] in HEAVY)


@pytest.mark.parametrize(
    ("args", "shows"),
    [
        (("--version",), "cove "),
        (("history", "list"), "question 2 about gulls"),
        (("history", "list", "--json"), "question 0 about gulls"),
        (("docs", "search", "notes", "how many gulls"), "417 gulls"),
        (("docs", "search", "notes", "kettle warranty", "--json"), "seven years"),
    ],
)
def test_a_light_command_imports_no_heavy_package(home: Path, args: tuple[str, ...], shows: str) -> None:
    done, modules = imported_by(home, *args)
    assert done.returncode == 0, done.stderr
    assert shows in done.stdout  # it did its work
    assert heavy_in(modules) == [], f"cove {' '.join(args)} imported {heavy_in(modules)}"
    if args != ("--version",):
        assert "app.core" in modules  # the check sees what the command imported
    else:
        assert "app.core" not in modules and "sqlite_utils" not in modules


def test_only_the_command_being_run_is_imported(home: Path) -> None:
    _, modules = imported_by(home, "history", "list")
    others = {
        "app.cli.chat_cmd",
        "app.cli.models_cmd",
        "app.cli.docs_cmd",
        "app.cli.serve_cmd",
        "app.cli.tools_cmd",
        "app.cli.remote_cmd",
        "app.cli.record_cmd",
        "app.cli.auth_cmd",
        "app.cli.bench_cmd",
        "app.cli.setup_cmd",
    }
    assert "app.cli.history_cmd" in modules
    assert sorted(others & modules) == []


def test_the_help_lines_of_the_command_table_are_each_modules_own() -> None:
    """`cove --help` lists every command from app.cli.main.COMMANDS without importing its
    module; the full parser (every module's add_parser) must say the same."""
    from app.cli.main import COMMANDS, build_parser

    def help_lines(parser: object) -> dict[str, str | None]:
        sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")  # type: ignore[attr-defined]
        return {choice.dest: choice.help for choice in sub._choices_actions}

    assert help_lines(build_parser()) == {name: help_line for name, (_, help_line) in COMMANDS.items()}
    assert build_parser().format_help() == build_parser("").format_help()
