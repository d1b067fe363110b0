"""The start-up log: one INFO record that says what this process serves.

When a relay starts (:meth:`relay.core.Relay.start`) it lists, in one record of the
``relay.startup`` logger: the graphs and their routes (``/graphs/{name}/chat``,
``/chat/resume`` and ``/agui``; the first graph also at ``/chat``, ``/chat/resume`` and
``/agui``), the OTLP receivers, the bus (in process, or the Redis host), the turn
records, saved answers and span store (the SQLite files, or the PostgreSQL host and
database), the LangGraph checkpointer and the graphs' long-term memory store, who may
call (the auth mode), and whether the SPA is served and from which folder, or why not. A
URL is shown by its host, port and database only: never a user name or a password.

As text, the record is a block of lines; with ``RELAY_LOG_FORMAT=json`` (relay/logs.py)
the same record is one JSON object whose ``message`` holds the block and whose fields
``graphs``, ``receivers``, ``bus``, ``stores``, ``checkpointer``, ``memory_store``,
``callers`` and ``spa`` hold it as data.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from relay.langgraph.checkpoints import checkpointer_url
from relay.langgraph.store import SQLITE_FILE as STORE_FILE
from relay.settings import PACKAGE_SPA_DIR, RelaySettings
from relay.version import __version__

log = logging.getLogger("relay.startup")

_POSTGRES = ("postgresql://", "postgres://")

#: who may call, by auth mode (RELAY_AUTH, or "langgraph" for langgraph.json's auth)
CALLERS = {
    "none": "anyone (RELAY_AUTH=none: no credential asked)",
    "token": "holders of RELAY_API_TOKEN (RELAY_AUTH=token)",
    "jwt": "users with a JWT verified against RELAY_JWT_JWKS (RELAY_AUTH=jwt)",
    "proxy": "users named by the fronting proxy (RELAY_AUTH=proxy)",
    "langgraph": "users langgraph.json's auth authenticates (LangGraph's Auth)",
}


@dataclass(frozen=True, slots=True)
class ServedGraph:
    """A mounted graph, as the listing shows it: its name, and what it checkpoints with
    when that is not the relay's (``its own InMemorySaver``, ``no checkpointer``; None:
    the relay's)."""

    name: str
    own_checkpointer: str | None = None


def routes_of(name: str, first: bool) -> list[str]:
    """The run routes of graph ``name``; ``first``: also the app's own ``/chat`` ones."""
    base = [f"/graphs/{name}/chat", f"/graphs/{name}/chat/resume", f"/graphs/{name}/agui"]
    return base + (["/chat", "/chat/resume", "/agui"] if first else [])


def served(
    settings: RelaySettings,
    environ: Mapping[str, str],
    graphs: Sequence[ServedGraph],
    *,
    routes: bool,
    auth_mode: str = "none",
    memory_store: bool = False,
) -> dict[str, Any]:
    """What this process serves, as data: ``routes`` says whether the app includes the
    relay's routes (:attr:`relay.core.Relay.router`: the turn API and the SPA),
    ``memory_store`` whether the relay opened the graphs' store (a graph compiled without
    one is served)."""
    return {
        "graphs": [
            {"name": graph.name, "routes": routes_of(graph.name, first=index == 0)}
            for index, graph in enumerate(graphs)
        ],
        "receivers": _receivers(settings),
        "bus": _bus(settings.bus),
        "stores": _stores(settings),
        "checkpointer": _checkpointer(settings, environ, graphs),
        "memory_store": _memory_store(settings) if memory_store else None,
        "callers": CALLERS.get(auth_mode, auth_mode),
        "spa": _spa(settings, routes),
    }


def listing(facts: Mapping[str, Any]) -> str:
    """The block of lines :func:`served` data reads as."""
    lines = [f"span-relay {__version__} serves:"]
    for graph in facts["graphs"]:
        own, first = graph["routes"][:3], graph["routes"][3:]
        lines.append(f"  graph {graph['name']}: {', '.join(own)}")
        if first:
            lines.append(f"    and, as the first graph, {', '.join(first)}")
    if not facts["graphs"]:
        lines.append("  graphs: none in this process")
    lines.append(f"  OTLP receivers: {', '.join(facts['receivers']) or 'off'}")
    lines.append(f"  bus: {facts['bus']}")
    lines += [f"  {part}: {where}" for part, where in facts["stores"].items()]
    lines.append(f"  checkpointer: {facts['checkpointer']}")
    if facts["memory_store"]:
        lines.append(f"  graphs' store: {facts['memory_store']}")
    lines.append(f"  who may call: {facts['callers']}")
    spa = facts["spa"]
    if spa["served"]:
        lines.append(f"  SPA: GET / from {spa['folder']} ({spa['source']})")
    else:
        lines.append(f"  SPA: not served ({spa['why']})")
    return "\n".join(lines)


