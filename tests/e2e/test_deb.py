"""The Debian package (packaging/build-deb.sh): its control data and tree, made from a fake app
folder in the default suite, and the real package of the frozen app installed with apt-get,
run and removed (marked `packaging`; needs root, as CI has)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.version import Version

from app import __version__
from tests.e2e.test_packaging import _python_was_run, no_python_env  # noqa: F401 (a fixture)
from tests.support.paths import REPO_ROOT
from tests.support.tiny_model import write_tiny_gguf

SCRIPT = REPO_ROOT / "packaging" / "build-deb.sh"
ICON_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
needs_dpkg = pytest.mark.skipif(
    not (shutil.which("dpkg-deb") and shutil.which("readelf")),
    reason="build-deb.sh needs Debian's dpkg-deb and binutils' readelf",
)


def _build_deb(app: Path, out: Path, *extra: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), "--app", str(app), "--out", str(out), *extra], capture_output=True, text=True, timeout=timeout
    )


def _field(deb: Path, name: str) -> str:
    return subprocess.run(["dpkg-deb", "-f", str(deb), name], capture_output=True, text=True, check=True).stdout.strip()


def _package_names(field: str) -> set[str]:
    """`libc6 (>= 2.36), libgl1` -> {libc6, libgl1}."""
    return {part.split("(")[0].strip() for part in field.split(",") if part.strip()}


def _fake_app(root: Path, version: str, elf_needing: str | None = None) -> Path:
    """A folder shaped like a build: `cove` prints the version, _internal/ holds a real ELF file
    (a copy of /bin/true, which links libc.so.6; with `elf_needing` that name is swapped in)."""
    app = root / "Cove"
    (app / "_internal").mkdir(parents=True)
    cove = app / "cove"
    cove.write_text(f"#!/bin/sh\necho 'cove {version}'\n")
    cove.chmod(0o755)
    elf = Path("/bin/true").read_bytes()
    if elf_needing is not None:
        assert len(elf_needing) == len("libc.so.6") and b"libc.so.6\0" in elf
        elf = elf.replace(b"libc.so.6\0", elf_needing.encode() + b"\0")
    helper = app / "_internal" / "helper"
    helper.write_bytes(elf)
    helper.chmod(0o755)
    (app / "install-desktop.sh").write_text("#!/bin/sh\n")
    return app


# ---- without a build ------------------------------------------------------------------------


@needs_dpkg
def test_deb_of_a_fake_app_has_the_control_data_and_tree(tmp_path: Path) -> None:
    app = _fake_app(tmp_path / "build", "1.2.0rc1")
    result = _build_deb(app, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True).stdout.strip()
    deb = tmp_path / "out" / f"cove_1.2.0~rc1_{arch}.deb"  # a pre-release sorts before 1.2.0 in Debian
    assert [p.name for p in (tmp_path / "out").iterdir()] == [deb.name]
    assert _field(deb, "Package") == "cove" and _field(deb, "Version") == "1.2.0~rc1"
    assert _field(deb, "Architecture") == arch
    depends = _field(deb, "Depends")
    # /bin/true links only libc.so.6: libc6, bounded by the newest GLIBC_ symbol version it uses.
    assert re.search(r"(^|, )libc6 \(>= 2\.\d+\)(,|$)", depends), depends
    assert _package_names(depends) == {"libc6", "fontconfig-config", "xkb-data"}
    assert _field(deb, "Recommends") == "libvulkan1"

    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout.splitlines()
    entries = {}
    for line in listing:
        mode, owner, size, _date, _time, name, *link = line.split()
        entries[name.removeprefix(".")] = (mode, owner, int(size), link[1] if link else None)
    assert {owner for _mode, owner, _size, _link in entries.values()} == {"root/root"}
    assert entries["/usr/bin/cove"][0].startswith("l") and entries["/usr/bin/cove"][3] == "/opt/cove/cove"
    assert entries["/opt/cove/cove"][0] == "-rwxr-xr-x"
    assert "/opt/cove/_internal/helper" in entries
    assert "/opt/cove/install-desktop.sh" not in entries  # the per-user installer is not packaged
    # Installed-Size counts as dpkg-gencontrol does: KiB per file rounded up, 1 per folder or link.
    counted = sum(-(-size // 1024) if mode.startswith("-") else 1 for name, (mode, _owner, size, _link) in entries.items() if name != "/")
    assert int(_field(deb, "Installed-Size")) == counted

    tree = tmp_path / "tree"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tree)], check=True)
    desktop = (tree / "usr/share/applications/cove.desktop").read_text().splitlines()
    assert "Exec=/usr/bin/cove" in desktop and "TryExec=/usr/bin/cove" in desktop and "Icon=cove" in desktop
    icons = REPO_ROOT / "assets" / "icons"
    for size in ICON_SIZES:
        packed = tree / f"usr/share/icons/hicolor/{size}x{size}/apps/cove.png"
        assert packed.read_bytes() == (icons / "png" / f"cove-{size}.png").read_bytes()
    assert (tree / "usr/share/icons/hicolor/scalable/apps/cove.svg").read_bytes() == (icons / "cove.svg").read_bytes()
    assert (tree / "opt/cove/_internal/helper").read_bytes() == Path("/bin/true").read_bytes()


@needs_dpkg
def test_deb_refuses_a_folder_that_is_not_a_build_in_one_sentence(tmp_path: Path) -> None:
    result = _build_deb(tmp_path / "nowhere", tmp_path / "out")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"build-deb: {tmp_path / 'nowhere'} is not a built Cove app")
    assert not (tmp_path / "out").exists()


@needs_dpkg
def test_deb_refuses_a_library_whose_package_it_does_not_know(tmp_path: Path) -> None:
    """A linked library missing from packaging/deb/sonames stops the build instead of a guess."""
    app = _fake_app(tmp_path / "build", "1.0.0", elf_needing="libq.so.9")
    result = _build_deb(app, tmp_path / "out")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "links libq.so.9 from the system" in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()


# ---- the real package, installed ------------------------------------------------------------


def _run(*cmd: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(list(cmd), capture_output=True, text=True, env=env, timeout=timeout)


def _cove_status() -> str:
    """dpkg's status of the cove package ('' when dpkg does not know it)."""
    result = _run("dpkg-query", "-W", "-f=${Status}", "cove")
    return result.stdout.strip() if result.returncode == 0 else ""


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()}


