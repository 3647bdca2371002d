"""The desktop build's lock files (packaging/lock.sh writes them, packaging/build.sh installs from
them) still agree with pyproject.toml: every dependency of the app, its `package` and `starter`
extras at one exact version inside pyproject's range, every file pinned by its sha256, and the
llama-cpp-python source at the version pyproject pins."""

from __future__ import annotations

import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.lock_file import LLAMA_LOCK, LOCK, applies, read_lock
from tests.support.paths import REPO_ROOT

BUILT_FROM_SOURCE = "llama-cpp-python"  # by packaging/llama-wheel.sh, from llama-source.lock


def wanted() -> list[Requirement]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [Requirement(line) for line in [*project["dependencies"], *extras["package"], *extras["starter"]]]


def test_the_lock_pins_every_dependency_inside_pyprojects_range() -> None:
    locked = read_lock(LOCK.read_text())
    assert len(locked) > 40  # the app's dependencies and theirs, not a stub
    for requirement in wanted():
        name = canonicalize_name(requirement.name)
        if name == BUILT_FROM_SOURCE:
            assert not [e for e in locked if e.name == name], "llama-cpp-python is built from source, not installed from the lock"
            continue
        here = [e for e in locked if e.name == name and applies(e, "3.11")]
        assert len(here) == 1, f"{requirement.name}: {len(here)} lines for Python 3.11 on Linux in packaging/requirements.lock"
        assert requirement.specifier.contains(here[0].version, prereleases=True), (
            f"packaging/requirements.lock has {requirement.name} {here[0].version}, outside pyproject.toml's "
            f"'{requirement.specifier}': run packaging/lock.sh"
        )


def test_every_locked_file_is_pinned_by_its_hash() -> None:
    for entry in read_lock(LOCK.read_text()):
        assert entry.hashes, f"{entry.name} has no --hash in packaging/requirements.lock"
    assert len({(e.name, e.version) for e in read_lock(LOCK.read_text())}) == len(read_lock(LOCK.read_text()))


def test_the_llama_source_lock_is_the_pinned_release() -> None:
    pinned = next(r for r in wanted() if canonicalize_name(r.name) == BUILT_FROM_SOURCE)
    (entry,) = read_lock(LLAMA_LOCK.read_text())
    assert entry.name == BUILT_FROM_SOURCE and pinned.specifier.contains(entry.version)
    assert str(pinned.specifier) == f"=={entry.version}"  # an exact pin both sides
    assert len(entry.hashes) == 1  # the one source release


def test_read_lock_reads_markers_and_continuations() -> None:
    text = (
        "# header\nfoo==1.2 ; sys_platform == 'win32' \\\n    --hash=sha256:"
        + "a" * 64
        + " \\\n    --hash=sha256:"
        + "b" * 64
        + "\n    # via bar\nbar-baz==3.0 \\\n    --hash=sha256:"
        + "c" * 64
        + "\n"
    )
    foo, bar = read_lock(text)
    assert (foo.name, str(foo.version), len(foo.hashes), applies(foo, "3.11")) == ("foo", "1.2", 2, False)
    assert (bar.name, bar.hashes, applies(bar, "3.11")) == ("bar-baz", ("c" * 64,), True)
