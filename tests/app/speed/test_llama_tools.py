"""Building llama.cpp's tools (app/speed/llama_tools.py): one configure and one build for all three,
the cache that answers without building, a partial folder that does not count as built, two
callers at once building once, and the build's progress as a person reads it."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from app.speed import llama_tools as lt


def _finished(tools_dir: Path, version: str, targets: tuple[str, ...] | None = None) -> Path:
    dest = lt.tool_dir(tools_dir, lt.LLAMA_TOOLS, version)
    dest.mkdir(parents=True)
    for target in lt.LLAMA_TOOLS.targets if targets is None else targets:
        (dest / lt.binary_name(target)).write_text("")
    (dest / lt.BUILD_INFO).write_text(json.dumps({"cpu": lt.cpu_signature()}))
    return dest


def test_one_configure_builds_all_four_tools_with_the_server_on_and_no_ui_download(tmp_path: Path) -> None:
    assert set(lt.LLAMA_TOOLS.targets) == {"llama-bench", "llama-server", "llama-cli", "llama-mtmd-cli"}
    args = lt.cmake_args(tmp_path / "src", tmp_path / "build", lt.LLAMA_TOOLS, {"CMAKE_ARGS": "-DGGML_NATIVE=OFF"})
    assert "-DLLAMA_BUILD_TOOLS=ON" in args and "-DLLAMA_BUILD_SERVER=ON" in args
    # the web UI is neither built with npm nor fetched from a bucket during the build
    assert "-DLLAMA_USE_PREBUILT_UI=OFF" in args and "-DLLAMA_BUILD_UI=OFF" in args
    assert args[-1] == "-DGGML_NATIVE=OFF"  # $CMAKE_ARGS last, as scikit-build-core passes it


def test_the_build_runs_cmake_once_for_every_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commands: list[list[str]] = []
    source = tmp_path / "src"
    for sub in lt.LLAMA_TOOLS.source_dirs:
        (source / "vendor" / "llama.cpp" / sub).mkdir(parents=True)

    def fake_run_logged(cmd: list[str], fh: object, what: str, build_log: Path, log: object) -> None:
        commands.append(cmd)
        if "--build" in cmd:  # what a finished build leaves behind
            out = Path(cmd[cmd.index("--build") + 1]) / "bin"
            out.mkdir(parents=True)
            for target in lt.LLAMA_TOOLS.targets:
                (out / target).write_text(target)
            (out / "libllama.so").write_text("lib")

    monkeypatch.setattr(lt.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(lt, "_download_sdist", lambda version, tmp, spec, log: source)
    monkeypatch.setattr(lt, "_run_logged", fake_run_logged)
    folder = lt.ensure_tools(tmp_path / "tools", "9.9.9", log=lambda m: None)
    assert [c[:2] for c in commands] == [["cmake", "-S"], ["cmake", "--build"]]  # one configure, one build
    build = commands[1]
    assert [build[i + 1] for i, a in enumerate(build) if a == "--target"] == list(lt.LLAMA_TOOLS.targets)
    assert lt.is_built(tmp_path / "tools", version="9.9.9")
    assert {p.name for p in folder.iterdir()} == {*lt.LLAMA_TOOLS.targets, "libllama.so", lt.BUILD_INFO}
    # every tool comes from that one folder, with no second build
    assert lt.ensure_tool(tmp_path / "tools", "llama-server", "9.9.9", log=lambda m: None) == folder / "llama-server"
    assert lt.ensure_tool(tmp_path / "tools", "llama-bench", "9.9.9", log=lambda m: None) == folder / "llama-bench"
    assert len(commands) == 2


def test_a_finished_build_is_returned_without_building(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dest = _finished(tmp_path, "9.9.9")
    monkeypatch.setattr(lt.subprocess, "run", lambda *a, **k: pytest.fail("must not download"))
    monkeypatch.setattr(lt.subprocess, "Popen", lambda *a, **k: pytest.fail("must not build"))
    assert lt.ensure_tool(tmp_path, "llama-server", "9.9.9", log=lambda m: None) == dest / lt.binary_name("llama-server")
    assert lt.ensure_tool(tmp_path, "llama-cli", "9.9.9", log=lambda m: None) == dest / lt.binary_name("llama-cli")
    assert lt.is_built(tmp_path, version="9.9.9")
    with pytest.raises(ValueError, match="llama-quantize is not one of the built tools"):
        lt.tool_binary(tmp_path, "llama-quantize", "9.9.9")


def test_a_folder_missing_one_of_the_binaries_is_not_a_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _finished(tmp_path, "9.9.9", targets=("llama-server", "llama-bench", "llama-mtmd-cli"))  # no llama-cli
    assert not lt.is_built(tmp_path, version="9.9.9")
    monkeypatch.setattr(lt.shutil, "which", lambda name: None)
    with pytest.raises(
        lt.LlamaToolError,
        match=r"cmake is not installed, so llama.cpp's tools \(llama-bench, llama-server, "
        r"llama-cli, llama-mtmd-cli\) cannot be built",
    ):
        lt.ensure_tool(tmp_path, "llama-server", "9.9.9", log=lambda m: None)


def test_two_callers_at_once_build_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builds: list[str] = []
    entered = threading.Event()
    release = threading.Event()

    def fake_build(dest: Path, spec: lt.ToolSpec, version: str, log: object) -> None:
        builds.append(spec.name)
        entered.set()
        release.wait(10)
        dest.mkdir(parents=True)
        for target in spec.targets:
            (dest / lt.binary_name(target)).write_text("")
        (dest / lt.BUILD_INFO).write_text(json.dumps({"cpu": lt.cpu_signature()}))

    monkeypatch.setattr(lt.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(lt, "_build", fake_build)
    results: list[Path] = []
    first = threading.Thread(target=lambda: results.append(lt.ensure_tool(tmp_path, "llama-server", "9.9.9", log=lambda m: None)))
    first.start()
    assert entered.wait(10)
    second = threading.Thread(target=lambda: results.append(lt.ensure_tool(tmp_path, "llama-bench", "9.9.9", log=lambda m: None)))
    second.start()
    second.join(0.3)
    assert second.is_alive()  # waiting on the lock while the first one builds
    release.set()
    first.join(10)
    second.join(10)
    assert builds == ["llama-tools"]
    folder = lt.tool_dir(tmp_path, lt.LLAMA_TOOLS, "9.9.9")
    assert sorted(results) == sorted([folder / lt.binary_name("llama-server"), folder / lt.binary_name("llama-bench")])


def test_collect_takes_every_target_and_the_shared_libraries(tmp_path: Path) -> None:
    build = tmp_path / "build"
    (build / "bin").mkdir(parents=True)
    for target in lt.LLAMA_TOOLS.targets:
        (build / "bin" / target).write_text(target)
    (build / "bin" / "libllama.so.0.0.1").write_text("lib")
    (build / "bin" / "libllama.so").symlink_to("libllama.so.0.0.1")
    dest = tmp_path / "dest"
    dest.mkdir()
    lt.collect_build(build, dest, lt.LLAMA_TOOLS)
    assert (dest / "llama-server").read_text() == "llama-server" and (dest / "llama-cli").read_text() == "llama-cli"
    assert (dest / "libllama.so").is_symlink() and (dest / "libllama.so").read_text() == "lib"
    (dest / "llama-cli").unlink()
    (build / "bin" / "llama-cli").unlink()
    with pytest.raises(lt.LlamaToolError, match="produced no llama-cli binary"):
        lt.collect_build(build, tmp_path / "dest", lt.LLAMA_TOOLS)


def test_progress_lines_say_steps_share_and_time() -> None:
    assert lt.progress_line("[120/300] Building CXX object common/CMakeFiles/chat.cpp.o\n", 245) == "120/300 steps (40%) after 4 min"
    assert lt.progress_line("[ 45%] Building CXX object ggml.c.o", 30).endswith("after 0 min")  # make's shape, kept


def test_library_env_puts_the_tools_folder_first(tmp_path: Path) -> None:
    env = lt.library_env(tmp_path / "llama-server", {"LD_LIBRARY_PATH": "/opt/lib", "PATH": "/bin"})
    assert env["LD_LIBRARY_PATH"].split(":") == [str(tmp_path), "/opt/lib"] and env["PATH"] == "/bin"


def test_a_build_from_another_processor_is_built_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A home folder carried to a machine with another instruction set keeps a native build that
    stops there with an illegal instruction: it does not count as built, and the next call builds."""
    dest = _finished(tmp_path, "9.9.9")
    (dest / lt.BUILD_INFO).write_text(json.dumps({"cpu": "flags:sse2"}))
    assert not lt.is_built(tmp_path, version="9.9.9")
    (dest / lt.BUILD_INFO).write_text("{}")  # a build recorded before the processor was
    assert not lt.is_built(tmp_path, version="9.9.9")
    builds: list[str] = []

    def fake_build(dest: Path, spec: lt.ToolSpec, version: str, log: object) -> None:
        builds.append(version)
        (dest / lt.BUILD_INFO).write_text(json.dumps({"cpu": lt.cpu_signature()}))

    monkeypatch.setattr(lt.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(lt, "_build", fake_build)
    assert lt.ensure_tool(tmp_path, "llama-server", "9.9.9", log=lambda m: None) == dest / "llama-server"
    assert builds == ["9.9.9"] and lt.is_built(tmp_path, version="9.9.9")


def test_the_processor_signature_is_its_instruction_set() -> None:
    sig = lt.cpu_signature()
    assert sig.startswith(("flags:", "machine:")) and sig == lt.cpu_signature()
