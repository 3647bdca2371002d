"""The desktop build (packaging/): how children are started frozen or not, and the frozen app
itself, built with PyInstaller and run as a person would run it, with no Python on PATH.

The tests marked `packaging` build the app (about a minute on 2 cores) and are deselected
by the default run (pyproject's addopts); run them with
`QT_QPA_PLATFORM=offscreen .venv/bin/python -m pytest -m packaging` (packaging/build.sh installs
PyInstaller with the app's packages from packaging/requirements.lock). The others run with the suite.
"""

from __future__ import annotations

import ast
import json
import os
import select
import struct
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from app import __version__
from app.child_command import CHILD_FLAG, CHILD_MODULES, child_command
from tests.support.lock_file import LLAMA_LOCK, LOCK, applies, read_lock
from tests.support.paths import REPO_ROOT
from tests.support.tiny_model import write_tiny_gguf
from tests.support.tiny_vision import N_IMAGE_TOKENS, write_tiny_vision

ROOT = REPO_ROOT


# ---- without a build ----------------------------------------------------------------------


def test_child_command_runs_python_m_from_a_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(sys, "frozen", raising=False)
    assert child_command("app.engine.host.main") == [sys.executable, "-m", "app.engine.host.main"]


def test_child_command_reenters_the_executable_when_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert child_command("models.download.child") == [sys.executable, CHILD_FLAG, "models.download.child"]


def test_child_command_refuses_a_module_that_is_not_a_child() -> None:
    with pytest.raises(ValueError, match="not one of Cove's child processes"):
        child_command("os")


