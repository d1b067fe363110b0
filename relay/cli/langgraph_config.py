"""``langgraph.json``, read as ``langgraph dev`` reads it: :func:`read_config` returns a
:class:`LangGraphConfig`.

The file's keys fall into four kinds (the README's ``--config`` table lists each):

- **honoured** (:data:`HONOURED`): ``graphs`` (every form langgraph-cli's schema allows:
  ``"./path.py:attr"``, ``"module.path:attr"``, ``{"path": ..., "description": ...}``),
  ``env`` (a file read by python-dotenv, the file winning over the process environment
  as in the Agent Server: relay/envfile.py, or an object; a file that does not exist is
  a warning, as the Agent Server reads it as empty), ``http`` (``app``,
  ``cors`` and ``configurable_headers``; the ``disable_*`` keys of routes the relay does
  not have are honoured by their absence), ``auth`` (loaded by
  relay/cli/langgraph_auth.py), ``store`` and ``checkpointer`` (checked and honoured by
  relay/langgraph/store.py and checkpointer_config.py): these three are carried as
  written (:attr:`LangGraphConfig.auth`, ...) for that code.
- **build-only** (:data:`BUILD_KEYS`): what LangGraph CLI uses to build an image
  (``dependencies``, ``python_version``, ``dockerfile_lines``, ...): known, and silent.
  Local ``dependencies`` directories join the import path, as ``langgraph dev`` does.
- **refused** (:data:`REFUSED`, :data:`REFUSED_HTTP`): a key whose omission would open
  what the user closed (``encryption``, ``http.disable_runs``, ...; ``auth`` too, were it
  not in :data:`HONOURED`): the server refuses to start (:class:`ConfigError`) and says
  why.
- **not honoured** (everything else, unknown keys too): named in one warning line at
  start-up (:meth:`LangGraphConfig.warning`).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relay.envfile import read_env_file
from relay.settings import ConfigError

log = logging.getLogger("relay.cli")

#: the top-level keys the server acts on: ``auth`` (relay/cli/langgraph_auth.py), ``store``
#: and ``checkpointer`` (relay/langgraph/store.py, checkpointer_config.py) too
HONOURED: set[str] = {"graphs", "env", "http", "auth", "store", "checkpointer"}

#: keys LangGraph CLI reads only to build an image (or to validate one): silent here
BUILD_KEYS = frozenset(
    {
        "$schema",
        "dependencies",
        "python_version",
        "node_version",
        "api_version",
        "base_image",
        "image_distro",
        "pip_config_file",
        "pip_installer",
        "source",
        "dockerfile_lines",
        "keep_pkg_tools",
        "_INTERNAL_docker_tag",
        "project_root",
        "package",
    }
)

#: top-level keys that close something: present (not null) and not honoured, they refuse
#: to start, for the reason given
REFUSED: dict[str, str] = {
    "auth": (
        "it protects the graphs with a custom Auth handler, and serving them without it "
        "would answer every caller"
    ),
    "encryption": (
        "it asks for data at rest to be encrypted, and span-relay stores checkpoints, "
        "turn records and spans unencrypted; remove it for local serving, or encrypt the "
        "storage itself (an encrypted disk or PostgreSQL)"
    ),
}

#: ``http`` keys that close routes the relay serves: true, they refuse to start
REFUSED_HTTP: dict[str, str] = {
    "disable_runs": "span-relay's run routes (/chat, /graphs/{name}/chat, /agui) stay on",
    "disable_threads": "span-relay's turn API (/turns, its events and feed) stays on",
    "disable_assistants": "span-relay's graph listing (/graphs, /graphs/{name}) stays on",
    "disable_meta": "span-relay's /docs, /openapi.json and /metrics stay on",
    "enable_custom_route_auth": "span-relay does not authenticate http.app's own routes",
}

#: ``http`` keys honoured: ``app``, ``cors`` and ``configurable_headers``; and the
#: ``disable_*`` of routes span-relay does not have (nothing to turn off)
HONOURED_HTTP = frozenset(
    {
        "app",
        "cors",
        "configurable_headers",
        "disable_store",
        "disable_mcp",
        "disable_a2a",
        "disable_ui",
        "disable_webhooks",
    }
)

#: every ``http`` key langgraph-cli knows (those neither honoured nor refused are named in
#: the warning)
KNOWN_HTTP = frozenset(
    {
        *HONOURED_HTTP,
        *REFUSED_HTTP,
        "mount_prefix",
        "logging_headers",
        "middleware_order",
    }
)

#: top-level keys langgraph-cli knows (schema.json, config.py's _KNOWN_CONFIG_KEYS and
#: what ``langgraph dev`` reads)
KNOWN = frozenset(
    {
        *BUILD_KEYS,
        *REFUSED,
        "graphs",
        "env",
        "http",
        "store",
        "checkpointer",
        "webhooks",
        "ui",
        "ui_config",
        "disable_persistence",
    }
)

_JS_SUFFIXES = (".ts", ".mts", ".cts", ".js", ".mjs", ".cjs")


@dataclass(frozen=True)
class GraphEntry:
    """One entry of ``graphs``: its name, its import spec (``./path.py:attr`` or
    ``module.path:attr``) and its description (the ``{"path", "description"}`` form)."""

    name: str | None
    spec: str
    description: str | None = None


@dataclass
class LangGraphConfig:
    """A ``langgraph.json``, read: what the server acts on, and the rest named."""

    #: the file (its folder is the base of relative paths)
    path: Path
    graphs: list[GraphEntry]
    #: ``env``'s variables (the file's, read by python-dotenv; or the object's)
    env: dict[str, str]
    #: ``http``, as written ({} when absent)
    http: dict[str, Any] = field(default_factory=dict)
    #: the sections other parts honour, as written (None when absent or null)
    auth: dict[str, Any] | None = None
    store: dict[str, Any] | None = None
    checkpointer: dict[str, Any] | None = None
    #: the whole file, as written
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def base(self) -> Path:
        """The folder relative paths (graphs, ``env``, ``http.app``) start from."""
        return self.path.parent

    def not_honoured(self) -> list[str]:
        """The keys present that this server does not act on (``http.x`` for ``http``'s)."""
        out = [
            key
            for key, value in self.raw.items()
            if value is not None
            and key in KNOWN
            and key not in HONOURED
            and key not in BUILD_KEYS
            and key not in REFUSED
        ]
        out += [
            f"http.{key}"
            for key, value in self.http.items()
            if value is not None
            and key in KNOWN_HTTP
            and key not in HONOURED_HTTP
            and not (key in REFUSED_HTTP and value)
        ]
        return out

    def unknown(self) -> list[str]:
        """The keys langgraph-cli does not know either (a typo, most likely)."""
        return [key for key in self.raw if key not in KNOWN] + [
            f"http.{key}" for key in self.http if key not in KNOWN_HTTP
        ]

    def warning(self) -> str | None:
        """The one start-up line naming every key not honoured, or None when there is none."""
        parts = []
        if ignored := self.not_honoured():
            parts.append("not honoured here: " + ", ".join(ignored))
        if unknown := self.unknown():
            parts.append("unknown keys: " + ", ".join(unknown))
        if not parts:
            return None
        return (
            f"{self.path.name}: " + "; ".join(parts) + " (see README, 'span-relay serve --config')"
        )

    def refuse_what_would_open(self) -> None:
        """ConfigError for a key that closes something this server does not honour."""
        for key, why in REFUSED.items():
            if self.raw.get(key) is not None and key not in HONOURED:
                raise ConfigError(
                    f"{self.path}: '{key}' is not honoured by span-relay: {why}; "
                    f"refusing to start rather than ignore it"
                )
        for key, why in REFUSED_HTTP.items():
            if self.http.get(key):
                raise ConfigError(
                    f"{self.path}: 'http.{key}: true': {why} here; remove the key "
                    "(or serve with langgraph dev)"
                )


def read_config(path: Path) -> LangGraphConfig:
    """Read and check a LangGraph CLI config; its folder and its local ``dependencies``
    join the import path (as ``langgraph dev`` adds them). ConfigError, in one sentence,
    for what cannot be served."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read it as JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: must be a JSON object")
    graphs = _graphs(path, raw.get("graphs"))
    http = raw.get("http") or {}
    if not isinstance(http, dict):
        raise ConfigError(f"{path}: 'http' must be an object")
    if not isinstance(http.get("cors") or {}, dict):
        raise ConfigError(f"{path}: 'http.cors' must be an object")
    config = LangGraphConfig(
        path=path,
        graphs=graphs,
        env=_env(path, raw.get("env")),
        http=http,
        auth=_section(path, raw, "auth"),
        store=_section(path, raw, "store"),
        checkpointer=_section(path, raw, "checkpointer"),
        raw=raw,
    )
    config.refuse_what_would_open()
    _join_import_path(config)
    return config


def _graphs(path: Path, graphs: Any) -> list[GraphEntry]:
    example = '{"agent": "./src/agent/graph.py:graph"}'
    if not isinstance(graphs, dict) or not graphs:
        raise ConfigError(f"{path}: 'graphs' must map names to graphs ({example})")
    out = []
    for name, value in graphs.items():
        description = None
        if isinstance(value, dict):
            spec = value.get("path")
            description = value.get("description")
            if not isinstance(spec, str) or not spec:
                raise ConfigError(
                    f"{path}: graph {name!r} is an object without a 'path' "
                    '({"path": "./src/agent/graph.py:graph", "description": "..."})'
                )
            if description is not None and not isinstance(description, str):
                raise ConfigError(f"{path}: graph {name!r}: 'description' must be a string")
        elif isinstance(value, str):
            spec = value
        else:
            raise ConfigError(
                f"{path}: graph {name!r} must be a path ({example}) or an object with a "
                "'path' and an optional 'description'"
            )
        where = spec.rpartition(":")[0]
        if where.endswith(_JS_SUFFIXES):
            raise ConfigError(
                f"{path}: graph {name!r} ({spec}) is a JavaScript graph; span-relay serves "
                "Python graphs (serve it with the LangGraph.js CLI)"
            )
        out.append(GraphEntry(str(name), spec, description))
    return out


def _env(path: Path, env: Any) -> dict[str, str]:
    if env is None:
        return {}
    if isinstance(env, str):
        if not (path.parent / env).exists():  # as the Agent Server: nothing to read
            log.warning("%s: its env file %s does not exist; nothing read", path.name, env)
            return {}
        return read_env_file(path.parent / env)
    if isinstance(env, dict) and all(not isinstance(v, dict | list) for v in env.values()):
        return {str(k): str(v) for k, v in env.items() if v is not None}
    raise ConfigError(f"{path}: 'env' must be a file name ('.env') or an object of strings")


def _section(path: Path, raw: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, dict):
        raise ConfigError(f"{path}: '{key}' must be an object")
    return value


def _join_import_path(config: LangGraphConfig) -> None:
    folders = [config.base.resolve()]
    deps = config.raw.get("dependencies")
    for dep in deps if isinstance(deps, list) else []:
        if isinstance(dep, str) and dep.startswith("."):
            folder = (config.base / dep).resolve()
            if folder.is_dir():
                folders.append(folder)
    for folder in reversed(folders):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
