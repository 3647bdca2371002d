"""The suite's build of llama.cpp's tools (tests/support/llama_tools_build.py), in a pytest run of
its own: the tools are built once, before the first test that needs them and outside its
timeout, with progress on the terminal; a failed build fails only the tests that need the tools,
with one sentence; a run that needs no tool builds nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.timeout(120)

# The inner run's conftest: the build is replaced by one that records each call in a file and
# either takes BUILD_SECONDS and leaves the tools in place, or fails with a sentence.
CONFTEST = """
import json, os, time
from pathlib import Path

from app.speed import llama_tools
from tests.support import llama_server

TOOLS = Path(os.environ["FAKE_TOOLS_DIR"])
llama_server.tools_cache = lambda: TOOLS


def fake_ensure_tools(tools_dir, version=llama_tools.DEFAULT_VERSION, log=print, spec=llama_tools.LLAMA_TOOLS):
    with open(os.environ["FAKE_BUILD_CALLS"], "a") as fh:
        fh.write(str(tools_dir) + "\\n")
    log("building llama-bench, llama-server, llama-cli with 2 jobs")
    log("  120/300 steps (40%) after 4 min")
    time.sleep(float(os.environ.get("BUILD_SECONDS", "0")))
    if os.environ.get("BUILD_FAILS"):
        raise llama_tools.LlamaToolError("cmake could not configure the llama.cpp sources (exit 1): no C++ compiler")
    dest = llama_tools.tool_dir(tools_dir, spec, version)
    dest.mkdir(parents=True)
    for target in spec.targets:
        (dest / target).write_text("")
    (dest / llama_tools.BUILD_INFO).write_text(json.dumps({"cpu": llama_tools.cpu_signature()}))
    return dest


llama_tools.ensure_tools = fake_ensure_tools
"""

TESTS = """
import pytest
from app.speed import llama_tools
from tests.support import llama_server


@pytest.mark.slow_build
@pytest.mark.timeout(1)
def test_uses_the_server():
    assert llama_tools.is_built(llama_server.tools_cache())


@pytest.mark.slow_build
@pytest.mark.timeout(1)
def test_uses_the_bench():
    assert llama_tools.tool_binary(llama_server.tools_cache(), "llama-bench").is_file()


def test_needs_no_tool():
    assert True
"""


@pytest.fixture
def inner(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=TESTS)
    pytester.makeini("[pytest]\nmarkers =\n    slow_build: builds llama.cpp's tools\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p))
    monkeypatch.setenv("FAKE_TOOLS_DIR", str(tmp_path / "tools"))
    monkeypatch.setenv("FAKE_BUILD_CALLS", str(tmp_path / "calls.txt"))
    monkeypatch.delenv("BUILD_FAILS", raising=False)
    return pytester


def _calls(tmp_path: Path) -> list[str]:
    calls = tmp_path / "calls.txt"
    return calls.read_text().splitlines() if calls.exists() else []


def test_the_tools_are_built_once_before_the_tests_outside_their_timeout(
    inner: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BUILD_SECONDS", "2.5")  # longer than each test's 1 s timeout
    result = inner.runpytest_subprocess("-p", "tests.support.llama_tools_build")
    result.assert_outcomes(passed=3)
    assert _calls(tmp_path) == [str(tmp_path / "tools")]  # one build for both tests
    out = result.stdout.str()
    assert "llama.cpp tools: 2 tests use llama.cpp's own tools (llama-bench, llama-server, llama-cli, llama-mtmd-cli); building" in out
    assert "llama.cpp tools:   120/300 steps (40%) after 4 min" in out  # the build's progress, not captured away
    assert out.index("llama.cpp tools: 2 tests use") < out.index("test_inner.py")  # before the first test

    second = inner.runpytest_subprocess("-p", "tests.support.llama_tools_build")
    second.assert_outcomes(passed=3)
    assert len(_calls(tmp_path)) == 1  # built already: nothing to do
    assert "llama.cpp tools:" not in second.stdout.str()


def test_a_failed_build_fails_only_the_tests_that_need_the_tools_with_one_sentence(
    inner: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BUILD_FAILS", "1")
    result = inner.runpytest_subprocess("-p", "tests.support.llama_tools_build")
    result.assert_outcomes(passed=1, errors=2)
    assert len(_calls(tmp_path)) == 1  # not tried again for the second test
    out = result.stdout.str()
    sentence = "llama.cpp's tools could not be built: cmake could not configure the llama.cpp sources (exit 1): no C++ compiler"
    assert out.count(sentence) >= 2  # each failed test says why
    assert "the build failed, so the 2 tests that need the tools will fail" in out
    assert "Traceback" not in out and "LlamaToolError" not in out


def test_a_run_without_tests_that_need_the_tools_builds_nothing(inner: pytest.Pytester, tmp_path: Path) -> None:
    result = inner.runpytest_subprocess("-p", "tests.support.llama_tools_build", "-m", "not slow_build")
    result.assert_outcomes(passed=1, deselected=2)
    assert _calls(tmp_path) == []
    listing = inner.runpytest_subprocess("-p", "tests.support.llama_tools_build", "--collect-only")
    assert listing.ret == 0 and _calls(tmp_path) == []


def test_the_plugin_is_part_of_the_suite() -> None:
    conftest = (REPO_ROOT / "tests" / "conftest.py").read_text()
    assert '"tests.support.llama_tools_build"' in conftest