def _entry(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(ROOT / "packaging" / "entry.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


def test_entry_runs_a_child_module_with_its_own_arguments() -> None:
    # argparse in the host sees only what follows the module name: its usage names its options.
    result = _entry(CHILD_FLAG, "app.engine.host.main", "--help")
    assert result.returncode == 0, result.stderr
    assert "--in-fd" in result.stdout and "--out-fd" in result.stdout


def test_entry_refuses_an_unknown_child_in_one_sentence() -> None:
    result = _entry(CHILD_FLAG, "http.server")
    assert result.returncode == 2
    assert result.stderr.strip() == "cove: http.server is not one of Cove's child processes"


def test_entry_without_a_child_flag_is_the_cove_command() -> None:
    result = _entry("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"cove {__version__}"


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_icons_exist_at_every_size_and_in_the_windows_and_macos_containers() -> None:
    icons = ROOT / "assets" / "icons"
    for size in (16, 24, 32, 48, 64, 128, 256, 512):
        assert _png_size((icons / "png" / f"cove-{size}.png").read_bytes()) == (size, size)
    ico = (icons / "cove.ico").read_bytes()
    reserved, kind, count = struct.unpack("<HHH", ico[:6])
    assert (reserved, kind) == (0, 1)
    sizes = []
    for i in range(count):
        width, _h, _c, _r, _planes, _bpp, length, offset = struct.unpack("<BBBBHHII", ico[6 + 16 * i : 22 + 16 * i])
        sizes.append(width or 256)
        assert _png_size(ico[offset : offset + length]) == (width or 256, width or 256)
    assert sorted(sizes) == [16, 24, 32, 48, 64, 128, 256]
    icns = (icons / "cove.icns").read_bytes()
    assert icns[:4] == b"icns" and struct.unpack(">I", icns[4:8])[0] == len(icns)
    pos, kinds = 8, {}
    while pos < len(icns):
        kind, length = icns[pos : pos + 4], struct.unpack(">I", icns[pos + 4 : pos + 8])[0]
        kinds[kind] = _png_size(icns[pos + 8 : pos + length])[0]
        pos += length
    assert kinds == {b"icp4": 16, b"icp5": 32, b"icp6": 64, b"ic07": 128, b"ic08": 256, b"ic09": 512, b"ic10": 1024}


def _desktop_entry(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    assert lines[0] == "[Desktop Entry]"
    return dict(line.split("=", 1) for line in lines[1:] if line and not line.startswith("#"))


def test_install_desktop_puts_the_entry_and_icons_in_the_users_menu(tmp_path: Path) -> None:
    target = tmp_path / "Apps With Space" / "cove"
    target.parent.mkdir()
    target.write_text("#!/bin/sh\n")
    target.chmod(0o755)
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "share")}
    script = ROOT / "packaging" / "install-desktop.sh"
    result = subprocess.run(["bash", str(script), "--exec", str(target)], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    entry = _desktop_entry(tmp_path / "share" / "applications" / "cove.desktop")
    assert entry["Exec"] == f'"{target}"' and entry["TryExec"] == str(target)
    assert entry["Icon"] == "cove" and entry["Type"] == "Application" and entry["Name"] == "Cove"
    hicolor = tmp_path / "share" / "icons" / "hicolor"
    for size in (16, 24, 32, 48, 64, 128, 256, 512):
        assert _png_size((hicolor / f"{size}x{size}" / "apps" / "cove.png").read_bytes()) == (size, size)
    assert (hicolor / "scalable" / "apps" / "cove.svg").read_bytes() == (ROOT / "assets" / "icons" / "cove.svg").read_bytes()

    removed = subprocess.run(["bash", str(script), "--uninstall"], capture_output=True, text=True, env=env, timeout=60)
    assert removed.returncode == 0, removed.stderr
    left = sorted(p.name for p in (tmp_path / "share").rglob("*") if p.is_file())
    assert "cove.desktop" not in left and "cove.png" not in left and "cove.svg" not in left


def test_install_desktop_refuses_a_missing_executable_in_one_sentence(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "share")}
    result = subprocess.run(
        ["bash", str(ROOT / "packaging" / "install-desktop.sh"), "--exec", str(tmp_path / "nowhere" / "cove")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("install-desktop: no cove executable found")
    assert not (tmp_path / "share" / "applications").exists()


# ---- the frozen app -------------------------------------------------------------------------


@pytest.fixture()
def no_python_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH holds only decoy `python` commands that record any call."""
    decoys = tmp_path / "bin"
    decoys.mkdir()
    for name in ("python", "python3", "python3.11"):
        decoy = decoys / name
        decoy.write_text(f"#!/bin/sh\necho \"$0 $*\" >> '{tmp_path / 'python-was-run'}'\nexit 97\n")
        decoy.chmod(0o755)
    (tmp_path / "home").mkdir()
    return {
        "PATH": str(decoys),
        "HOME": str(tmp_path / "home"),
        "COVE_HOME": str(tmp_path / "cove"),
        "LANG": "C.UTF-8",
        "QT_QPA_PLATFORM": "offscreen",
    }


def _python_was_run(env: dict[str, str]) -> str:
    record = Path(env["PATH"]).parent / "python-was-run"
    return record.read_text() if record.exists() else ""


@pytest.mark.packaging
@pytest.mark.timeout(1800)
def test_frozen_version(frozen: Path, no_python_env: dict[str, str]) -> None:
    result = subprocess.run([frozen / "cove", "--version"], capture_output=True, text=True, env=no_python_env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"cove {__version__}"
    assert _python_was_run(no_python_env) == ""


@pytest.mark.packaging
@pytest.mark.timeout(1800)
def test_frozen_chat_replies(frozen: Path, no_python_env: dict[str, str], tmp_path: Path) -> None:
    model = tmp_path / "tiny.gguf"
    write_tiny_gguf(model)
    result = subprocess.run(
        [frozen / "cove", "chat", "--model", str(model), "--max-tokens", "8", "--seed", "1", "--json", "hi"],
        capture_output=True,
        text=True,
        env=no_python_env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    reply = json.loads(result.stdout)
    assert reply["status"] in ("complete", "length")
    assert reply["metrics"]["gen_tokens"] >= 1
    assert reply["metrics"]["engine_uss_bytes"] > 0  # measured on the engine host process
    assert _python_was_run(no_python_env) == ""
    shown = subprocess.run(
        [frozen / "cove", "history", "show", reply["conversation_id"]],
        capture_output=True,
        text=True,
        env=no_python_env,
        timeout=60,
    )
    assert shown.returncode == 0 and "hi" in shown.stdout


@pytest.mark.packaging
@pytest.mark.timeout(1800)
def test_frozen_hub_search_reaches_the_endpoint(frozen: Path, no_python_env: dict[str, str], fake_hub, tmp_path: Path) -> None:
    """The Hub stack (huggingface_hub, httpx2, certifi, keyring looked up for a token) works
    frozen, and the curated catalog (a data file) is bundled."""
    fake_hub.add_repo("bartowski/Qwen2.5-7B-Instruct-GGUF", {"Qwen2.5-7B-Instruct-Q4_K_M.gguf": b"q" * 400}, downloads=900)
    env = {**no_python_env, "HF_ENDPOINT": fake_hub.url, "HF_HOME": str(tmp_path / "hf_home")}
    result = subprocess.run(
        [frozen / "cove", "models", "search", "qwen", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["catalog"], "the catalog has Qwen models"
    assert [m["repo_id"] for m in data["hub"]] == ["bartowski/Qwen2.5-7B-Instruct-GGUF"]
    assert {r.host.split(":")[0] for r in fake_hub.requests} == {"127.0.0.1"}
    assert _python_was_run(no_python_env) == ""


def _read_until(fd: int, marker: bytes, seen: bytearray, timeout_s: float, count: int = 1) -> None:
    """Read the terminal into `seen` until `marker` occurs `count` times in it."""
    deadline = time.monotonic() + timeout_s
    while seen.count(marker) < count:
        left = deadline - time.monotonic()
        assert left > 0, f"no {marker!r} in {bytes(seen)[-600:]!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the terminal closed: the program ended
                chunk = b""
            assert chunk, f"the program ended before {marker!r}: {bytes(seen)[-600:]!r}"
            seen += chunk


@pytest.mark.packaging
@pytest.mark.timeout(1800)
def test_frozen_engine_host_is_the_frozen_executable(frozen: Path, no_python_env: dict[str, str], tmp_path: Path) -> None:
    """An interactive chat keeps its engine host running between turns: look at that child."""
    model = tmp_path / "tiny.gguf"
    write_tiny_gguf(model)
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [frozen / "cove", "chat", "--model", str(model), "--max-tokens", "4", "--seed", "1"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=no_python_env,
        start_new_session=True,
    )
    os.close(slave)
    try:
        seen = bytearray()
        _read_until(master, b"you> ", seen, 60)
        os.write(master, b"hi\n")
        _read_until(master, b"you> ", seen, 120, count=2)  # the reply, its metrics line, the next prompt
        assert b" tok at " in seen
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) == 1, [c.cmdline() for c in children]
        host = children[0]
        assert Path(host.exe()).resolve() == (frozen / "cove").resolve()
        assert host.cmdline()[1:3] == [CHILD_FLAG, "app.engine.host.main"]
        assert "--in-fd" in host.cmdline() and "--out-fd" in host.cmdline()  # the pipes it was passed
        os.write(master, b"\x04")  # Ctrl-D at the prompt: leave
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert _python_was_run(no_python_env) == ""


@pytest.mark.packaging
@pytest.mark.timeout(1800)
def test_frozen_window_opens_offscreen_and_closes(frozen: Path, no_python_env: dict[str, str]) -> None:
    env = {**no_python_env, "COVE_QUIT_AFTER_MS": "1500", "COVE_REPORT_STARTUP": "1"}
    result = subprocess.run([frozen / "cove"], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "cove: window shown" in result.stderr  # printed at the window's first paint
    assert "Traceback" not in result.stderr
    assert _python_was_run(no_python_env) == ""


@pytest.mark.packaging
@pytest.mark.timeout(1800)
def test_frozen_app_reads_every_kind_of_document(frozen: Path, no_python_env: dict[str, str], tmp_path: Path) -> None:
    """pypdf, PDFium (pypdfium2), python-docx (lxml), charset-normalizer and the readers are in the build and read."""
    from tests.support.docs_corpus import write_corpus

    corpus = write_corpus(tmp_path / "papers", bad=False)
    added = subprocess.run(
        [frozen / "cove", "docs", "add", "papers", str(corpus.root)], capture_output=True, text=True, env=no_python_env, timeout=300
    )
    assert added.returncode == 0, added.stderr
    assert "could not be read" not in added.stdout, added.stdout
    for fact in corpus.facts:
        found = subprocess.run(
            [frozen / "cove", "docs", "search", "papers", fact.text, "--json"],
            capture_output=True,
            text=True,
            env=no_python_env,
            timeout=120,
        )
        assert found.returncode == 0, found.stderr
        hits = json.loads(found.stdout)
        assert any(h["path"].endswith(fact.path) and h["page"] == fact.page for h in hits), (fact, hits[:2])
    assert _python_was_run(no_python_env) == ""


@pytest.mark.packaging
@pytest.mark.timeout(1800)
def test_frozen_build_holds_only_what_cove_uses(frozen: Path) -> None:
    internal = frozen / "_internal"
    libs = sorted(p.name for p in (internal / "llama_cpp" / "lib").iterdir())
    assert {"libllama.so", "libggml.so", "libggml-base.so"} <= set(libs)
    # The portable build: no CPU library built for one CPU, one per x86-64 level instead.
    assert "libggml-cpu.so" not in libs
    assert {"libggml-cpu-x64.so", "libggml-cpu-sse42.so", "libggml-cpu-haswell.so"} <= set(libs)
    assert not [name for name in libs if name.count(".so.") and name.split(".so.")[1].count(".")]  # no libX.so.0.25.3 copies
    bindings = sorted(p.name.split(".")[0] for p in (internal / "PySide6").glob("Qt*.so"))
    assert bindings == ["QtCore", "QtGui", "QtWidgets"]
    qt_libs = {p.name.split(".")[0] for p in (internal / "PySide6" / "Qt" / "lib").iterdir()}
    unwanted = {
        "libQt6Network",
        "libQt6Qml",
        "libQt6Quick",
        "libQt6Pdf",
        "libQt6WebEngineCore",
        "libQt6Multimedia",
        "libQt6OpenGL",
        "libQt6VirtualKeyboard",
    }
    assert not qt_libs & unwanted
    assert not (internal / "PySide6" / "Qt" / "translations").exists()
    plugins = internal / "PySide6" / "Qt" / "plugins"
    assert (plugins / "platforms" / "libqoffscreen.so").is_file() and (plugins / "platforms" / "libqxcb.so").is_file()
    assert not (plugins / "imageformats").exists() and not (plugins / "tls").exists()
    # The pure-Python modules in the archive: none of the test tools.
    toc = ast.literal_eval((frozen.parents[1] / "work" / "cove" / "PYZ-00.toc").read_text())
    top = {name.split(".")[0] for name, _path, _kind in toc[1]}
    assert {"app", "models", "ui", "llama_cpp", "keyring"} <= top
    assert not top & {"pytest", "_pytest", "hypothesis", "pytestqt", "tests", "PyInstaller", "tkinter"}
    assert set(CHILD_MODULES) <= {name for name, _path, _kind in toc[1]}


@pytest.mark.packaging
@pytest.mark.timeout(1800)
def test_frozen_build_is_made_from_the_lock_files(frozen: Path) -> None:
    """Its third-party code comes from build/venv, whose packages are exactly the lock's lines for
    this platform (plus llama.cpp's wheel), and the metadata it ships names the locked versions."""
    venv = ROOT / "build" / "venv"
    listed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"], capture_output=True, text=True, timeout=120, check=True
    )
    installed = {canonicalize_name(p["name"]): Version(p["version"]) for p in json.loads(listed.stdout)}
    locked = {e.name: e.version for e in read_lock(LOCK.read_text()) if applies(e, "3.11")}
    (llama,) = read_lock(LLAMA_LOCK.read_text())
    assert installed == {**locked, llama.name: llama.version}
    toc = ast.literal_eval((frozen.parents[1] / "work" / "cove" / "PYZ-00.toc").read_text())
    sources = {name.split(".")[0]: Path(path) for name, path, _kind in toc[1] if path}
    site = venv.resolve() / "lib"
    for module in ("huggingface_hub", "keyring", "starlette", "llama_cpp", "PySide6", "numpy"):
        assert sources[module].resolve().is_relative_to(site), f"{module} came from {sources[module]}"
    shipped = {
        canonicalize_name(name): Version(version)
        for name, version in (d.name.removesuffix(".dist-info").rsplit("-", 1) for d in (frozen / "_internal").glob("*.dist-info"))
    }
    assert shipped["huggingface-hub"] == locked["huggingface-hub"] and shipped["httpx2"] == locked["httpx2"]


@pytest.mark.packaging
@pytest.mark.timeout(1800)
def test_frozen_build_installs_itself_in_the_menu(frozen: Path, tmp_path: Path) -> None:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "share")}
    result = subprocess.run(["bash", str(frozen / "install-desktop.sh")], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    entry = _desktop_entry(tmp_path / "share" / "applications" / "cove.desktop")
    assert Path(entry["TryExec"]).resolve() == (frozen / "cove").resolve()
    assert (tmp_path / "share" / "icons" / "hicolor" / "48x48" / "apps" / "cove.png").is_file()


@pytest.mark.packaging
@pytest.mark.timeout(1800)
def test_frozen_serve_answers_an_openai_request(frozen: Path, no_python_env: dict[str, str], tmp_path: Path) -> None:
    """uvicorn, starlette and anyio load their parts by name; the frozen app has them all, and
    Pillow, which reads an image part, and libmtmd, which opens a vision model's projector."""
    import base64
    import io
    import socket
    import time

    import httpx
    import PIL.Image

    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    imported = subprocess.run(
        [frozen / "cove", "models", "import", str(model)], capture_output=True, text=True, env=no_python_env, timeout=120
    )
    assert imported.returncode == 0, imported.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([frozen / "cove", "serve", "--port", str(port)], env=no_python_env, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(600):
            try:
                httpx.get(f"{base}/models", timeout=2)
                break
            except httpx.HTTPError:
                assert server.poll() is None, server.stderr.read().decode()[-3000:] if server.stderr else ""
                time.sleep(0.1)
        reply = httpx.post(
            f"{base}/chat/completions",
            timeout=120,
            json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["usage"]["completion_tokens"] >= 1
        # An image is decoded by Pillow inside the frozen app before the model is asked to see it.
        picture = io.BytesIO()
        PIL.Image.new("RGB", (24, 16), (200, 30, 30)).save(picture, "PNG")
        url = "data:image/png;base64," + base64.b64encode(picture.getvalue()).decode()
        image = {"type": "image_url", "image_url": {"url": url}}
        seen = httpx.post(
            f"{base}/chat/completions",
            timeout=120,
            json={"model": "tiny", "messages": [{"role": "user", "content": [{"type": "text", "text": "What is it?"}, image]}]},
        )
        assert seen.status_code == 400 and seen.json()["error"]["code"] == "model_not_vision", seen.text
        # A vision model: libmtmd opens its projector in the frozen engine, and the image is read.
        text, mmproj = write_tiny_vision(tmp_path / "vision")
        paired = subprocess.run(
            [frozen / "cove", "models", "import", str(text), "--mmproj", str(mmproj)],
            capture_output=True,
            text=True,
            env=no_python_env,
            timeout=120,
        )
        assert paired.returncode == 0, paired.stderr
        answered = httpx.post(
            f"{base}/chat/completions",
            timeout=120,
            json={
                "model": "text_model",
                "max_tokens": 2,
                "messages": [{"role": "user", "content": [image, {"type": "text", "text": "What?"}]}],
            },
        )
        assert answered.status_code == 200, answered.text
        assert answered.json()["timings"]["image_tokens"] == N_IMAGE_TOKENS
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert _python_was_run(no_python_env) == ""


@pytest.mark.packaging
@pytest.mark.timeout(1800)
def test_frozen_tools_reach_an_mcp_server(frozen: Path, no_python_env: dict[str, str], tmp_path: Path) -> None:
    """The `mcp` SDK's client, its pydantic models and its JSON Schema data work in the frozen app:
    a tool server of the test suite's own (run by this Python, named by its full path) answers."""
    from tests.app.mcp.conftest import FAULT_SERVER

    calls_file = tmp_path / "calls.txt"
    added = subprocess.run(
        [frozen / "cove", "tools", "add", "fault", "--", sys.executable, str(FAULT_SERVER), str(calls_file)],
        capture_output=True,
        text=True,
        env=no_python_env,
        timeout=60,
    )
    assert added.returncode == 0, added.stderr
    listed = subprocess.run([frozen / "cove", "tools", "list"], capture_output=True, text=True, env=no_python_env, timeout=180)
    assert listed.returncode == 0 and "- echo: Echo the text back." in listed.stdout, listed.stdout + listed.stderr
    called = subprocess.run(
        [frozen / "cove", "tools", "call", "fault", "echo", '{"text": "frozen hi"}', "--allow-tools"],
        capture_output=True,
        text=True,
        env=no_python_env,
        timeout=180,
    )
    assert called.returncode == 0 and called.stdout == "frozen hi\n", called.stderr
    assert calls_file.read_text().split() == ["echo"]
    assert _python_was_run(no_python_env) == ""  # the decoys: the server ran from its full path, Cove from itself
