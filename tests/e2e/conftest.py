"""The frozen app, built once for every test that needs it (tests marked `packaging`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT as ROOT


@pytest.fixture(scope="session")
def frozen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the app into a temporary folder with packaging/build.sh; returns dist/Cove."""
    out = tmp_path_factory.mktemp("build")
    result = subprocess.run(
        ["bash", str(ROOT / "packaging" / "build.sh"), "--distpath", str(out / "dist"), "--workpath", str(out / "work")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "COVE_PYTHON": sys.executable},
        timeout=1500,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    app = out / "dist" / "Cove"
    assert (app / "cove").is_file()
    return app
