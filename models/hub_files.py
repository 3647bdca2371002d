"""A Hub repository's GGUF files, with split models (`name-00001-of-00003.gguf`) shown as one entry.

The listing is read at one commit: `model_info` resolves the requested revision (default
branch if none) to a commit hash, and the file tree is then listed *at that hash*, so a
download can pin every part of a split model to the same commit even if the repo changes
in between. GGUFs in subfolders are found too (unsloth and others keep quants in folders).

File names come from the repository's owner and are untrusted: only a plain relative path
(see `repo_path_problem`) is offered or downloaded, because a name such as
`../../escape.gguf` would be collapsed into the download URL and leave the pinned
`resolve/<commit>/` path. The listing leaves such files out and names them in `refused`.

A vision projector (`mmproj*.gguf`) is not a model of its own: it is the `projector` of the model
files beside it (in its folder, or below it), the preferred precision when there are several
(models/projector.py), so a repo with one mmproj pairs it with every quant.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any

from models.hub_errors import HubError, describe_hub_error
from models.hub_search import hub_api
from models.network import NetworkGate, hub_endpoint
from models.projector import is_projector_name, preferred_projector
from models.quant import quant_from_filename

# llama.cpp's gguf-split naming: "%s-%05d-of-%05d.gguf" (part numbers start at 1).
_SPLIT = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<total>\d{5})\.gguf$", re.IGNORECASE)
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
INFO_TIMEOUT_S = 30.0
# C0 controls, DEL, C1 controls; a name holding one is refused.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def repo_path_problem(name: str) -> str | None:
    """Why `name` is not a plain path inside a repository, or None when it is one.

    Plain: "/"-separated segments, none empty, none "." or "..", no leading "/", no
    backslash, no control character.
    """
    if not name:
        return "it is empty"
    if _CONTROL.search(name):
        return "it holds a control character"
    if "\\" in name:
        return "it holds a backslash"
    if name.startswith("/"):
        return "it starts with /"
    segments = name.split("/")
    if any(seg in (".", "..") for seg in segments):
        return "it has a . or .. segment"
    if any(not seg for seg in segments):
        return "it has an empty segment"
    return None


def refusal_of(name: str) -> str | None:
    """The sentence refusing `name` when it is not a plain path inside a repository, else None."""
    if repo_path_problem(name) is None:
        return None
    return f"the file name {name!r} is not a plain path inside the repository; Cove does not download it."


def check_repo_path(name: str) -> str:
    """`name` itself when it is a plain path inside a repository; else HubError (one sentence)."""
    refusal = refusal_of(name)
    if refusal:
        raise HubError(refusal)
    return name


@dataclass(frozen=True)
class RemoteFile:
    filename: str  # path inside the repo, e.g. "Q4_K_M/model-00001-of-00002.gguf"
    size: int
    sha256: str | None  # from the LFS pointer; None for files not stored in LFS


@dataclass(frozen=True)
class GGUFEntry:
    name: str  # the file's path, or for a split model that path without "-0000k-of-0000N"
    quant: str | None
    total_size: int
    parts: tuple[RemoteFile, ...]  # in part order; one part if not split
    complete: bool  # False when a split set is missing parts
    projector: RemoteFile | None = None  # the vision projector downloaded with it (None: text only)

    @property
    def vision(self) -> bool:
        return self.projector is not None

    @property
    def filenames(self) -> tuple[str, ...]:
        """What a download of this entry fetches: every part, then the projector."""
        return tuple(p.filename for p in self.parts) + ((self.projector.filename,) if self.projector else ())

    @property
    def download_size(self) -> int:
        return self.total_size + (self.projector.size if self.projector else 0)

    @property
    def first_file(self) -> RemoteFile:
        """The file llama.cpp is pointed at (it finds the other parts beside it)."""
        return self.parts[0]

    @property
    def is_split(self) -> bool:
        return len(self.parts) > 1 or _SPLIT.match(PurePosixPath(self.parts[0].filename).name) is not None

    @property
    def expected_parts(self) -> int:
        """How many parts the file names announce (1 when not split)."""
        match = _SPLIT.match(PurePosixPath(self.parts[0].filename).name)
        return int(match["total"]) if match else 1


@dataclass(frozen=True)
class RepoListing:
    repo_id: str
    commit: str | None  # the commit hash every listed file was read at
    entries: tuple[GGUFEntry, ...]  # smallest first
    refused: tuple[str, ...] = ()  # GGUF names left out: not plain paths (see repo_path_problem)
    projectors: tuple[RemoteFile, ...] = ()  # every mmproj file, paired with entries or not


def list_gguf_files(gate: NetworkGate, repo_id: str, token: str | None = None, revision: str | None = None) -> RepoListing:
    """Every GGUF in `repo_id` at `revision` (default branch when None), split sets grouped.

    Raises NetworkRefused when offline and HubError (one sentence) for a missing repo or
    revision, a refused token, or a network failure.
    """
    repo_id = normalize_repo_id(repo_id)
    gate.check("files")
    api = hub_api(token)
    with gate.use("files", hub_endpoint()):
        try:
            info = api.model_info(repo_id, revision=revision, timeout=INFO_TIMEOUT_S)
            commit = info.sha or None
            tree = list(api.list_repo_tree(repo_id, recursive=True, revision=commit or revision))
        except Exception as exc:  # noqa: BLE001 - every failure becomes one sentence
            raise HubError(describe_hub_error(exc, repo_id)) from exc
    ggufs = [item for item in tree if _is_gguf_file(item)]
    refused = tuple(str(item.path) for item in ggufs if repo_path_problem(str(item.path)) is not None)
    files = [_remote_file(item) for item in ggufs if repo_path_problem(str(item.path)) is None]
    projectors = tuple(f for f in files if is_projector_name(f.filename))
    return RepoListing(repo_id=repo_id, commit=commit, entries=group_gguf_files(files), refused=refused, projectors=projectors)


def normalize_repo_id(text: str) -> str:
    """ "owner/name" from itself or from a pasted Hub address (https://huggingface.co/owner/name/...);
    raises HubError (one sentence) for anything else."""
    value = text.strip()
    match = re.match(r"^(?:https?://)?(?:www\.)?(?:huggingface\.co|hf\.co)/(.+)$", value, re.IGNORECASE)
    if match:
        value = "/".join(match[1].split("/")[:2])
    value = value.strip("/")
    if not _REPO_ID.match(value):
        raise HubError(f"{text.strip()!r} is not a Hub repository id; it looks like owner/name, e.g. Qwen/Qwen2.5-0.5B-Instruct-GGUF.")
    return value


def group_gguf_files(files: list[RemoteFile]) -> tuple[GGUFEntry, ...]:
    """One entry per single GGUF and per split set (keyed by folder, stem and part count), each
    with its projector when one is near (see the module docstring)."""
    singles: list[GGUFEntry] = []
    sets: dict[tuple[str, str, int], dict[int, RemoteFile]] = defaultdict(dict)
    projectors: dict[str, list[RemoteFile]] = defaultdict(list)
    for f in files:
        path = PurePosixPath(f.filename)
        if is_projector_name(path.name):
            projectors[str(path.parent)].append(f)
            continue
        match = _SPLIT.match(path.name)
        if match is None:
            singles.append(GGUFEntry(f.filename, _quant(path), f.size, (f,), True))
            continue
        sets[(str(path.parent), match["stem"], int(match["total"]))][int(match["index"])] = f
    entries = list(singles)
    for (folder, stem, total), by_index in sets.items():
        parts = tuple(by_index[i] for i in sorted(by_index))
        name = str(PurePosixPath(folder) / f"{stem}.gguf") if folder != "." else f"{stem}.gguf"
        complete = total > 0 and sorted(by_index) == list(range(1, total + 1))
        entries.append(GGUFEntry(name, _quant(PurePosixPath(name)), sum(p.size for p in parts), parts, complete))
    entries = [replace(e, projector=_projector_for(e, projectors)) for e in entries]
    entries.sort(key=lambda e: (e.total_size, e.name.lower()))
    return tuple(entries)


def _projector_for(entry: GGUFEntry, projectors: dict[str, list[RemoteFile]]) -> RemoteFile | None:
    """The preferred projector in the entry's folder, else in the nearest folder above it."""
    folder = PurePosixPath(entry.parts[0].filename).parent
    for where in (folder, *folder.parents):
        near = {f.filename: f for f in projectors.get(str(where), [])}
        best = preferred_projector(list(near))
        if best is not None:
            return near[best]
    return None


def _quant(path: PurePosixPath) -> str | None:
    """The quant label from the file name, else from its folder (e.g. "Q4_K_M/model-00001-of-00002.gguf")."""
    label = quant_from_filename(path.name)
    if label is None and path.parent.name:
        label = quant_from_filename(path.parent.name + ".gguf")
    return label


def _is_gguf_file(item: Any) -> bool:
    # RepoFolder has no size; only files count.
    return hasattr(item, "size") and str(getattr(item, "path", "")).lower().endswith(".gguf")


def _remote_file(item: Any) -> RemoteFile:
    lfs = getattr(item, "lfs", None)
    sha256 = None
    if lfs is not None:
        sha256 = getattr(lfs, "sha256", None) or (lfs.get("sha256") if hasattr(lfs, "get") else None)
    return RemoteFile(filename=str(item.path), size=int(item.size or 0), sha256=sha256)
