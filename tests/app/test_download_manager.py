"""Downloads end to end against the fake Hub: the real child process, its retries, resume
across processes, verification, the token's path, the preflight, split models, pause,
resume and cancel."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
from collections import namedtuple
from dataclasses import replace
from pathlib import Path

import pytest

from app.core import open_core
from app.downloads import DownloadHandle, DownloadManager, resumable
from app.paths import resolve_paths
from models.download import partial
from models.download.protocol import (
    Cancelled,
    DownloadEvent,
    Failed,
    Finished,
    Paused,
    Planned,
    Progress,
    Retrying,
    Started,
    TransferPolicy,
)
from models.network import NetworkRefused
from tests.support.fake_hub import COMMIT, VALID_TOKEN, FakeHub, Fault, sha256_hex
from tests.support.paths import REPO_ROOT
from tests.support.tiny_model import write_tiny_gguf

REPO = "org/tiny-GGUF"
FILE = "tiny-Q8_0.gguf"
SPLIT = tuple(f"tiny-Q8_0-0000{i}-of-00003.gguf" for i in (1, 2, 3))

# Short waits between retries. Stalls time out only after 60 s (so a busy machine never
# looks like a stall and a test can stop a child held mid-file), except in the stall test.
FAST = TransferPolicy(stall_timeout=60.0, connect_timeout=5.0, max_attempts=4, backoff_base=0.05, backoff_max=0.2, progress_interval=0.05)
WAIT_S = 60.0


@pytest.fixture(scope="session")
def model_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A real (tiny) GGUF of about 5 MB: 8000 extra tokens make its embedding table big."""
    path = tmp_path_factory.mktemp("served") / "tiny.gguf"
    return write_tiny_gguf(path, extra_tokens=[f"<x{i}>" for i in range(8000)]).read_bytes()


@pytest.fixture(scope="session")
def split_bytes(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes, bytes]:
    """Three distinct parts; part 1 is a valid GGUF (the library validates the file it loads)."""
    first = write_tiny_gguf(tmp_path_factory.mktemp("split") / "part1.gguf", seed=1).read_bytes()
    rng = random.Random(7)
    return first, rng.randbytes(300_000), rng.randbytes(200_000)


@pytest.fixture
def core(tmp_path: Path):
    c = open_core(resolve_paths({"COVE_HOME": str(tmp_path / "home")}))
    yield c
    c.close()


Downloads = namedtuple("Downloads", "manager core hub")


def make_manager(core, policy: TransferPolicy = FAST) -> DownloadManager:
    return DownloadManager.for_core(core, policy=policy)


@pytest.fixture
def dl(core, fake_hub: FakeHub, model_bytes: bytes):
    fake_hub.add_repo(REPO, {FILE: model_bytes})
    manager = make_manager(core)
    yield Downloads(manager, core, fake_hub)
    manager.shutdown()


class Recorder:
    """Collects a handle's events; `reached(n)` is set once `n` bytes are on disk."""

    def __init__(self, reach: int | None = None) -> None:
        self.events: list[DownloadEvent] = []
        self.reached = threading.Event()
        self._reach = reach

    def __call__(self, event: DownloadEvent) -> None:
        self.events.append(event)
        if self._reach is not None and isinstance(event, Progress) and event.bytes_done >= self._reach:
            self.reached.set()

    def of(self, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind)]


def run(
    manager: DownloadManager, files=(FILE,), repo: str = REPO, token: str | None = None
) -> tuple[DownloadHandle, Recorder, DownloadEvent]:
    rec = Recorder()
    handle = manager.start(repo, list(files), None, token, rec)
    last = handle.wait(WAIT_S)
    assert last is not None, "the download did not end"
    return handle, rec, last


def stalled(manager: DownloadManager, at: int, files=(FILE,)) -> tuple[DownloadHandle, Recorder]:
    """A download whose server stops sending after `at` bytes (and holds the connection)."""
    rec = Recorder(reach=at)
    handle = manager.start(REPO, list(files), None, None, rec)
    assert rec.reached.wait(WAIT_S), "the first bytes never arrived"
    return handle, rec


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


