"""langgraph.json's ``http.configurable_headers``: which request headers a run sees in
``config["configurable"]``, as the Agent Server picks them
(``langgraph_api/utils/headers.py``: ``should_include_header``, ``pattern_matches``).

``{"includes": [...], "excludes": [...]}``, each pattern a header name with ``*``
wildcards (nothing else is special), matched against the lower-case name: a header
matching an exclude is left out; else it is in when it matches an include; without
includes, none is. Never included, whatever the patterns: ``authorization``, ``cookie``,
``x-api-key``, ``x-service-key``, ``x-tenant-id`` (the Agent Server's list, and the
cookie), and the names the relay's own ``configurable`` entries use (``thread_id``,
``user``, ``checkpoint_id``, ``checkpoint_ns``). The result is the :class:`GraphAgent`'s
``config_of`` hook.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from relay.settings import ConfigError

NEVER = frozenset(
    {
        "authorization",
        "cookie",
        "x-api-key",
        "x-service-key",
        "x-tenant-id",
        "thread_id",
        "user",
        "checkpoint_id",
        "checkpoint_ns",
    }
)


def header_filter(
    spec: Mapping[str, Any] | None,
) -> Callable[[Mapping[str, str]], dict[str, str]] | None:
    """The ``config_of`` hook ``spec`` (``http.configurable_headers``) describes; None
    without one (no header reaches the run, as in the Agent Server)."""
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise ConfigError("langgraph.json: http.configurable_headers must be an object")
    includes = _patterns(spec, "includes", "include")
    excludes = _patterns(spec, "excludes", "exclude")

    def wanted(name: str) -> bool:
        if name in NEVER or any(p.match(name) for p in excludes):
            return False
        return any(p.match(name) for p in includes)

    def config_of(headers: Mapping[str, str]) -> dict[str, str]:
        return {name.lower(): value for name, value in headers.items() if wanted(name.lower())}

    return config_of


def _patterns(spec: Mapping[str, Any], key: str, alias: str) -> list[re.Pattern[str]]:
    values = spec.get(key) or spec.get(alias) or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ConfigError(
            f"langgraph.json: http.configurable_headers.{key} must be a list of header "
            "names ('*' a wildcard)"
        )
    return [
        re.compile("".join(".*" if c == "*" else re.escape(c) for c in v.lower()) + r"\Z")
        for v in values
    ]
