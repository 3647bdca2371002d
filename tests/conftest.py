"""Shared fixtures: tiny random-weight GGUF models that real llama.cpp loads in milliseconds; and,
before Qt starts, the suite's own CJK fallback font."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cjk_font import write_fontconfig

# Every Qt test runs without a display; set once, before any test module creates the application.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# Qt draws CJK text with the suite's own fallback font (tests/support/cjk_font.py), the only CJK
# font the tests see, whatever the machine has installed. Qt on Linux takes its fonts and its
# fallback fonts from fontconfig, which reads FONTCONFIG_FILE once, when Qt creates the
# application (pytest-qt's qapp fixture, after this hook); the child processes the tests start
# inherit it with the rest of the environment. (QFontDatabase.addApplicationFont would reach
# this process only, and would leave a system CJK font ahead of it among the fallbacks.)
_FONTS = pytest.StashKey[tuple[Path, str | None]]()


def pytest_configure(config: pytest.Config) -> None:
    directory = Path(tempfile.mkdtemp(prefix="cove-test-fonts-"))
    config.stash[_FONTS] = (directory, os.environ.get("FONTCONFIG_FILE"))
    os.environ["FONTCONFIG_FILE"] = str(write_fontconfig(directory))


def pytest_unconfigure(config: pytest.Config) -> None:
    directory, before = config.stash.get(_FONTS, (None, None))
    if directory is None:
        return
    if before is None:
        os.environ.pop("FONTCONFIG_FILE", None)
    else:
        os.environ["FONTCONFIG_FILE"] = before
    shutil.rmtree(directory, ignore_errors=True)


# Tests never touch the developer's real keyring: the default is keyring's fail backend (no
# storage, like a headless machine); tests that need storage set an in-memory backend.
os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")

# Tests press Ctrl+C on child processes (SIGINT). A shell that runs the suite in the background
# (`cmd &` without job control) starts it with SIGINT ignored, children inherit that, and
# Python then installs no KeyboardInterrupt handler: those tests would hang. Children of a
# process with a handler start with the default disposition instead.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

pytest_plugins = [
    "tests.support.models_panel",  # the Models panel fixtures (hub, panel, served_bytes)
    "tests.support.llama_tools_build",  # llama.cpp's tools, built once before the tests that use them
    "tests.support.real_models",  # real instruct models, fetched once before the tests that use them
    "pytester",  # runs a pytest session inside a test (tests/app/speed/test_llama_tools_build.py)
]

from tests.support.tiny_model import write_tiny_gguf  # noqa: E402  (after the SIGINT fix-up above)

# A chatml template as Qwen-style models ship it (the tiny vocab gets its two special tokens).
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CHATML_TOKENS = ("<|im_start|>", "<|im_end|>")


@pytest.fixture(autouse=True)
def _umask_kept() -> Iterator[None]:
    """Each test starts with the suite's umask: `cove`'s main, called in-process, sets its own
    (app/private_files.py), and a later test must not depend on which ran before it."""
    before = os.umask(0o022)
    os.umask(before)
    yield
    os.umask(before)


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny llama model with no chat template (so the engine uses its plain fallback)."""
    return write_tiny_gguf(tmp_path_factory.mktemp("models") / "tiny-llama.gguf")


@pytest.fixture(scope="session")
def tiny_gguf_with_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with a chatml chat template and the <|im_start|>/<|im_end|> tokens."""
    return write_tiny_gguf(
        tmp_path_factory.mktemp("models") / "tiny-chatml.gguf",
        chat_template=CHATML_TEMPLATE,
        extra_tokens=CHATML_TOKENS,
    )


FAKE_HOST = Path(__file__).resolve().parent / "support" / "fake_host.py"


@pytest.fixture
def cove_core(tmp_path: Path, tiny_gguf: Path):
    """A Core (history, library, settings) under a temporary COVE_HOME, with the tiny model
    registered and chosen, so window tests never pick up the starter model."""
    from app.core import open_core
    from app.paths import resolve_paths

    core = open_core(resolve_paths({"COVE_HOME": str(tmp_path / "home")}))
    model = core.library.import_file(tiny_gguf)
    core.remember_model(model)
    yield core
    core.close()


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch):
    """An EngineClient whose host is the scripted fake host (real pipe protocol, no llama.cpp).
    Steer it with FAKE_HOST_TPS / FAKE_HOST_WORDS (monkeypatch.setenv before the first turn)."""
    import sys

    from app.engine.client import EngineClient

    client = EngineClient(host_argv=[sys.executable, str(FAKE_HOST)], cancel_grace_s=1.0)
    yield client
    client.close()


@pytest.fixture
def fake_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A local fake Hub on 127.0.0.1 (CDN on 127.0.0.2) reached through HF_ENDPOINT.
    Add repos with `fake_hub.add_repo(...)`, faults with `fake_hub.set_fault(...)`,
    and read `fake_hub.requests` to see what reached which host."""
    from tests.support.fake_hub import FakeHub

    hub = FakeHub().start()
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.delenv("COVE_OFFLINE", raising=False)
    yield hub
    hub.stop()
