"""langgraph.json's ``checkpointer`` section (the Agent Server's schema,
libs/cli/langgraph_cli/schemas.py ``CheckpointerConfig``), checked: what the relay's
checkpointer (relay/langgraph/checkpoints.py) can honour is honoured, the rest refuses to
start with one sentence, never ignored.

- ``serde`` (``allowed_json_modules``, ``allowed_msgpack_modules``, ``pickle_fallback``):
  honoured; the checkpointer (SQLite or PostgreSQL) reads and writes with LangGraph's
  ``JsonPlusSerializer`` made with these allowlists, with the schema's defaults for an
  omitted key (``allowed_msgpack_modules: true``, ``pickle_fallback: true``).
- ``ttl`` (``strategy: "delete"``, ``default_ttl`` minutes, ``sweep_interval_minutes``,
  ``sweep_limit``): honoured by the relay's own sweeper (relay/langgraph/thread_ttl.py),
  since langgraph-checkpoint-sqlite 3.1 and -postgres 3.2 keep no expiry: a thread whose
  last checkpoint is older than ``default_ttl`` is deleted. ``strategy: "keep_latest"``
  is refused (the SQLite checkpointer cannot prune a thread), and so is a ``ttl`` without
  ``default_ttl`` (the Agent Server's per-thread TTLs have no API here: it would expire
  nothing).
- ``path`` (a checkpointer of one's own): refused; compile the graph with it instead (a
  graph compiled with its own checkpointer keeps it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relay.langgraph.thread_ttl import ThreadTTL
from relay.settings import ConfigError

_KEYS = ("path", "ttl", "serde")
_SERDE_KEYS = ("allowed_json_modules", "allowed_msgpack_modules", "pickle_fallback")
_TTL_KEYS = ("strategy", "default_ttl", "sweep_interval_minutes", "sweep_limit")


@dataclass(frozen=True, slots=True)
class CheckpointerOptions:
    """The honoured part of the ``checkpointer`` section: ``serde``, LangGraph's
    ``SerializerProtocol`` the relay's checkpointer is made with (None: LangGraph's
    default); ``ttl``, the threads' expiry (None: threads are kept)."""

    serde: Any = None
    ttl: ThreadTTL | None = None


def checkpointer_options(section: Any) -> CheckpointerOptions:
    """The ``checkpointer`` section of langgraph.json (or the same mapping given to
    ``Relay(..., checkpointer=...)``): a ConfigError for a wrong value or one the relay
    cannot honour."""
    if section is None:
        return CheckpointerOptions()
    if not isinstance(section, Mapping):
        raise ConfigError(f"checkpointer: expected an object, not {type(section).__name__}")
    unknown = sorted(str(k) for k in section if k not in _KEYS)
    if unknown:
        raise ConfigError(
            f"checkpointer: unknown key(s) {', '.join(map(repr, unknown))} (it takes "
            f"{', '.join(map(repr, _KEYS))})"
        )
    if section.get("path") is not None:
        raise ConfigError(
            "checkpointer.path: span-relay opens its own checkpointer (SQLite, or "
            "PostgreSQL with RELAY_STORE / RELAY_CHECKPOINTER); to use yours, compile "
            "the graph with it (a graph compiled with a checkpointer keeps it) and "
            "remove 'path'"
        )
    serde = section.get("serde")
    ttl = section.get("ttl")
    return CheckpointerOptions(
        serde=None if serde is None else _serde(serde), ttl=None if ttl is None else _ttl(ttl)
    )


def _section(value: Any, name: str, keys: Any) -> Mapping[str, Any]:
    """``value`` as the object ``checkpointer.{name}`` must be, holding only ``keys``."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"checkpointer.{name}: expected an object, not {type(value).__name__}")
    unknown = sorted(str(k) for k in value if k not in keys)
    if unknown:
        raise ConfigError(
            f"checkpointer.{name}: unknown key(s) {', '.join(map(repr, unknown))} (it takes "
            f"{', '.join(map(repr, keys))})"
        )
    return value


def _ttl(value: Any) -> ThreadTTL:
    ttl = _section(value, "ttl", _TTL_KEYS)
    strategy = ttl.get("strategy", "delete")
    if strategy == "keep_latest":
        raise ConfigError(
            'checkpointer.ttl.strategy "keep_latest" is not supported by span-relay (its '
            'SQLite checkpointer cannot prune a thread): use "delete", which deletes a '
            "thread idle for longer than default_ttl"
        )
    if strategy != "delete":
        raise ConfigError(f'checkpointer.ttl.strategy: expected "delete", not {strategy!r}')
    default = ttl.get("default_ttl")
    if isinstance(default, bool) or not isinstance(default, int | float) or not default > 0:
        raise ConfigError(
            "checkpointer.ttl.default_ttl: expected the minutes a thread is kept after its "
            f"last checkpoint, a positive number, not {default!r} (span-relay has no "
            "per-thread TTL: without it nothing would expire)"
        )
    return ThreadTTL(
        default_ttl=float(default),
        sweep_interval_minutes=_whole(ttl, "sweep_interval_minutes", 5),
        sweep_limit=_whole(ttl, "sweep_limit", 1000),
    )


def _whole(ttl: Mapping[str, Any], key: str, default: int) -> int:
    value = ttl.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(
            f"checkpointer.ttl.{key}: expected a whole number, 1 or more, not {value!r}"
        )
    return value


def _serde(value: Any) -> Any:
    serde = _section(value, "serde", _SERDE_KEYS)
    pickle_fallback = serde.get("pickle_fallback", True)
    if not isinstance(pickle_fallback, bool):
        raise ConfigError(
            f"checkpointer.serde.pickle_fallback: expected true or false, not {pickle_fallback!r}"
        )
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    return JsonPlusSerializer(
        pickle_fallback=pickle_fallback,
        allowed_json_modules=_modules(serde, "allowed_json_modules", None),
        allowed_msgpack_modules=_modules(serde, "allowed_msgpack_modules", True),
    )


def _modules(serde: Mapping[str, Any], key: str, default: Any) -> Any:
    """An allowlist: true (any module), null or false (none beyond LangGraph's safe
    types), or a
    list of module paths (``[["my_agent", "models", "State"]]``)."""
    value = serde.get(key, default)
    if value is False:
        return None
    if value is None or value is True:
        return value
    if isinstance(value, list) and all(
        isinstance(path, list) and path and all(isinstance(p, str) and p for p in path)
        for path in value
    ):
        return [tuple(path) for path in value]
    raise ConfigError(
        f"checkpointer.serde.{key}: expected true, null or a list of module paths "
        f'([["my_agent", "models", "State"]]), not {value!r}'
    )