def _owner(path: str) -> str:
    """The package dpkg lists as owning `path` (also under /lib <-> /usr/lib: merged /usr)."""
    candidates = [path]
    if path.startswith("/usr/lib/"):
        candidates.append(path.removeprefix("/usr"))
    elif path.startswith("/lib/"):
        candidates.append("/usr" + path)
    for candidate in candidates:
        result = _run("dpkg", "-S", candidate)
        if result.returncode == 0:
            return result.stdout.split(":")[0]
    raise AssertionError(f"no package owns {path}")


def _check_system_libraries(root: Path, declared: set[str]) -> None:
    """Every ELF file of the installed app loads all its libraries (as the bootloader sets
    LD_LIBRARY_PATH to _internal/), and each one it links directly from the system belongs to a
    package the .deb names in Depends or Recommends."""
    held = {p.name for p in root.rglob("*")}
    env = {**os.environ, "LD_LIBRARY_PATH": str(root / "_internal")}
    missing, undeclared, external = [], set(), 0
    for path in sorted(p for p in root.rglob("*") if p.is_file() and (".so" in p.name or p.name == "cove")):
        dynamic = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True).stdout
        needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dynamic)) - held
        if not dynamic or not needed:
            continue
        resolved = subprocess.run(["ldd", str(path)], capture_output=True, text=True, env=env).stdout
        missing += [f"{path.name}: {line.strip()}" for line in resolved.splitlines() if "not found" in line]
        for soname in needed:
            match = re.search(rf"^\s*{re.escape(soname)} => (/\S+)", resolved, re.MULTILINE)
            if match:
                external += 1
                package = _owner(match.group(1))
                if package not in declared:
                    undeclared.add(f"{soname} ({package})")
    assert not missing, missing
    assert not undeclared, f"linked from the system but not in Depends/Recommends: {sorted(undeclared)}"
    assert external > 0  # the app does link the system's libc, libGL, libxcb, ...