# -- the normal path --------------------------------------------------------------------------


def test_download_is_verified_moved_and_registered(dl, model_bytes):
    handle, rec, last = run(dl.manager)
    assert isinstance(last, Finished), last
    assert handle.state == "finished"
    model = dl.manager.register(last)
    assert model.sha256 == sha256_hex(model_bytes)
    assert (model.repo, model.file, model.revision, model.source) == (REPO, FILE, COMMIT, "download")
    assert Path(model.path) == dl.core.models_dir / FILE
    assert Path(model.path).read_bytes() == model_bytes
    assert files_in(dl.core.paths.partial_downloads_dir) == []  # nothing left behind
    assert rec.of(Started)[0].total == len(model_bytes)
    progress = rec.of(Progress)
    assert progress[-1].bytes_done == len(model_bytes)
    assert all(p.bytes_done <= p.total for p in progress)
    # Only the file itself was asked for: no telemetry side call, and the GET is pinned to the commit.
    assert {r.method for r in dl.hub.requests} == {"HEAD", "GET"}
    assert all(f"/resolve/{COMMIT}/" in r.path for r in dl.hub.requests_for(FILE, "GET"))


def test_register_again_returns_the_same_entry(dl):
    _, _, last = run(dl.manager)
    first = dl.manager.register(last)
    assert dl.manager.register(last) == first
    assert dl.manager.find_installed(REPO, FILE) == first
    assert dl.manager.find_installed(REPO, FILE, revision="f" * 40) is None
    assert dl.manager.find_installed("x/y", "z.gguf", sha256=first.sha256) == first  # the same bytes
    assert dl.manager.find_installed(REPO, FILE, sha256="0" * 64) is None  # the Hub's file changed
    Path(first.path).unlink()
    assert dl.manager.find_installed(REPO, FILE) is None


def test_a_download_into_a_chosen_models_folder_is_cove_s_to_delete(dl, tmp_path):
    dl.core.set_models_dir(tmp_path / "elsewhere")
    _, _, last = run(dl.manager)
    assert isinstance(last, Finished), last
    model = dl.manager.register(last)
    assert Path(model.path) == tmp_path / "elsewhere" / FILE
    dl.core.library.remove(model.name, delete_file=True)
    assert not Path(model.path).exists()


# -- faults -----------------------------------------------------------------------------------


def test_dropped_connection_is_retried_from_where_it_stopped(dl, model_bytes):
    dl.hub.set_fault(REPO, FILE, Fault(drop_after=1_000_000, times=1))
    _, rec, last = run(dl.manager)
    assert isinstance(last, Finished), last
    assert [r.reason for r in rec.of(Retrying)] == ["the connection dropped"]
    gets = dl.hub.requests_for(FILE, "GET")
    assert [g.range_start for g in gets] == [None, 1_000_000]
    assert Path(last.path).read_bytes() == model_bytes
    assert all(p.bytes_done <= p.total for p in rec.of(Progress))


def test_server_ignoring_the_range_restarts_the_file_from_zero(dl, model_bytes):
    dl.hub.set_fault(REPO, FILE, Fault(drop_after=1_000_000, times=1, ignore_range=True))
    _, rec, last = run(dl.manager)
    assert isinstance(last, Finished), last
    assert [g.range_start for g in dl.hub.requests_for(FILE, "GET")] == [None, 1_000_000]  # answered with 200
    assert Path(last.path).read_bytes() == model_bytes
    assert all(p.bytes_done <= p.total for p in rec.of(Progress))


def test_child_killed_mid_file_resumes_in_a_new_process(dl, model_bytes):
    dl.hub.set_fault(REPO, FILE, Fault(stall_after=2_000_000, stall_s=60, times=1))
    handle, _ = stalled(dl.manager, 2_000_000)
    os.kill(handle.pid, signal.SIGKILL)
    last = handle.wait(WAIT_S)
    assert isinstance(last, Failed) and "stopped unexpectedly" in last.message
    left = resumable(dl.core.paths)
    assert [(r.repo, r.filenames, r.bytes_done) for r in left] == [(REPO, (FILE,), 2_000_000)]

    rec = Recorder()
    last = dl.manager.start(REPO, [FILE], None, None, rec).wait(WAIT_S)
    assert isinstance(last, Finished), last
    assert rec.of(Started)[0].resumed_from == 2_000_000
    assert dl.hub.requests_for(FILE, "GET")[-1].range_start == 2_000_000
    assert dl.manager.register(last).sha256 == sha256_hex(model_bytes)
    assert resumable(dl.core.paths) == []


