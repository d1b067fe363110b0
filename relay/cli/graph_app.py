"""``span-relay serve --graph MODULE:ATTR`` and ``--config langgraph.json``: any graph, served.

A graph is named the way the LangGraph CLI names it: ``my_pkg.agent:graph`` (a module on
the import path) or ``./src/agent.py:graph`` (a file, relative to the config's folder or
the working directory). ``ATTR`` is a compiled graph, a ``StateGraph`` (compiled here), or
a function that returns either (called with no argument, or with a RunnableConfig-like
``{}`` when it takes one; a coroutine function is awaited). A graph compiled without a
checkpointer gets the relay's (SQLite under RELAY_DATA_DIR, or PostgreSQL).

``langgraph.json``: its ``graphs`` map (name -> path), its ``env`` (a file of ``KEY=VALUE``
lines, or an object), and its folder on the import path. Other keys (``dependencies``,
``python_version``, ...) are the LangGraph CLI's build settings and are not read.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from relay.core import Relay
from relay.langgraph.agent import GraphAgent
from relay.settings import ConfigError
from relay.version import __version__

_NAME = re.compile(r"[^A-Za-z0-9_-]+")


def load_graph(spec: str, base: Path | None = None) -> Any:
    """The compiled graph ``spec`` (``module:attr`` or ``path.py:attr``) names."""
    where, sep, attr = spec.rpartition(":")
    if not sep or not where or not attr:
        raise ConfigError(
            f"graph {spec!r}: write it as module:attribute "
            "(my_pkg.agent:graph) or path/to/file.py:attribute"
        )
    module = _import(where, base or Path.cwd())
    try:
        value = getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"graph {spec!r}: {where} has no attribute {attr!r}") from None
    if callable(value) and not _is_graph(value) and not hasattr(value, "compile"):
        value = value({}) if _takes_argument(value) else value()
        if inspect.isawaitable(value):
            value = asyncio.run(_awaited(value))
    if not _is_graph(value) and callable(getattr(value, "compile", None)):
        value = value.compile()  # a StateGraph builder
    if not _is_graph(value):
        raise ConfigError(
            f"graph {spec!r} is a {type(value).__name__}, not a compiled "
            "LangGraph graph (or a StateGraph, or a function returning one)"
        )
    return value


def read_config(path: Path) -> tuple[list[tuple[str | None, str]], dict[str, str]]:
    """``(graphs as (name, spec), env)`` of a LangGraph CLI config file; its folder joins
    the import path."""
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read it as JSON ({exc})") from None
    graphs = config.get("graphs") if isinstance(config, dict) else None
    if (
        not isinstance(graphs, dict)
        or not graphs
        or not all(isinstance(v, str) for v in graphs.values())
    ):
        raise ConfigError(
            f'{path}: \'graphs\' must map names to paths ({{"agent": "./agent.py:graph"}})'
        )
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    env = config.get("env")
    if isinstance(env, str):
        env = read_env_file(path.parent / env)
    elif env is not None and not isinstance(env, dict):
        raise ConfigError(f"{path}: 'env' must be a file name or an object")
    named: list[tuple[str | None, str]] = list(graphs.items())
    return named, {str(k): str(v) for k, v in (env or {}).items()}


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines (``#`` comments, optional ``export``, quotes stripped)."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ConfigError(f"env file {path}: {exc}") from None
    env: dict[str, str] = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        env[key.strip()] = value
    return env


def create_graph_app(
    graphs: Sequence[tuple[str | None, str]],
    environ: Mapping[str, str] | None = None,
    base: Path | None = None,
) -> FastAPI:
    """An app serving ``graphs`` (``(name, spec)``; a name None: the graph's own name,
    else the spec's module), the first also at ``/chat``."""
    env = dict(os.environ if environ is None else environ)
    relay = Relay.from_env(env)
    agents = []
    for name, spec in graphs:
        graph = load_graph(spec, base)
        own = getattr(graph, "name", None)
        chosen = name or (own if own and own != "LangGraph" else graph_name(spec))
        agents.append(GraphAgent(graph, name=_NAME.sub("_", chosen)[:64] or "graph"))
    app = FastAPI(title="span-relay", version=__version__, lifespan=relay.lifespan)
    relay.mount(app, *agents)
    return app


def graph_name(spec: str) -> str:
    """The name of a ``--graph`` spec: its module's last part (``my_pkg.agent:graph`` ->
    ``agent``, ``./src/chat.py:app`` -> ``chat``)."""
    where = spec.rpartition(":")[0]
    stem = Path(where).stem if where.endswith(".py") else where.rsplit(".", 1)[-1]
    return _NAME.sub("_", stem) or "graph"


def _import(where: str, base: Path) -> Any:
    if where.endswith(".py") or "/" in where or os.sep in where:
        path = (base / where).resolve()
        if not path.is_file():
            raise ConfigError(f"graph file {path} does not exist")
        name = f"span_relay_graph_{abs(hash(str(path)))}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ConfigError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        spec.loader.exec_module(module)
        return module
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"cannot import {where!r}: {exc}") from None


def _is_graph(value: Any) -> bool:
    return (
        callable(getattr(value, "ainvoke", None))
        and callable(getattr(value, "get_graph", None))
        and hasattr(value, "checkpointer")
    )


def _takes_argument(fn: Any) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        for p in params
    )


async def _awaited(value: Any) -> Any:
    return await value