@pytest.mark.packaging
@pytest.mark.timeout(2400)
def test_deb_installs_runs_and_removes_cleanly(
    frozen: Path,
    no_python_env: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("installs a system package with apt-get: run as root (CI does)")
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")):
        pytest.skip("needs Debian's apt-get and dpkg")
    if _cove_status():  # left installed by an earlier run that failed half-way
        purged = _run("apt-get", "purge", "-y", "cove")
        assert purged.returncode == 0, purged.stdout[-2000:] + purged.stderr[-2000:]
    assert not Path("/opt/cove").exists(), "/opt/cove exists but no cove package owns it; move it away first"

    built = _build_deb(frozen, tmp_path / "out", timeout=1200)
    assert built.returncode == 0, built.stderr
    (deb,) = (tmp_path / "out").glob("cove_*.deb")
    version = _field(deb, "Version")
    assert Version(version.replace("~", "")) == Version(__version__)
    declared = _package_names(_field(deb, "Depends")) | _package_names(_field(deb, "Recommends"))

    installed = _run("apt-get", "install", "-y", str(deb))
    if installed.returncode != 0:  # stale package lists: a dependency could not be found
        _run("apt-get", "update", "-qq")
        installed = _run("apt-get", "install", "-y", str(deb))
    try:
        assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
        assert _cove_status() == "install ok installed"
        listed = set(_run("dpkg", "-L", "cove").stdout.split())
        icons = {f"/usr/share/icons/hicolor/{s}x{s}/apps/cove.png" for s in ICON_SIZES}
        expected = {
            "/opt/cove/cove",
            "/usr/bin/cove",
            "/usr/share/applications/cove.desktop",
            "/usr/share/icons/hicolor/scalable/apps/cove.svg",
            *icons,
        }
        assert expected <= listed, expected - listed
        assert Path("/usr/bin/cove").resolve() == Path("/opt/cove/cove")
        entry = Path("/usr/share/applications/cove.desktop").read_text().splitlines()
        assert "Exec=/usr/bin/cove" in entry
        _check_system_libraries(Path("/opt/cove"), declared)

        shown = subprocess.run(["/usr/bin/cove", "--version"], capture_output=True, text=True, env=no_python_env, timeout=60)
        assert shown.returncode == 0 and shown.stdout.strip() == f"cove {__version__}", shown.stderr
        model = write_tiny_gguf(tmp_path / "tiny.gguf")
        chat = subprocess.run(
            ["/usr/bin/cove", "chat", "--model", str(model), "--max-tokens", "8", "--seed", "1", "--json", "hi"],
            capture_output=True,
            text=True,
            env=no_python_env,
            timeout=180,
        )
        assert chat.returncode == 0, chat.stderr
        reply = json.loads(chat.stdout)
        assert reply["status"] in ("complete", "length") and reply["metrics"]["gen_tokens"] >= 1
        assert reply["metrics"]["engine_uss_bytes"] > 0  # the engine host ran (as /opt/cove/cove --cove-child)
        assert _python_was_run(no_python_env) == ""
        data = _snapshot(Path(no_python_env["COVE_HOME"]))
        assert data, "the chat kept its conversation in COVE_HOME"
    finally:
        removed = _run("apt-get", "remove", "-y", "cove")
        # With no conffiles dpkg forgets a removed package (apt-get purge then finds no cove);
        # dpkg --purge clears whatever state is left and answers 0 either way.
        purged = _run("dpkg", "--purge", "cove")
    assert removed.returncode == 0, removed.stdout[-2000:] + removed.stderr[-2000:]
    assert purged.returncode == 0, purged.stdout[-2000:] + purged.stderr[-2000:]
    assert _cove_status() in ("", "unknown ok not-installed", "deinstall ok not-installed", "purge ok not-installed")
    left = [p for p in listed if os.path.lexists(p) and not os.path.isdir(p)]
    assert not left, left
    assert not Path("/opt/cove").exists()  # nothing the app wrote while it ran stays behind either
    assert _snapshot(Path(no_python_env["COVE_HOME"])) == data  # the person's conversations are untouched
