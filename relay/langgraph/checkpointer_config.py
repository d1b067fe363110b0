"""langgraph.json's ``checkpointer`` section (the Agent Server's schema,
libs/cli/langgraph_cli/schemas.py ``CheckpointerConfig``), checked: what the relay's
checkpointer (relay/langgraph/checkpoints.py) can honour is honoured, the rest refuses to
start with one sentence, never ignored.

- ``serde`` (``allowed_json_modules``, ``allowed_msgpack_modules``, ``pickle_fallback``):
  honoured; the checkpointer (SQLite or PostgreSQL) reads and writes with LangGraph's
  ``JsonPlusSerializer`` made with these allowlists, with the schema's defaults for an
  omitted key (``allowed_msgpack_modules: true``, ``pickle_fallback: true``).
- ``ttl`` (``strategy``, ``default_ttl``, ``sweep_interval_minutes``, ``sweep_limit``):
  refused. langgraph-checkpoint-sqlite 3.1 and -postgres 3.2 keep no expiry of their
  own, and a sweeper that deletes threads behind them is not sound here: a thread's
  deletion can meet a turn that starts on it at that moment (on another worker or
  replica, or before the run takes the thread), and on PostgreSQL a checkpoint written
  after the deletion points at channel values that are gone. Expired threads are left
  to the operator (RUNBOOK: "The LangGraph store and checkpoints").
- ``path`` (a checkpointer of one's own): refused; compile the graph with it instead (a
  graph compiled with its own checkpointer keeps it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relay.settings import ConfigError

_KEYS = ("path", "ttl", "serde")
_SERDE_KEYS = ("allowed_json_modules", "allowed_msgpack_modules", "pickle_fallback")


@dataclass(frozen=True, slots=True)
class CheckpointerOptions:
    """The honoured part of the ``checkpointer`` section: ``serde``, LangGraph's
    ``SerializerProtocol`` the relay's checkpointer is made with (None: LangGraph's
    default)."""

    serde: Any = None


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
    if section.get("ttl") is not None:
        raise ConfigError(
            "checkpointer.ttl is not supported by span-relay: its checkpointers "
            "(langgraph-checkpoint-sqlite/-postgres) keep no expiry, and deleting "
            "threads behind them could break a turn that starts on one at that moment; "
            "remove 'ttl' (RUNBOOK: 'The LangGraph store and checkpoints' says how to "
            "delete old threads)"
        )
    serde = section.get("serde")
    return CheckpointerOptions(serde=None if serde is None else _serde(serde))


def _serde(serde: Any) -> Any:
    if not isinstance(serde, Mapping):
        raise ConfigError(f"checkpointer.serde: expected an object, not {type(serde).__name__}")
    unknown = sorted(str(k) for k in serde if k not in _SERDE_KEYS)
    if unknown:
        raise ConfigError(
            f"checkpointer.serde: unknown key(s) {', '.join(map(repr, unknown))} (it "
            f"takes {', '.join(map(repr, _SERDE_KEYS))})"
        )
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