def test_corrupt_body_is_deleted_and_never_registered(dl):
    dl.hub.set_fault(REPO, FILE, Fault(corrupt=True))
    handle, _, last = run(dl.manager)
    assert isinstance(last, Failed)
    assert last.message == "The downloaded file was corrupted (sha256 mismatch); it was deleted — try again."
    assert handle.state == "failed"
    assert files_in(dl.core.paths.partial_downloads_dir) == []
    assert files_in(dl.core.models_dir) == []
    assert dl.core.library.list() == []


def test_server_errors_are_retried_with_growing_waits(dl):
    dl.hub.set_fault(REPO, FILE, Fault(status=500, times=2))
    _, rec, last = run(dl.manager)
    assert isinstance(last, Finished), last
    retries = rec.of(Retrying)
    assert [(r.attempt, r.reason) for r in retries] == [(1, "server error 500"), (2, "server error 500")]
    assert retries[0].wait < retries[1].wait


def test_server_error_every_time_fails_with_a_sentence(dl):
    dl.hub.set_fault(REPO, FILE, Fault(status=500))
    _, rec, last = run(dl.manager)
    assert isinstance(last, Failed)
    assert last.message == "The Hub had a server error (500); try again in a moment."
    assert len(rec.of(Retrying)) == FAST.max_attempts - 1
    assert dl.core.library.list() == [] and files_in(dl.core.models_dir) == []


def test_stall_is_retried(core, fake_hub, model_bytes):
    fake_hub.add_repo(REPO, {FILE: model_bytes})
    fake_hub.set_fault(REPO, FILE, Fault(stall_after=500_000, stall_s=60, times=1))
    manager = make_manager(core, replace(FAST, stall_timeout=1.0))  # "no bytes for 1 s" is a stall
    try:
        _, rec, last = run(manager)
    finally:
        manager.shutdown()
    assert isinstance(last, Finished), last
    assert [r.reason for r in rec.of(Retrying)] == ["no data for 1 s"]
    assert fake_hub.requests_for(FILE, "GET")[-1].range_start == 500_000
    assert Path(last.path).read_bytes() == model_bytes


def test_missing_file_is_a_sentence(dl):
    _, _, last = run(dl.manager, files=("nope.gguf",))
    assert isinstance(last, Failed)
    assert last.message == f"{REPO} has no file called nope.gguf."


def test_gated_repo_without_token_says_where_to_ask_for_access(dl, model_bytes):
    dl.hub.add_repo("org/gated", {FILE: model_bytes}, gated=True)
    _, _, last = run(dl.manager, repo="org/gated")
    assert isinstance(last, Failed)
    assert "gated" in last.message and f"{dl.hub.url}/org/gated" in last.message
    assert dl.hub.requests_for(FILE, "GET") == []


def test_token_reaches_the_hub_but_never_the_cdn_the_disk_or_the_child(dl, model_bytes):
    dl.hub.add_repo("org/gated", {FILE: model_bytes}, gated=True)
    dl.hub.set_fault("org/gated", FILE, Fault(redirect=True, stall_after=1_000_000, stall_s=60, times=1))
    rec = Recorder(reach=1_000_000)
    handle = dl.manager.start("org/gated", [FILE], None, VALID_TOKEN, rec)
    assert rec.reached.wait(WAIT_S)
    if sys.platform.startswith("linux"):
        for name in ("environ", "cmdline"):
            assert VALID_TOKEN.encode() not in Path(f"/proc/{handle.pid}/{name}").read_bytes()
    dl.hub.release_stalls()  # the held connection closes: a retry with a fresh HEAD finishes the file
    last = handle.wait(WAIT_S)
    assert isinstance(last, Finished), last
    assert dl.manager.register(last).sha256 == sha256_hex(model_bytes)

    hub_heads = dl.hub.requests_for(FILE, "HEAD", host="127.0.0.1")
    assert hub_heads and all(r.headers.get("authorization") == f"Bearer {VALID_TOKEN}" for r in hub_heads)
    cdn = [r for r in dl.hub.requests if r.host == "127.0.0.2"]
    assert cdn and all(VALID_TOKEN not in str(r.headers) for r in cdn)
    assert all(VALID_TOKEN not in repr(e) for e in rec.events)
    for path in Path(dl.core.paths.data_dir).parent.rglob("*"):
        if path.is_file():
            assert VALID_TOKEN.encode() not in path.read_bytes(), path


