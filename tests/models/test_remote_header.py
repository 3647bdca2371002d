"""Reading a GGUF header from the (fake) Hub with ranged GETs: only a prefix of a large file is
fetched, the result is the same as parsing the file locally, and every failure is one sentence."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from models.gguf_info import read_gguf_info
from models.gguf_validate import NeedMoreBytes, read_gguf_header, read_gguf_header_bytes
from models.hub_errors import HubError
from models.network import NetworkGate, NetworkRefused
from models.remote_header import read_remote_header
from tests.support.fake_hub import VALID_TOKEN, Fault
from tests.support.padded_gguf import write_padded_gguf

REPO = "someone/Tiny-GGUF"
FILE = "tiny-Q8_0.gguf"


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_padded_gguf(tmp_path_factory.mktemp("remote") / FILE, pad_mib=8)


@pytest.fixture(scope="module")
def long_header_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_padded_gguf(tmp_path_factory.mktemp("remote") / FILE, pad_mib=1, extra_tokens=3000)


def _gets(hub, filename: str = FILE):
    return hub.requests_for(filename, "GET")


def test_only_a_prefix_is_fetched_and_it_parses_like_the_local_file(fake_hub, big_file: Path) -> None:
    data = big_file.read_bytes()
    fake_hub.add_repo(REPO, {FILE: data})
    remote = read_remote_header(NetworkGate(), REPO, FILE)
    local = read_gguf_header(big_file)
    assert remote.file_size == len(data) > 8 << 20
    assert remote.header.metadata == local.metadata and remote.header.tensors == local.tensors
    assert (remote.header.data_start, remote.header.data_end) == (local.data_start, local.data_end)
    assert dataclasses.replace(remote.info, path="x") == dataclasses.replace(read_gguf_info(big_file), path="x")
    assert remote.info.quant == "Q8_0" and remote.commit is not None
    gets = _gets(fake_hub)
    assert gets and all(r.headers.get("range", "").startswith("bytes=") for r in gets)
    assert remote.bytes_fetched == fake_hub.bytes_served(FILE) <= 256 * 1024 < len(data) // 32


def test_a_long_header_is_fetched_in_growing_contiguous_ranges(fake_hub, long_header_file: Path) -> None:
    data = long_header_file.read_bytes()
    local = read_gguf_header(long_header_file)
    assert local.data_start > 64 * 1024  # the header alone is longer than the first ranges
    fake_hub.add_repo(REPO, {FILE: data})
    remote = read_remote_header(NetworkGate(), REPO, FILE, first_chunk=4096)
    assert remote.header.tensors == local.tensors
    ranges = [tuple(int(x) for x in r.headers["range"][6:].split("-")) for r in _gets(fake_hub)]
    assert ranges[0] == (0, 4095) and len(ranges) >= 4
    for (_a, b), (c, d) in zip(ranges, ranges[1:]):
        assert c == b + 1  # each request continues where the last one ended
        assert d + 1 >= 2 * (b + 1)  # and at least doubles what is held
    assert remote.bytes_fetched < 2 * local.data_start + 128 * 1024 < len(data)


def test_the_prefix_parser_asks_for_more_instead_of_failing(long_header_file: Path) -> None:
    data = long_header_file.read_bytes()
    with pytest.raises(NeedMoreBytes) as more:
        read_gguf_header_bytes(data[:1000], len(data))
    assert 1000 < more.value.needed <= len(data)
    assert read_gguf_header_bytes(data, len(data)).tensors == read_gguf_header(long_header_file).tensors


def test_a_gated_repo_without_a_token_says_where_to_ask_for_access(fake_hub, big_file: Path) -> None:
    fake_hub.add_repo(REPO, {FILE: big_file.read_bytes()}, gated=True)
    with pytest.raises(HubError) as err:
        read_remote_header(NetworkGate(), REPO, FILE)
    assert f"request access at {fake_hub.url}/{REPO}" in str(err.value)
    assert not _gets(fake_hub)  # it stopped at the HEAD
    assert read_remote_header(NetworkGate(), REPO, FILE, token=VALID_TOKEN).header.tensors


def test_a_cdn_redirect_gets_the_ranges_without_the_token(fake_hub, big_file: Path) -> None:
    fake_hub.add_repo(REPO, {FILE: big_file.read_bytes()}, gated=True)
    fake_hub.set_fault(REPO, FILE, Fault(redirect=True))
    remote = read_remote_header(NetworkGate(), REPO, FILE, token=VALID_TOKEN)
    assert remote.header.tensors == read_gguf_header(big_file).tensors
    hub_host, cdn_host = "127.0.0.1", "127.0.0.2"
    assert fake_hub.requests_for(FILE, "HEAD", hub_host)[0].headers["authorization"] == f"Bearer {VALID_TOKEN}"
    cdn_gets = _gets(fake_hub)
    assert cdn_gets and all(r.host == cdn_host and "authorization" not in r.headers for r in cdn_gets)


def test_offline_refuses_with_no_request(fake_hub, big_file: Path) -> None:
    fake_hub.add_repo(REPO, {FILE: big_file.read_bytes()})
    with pytest.raises(NetworkRefused, match="offline"):
        read_remote_header(NetworkGate(offline=True), REPO, FILE)
    assert fake_hub.requests == []


def test_a_missing_file_and_a_missing_repo_are_sentences(fake_hub, big_file: Path) -> None:
    fake_hub.add_repo(REPO, {FILE: big_file.read_bytes()})
    with pytest.raises(HubError, match=f"{REPO} has no file called nope.gguf"):
        read_remote_header(NetworkGate(), REPO, "nope.gguf")
    with pytest.raises(HubError, match="no model repository called someone/Missing"):
        read_remote_header(NetworkGate(), "someone/Missing", FILE)


def test_a_server_that_ignores_range_is_read_only_as_far_as_needed(fake_hub, tmp_path: Path) -> None:
    path = write_padded_gguf(tmp_path / FILE, pad_mib=48)
    data = path.read_bytes()
    fake_hub.add_repo(REPO, {FILE: data})
    fake_hub.set_fault(REPO, FILE, Fault(ignore_range=True))
    remote = read_remote_header(NetworkGate(), REPO, FILE)
    assert remote.header.tensors == read_gguf_header(path).tensors
    assert remote.bytes_fetched < 1 << 20
    assert fake_hub.bytes_served(FILE) < len(data) // 2  # the connection was closed early


def test_a_file_that_is_not_a_gguf_and_a_header_over_the_cap(fake_hub, long_header_file: Path) -> None:
    fake_hub.add_repo(REPO, {"notes.gguf": b"<html>" + b"x" * 5000, FILE: long_header_file.read_bytes()})
    with pytest.raises(HubError, match="not a GGUF model Cove can use: not a GGUF model file"):
        read_remote_header(NetworkGate(), REPO, "notes.gguf")
    with pytest.raises(HubError, match="goes on past 0 MiB"):
        read_remote_header(NetworkGate(), REPO, FILE, first_chunk=4096, max_bytes=64 * 1024)
