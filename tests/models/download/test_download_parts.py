"""The download package's pieces on their own: the wire format, partial files and their
sidecars, start-up cleanup, the disk-space sentence, split names, placing files, retries."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.downloads import child_environment, cleanup_orphans
from app.paths import resolve_paths
from models.download import partial, place
from models.download.preflight import check_disk_space
from models.download.protocol import Failed, Finished, Job, Planned, Progress, ProtocolError, TransferPolicy, decode, encode
from models.download.split import part_names, split_name
from models.library import model_files

SHA_A = "a" * 64
SHA_B = "b" * 64


def test_job_round_trips_with_its_token_and_events_round_trip():
    job = Job("org/m", ("a.gguf",), None, "hf_secret", "/p", "/d", TransferPolicy(stall_timeout=1.5))
    assert Job.from_line(job.to_line()) == job
    finished = Finished("org/m", "c" * 40, ("a.gguf",), ("/d/a.gguf",), (SHA_A,))
    for event in (finished, Failed("no."), Progress(5, 10, 1.5, None), Planned("c" * 40, ("a",), (3,), (SHA_A,), (1,))):
        assert decode(encode(event)) == event
    assert finished.path == "/d/a.gguf" and finished.sha256 == SHA_A
    with pytest.raises(ProtocolError):
        decode("not json")
    with pytest.raises(ProtocolError):
        Job.from_line('{"repo": "x"}')


def test_child_environment_carries_no_token(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_fromtheenvironment123")
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", "hf_fromtheenvironment123")
    env = child_environment()
    assert "HF_TOKEN" not in env and "HUGGING_FACE_HUB_TOKEN" not in env
    assert env["HF_HUB_DISABLE_TELEMETRY"] == "1" and env["HF_HUB_DISABLE_XET"] == "1"


def _record(sha: str, filename: str = "m.gguf", group: tuple[str, ...] = ("m.gguf",)) -> partial.PartialRecord:
    return partial.new_record("org/m", filename, "c" * 40, 100, sha, group)


def test_partial_files_are_never_truncated_and_sidecars_are_validated(tmp_path):
    record = _record(SHA_A)
    partial.write_record(tmp_path, record)
    with partial.open_partial(tmp_path, SHA_A) as f:
        f.write(b"x" * 40)
    with partial.open_partial(tmp_path, SHA_A) as f:  # reopening keeps the bytes
        f.seek(0, 2)
        assert f.tell() == 40
    assert partial.read_record(tmp_path, SHA_A) == record
    partial.sidecar_path(tmp_path, SHA_B).write_text('{"version": 1, "repo": "x"}')
    assert partial.read_record(tmp_path, SHA_B) is None
    # A sidecar filed under another hash is not trusted either.
    partial.sidecar_path(tmp_path, SHA_B).write_text(partial.sidecar_path(tmp_path, SHA_A).read_text())
    assert partial.read_record(tmp_path, SHA_B) is None


def test_a_locked_partial_is_in_use_and_not_resumable(tmp_path):
    partial.write_record(tmp_path, _record(SHA_A))
    with partial.open_partial(tmp_path, SHA_A) as f:
        f.write(b"x" * 10)
        assert partial.try_lock(f)
        assert partial.in_use(partial.part_path(tmp_path, SHA_A))
        assert partial.resumable(tmp_path) == []
    assert not partial.in_use(partial.part_path(tmp_path, SHA_A))
    [left] = partial.resumable(tmp_path)
    assert (left.repo, left.filenames, left.bytes_done, left.total) == ("org/m", ("m.gguf",), 10, 100)


def test_cleanup_removes_orphans_and_keeps_what_can_be_resumed(tmp_path):
    paths = resolve_paths({"COVE_HOME": str(tmp_path / "home")}).ensure()
    pdir = paths.partial_downloads_dir
    partial.write_record(pdir, _record(SHA_A))
    partial.part_path(pdir, SHA_A).write_bytes(b"k" * 30)  # resumable: kept
    partial.part_path(pdir, SHA_B).write_bytes(b"o" * 50)  # no sidecar: orphan
    stale = partial.sidecar_path(pdir, "c" * 64)
    stale.write_text(partial.sidecar_path(pdir, SHA_A).read_text())  # sidecar without its file
    hf_leftover = paths.cache_dir / "huggingface" / "blobs" / "abc.1234abcd.incomplete"
    hf_leftover.parent.mkdir(parents=True)
    hf_leftover.write_bytes(b"i" * 20)
    copy_leftover = paths.models_dir / f"m.gguf{place.INCOMING_SUFFIX}"
    copy_leftover.write_bytes(b"c" * 7)
    persons_file = paths.models_dir / "mine.gguf"
    persons_file.write_bytes(b"keep me")

    expected_freed = 50 + stale.stat().st_size + 20 + 7
    report = cleanup_orphans(paths)

    assert sorted(Path(p).name for p in report.removed) == sorted([f"{SHA_B}.part", stale.name, hf_leftover.name, copy_leftover.name])
    assert report.freed == expected_freed
    assert partial.part_path(pdir, SHA_A).read_bytes() == b"k" * 30
    assert persons_file.read_bytes() == b"keep me"
    assert [(r.repo, r.bytes_done) for r in report.resumable] == [("org/m", 30)]


def test_cleanup_leaves_a_partial_that_a_running_download_holds(tmp_path):
    paths = resolve_paths({"COVE_HOME": str(tmp_path / "home")}).ensure()
    pdir = paths.partial_downloads_dir
    pdir.mkdir(parents=True)
    with partial.open_partial(pdir, SHA_B) as f:  # no sidecar yet, but locked by its writer
        assert partial.try_lock(f)
        assert cleanup_orphans(paths).removed == ()
    assert partial.part_path(pdir, SHA_B).exists()


def test_disk_space_sentence(tmp_path, monkeypatch):
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=2_000_000_000))
    message = check_disk_space(tmp_path / "partial", tmp_path / "models", 3_904_761_905, 3_904_761_905)
    assert message is not None and "needs 4.1 GB, 2.0 GB free" in message
    assert check_disk_space(tmp_path / "partial", tmp_path / "models", 1_000_000_000, 3_904_761_905) is None


def test_split_names():
    assert split_name("dir/m-Q4_K_M-00002-of-00003.gguf") == split_name("m-Q4_K_M-00002-of-00003.gguf")
    assert split_name("m-00002-of-00003.gguf").index == 2
    assert split_name("m.gguf") is None and split_name("m-00004-of-00003.gguf") is None
    assert part_names("q/m-00002-of-00003.gguf") == [f"q/m-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    assert [p.name for p in model_files("/x/m-00001-of-00002.gguf")] == ["m-00001-of-00002.gguf", "m-00002-of-00002.gguf"]
    assert model_files("/x/m.gguf") == [Path("/x/m.gguf")]


def test_place_never_overwrites_a_different_file_and_reuses_the_same_one(tmp_path):
    from models.gguf_info import sha256_file

    (tmp_path / "m.gguf").write_bytes(b"other")
    (tmp_path / "m-2.gguf").write_bytes(b"mine!")
    same = sha256_file(tmp_path / "m-2.gguf")
    assert place.destinations(tmp_path, ["sub/m.gguf"], [5], [same]) == [tmp_path / "m-2.gguf"]
    assert place.destinations(tmp_path, ["m.gguf"], [5], ["0" * 64]) == [tmp_path / "m-3.gguf"]

    src = tmp_path / "src.part"
    src.write_bytes(b"data")
    place.move_into(src, tmp_path / "new" / "m.gguf")
    assert (tmp_path / "new" / "m.gguf").read_bytes() == b"data" and not src.exists()


def test_retries_back_off_exponentially_and_restart_counting_after_progress():
    from models.network import prepare_hub_import

    prepare_hub_import()
    import httpx2

    from models.download.transfer import with_retries
    from models.hub_errors import HubError

    policy = TransferPolicy(max_attempts=3, backoff_base=1.0, backoff_max=3.0)
    waits: list[float] = []
    progress = [0]
    outcomes = iter(["drop", "drop+bytes", "drop", "drop", "drop"])

    def attempt() -> None:
        what = next(outcomes)
        if what == "drop+bytes":
            progress[0] += 10
        raise httpx2.RemoteProtocolError("peer closed connection")

    with pytest.raises(HubError, match="kept failing .the connection dropped. after 3 attempts"):
        with_retries(attempt, policy, lambda n, reason, wait: waits.append(wait), progress=lambda: progress[0], sleep=lambda s: None)
    # 1 s, then bytes arrived (count starts again): 1 s, 2 s; the third failure in a row gives up.
    assert waits == [1.0, 1.0, 2.0]

    with pytest.raises(ValueError):  # not a network problem: no retry
        with_retries(lambda: (_ for _ in ()).throw(ValueError("bug")), policy, lambda *a: pytest.fail("retried"), sleep=lambda s: None)


def test_discard_deletes_only_that_downloads_partials(tmp_path):
    from app.downloads import discard

    paths = resolve_paths({"COVE_HOME": str(tmp_path / "home")}).ensure()
    pdir = paths.partial_downloads_dir
    mine, other = _record(SHA_A), partial.new_record("org/other", "m.gguf", "c" * 40, 100, SHA_B, ("m.gguf",))
    for record in (mine, other):
        partial.write_record(pdir, record)
        partial.part_path(pdir, record.sha256).write_bytes(b"x")
    [left] = [r for r in partial.resumable(pdir) if r.repo == "org/m"]
    discard(paths, left)
    assert sorted(p.name for p in pdir.iterdir()) == [f"{SHA_B}.json", f"{SHA_B}.part"]
