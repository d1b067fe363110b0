"""The house rules of DESIGN.md §2, checked on the code itself.

- no import cycle among relay/ and span_relay_demo/ modules, counting imports inside functions and
  under ``TYPE_CHECKING`` (a cycle that only a lazy import hides is still a cycle);
- imports go one way, down the layers below (a module may import its own layer and the
  layers under it);
- ``relay`` never imports ``span_relay_demo``; the demo agent imports only ``relay`` (the curated
  public surface), ``relay.conventions`` and ``relay.events`` (the event contract);
- only ``relay.http``, ``relay.cli`` and ``relay.delivery.streaming`` import Starlette or
  FastAPI.

A module's size is no rule here: ``../shared/tools/layers.py`` lists the largest modules as
a prompt to check whether one has grown a second job (split by job, never squeeze).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = ("fastapi", "starlette")
FRAMEWORK_ALLOWED = ("relay.http", "relay.cli", "relay.delivery.streaming")
#: the curated surface, the span attribute names, and the event contract (its type names)
AGENT_MAY_IMPORT = ("relay", "relay.conventions", "relay.events")

#: the layers, lowest first: spans and events at the bottom, the command line on top
LAYERS: list[tuple[str, ...]] = [
    (
        "relay.events",
        "relay.conventions",
        "relay.settings",
        "relay.setting",
        "relay.envfile",
        "relay.extras",
        "relay.errors",
        "relay.logs",
        "relay.spans",
        "relay.version",
        "relay.json_depth",
        "relay.sourcefile",
    ),
    ("relay.bus", "relay.store", "relay.mapping"),
    (
        "relay.ingest",
        "relay.delivery",
        "relay.agent_server",
        "relay.turns",
        "relay.langgraph",
        "relay.export",
        "relay.readiness",
        "relay.auth",
        "relay.lifecycle",
        "relay.startup",
    ),
    ("relay.http",),
    ("relay.core",),
    ("relay.cli",),
]


def _modules() -> dict[str, Path]:
    found = {}
    for package in ("relay", "span_relay_demo"):
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _parsed(path: Path) -> ast.Module:
    """The module's syntax tree. CPython 3.11 keeps the AST constructor's recursion depth
    in state every thread shares (python/cpython#106905): while another thread of this
    worker parses (a server a fixture left running maps an interrupt), a parse may fail
    with a spurious ``SystemError``; it is tried again (relay/mapping/interrupts.py does
    the same)."""
    text = path.read_text(encoding="utf-8")
    for _ in range(5):
        try:
            return ast.parse(text)
        except SystemError:
            continue
    return ast.parse(text)


def _imports(name: str, path: Path) -> list[tuple[str, int]]:
    """Every module ``name`` imports (anywhere in the file), with its line."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[str, int]] = []
    for node in ast.walk(_parsed(path)):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            names = [f"{target}.{a.name}" for a in node.names]
            submodules = [n for n in names if n in MODULES]
            # `from relay.bus import redis` imports relay.bus.redis; `from relay.bus
            # import MemoryBus` imports the package relay.bus
            out += [(n, node.lineno) for n in submodules]
            if len(submodules) < len(names):
                out.append((target, node.lineno))
    return out


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        edges = set()
        for target, _ in _imports(name, path):
            # a package's face imported from inside the package is the package importing
            # itself, not an edge (Python runs the __init__ first anyway)
            if target in MODULES and target != name and not name.startswith(target + "."):
                edges.add(target)
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
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
    return found


def _layer(name: str) -> int | None:
    for rank, members in enumerate(LAYERS):
        if any(name == m or name.startswith(m + ".") for m in members):
            return rank
    return None


def test_there_is_no_import_cycle() -> None:
    assert _cycles(_graph()) == []


def test_every_relay_module_has_a_layer() -> None:
    unplaced = [m for m in MODULES if m.startswith("relay.") and _layer(m) is None]
    assert unplaced == [], "add these to LAYERS (and to DESIGN.md §2)"


def test_imports_go_one_way() -> None:
    upward = []
    for name, path in MODULES.items():
        rank = _layer(name)
        if rank is None:
            continue
        for target, line in _imports(name, path):
            to = _layer(target)
            if to is not None and to > rank:
                upward.append(f"{path.relative_to(ROOT)}:{line} {name} -> {target}")
    assert upward == []


def test_relay_never_imports_agent() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for name, path in MODULES.items()
        if name.startswith("relay")
        for target, line in _imports(name, path)
        if target == "span_relay_demo" or target.startswith("span_relay_demo.")
    ]
    assert found == []


def test_the_demo_agent_uses_the_public_surface_only() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line} {target}"
        for name, path in MODULES.items()
        if name.startswith("span_relay_demo")
        for target, line in _imports(name, path)
        if (target == "relay" or target.startswith("relay.")) and target not in AGENT_MAY_IMPORT
    ]
    assert found == []


def test_web_frameworks_only_where_allowed() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line} {target}"
        for name, path in MODULES.items()
        if name.startswith("relay") and not name.startswith(FRAMEWORK_ALLOWED)
        for target, line in _imports(name, path)
        if target.split(".")[0] in FRAMEWORKS
    ]
    assert found == []


def test_the_rules_see_what_they_check() -> None:
    """The checks above are only as good as the import reader: it must see a lazy import
    inside a function and one under TYPE_CHECKING (relay.core has both kinds)."""
    core = dict(_imports("relay.core", MODULES["relay.core"]))
    assert "relay.http.turns" in core  # inside Relay.router
    assert "relay.ingest.grpc" in core  # under TYPE_CHECKING
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