# -- before starting ----------------------------------------------------------------------------


def test_not_enough_disk_space_is_refused_before_fetching(dl, monkeypatch):
    usage = shutil.disk_usage(dl.core.paths.cache_dir)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=2_000_000))
    handle, _, last = run(dl.manager)
    assert isinstance(last, Failed)
    assert "needs 5.4 MB, 2.0 MB free" in last.message
    assert handle.state == "failed"
    assert dl.hub.requests_for(FILE, "GET") == []  # only the metadata HEAD went out
    assert files_in(dl.core.paths.partial_downloads_dir) == []


def test_offline_refuses_with_zero_requests(dl):
    dl.core.network.set_offline(True)
    with pytest.raises(NetworkRefused, match="offline"):
        dl.manager.start(REPO, [FILE], None, None, lambda e: None)
    assert dl.hub.requests == []
    assert dl.manager.active() == []


def test_the_gate_shows_the_download_while_it_runs(dl):
    seen: list[tuple[str, str, bool]] = []
    dl.core.network.add_listener(lambda activity, started: seen.append((activity.kind, activity.host, started)))
    _, _, last = run(dl.manager)
    assert isinstance(last, Finished)
    host = dl.hub.url.split("//", 1)[1]
    assert seen == [("download", host, True), ("download", host, False)]
    assert dl.core.network.active() == []


# -- split models ------------------------------------------------------------------------------


def test_split_model_downloads_every_part_at_one_commit_and_registers_once(core, fake_hub, split_bytes):
    fake_hub.add_repo(REPO, dict(zip(SPLIT, split_bytes)))
    manager = make_manager(core)
    try:
        _, rec, last = run(manager, files=SPLIT)
        assert isinstance(last, Finished), last
        assert rec.of(Planned)[0].commit == COMMIT
        assert [Path(p).name for p in last.paths] == list(SPLIT)
        assert len({Path(p).parent for p in last.paths}) == 1
        for name in SPLIT:
            assert all(f"/resolve/{COMMIT}/" in r.path for r in fake_hub.requests_for(name, "GET"))
        model = manager.register(last)
        assert Path(model.path).name == SPLIT[0] and model.revision == COMMIT
        assert [m.name for m in core.library.list()] == [model.name]

        core.library.remove(model.name, delete_file=True)
        assert files_in(core.models_dir) == []
    finally:
        manager.shutdown()


def test_split_model_next_to_a_different_file_of_the_same_name_gets_its_own_folder(core, fake_hub, split_bytes):
    fake_hub.add_repo(REPO, dict(zip(SPLIT, split_bytes)))
    core.models_dir.mkdir(parents=True, exist_ok=True)
    (core.models_dir / SPLIT[1]).write_bytes(b"somebody else's file")
    manager = make_manager(core)
    try:
        _, _, last = run(manager, files=SPLIT)
        assert isinstance(last, Finished), last
        assert {Path(p).parent for p in last.paths} == {core.models_dir / "tiny-Q8_0"}
        assert (core.models_dir / SPLIT[1]).read_bytes() == b"somebody else's file"
        model = manager.register(last)
        core.library.remove(model.name, delete_file=True)
        assert files_in(core.models_dir) == [SPLIT[1]]  # its folder is gone, the other file stays
    finally:
        manager.shutdown()


# -- pause, resume, cancel, quit ------------------------------------------------------------------


