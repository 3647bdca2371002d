"""The core stays Qt-free: app/ and models/ never import PySide6, shiboken6 or ui/ (DESIGN.md section 1),
and models/ never imports app/ (imports go ui -> app -> models)."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN_FOR_CORE = ("PySide6", "shiboken6", "ui")


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _violations(package: str, forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for name in _imports(path):
            if name.split(".")[0] in forbidden:
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    return bad


def test_core_packages_do_not_import_qt_or_ui() -> None:
    assert _violations("app", FORBIDDEN_FOR_CORE) == []
    assert _violations("models", FORBIDDEN_FOR_CORE + ("app",)) == []


def test_importing_every_core_module_loads_no_qt() -> None:
    modules = []
    for package in ("app", "models"):
        for info in pkgutil.walk_packages([str(ROOT / package)], prefix=f"{package}."):
            if not info.name.endswith("__main__"):
                modules.append(info.name)
    assert len(modules) > 5, modules
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'shiboken6', 'ui'))\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_checker_notices_a_forbidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from PySide6.QtCore import QTimer\nimport ui.main\n")
    assert [n.split(".")[0] for n in _imports(sample)] == ["PySide6", "ui"]
