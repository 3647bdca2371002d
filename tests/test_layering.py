"""The layering holds: app/ and models/ never import PySide6, shiboken6 or ui/, models/ never imports
app/ (imports go ui -> app -> models), no modules of app/, models/, ui/ import each other in a cycle,
only the engine host's package (app/engine/host/) imports llama_cpp, no parent code imports the
engine host's package, the engine and the history store (app/engine/, app/store/) do not import
each other, and app/serve's three rooms keep their order: http -> api -> pool, the pool never
reaching up, the endpoints reaching the pool only through the shared preamble (api/service.py)."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN_FOR_CORE = ("PySide6", "shiboken6", "ui")
OUR_PACKAGES = ("app", "models", "ui")


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


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(root: Path, packages: tuple[str, ...] = OUR_PACKAGES) -> dict[str, set[str]]:
    """Module -> the modules of `packages` it imports. Every import statement counts: at module
    level, inside functions (lazy imports) and under `if TYPE_CHECKING:`. `from a.b import c`
    names the module a.b.c when there is one, else a.b; relative imports are resolved."""
    files = {_module_name(root, p): p for package in packages for p in sorted((root / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base for alias in node.names]
            graph[name].update(t for t in targets if t in files and t != name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_import_cycles_between_our_modules() -> None:
    graph = _import_graph(ROOT)
    assert len(graph) > 100 and "app.store.history" in graph["app.turn.record"]
    assert _cycles(graph) == []


def test_the_cycle_check_notices_a_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "app"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from app import b\n")
    (pkg / "b.py").write_text("def f():\n    from .sub import c\n")
    (pkg / "sub" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import app.a\n")
    (pkg / "d.py").write_text("import app.a\n")
    graph = _import_graph(tmp_path, ("app",))
    assert graph["app.b"] == {"app.sub.c"}
    assert _cycles(graph) == [["app.a", "app.b", "app.sub.c"]]


ENGINE_HOST = "app/engine/host"


def _llama_importers(root: Path) -> list[str]:
    """Modules of app/, models/ and ui/ outside the engine host's package that import llama_cpp
    (at any level: module, function or TYPE_CHECKING)."""
    bad = []
    for package in OUR_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel.startswith(ENGINE_HOST + "/"):
                continue
            if any(name.split(".")[0] == "llama_cpp" for name in _imports(path)):
                bad.append(rel)
    return bad


def test_only_the_engine_host_imports_llama_cpp() -> None:
    assert _llama_importers(ROOT) == []
    assert "app.engine.host.session" in _import_graph(ROOT)  # the host's package is where it is said to be


def test_the_llama_check_notices_an_import_outside_the_host(tmp_path: Path) -> None:
    (tmp_path / "app" / "engine" / "host").mkdir(parents=True)
    (tmp_path / "app" / "engine" / "host" / "session.py").write_text("import llama_cpp\n")
    (tmp_path / "app" / "docs").mkdir()
    (tmp_path / "app" / "docs" / "embedding.py").write_text("def f():\n    from llama_cpp import Llama\n")
    assert _llama_importers(tmp_path) == ["app/docs/embedding.py"]


def test_the_engine_and_the_history_store_do_not_import_each_other() -> None:
    graph = _import_graph(ROOT)
    crossing = sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        for b in targets
        if (a.startswith("app.engine.") and b.startswith("app.store.")) or (a.startswith("app.store.") and b.startswith("app.engine."))
    )
    assert crossing == []


def _host_importers(graph: dict[str, set[str]]) -> list[str]:
    """Imports of the engine host's package from outside it (parent code runs the host as a process)."""
    return sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        for b in targets
        if b.startswith("app.engine.host") and not a.startswith("app.engine.host")
    )


def test_parent_code_does_not_import_the_engine_host() -> None:
    graph = _import_graph(ROOT)
    assert "app.engine.client" in graph
    assert _host_importers(graph) == []


# What the api and pool rooms may use of the http room: its leaf helpers, not the server.
SERVE_HTTP_HELPERS = {"app.serve.http.errors", "app.serve.http.http", "app.serve.http.keys", "app.serve.http.peer_owner"}
SERVE_PREAMBLE = "app.serve.api.service"  # the one module of the endpoints that reaches into the pool


def _serve_crossings(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for a, targets in graph.items():
        for b in targets:
            if a.startswith("app.serve.pool.") and b.startswith("app.serve.api."):
                bad.append(f"{a} -> {b} (the pool reaches up into the endpoints)")
            if a.startswith(("app.serve.pool.", "app.serve.api.")) and b.startswith("app.serve.http.") and b not in SERVE_HTTP_HELPERS:
                bad.append(f"{a} -> {b} (the server itself)")
            if a.startswith("app.serve.api.") and a != SERVE_PREAMBLE and b.startswith("app.serve.pool."):
                bad.append(f"{a} -> {b} (an endpoint in the pool's internals)")
    return sorted(bad)


def test_the_api_server_keeps_its_three_rooms_in_order() -> None:
    graph = _import_graph(ROOT)
    rooms = {name.split(".")[2] for name in graph if name.startswith("app.serve.") and name.count(".") >= 3}
    assert rooms == {"http", "api", "pool"}
    outside = [n for n in graph if n.startswith("app.serve.") and n.split(".")[2] not in {"http", "api", "pool"}]
    assert outside == [], "every module of app/serve lives in one of its rooms"
    assert _serve_crossings(graph) == []


def test_the_room_check_notices_crossings(tmp_path: Path) -> None:
    for room in ("http", "api", "pool"):
        (tmp_path / "app" / "serve" / room).mkdir(parents=True)
        (tmp_path / "app" / "serve" / room / "__init__.py").write_text("")
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "serve" / "__init__.py").write_text("")
    (tmp_path / "app" / "serve" / "http" / "server.py").write_text("")
    (tmp_path / "app" / "serve" / "http" / "errors.py").write_text("")
    (tmp_path / "app" / "serve" / "api" / "service.py").write_text("from app.serve.pool import pool\n")
    (tmp_path / "app" / "serve" / "api" / "openai_api.py").write_text(
        "from app.serve.pool.pool import X\nfrom app.serve.http import errors\n"
    )
    (tmp_path / "app" / "serve" / "pool" / "pool.py").write_text("def f():\n    from app.serve.api import service\n")
    (tmp_path / "app" / "serve" / "pool" / "engines.py").write_text("from app.serve.http.server import app\n")
    assert _serve_crossings(_import_graph(tmp_path, ("app",))) == [
        "app.serve.api.openai_api -> app.serve.pool.pool (an endpoint in the pool's internals)",
        "app.serve.pool.engines -> app.serve.http.server (the server itself)",
        "app.serve.pool.pool -> app.serve.api.service (the pool reaches up into the endpoints)",
    ]
    (tmp_path / "app" / "engine" / "host").mkdir(parents=True)
    (tmp_path / "app" / "engine" / "__init__.py").write_text("")
    (tmp_path / "app" / "engine" / "host" / "__init__.py").write_text("")
    (tmp_path / "app" / "engine" / "host" / "session.py").write_text("")
    (tmp_path / "app" / "engine" / "client.py").write_text("from app.engine.host.session import S\n")
    assert _host_importers(_import_graph(tmp_path, ("app",))) == ["app.engine.client -> app.engine.host.session"]
