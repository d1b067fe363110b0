"""LangGraph's long-term memory store (a ``BaseStore``) for every graph the relay serves.

A node reads and writes memories across threads with ``get_store()``
(``langgraph.config``) or ``runtime.store``; ``langgraph dev`` always gives a graph one,
and so does the relay: a graph compiled without a store gets this one
(:meth:`relay.langgraph.agent.GraphAgent.bind`), a graph compiled with its own keeps it.

- SQLite (default): ``store.db`` under RELAY_DATA_DIR, LangGraph's ``AsyncSqliteStore``
  (langgraph-checkpoint-sqlite), one connection in WAL mode.
- PostgreSQL when RELAY_STORE is a ``postgresql://`` URL: LangGraph's
  ``AsyncPostgresStore`` (langgraph-checkpoint-postgres) on a psycopg_pool pool opened
  with RELAY_STORE itself and the numbers of relay/store/pool.py, as the checkpointer.
  LangGraph names its tables without a schema (``store``, ``store_migrations``, and with
  ``index`` ``store_vectors``, ``vector_migrations``), so they land in the first schema
  of the connection's ``search_path``: the deployment's (relay/store/schema.py:
  ``RELAY_PG_SCHEMA``, or the connection's current schema), which the pool puts first on
  each connection, as for the relay's other tables; the setup lock's key is that
  schema's own.

It is opened once per process by ``Relay.lifespan``, its ``setup()`` (LangGraph's
migrations) run, and closed at shutdown. :func:`store_options` reads langgraph.json's
``store`` section (the Agent Server's schema, libs/cli/langgraph_cli/schemas.py):
``index`` (``dims``, ``embed``, ``fields``: semantic search) and ``ttl``
(``refresh_on_read``, ``default_ttl`` in minutes, ``sweep_interval_minutes``: the
store's own sweeper runs while the app does, when an interval is given).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relay.settings import ConfigError, RelaySettings
from relay.sourcefile import import_file

log = logging.getLogger("relay.store")
_POSTGRES = ("postgresql://", "postgres://")
#: the store's file under RELAY_DATA_DIR (SQLite)
SQLITE_FILE = "store.db"
_INDEX_KEYS = ("dims", "embed", "fields")
_TTL_KEYS = ("refresh_on_read", "default_ttl", "sweep_interval_minutes")


@dataclass(frozen=True, slots=True)
class StoreOptions:
    """langgraph.json's ``store`` section, checked and ready for LangGraph's stores.

    ``index``: ``{"dims", "embed", "fields"}`` with ``embed`` an ``Embeddings`` object
    or a function of a list of texts (None: no semantic search). ``ttl``: LangGraph's
    ``TTLConfig`` (None: items never expire)."""

    index: Mapping[str, Any] | None = None
    ttl: Mapping[str, Any] | None = None


def store_options(section: Any, base: Path | None = None) -> StoreOptions:
    """The ``store`` section of langgraph.json (or the same mapping given to
    ``Relay(..., store=...)``), checked: a ConfigError names each wrong value.
    ``base``: the folder a path in ``index.embed`` is relative to (the config's)."""
    if section is None:
        return StoreOptions()
    if not isinstance(section, Mapping):
        raise ConfigError(
            f"store: expected an object with 'index' and/or 'ttl', not {_kind(section)}"
        )
    _no_other_keys("store", section, ("index", "ttl"))
    index = section.get("index")
    ttl = section.get("ttl")
    return StoreOptions(
        index=None if index is None else _index(index, base or Path.cwd()),
        ttl=None if ttl is None else _ttl(ttl),
    )


def store_url(settings: RelaySettings) -> str | None:
    """The PostgreSQL URL of the store (RELAY_STORE), or None for SQLite."""
    return settings.store if settings.store.startswith(_POSTGRES) else None


def check_backend(settings: RelaySettings, options: StoreOptions) -> None:
    """Refuse (ConfigError) what the chosen backend cannot do, before anything opens:
    semantic search on SQLite loads the sqlite-vec extension, which a Python built
    without loadable SQLite extensions (some pyenv builds) cannot. PostgreSQL's pgvector
    is found missing only when the store opens (:func:`open_store` says so then)."""
    if options.index is not None and store_url(settings) is None and not sqlite_can_index():
        raise ConfigError(
            "store.index on SQLite loads the sqlite-vec extension, and this Python's "
            f"sqlite3 module ({sys.executable}) cannot load extensions: use a Python "
            "built with loadable SQLite extensions, or PostgreSQL with pgvector "
            "(RELAY_STORE=postgresql://...), or remove 'index'"
        )


def sqlite_can_index() -> bool:
    """Whether this Python's sqlite3 can load sqlite-vec (semantic search on SQLite)."""
    import sqlite3

    return hasattr(sqlite3.Connection, "enable_load_extension")


@asynccontextmanager
async def open_store(
    settings: RelaySettings, options: StoreOptions | None = None
) -> AsyncIterator[Any]:
    """The relay's LangGraph store, set up, for the life of the block; its TTL sweeper
    (``ttl.sweep_interval_minutes``) runs until the block ends."""
    options = options or StoreOptions()
    check_backend(settings, options)
    ttl = dict(options.ttl) if options.ttl is not None else None
    url = store_url(settings)
    if url is None:
        from langgraph.store.sqlite.aio import AsyncSqliteStore

        # langgraph-checkpoint-sqlite 3.1 reads the fields to embed from "text_fields"
        # (every other store, and langgraph.json, say "fields"): given both
        index = dict(options.index) if options.index is not None else None
        if index is not None:
            index["text_fields"] = index.get("fields")
        path = str(settings.data_dir / SQLITE_FILE)
        async with AsyncSqliteStore.from_conn_string(
            path,
            index=index,  # type: ignore[arg-type]
            ttl=ttl,  # type: ignore[arg-type]
        ) as sqlite_store:
            # WAL + synchronous=NORMAL, as the checkpoints and the turn records
            await sqlite_store.conn.execute("PRAGMA journal_mode=WAL")
            await sqlite_store.conn.execute("PRAGMA synchronous=NORMAL")
            await sqlite_store.setup()
            _opened(f"SQLite {settings.data_dir.resolve() / SQLITE_FILE}", options)
            async with _sweeping(sqlite_store, ttl):
                yield sqlite_store
        return
    async with _postgres_store(url, settings.pg_schema, options, ttl) as pg_store:
        _opened("PostgreSQL (RELAY_STORE)", options)
        async with _sweeping(pg_store, ttl):
            yield pg_store


def _opened(where: str, options: StoreOptions) -> None:
    index = options.index
    log.info(
        "relay: the graphs' LangGraph store: %s; semantic search %s; TTL %s",
        where,
        f"on ({index['dims']} dims, fields {index['fields']})" if index else "off",
        dict(options.ttl) if options.ttl else "off",
    )


async def check_store(store: Any) -> None:
    """Readiness: a lookup of an item that does not exist (a round trip to the store's
    database); the driver's "cannot do it now" errors as StoreUnavailable."""
    from relay.store.pool import unavailable_as  # without the postgres extra: a no-op

    with unavailable_as("memory store"):
        await store.aget(("relay-readyz",), "ping")


@asynccontextmanager
async def _postgres_store(
    url: str, schema: str | None, options: StoreOptions, ttl: dict[str, Any] | None
) -> AsyncIterator[Any]:
    import psycopg
    from langgraph.store.postgres.aio import AsyncPostgresStore
    from psycopg.rows import dict_row

    from relay.store.pool import open_async_pool
    from relay.store.schema import lock_key, migrating

    # the driver's own reason if PostgreSQL is not there at start-up (see open_pool), and
    # the deployment's schema, first on every pooled connection's search_path
    pool, resolved = await open_async_pool(
        url,
        name="relay-memory-store",
        schema=schema,
        prepare_threshold=0,
        row_factory=dict_row,
    )
    setup_lock = lock_key(resolved, "store")
    try:
        index = dict(options.index) if options.index is not None else None
        store = AsyncPostgresStore(pool, index=index, ttl=ttl)  # type: ignore[arg-type]
        # instances that start together must not run the migrations at the same time
        async with migrating(url, setup_lock):
            try:
                await store.setup()
            except psycopg.errors.FeatureNotSupported as exc:  # no pgvector
                raise ConfigError(
                    "store.index on PostgreSQL needs the pgvector extension, which this "
                    f"server does not have ({' '.join(str(exc).split())[:160]}): install "
                    "pgvector, or remove 'index' from langgraph.json's store section"
                ) from None
        yield store
    finally:
        await pool.close()


@asynccontextmanager
async def _sweeping(store: Any, ttl: Mapping[str, Any] | None) -> AsyncIterator[None]:
    """The store's TTL sweeper while the block runs, when ``sweep_interval_minutes`` is
    set (without it, as the Agent Server documents, nothing sweeps)."""
    interval = ttl.get("sweep_interval_minutes") if ttl else None
    if not interval:
        yield
        return
    await store.start_ttl_sweeper(interval)
    try:
        yield
    finally:
        await store.stop_ttl_sweeper(timeout=5.0)


# -- the section, checked -----------------------------------------------------------------


def _index(index: Any, base: Path) -> dict[str, Any]:
    if not isinstance(index, Mapping):
        raise ConfigError(
            f"store.index: expected an object with 'dims', 'embed' and 'fields', not {_kind(index)}"
        )
    _no_other_keys("store.index", index, _INDEX_KEYS)
    dims = index.get("dims")
    if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
        raise ConfigError(
            f"store.index.dims: expected the embeddings' dimension, a positive integer "
            f"(1536 for openai:text-embedding-3-small), not {dims!r}"
        )
    fields = index.get("fields")
    if fields is not None and (
        not isinstance(fields, list)
        or not fields
        or not all(isinstance(f, str) and f for f in fields)
    ):
        raise ConfigError(
            f'store.index.fields: expected a list of JSON paths to embed (["text"]; '
            f'default ["$"], the whole value), not {fields!r}'
        )
    embed = index.get("embed")
    return {"dims": dims, "embed": _embeddings(embed, base), "fields": fields or ["$"]}


def _ttl(ttl: Any) -> dict[str, Any]:
    if not isinstance(ttl, Mapping):
        raise ConfigError(
            "store.ttl: expected an object with 'refresh_on_read', 'default_ttl' "
            f"and 'sweep_interval_minutes', not {_kind(ttl)}"
        )
    _no_other_keys("store.ttl", ttl, _TTL_KEYS)
    refresh = ttl.get("refresh_on_read", True)
    if not isinstance(refresh, bool):
        raise ConfigError(f"store.ttl.refresh_on_read: expected true or false, not {refresh!r}")
    default = ttl.get("default_ttl")
    if default is not None and (
        isinstance(default, bool) or not isinstance(default, int | float) or not default > 0
    ):
        raise ConfigError(
            f"store.ttl.default_ttl: expected minutes, a positive number, not {default!r}"
        )
    interval = ttl.get("sweep_interval_minutes")
    if interval is not None and (
        isinstance(interval, bool) or not isinstance(interval, int) or interval < 1
    ):
        raise ConfigError(
            "store.ttl.sweep_interval_minutes: expected a whole number of minutes, 1 "
            f"or more, not {interval!r}"
        )
    out: dict[str, Any] = {"refresh_on_read": refresh}
    if default is not None:
        out["default_ttl"] = float(default)
    if interval is not None:
        out["sweep_interval_minutes"] = interval
    return out


def _embeddings(embed: Any, base: Path) -> Any:
    """``index.embed``: a provider string (``openai:text-embedding-3-small``, through
    LangChain's ``init_embeddings``), a path to a function or an ``Embeddings`` object
    (``./embeddings.py:embed``, ``my_pkg.memory:embed``); in the library, the object
    itself."""
    if embed is None or (isinstance(embed, str) and not embed.strip()):
        raise ConfigError(
            "store.index.embed: name the embeddings, a provider:model "
            "('openai:text-embedding-3-small') or a path ('./embeddings.py:embed')"
        )
    if not isinstance(embed, str):
        if callable(embed) or hasattr(embed, "aembed_documents"):
            return embed
        raise ConfigError(
            f"store.index.embed: expected a string, an Embeddings object or a function, "
            f"not {_kind(embed)}"
        )
    where, sep, attr = embed.rpartition(":")
    if (sep and where.endswith(".py")) or "/" in where:
        return _embed_object(embed, _from_file(embed, (base / where).resolve()), attr)
    if sep and where and attr.isidentifier():  # my_pkg.memory:embed, if it is one
        try:
            module = importlib.import_module(where)
        except ImportError:
            module = None
        if module is not None and getattr(module, attr, None) is not None:
            return _embed_object(embed, module, attr)
    embeddings = _provider(embed)  # openai:text-embedding-3-small
    if isinstance(embeddings, str):
        raise ConfigError(f"store.index.embed {embed!r}: {embeddings}")
    return embeddings


def _provider(embed: str) -> Any:
    """The embeddings of a provider string, or why not (a str)."""
    try:
        from langchain.embeddings import init_embeddings
    except ImportError:
        return (
            "a provider string needs the langchain package (pip install langchain "
            "and the provider's, e.g. langchain-openai), or name a function "
            "('./embeddings.py:embed')"
        )
    try:
        return init_embeddings(embed)
    except Exception as exc:  # an unknown provider, its package missing, no API key
        return " ".join(str(exc).split())[:300]


def _from_file(embed: str, path: Path) -> Any:
    if not path.is_file():
        raise ConfigError(f"store.index.embed {embed!r}: {path} does not exist")
    try:
        module = import_file(path, "span_relay_embed")
    except Exception as exc:
        raise ConfigError(
            f"store.index.embed {embed!r}: importing {path} failed: "
            f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        ) from None
    return module


def _embed_object(embed: str, module: Any, attr: str) -> Any:
    value = getattr(module, attr, None)
    if value is None:
        raise ConfigError(f"store.index.embed {embed!r}: no attribute {attr!r} there")
    if not (callable(value) or hasattr(value, "aembed_documents")):
        raise ConfigError(
            f"store.index.embed {embed!r} is a {type(value).__name__}: name a function "
            "of a list of texts or a LangChain Embeddings object"
        )
    return value


def _no_other_keys(where: str, section: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = sorted(str(k) for k in section if k not in allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))} (it takes "
            f"{', '.join(map(repr, allowed))})"
        )


def _kind(value: Any) -> str:
    return "null" if value is None else f"{type(value).__name__} {value!r}"[:80]