def log_served(
    settings: RelaySettings,
    environ: Mapping[str, str],
    graphs: Sequence[ServedGraph],
    *,
    routes: bool,
    auth_mode: str = "none",
    memory_store: bool = False,
) -> None:
    """Log the listing: one INFO record, its data as the record's fields."""
    facts = served(
        settings, environ, graphs, routes=routes, auth_mode=auth_mode, memory_store=memory_store
    )
    log.info("%s", listing(facts), extra=facts)


def _receivers(settings: RelaySettings) -> list[str]:
    found = []
    if settings.otlp_http:
        found.append("HTTP POST /v1/traces")
    if settings.otlp_grpc:
        found.append(f"gRPC {settings.otlp_grpc}")
    return found


def _bus(url: str) -> str:
    if url == "memory":
        return "memory (this process only)"
    parts = urlsplit(url)
    tls = " (TLS)" if parts.scheme == "rediss" else ""
    return f"Redis {_host(parts.hostname, _port(parts))}{parts.path or '/0'}{tls}"


def _stores(settings: RelaySettings) -> dict[str, str]:
    if settings.store.startswith(_POSTGRES):
        return {"turn records, saved answers and spans": _postgres(settings.store)}
    folder = settings.data_dir.resolve()
    return {
        "turn records": f"SQLite {folder / 'turns.db'}",
        "saved answers": f"SQLite {folder / 'messages.db'}",
        "span store": f"SQLite {folder / 'spans.db'}",
    }


def _checkpointer(
    settings: RelaySettings, environ: Mapping[str, str], graphs: Sequence[ServedGraph]
) -> str:
    if not graphs:
        return "none (no graph in this process)"
    url = checkpointer_url(settings, environ)
    if url is None:
        where = f"SQLite {settings.data_dir.resolve() / 'checkpoints.db'}"
    else:
        where = _postgres(url)
    own = [f"graph {g.name}: {g.own_checkpointer}" for g in graphs if g.own_checkpointer]
    return "; ".join([where, *own])


def _memory_store(settings: RelaySettings) -> str:
    """Where the graphs' LangGraph store keeps its items (relay/langgraph/store.py)."""
    if settings.store.startswith(_POSTGRES):
        return _postgres(settings.store)
    return f"SQLite {settings.data_dir.resolve() / STORE_FILE}"


def _spa(settings: RelaySettings, routes: bool) -> dict[str, Any]:
    folder = settings.resolved_spa_dir()
    if not routes:
        why = "this app does not include the relay's routes (relay.mount or relay.router)"
        return {"served": False, "folder": None, "source": None, "why": why}
    if folder is None:
        why = (
            f"{PACKAGE_SPA_DIR} holds no index.html: an incomplete install of span-relay "
            "(reinstall it, or set RELAY_SPA_DIR)"
        )
        return {"served": False, "folder": None, "source": None, "why": why}
    source = "RELAY_SPA_DIR" if settings.spa_dir is not None else "the package's own"
    return {"served": True, "folder": str(folder.resolve()), "source": source, "why": None}


def _postgres(url: str) -> str:
    """``PostgreSQL host:port/database``: what a URL connects to, never who with."""
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    host = parts.hostname or next(iter(query.get("host", [])), None) or "the local socket"
    database = parts.path.lstrip("/") or next(iter(query.get("dbname", [])), "")
    return f"PostgreSQL {_host(host, _port(parts))}/{database or '(the default database)'}"


def _host(host: str | None, port: int | None) -> str:
    name = host or "localhost"
    return f"{name}:{port}" if port is not None else name


def _port(parts: Any) -> int | None:
    try:
        port: int | None = parts.port
    except ValueError:  # not a number: the driver will say so when it connects
        return None
    return port


__all__ = ["ServedGraph", "listing", "log_served", "routes_of", "served"]
