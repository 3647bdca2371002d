"""Shared set-up for the Models panel tests: a tiny GGUF served by the fake Hub, the panel
built with an in-memory keyring and a fast transfer policy, and steps a person takes in it."""

from __future__ import annotations

import pytest

from app.downloads import DownloadManager
from app.hub_token import MemoryToken, TokenStore
from models.download.protocol import TransferPolicy
from tests.support.keyrings import InMemoryKeyring
from tests.support.tiny_model import write_tiny_gguf
from ui.models_panel.download_bridge import DownloadBridge
from ui.models_panel.hub_worker import HubWorker
from ui.models_panel.panel import ModelsPanel

REPO = "org/tiny-GGUF"
FILE = "tiny-Q8_0.gguf"
WAIT_MS = 60_000
FAST = TransferPolicy(stall_timeout=1.0, connect_timeout=5.0, max_attempts=4, backoff_base=0.05, backoff_max=0.2, progress_interval=0.05)
PATIENT = TransferPolicy(
    stall_timeout=60.0, connect_timeout=5.0, max_attempts=4, backoff_base=0.05, backoff_max=0.2, progress_interval=0.05
)


@pytest.fixture(scope="session")
def served_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A real tiny GGUF (about 1.5 MB with its extra tokens) for the fake Hub to serve."""
    path = tmp_path_factory.mktemp("served") / "tiny.gguf"
    return write_tiny_gguf(path, extra_tokens=[f"<x{i}>" for i in range(2000)]).read_bytes()


class Confirmations:
    """Stands in for the confirmation dialog: records each question and answers `answer`."""

    def __init__(self, answer: bool = True) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str]] = []

    def __call__(self, title: str, question: str) -> bool:
        self.asked.append((title, question))
        return self.answer


def make_panel(qtbot, core, policy: TransferPolicy = FAST, keyring=None, confirm=None):
    store = TokenStore(keyring or InMemoryKeyring(), MemoryToken())
    worker = HubWorker(core.network, store.get)
    bridge = DownloadBridge(DownloadManager.for_core(core, policy=policy), store.get)
    panel = ModelsPanel(core, worker, bridge, store, confirm=confirm or Confirmations())
    qtbot.addWidget(panel)
    panel.show()
    return panel


@pytest.fixture
def hub(fake_hub, served_bytes):
    fake_hub.add_repo(
        REPO, {FILE: served_bytes, "tiny-Q4_K_M.gguf": served_bytes[:-1] + b"\0", "README.md": b"hi"}, downloads=500, likes=7, license="mit"
    )
    return fake_hub


@pytest.fixture
def panel(qtbot, cove_core, hub):
    p = make_panel(qtbot, cove_core)
    yield p
    p.downloads.shutdown()


def list_repo(qtbot, panel: ModelsPanel, repo: str = REPO) -> None:
    panel.choose_repo(repo)
    qtbot.waitUntil(lambda: panel.files_view.listing() is not None and panel.files_view.listing().repo_id == repo, timeout=WAIT_MS)


def choose_file(qtbot, panel: ModelsPanel, name: str) -> None:
    row = [r[0] for r in panel.files_view.rows()].index(name)
    panel.files_view.choose(row)
    qtbot.waitUntil(lambda: panel.files_view.fit_text().lower().startswith(("fits", "too large")), timeout=WAIT_MS)