def test_pause_keeps_the_partial_and_resume_continues_from_it(dl, model_bytes):
    dl.hub.set_fault(REPO, FILE, Fault(stall_after=1_500_000, stall_s=60, times=1))
    handle, _ = stalled(dl.manager, 1_500_000)
    handle.pause()
    last = handle.wait(WAIT_S)
    assert isinstance(last, Paused) and last.bytes_done == 1_500_000
    assert handle.state == "paused"
    sha = sha256_hex(model_bytes)
    assert partial.partial_size(dl.core.paths.partial_downloads_dir, sha) == 1_500_000
    assert dl.core.network.active() == []

    handle.resume()
    last = handle.wait(WAIT_S)
    assert isinstance(last, Finished), last
    assert handle.state == "finished"
    assert dl.hub.requests_for(FILE, "GET")[-1].range_start == 1_500_000
    assert dl.manager.register(last).sha256 == sha


def test_cancel_stops_the_child_and_deletes_the_partial(dl):
    dl.hub.set_fault(REPO, FILE, Fault(stall_after=1_000_000, stall_s=60, times=1))
    handle, _ = stalled(dl.manager, 1_000_000)
    handle.cancel()
    assert isinstance(handle.wait(WAIT_S), Cancelled)
    assert handle.state == "cancelled"
    assert files_in(dl.core.paths.partial_downloads_dir) == []
    assert resumable(dl.core.paths) == []


def test_cancel_of_a_paused_download_deletes_its_partial(dl):
    dl.hub.set_fault(REPO, FILE, Fault(stall_after=1_000_000, stall_s=60, times=1))
    handle, _ = stalled(dl.manager, 1_000_000)
    handle.pause()
    assert isinstance(handle.wait(WAIT_S), Paused)
    handle.cancel()
    assert handle.state == "cancelled"
    assert files_in(dl.core.paths.partial_downloads_dir) == []


def test_shutdown_stops_the_child_and_keeps_the_partial(dl):
    import psutil

    dl.hub.set_fault(REPO, FILE, Fault(stall_after=1_000_000, stall_s=60, times=1))
    handle, _ = stalled(dl.manager, 1_000_000)
    pid = handle.pid
    dl.manager.shutdown(timeout=3.0)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert handle.state == "paused"
    assert [r.bytes_done for r in resumable(dl.core.paths)] == [1_000_000]


def test_the_same_file_cannot_be_started_twice(dl):
    from app.downloads import DownloadError

    dl.hub.set_fault(REPO, FILE, Fault(stall_after=1_000_000, stall_s=60, times=1))
    stalled(dl.manager, 1_000_000)
    with pytest.raises(DownloadError, match="already downloading"):
        dl.manager.start(REPO, [FILE], None, None, lambda e: None)


PARENT_THAT_DIES = """
import os, sys, threading
from app.core import open_core
from app.downloads import DownloadManager
from app.paths import resolve_paths
from models.download.protocol import Progress
core = open_core(resolve_paths())
reached = threading.Event()
on_event = lambda e: reached.set() if isinstance(e, Progress) and e.bytes_done >= 1_000_000 else None
handle = DownloadManager.for_core(core).start(sys.argv[1], [sys.argv[2]], None, None, on_event)
reached.wait(60)
print(handle.pid, flush=True)
os._exit(1)  # the parent dies without stopping anything
"""


def test_a_child_whose_parent_died_stops_and_leaves_a_resumable_partial(dl, tmp_path, monkeypatch):
    import psutil

    dl.hub.set_fault(REPO, FILE, Fault(stall_after=1_000_000, stall_s=60, times=1))
    monkeypatch.setenv("COVE_HOME", str(dl.core.paths.data_dir.parent))
    parent = subprocess.run(
        [sys.executable, "-c", PARENT_THAT_DIES, REPO, FILE],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    pid = int(parent.stdout.split()[0])
    try:
        psutil.Process(pid).wait(timeout=WAIT_S)  # it goes by itself: its stdin closed with the parent
    except psutil.NoSuchProcess:
        pass
    assert [r.bytes_done for r in resumable(dl.core.paths)] == [1_000_000]
