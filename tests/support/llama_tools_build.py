"""A pytest plugin that builds llama.cpp's tools (llama-bench, llama-server, llama-cli;
app/speed/llama_tools.py) once per test run, before the first test, when a collected test is
marked `slow_build`: outside every test's timeout, with its progress on the terminal. A failed
build fails exactly the tests that need the tools, each with the build's one sentence, and the
rest of the suite runs on."""

from __future__ import annotations

import pytest

from app.speed import llama_tools
from tests.support import llama_server

_BUILD_ERROR = pytest.StashKey[str]()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if config.option.collectonly:
        return
    needing = [item for item in session.items if item.get_closest_marker("slow_build") is not None]
    if not needing:
        return
    tools = llama_server.tools_cache()
    if llama_tools.is_built(tools):
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")

    def log(message: str) -> None:
        line = f"llama.cpp tools: {message}"
        if reporter is None:
            print(line, flush=True)
            return
        if capture is None:
            reporter.write_line(line)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)
            reporter.flush()

    log(
        f"{len(needing)} tests use llama.cpp's own tools (llama-bench, llama-server, llama-cli, llama-mtmd-cli); "
        "building them once, before the tests run (leave them out with -m 'not slow_build')"
    )
    try:
        llama_tools.ensure_tools(tools, log=log)
    except llama_tools.LlamaToolError as exc:
        config.stash[_BUILD_ERROR] = str(exc)
        log(f"the build failed, so the {len(needing)} tests that need the tools will fail: {exc}")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before any fixture of a test that needs the tools: fail it with the build's sentence, if the build failed."""
    if item.get_closest_marker("slow_build") is None:
        return
    error = item.config.stash.get(_BUILD_ERROR, None)
    if error is not None:
        pytest.fail(f"llama.cpp's tools could not be built: {error}", pytrace=False)
