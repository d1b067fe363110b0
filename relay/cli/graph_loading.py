"""A graph named the LangGraph way (``./src/agent/graph.py:graph``, ``my_pkg.agent:graph``),
imported and built: :func:`import_graph` at start-up (an import failure is a
:class:`GraphLoadError` in one line), then :meth:`ImportedGraph.build` in the app's
lifespan, on the server's event loop.

What the attribute may be (langgraph-cli's schema, and the Agent Server's loader):

- a compiled graph (any Pregel: ``StateGraph(...).compile()``, ``@entrypoint``), or a
  ``StateGraph`` builder (compiled here);
- a factory that returns either: a function taking no argument, a ``RunnableConfig``,
  a ``ServerRuntime`` (by annotation, as the Agent Server tells them apart), or both; sync
  or ``async``. A parameter with a default is left to it unless it is named ``config`` or
  annotated ``RunnableConfig`` / ``ServerRuntime`` (``build(checkpointer=None)`` is a
  factory of no argument);
- a factory that is a context manager: ``@contextlib.asynccontextmanager`` (or
  ``@contextlib.contextmanager``) around a function of the same arguments; it is entered
  once, before the server answers, and exited at shutdown.

Unlike the Agent Server, which calls a factory for every run (with that run's config,
user and access context), span-relay calls it **once**, at start-up, with an empty
``RunnableConfig`` and a ``ServerRuntime`` of no user and no store (``access_context
"threads.create_run"``; the graph's store is opened with the relay, after the factories,
and reaches the nodes at run time: ``get_store()``, ``runtime.store``): the graph it
returns serves every turn. A factory that needs the caller (``runtime.user``,
``ensure_user()``) fails at start-up, saying so.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import logging
import os
import sys
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relay.settings import ConfigError
from relay.sourcefile import import_file

log = logging.getLogger("relay.cli")


class GraphLoadError(ConfigError):
    """A graph that cannot be imported or built: one line naming it, its file and the
    exception (the traceback is logged at DEBUG)."""


@dataclass
class ImportedGraph:
    """A graph's attribute, imported: a compiled graph, or a factory to call in the
    lifespan (:meth:`build`)."""

    #: the name it is served under (None: the graph's own name, else the module's)
    name: str | None
    spec: str
    #: where it came from, for messages: the file (``./src/agent/graph.py``) or module
    where: str
    value: Any
    description: str | None = None
    #: for a factory, the keyword of each argument: "config" or "runtime" (by name)
    arguments: dict[str, str] | None = None

    @property
    def label(self) -> str:
        return f"graph {self.name!r}" if self.name else f"graph {self.spec!r}"

    async def build(self, stack: contextlib.AsyncExitStack, store: Any = None) -> Any:
        """The compiled graph: the value itself, or what the factory returns (awaited, or
        entered as a context manager on ``stack``, exited when the stack closes)."""
        if self.arguments is None:
            return self.value
        try:
            made = self.value(**self._arguments(store))
            if hasattr(made, "__aenter__") and hasattr(made, "__aexit__"):
                made = await stack.enter_async_context(made)
            elif hasattr(made, "__enter__") and hasattr(made, "__exit__"):
                made = stack.enter_context(made)
            elif inspect.isawaitable(made):
                made = await made
        except Exception as exc:
            log.debug("building %s failed", self.label, exc_info=True)
            raise GraphLoadError(
                f"cannot build {self.label} from {self.where}: its factory raised "
                f"{type(exc).__name__}: {exc}"
            ) from None
        return as_compiled(made, f"{self.label} ({self.spec}): its factory returned", "")

    def _arguments(self, store: Any) -> dict[str, Any]:
        from langchain_core.runnables import ensure_config

        out: dict[str, Any] = {}
        for name, kind in (self.arguments or {}).items():
            if kind == "runtime":
                from langgraph_sdk.runtime import _ExecutionRuntime

                out[name] = _ExecutionRuntime(
                    access_context="threads.create_run", user=None, store=store
                )
            else:
                out[name] = ensure_config({"configurable": {}})
        return out


def import_graph(
    spec: str,
    base: Path | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
) -> ImportedGraph:
    """Import what ``spec`` (``module:attr`` or ``path.py:attr``) names and tell what it
    is; a StateGraph is compiled here. GraphLoadError (or ConfigError) in one sentence
    for what cannot be served."""
    where, sep, attr = spec.rpartition(":")
    label = f"graph {name!r}" if name else f"graph {spec!r}"
    if not sep or not where or not attr:
        raise ConfigError(
            f"{label}: write it as module:attribute (my_pkg.agent:graph) or "
            f"path/to/file.py:attribute, not {spec!r}"
        )
    module = import_source(where, base or Path.cwd(), label)
    try:
        value = getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"{label}: {where} has no attribute {attr!r}") from None
    graph = ImportedGraph(name, spec, where, value, description)
    if is_graph(value):
        return graph
    if callable(getattr(value, "compile", None)) and not inspect.isroutine(value):
        graph.value = value.compile()  # a StateGraph builder
        return graph
    if inspect.isasyncgenfunction(value) or inspect.isgeneratorfunction(value):
        raise ConfigError(
            f"{label} ({spec}) is a generator function: decorate it with "
            "@contextlib.asynccontextmanager (or @contextlib.contextmanager) to make it "
            "a factory that yields the graph"
        )
    if callable(value) and not inspect.isclass(value):
        graph.arguments = factory_arguments(value, f"{label} ({spec})")
        return graph
    raise ConfigError(
        f"{label} ({spec}) is a {type(value).__name__}, not a compiled LangGraph graph, "
        "a StateGraph, or a function (or context manager) returning one"
    )


def factory_arguments(fn: Any, label: str) -> dict[str, str]:
    """Each parameter of the factory ``fn``: ``config`` (a RunnableConfig) or ``runtime``
    (annotated ServerRuntime), as the Agent Server classifies them."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return {}
    params = [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # an annotation that does not resolve: judged by its text below
        hints = {}
    kinds = {}
    for p in params:
        annotation = hints.get(p.name, p.annotation)
        if _is_runtime(annotation):
            kinds[p.name] = "runtime"
        elif p.default is p.empty or p.name == "config" or _is_config(annotation):
            kinds[p.name] = "config"  # else a parameter with a default keeps it
    if len(kinds) > 2:
        raise ConfigError(
            f"{label}: a graph factory takes no argument, a RunnableConfig, a "
            f"ServerRuntime or both; it takes {list(kinds)}"
        )
    if len(kinds) == 2 and sorted(kinds.values()) != ["config", "runtime"]:
        raise ConfigError(
            f"{label}: a factory of two arguments takes a RunnableConfig and a "
            "ServerRuntime (annotate the runtime's: runtime: ServerRuntime)"
        )
    return kinds


def is_graph(value: Any) -> bool:
    """A compiled LangGraph graph (what GraphAgent serves)."""
    return (
        callable(getattr(value, "ainvoke", None))
        and callable(getattr(value, "get_graph", None))
        and hasattr(value, "checkpointer")
    )


def as_compiled(value: Any, what: str, hint: str) -> Any:
    """``value`` compiled (a StateGraph builder), or a ConfigError naming ``what``."""
    if not is_graph(value) and callable(getattr(value, "compile", None)):
        value = value.compile()
    if not is_graph(value):
        raise GraphLoadError(
            f"{what} a {type(value).__name__}, not a compiled LangGraph graph "
            f"(or a StateGraph){hint}"
        )
    return value


def _is_config(annotation: Any) -> bool:
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return "RunnableConfig" in text


def _is_runtime(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.split("[", 1)[0].rsplit(".", 1)[-1] == "ServerRuntime"
    if annotation is inspect.Parameter.empty:
        return False
    if getattr(annotation, "__name__", None) == "ServerRuntime":
        return True
    origin = typing.get_origin(annotation)
    if origin is not None and origin is not annotation:
        return getattr(origin, "__name__", None) == "ServerRuntime" or any(
            _is_runtime(a) for a in typing.get_args(annotation)[:1]
        )
    try:
        from langgraph_sdk.runtime import _ServerRuntimeBase
    except ImportError:
        return False
    return isinstance(annotation, type) and issubclass(annotation, _ServerRuntimeBase)


def import_source(where: str, base: Path, label: str) -> Any:
    """The module ``where`` names: a file (a path, or a name ending in ``.py``) or a
    module on the import path. A failure while importing is a GraphLoadError naming the
    file and the exception."""
    if where.endswith(".py") or "/" in where or os.sep in where:
        path = (base / where).resolve()
        if not path.is_file():
            raise ConfigError(f"{label}: the file {path} does not exist")
        try:
            return import_file(path, "span_relay_graph")
        except Exception as exc:
            raise _load_error(label, where, exc) from None
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(where)
    except Exception as exc:
        raise _load_error(label, where, exc) from None


def _load_error(label: str, where: str, exc: BaseException) -> GraphLoadError:
    log.debug("importing %s from %s failed", label, where, exc_info=exc)
    return GraphLoadError(f"cannot load {label} from {where}: {type(exc).__name__}: {exc}")
