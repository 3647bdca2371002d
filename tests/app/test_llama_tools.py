"""Building llama.cpp's tools (app/speed/llama_tools.py): each tool's configure and targets, the
cache that answers without building, a partial folder that does not count as built, and two
callers at once building once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app.speed import llama_tools as lt


def _finished(tools_dir: Path, spec: lt.ToolSpec, version: str, targets: tuple[str, ...] | None = None) -> Path:
    dest = lt.tool_dir(tools_dir, spec, version)
    dest.mkdir(parents=True)
    for target in spec.targets if targets is None else targets:
        (dest / lt.binary_name(target)).write_text("")
    (dest / lt.BUILD_INFO).write_text("{}")
    return dest


def test_the_server_configure_is_the_engines_with_the_server_on_and_no_ui_download(tmp_path: Path) -> None:
    env = {"CMAKE_ARGS": "-DGGML_NATIVE=OFF"}
    server = lt.cmake_args(tmp_path / "src", tmp_path / "build", lt.LLAMA_SERVER, env)
    bench = lt.cmake_args(tmp_path / "src", tmp_path / "build", lt.LLAMA_BENCH, env)
    assert "-DLLAMA_BUILD_SERVER=ON" in server and "-DLLAMA_BUILD_SERVER=OFF" in bench
    # the web UI is neither built with npm nor fetched from a bucket during the build
    assert "-DLLAMA_USE_PREBUILT_UI=OFF" in server and "-DLLAMA_BUILD_UI=OFF" in server
    # everything that decides ggml's code is the same for both
    assert [a for a in server if a not in lt.LLAMA_SERVER.options] == [a for a in bench if a not in lt.LLAMA_BENCH.options]
    assert server[-1] == "-DGGML_NATIVE=OFF"  # $CMAKE_ARGS last, as scikit-build-core passes it


def test_a_finished_server_build_is_returned_without_building(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dest = _finished(tmp_path, lt.LLAMA_SERVER, "9.9.9")
    monkeypatch.setattr(lt.subprocess, "run", lambda *a, **k: pytest.fail("must not download"))
    monkeypatch.setattr(lt.subprocess, "Popen", lambda *a, **k: pytest.fail("must not build"))
    assert lt.ensure_tool(tmp_path, lt.LLAMA_SERVER, "9.9.9", log=lambda m: None) == dest / lt.binary_name("llama-server")
    assert lt.is_built(tmp_path, lt.LLAMA_SERVER, "9.9.9")


def test_a_folder_missing_one_of_the_tools_binaries_is_not_a_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _finished(tmp_path, lt.LLAMA_SERVER, "9.9.9", targets=("llama-server",))  # no llama-cli
    assert not lt.is_built(tmp_path, lt.LLAMA_SERVER, "9.9.9")
    monkeypatch.setattr(lt.shutil, "which", lambda name: None)
    with pytest.raises(lt.LlamaToolError, match="cmake is not installed, so llama-server cannot be built"):
        lt.ensure_tool(tmp_path, lt.LLAMA_SERVER, "9.9.9", log=lambda m: None)


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
        (dest / lt.BUILD_INFO).write_text("{}")

    monkeypatch.setattr(lt.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(lt, "_build", fake_build)
    results: list[Path] = []
    first = threading.Thread(target=lambda: results.append(lt.ensure_tool(tmp_path, lt.LLAMA_SERVER, "9.9.9", log=lambda m: None)))
    first.start()
    assert entered.wait(10)
    second = threading.Thread(target=lambda: results.append(lt.ensure_tool(tmp_path, lt.LLAMA_SERVER, "9.9.9", log=lambda m: None)))
    second.start()
    second.join(0.3)
    assert second.is_alive()  # waiting on the lock while the first one builds
    release.set()
    first.join(10)
    second.join(10)
    assert builds == ["llama-server"]
    assert results == [lt.tool_dir(tmp_path, lt.LLAMA_SERVER, "9.9.9") / lt.binary_name("llama-server")] * 2


def test_collect_takes_every_target_and_the_shared_libraries(tmp_path: Path) -> None:
    build = tmp_path / "build"
    (build / "bin").mkdir(parents=True)
    (build / "bin" / "llama-server").write_text("server")
    (build / "bin" / "llama-cli").write_text("cli")
    (build / "bin" / "libllama.so.0.0.1").write_text("lib")
    (build / "bin" / "libllama.so").symlink_to("libllama.so.0.0.1")
    dest = tmp_path / "dest"
    dest.mkdir()
    lt._collect(build, dest, lt.LLAMA_SERVER)
    assert (dest / "llama-server").read_text() == "server" and (dest / "llama-cli").read_text() == "cli"
    assert (dest / "libllama.so").is_symlink() and (dest / "libllama.so").read_text() == "lib"
    (dest / "llama-cli").unlink()
    (build / "bin" / "llama-cli").unlink()
    with pytest.raises(lt.LlamaToolError, match="produced no llama-cli binary"):
        lt._collect(build, tmp_path / "dest", lt.LLAMA_SERVER)


def test_library_env_puts_the_tools_folder_first(tmp_path: Path) -> None:
    env = lt.library_env(tmp_path / "llama-server", {"LD_LIBRARY_PATH": "/opt/lib", "PATH": "/bin"})
    assert env["LD_LIBRARY_PATH"].split(":") == [str(tmp_path), "/opt/lib"] and env["PATH"] == "/bin"
