"""A repo's GGUF files against the local fake Hub: quant labels, sizes and LFS sha256, split models as
one entry (and an incomplete set flagged), subfolders, the listing pinned to one commit, errors."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

import pytest

from models.hub_errors import HubError
from models.hub_files import GGUFEntry, RemoteFile, group_gguf_files, list_gguf_files, normalize_repo_id
from models.network import NetworkGate, NetworkRefused
from tests.support.fake_hub import sha256_hex

REPO = "bartowski/Model-7B-Instruct-GGUF"
FILES = {
    "Model-7B-Instruct-IQ2_XXS.gguf": b"i" * 200,
    "Model-7B-Instruct-Q4_K_M.gguf": b"q" * 400,
    "Model-7B-Instruct-Q8_0.gguf": b"e" * 700,
    "Model-7B-Instruct-f16.gguf": b"f" * 1400,
    "Model-7B-Instruct-bf16.gguf": b"b" * 1300,
    "model-7b-instruct-mxfp4.gguf": b"m" * 350,
    "README.md": b"# model card",
    "imatrix.dat": b"not a gguf",
}


def _names(entries) -> list[str]:
    return [e.name for e in entries]


def test_every_gguf_with_its_quant_size_and_sha256(fake_hub) -> None:
    fake_hub.add_repo(REPO, FILES)
    listing = list_gguf_files(NetworkGate(), REPO)
    assert listing.repo_id == REPO
    by_name = {e.name: e for e in listing.entries}
    assert {name: e.quant for name, e in by_name.items()} == {
        "Model-7B-Instruct-IQ2_XXS.gguf": "IQ2_XXS",
        "Model-7B-Instruct-Q4_K_M.gguf": "Q4_K_M",
        "Model-7B-Instruct-Q8_0.gguf": "Q8_0",
        "Model-7B-Instruct-f16.gguf": "F16",
        "Model-7B-Instruct-bf16.gguf": "BF16",
        "model-7b-instruct-mxfp4.gguf": "MXFP4",
    }
    for name, entry in by_name.items():
        assert entry.total_size == len(FILES[name])
        assert entry.parts == (RemoteFile(name, len(FILES[name]), sha256_hex(FILES[name])),)
        assert entry.first_file.filename == name
        assert entry.complete and not entry.is_split
    sizes = [e.total_size for e in listing.entries]
    assert sizes == sorted(sizes)  # smallest first


def test_a_split_model_is_one_entry_with_its_total_size(fake_hub) -> None:
    parts = {f"Big-70B-Q4_K_M-{i:05d}-of-00003.gguf": bytes([i]) * (1000 + i) for i in (1, 2, 3)}
    fake_hub.add_repo(REPO, {**parts, "Small-Q8_0.gguf": b"s" * 10})
    listing = list_gguf_files(NetworkGate(), REPO)
    assert _names(listing.entries) == ["Small-Q8_0.gguf", "Big-70B-Q4_K_M.gguf"]
    big = listing.entries[1]
    assert isinstance(big, GGUFEntry)
    assert big.quant == "Q4_K_M"
    assert big.total_size == sum(len(d) for d in parts.values())
    assert [p.filename for p in big.parts] == sorted(parts)  # in part order
    assert big.first_file.filename == "Big-70B-Q4_K_M-00001-of-00003.gguf"
    assert big.complete and big.is_split and big.expected_parts == 3
    assert [p.sha256 for p in big.parts] == [sha256_hex(parts[p.filename]) for p in big.parts]


def test_a_split_set_with_a_missing_part_is_flagged(fake_hub) -> None:
    fake_hub.add_repo(
        REPO,
        {
            "Big-Q8_0-00001-of-00003.gguf": b"1" * 50,
            "Big-Q8_0-00003-of-00003.gguf": b"3" * 20,
        },
    )
    (entry,) = list_gguf_files(NetworkGate(), REPO).entries
    assert entry.name == "Big-Q8_0.gguf"
    assert entry.complete is False
    assert len(entry.parts) == 2 and entry.expected_parts == 3
    assert entry.total_size == 70


def test_ggufs_in_subfolders_are_found_and_named_by_path(fake_hub) -> None:
    fake_hub.add_repo(
        REPO,
        {
            "Q4_K_M/Model-00001-of-00002.gguf": b"a" * 30,
            "Q4_K_M/Model-00002-of-00002.gguf": b"b" * 30,
            "UD-Q2_K_XL/Model-UD-Q2_K_XL.gguf": b"c" * 40,
            "Model-Q8_0.gguf": b"d" * 100,
        },
    )
    entries = {e.name: e for e in list_gguf_files(NetworkGate(), REPO).entries}
    assert set(entries) == {"Q4_K_M/Model.gguf", "UD-Q2_K_XL/Model-UD-Q2_K_XL.gguf", "Model-Q8_0.gguf"}
    split = entries["Q4_K_M/Model.gguf"]
    assert split.quant == "Q4_K_M"  # from the folder: the file names carry no label
    assert split.first_file.filename == "Q4_K_M/Model-00001-of-00002.gguf"
    assert split.total_size == 60 and split.complete
    assert entries["UD-Q2_K_XL/Model-UD-Q2_K_XL.gguf"].quant == "Q2_K_XL"


def test_the_listing_is_read_at_the_commit_it_reports(fake_hub) -> None:
    commit = "1234abcd" * 5
    fake_hub.add_repo(REPO, {"M-Q4_K_M.gguf": b"x" * 10}, commit=commit)
    listing = list_gguf_files(NetworkGate(), REPO, revision="main")
    assert listing.commit == commit
    paths = [unquote(urlsplit(r.path).path) for r in fake_hub.requests]
    assert paths == [f"/api/models/{REPO}/revision/main", f"/api/models/{REPO}/tree/{commit}"]
    assert "recursive=true" in fake_hub.requests[1].path.lower()
    assert not any("agent-harnesses" in r.path for r in fake_hub.requests)


def test_a_gated_repo_lists_without_a_token(fake_hub) -> None:
    fake_hub.add_repo("org/gated-GGUF", {"g-Q4_K_M.gguf": b"g" * 10}, gated=True)
    listing = list_gguf_files(NetworkGate(), "org/gated-GGUF")
    assert _names(listing.entries) == ["g-Q4_K_M.gguf"]
    assert all("authorization" not in r.headers for r in fake_hub.requests)


def test_a_missing_repo_is_one_sentence(fake_hub) -> None:
    with pytest.raises(HubError) as err:
        list_gguf_files(NetworkGate(), "nobody/no-such-model-GGUF")
    assert str(err.value) == "There is no model repository called nobody/no-such-model-GGUF on the Hub (or it is private)."


def test_offline_refuses_before_any_request(fake_hub) -> None:
    fake_hub.add_repo(REPO, FILES)
    with pytest.raises(NetworkRefused):
        list_gguf_files(NetworkGate(offline=True), REPO)
    assert fake_hub.requests == []


@pytest.mark.parametrize("bad", ["just-a-name", "a/b/c", "", "https://example.com/org/x", "org/../x y"])
def test_a_malformed_repo_id_is_refused_without_a_request(fake_hub, bad: str) -> None:
    with pytest.raises(HubError) as err:
        list_gguf_files(NetworkGate(), bad)
    assert "owner/name" in str(err.value)
    assert fake_hub.requests == []


@pytest.mark.parametrize(
    "given",
    [REPO, f" {REPO}/ ", f"https://huggingface.co/{REPO}", f"https://huggingface.co/{REPO}/tree/main", f"hf.co/{REPO}"],
)
def test_a_pasted_hub_address_names_the_repo(given: str) -> None:
    assert normalize_repo_id(given) == REPO


def test_grouping_keeps_sets_in_different_folders_apart() -> None:
    files = [
        RemoteFile("a/M-00001-of-00002.gguf", 5, None),
        RemoteFile("b/M-00001-of-00002.gguf", 7, None),
        RemoteFile("b/M-00002-of-00002.gguf", 7, None),
        RemoteFile("a/M-00002-of-00002.gguf", 5, None),
    ]
    entries = group_gguf_files(files)
    assert [(e.name, e.total_size, e.complete) for e in entries] == [("a/M.gguf", 10, True), ("b/M.gguf", 14, True)]
    assert [p.filename for p in entries[0].parts] == ["a/M-00001-of-00002.gguf", "a/M-00002-of-00002.gguf"]
