"""langgraph.json's ``auth`` key, loaded as ``langgraph dev`` loads it.

``"auth": {"path": "./src/agent/auth.py:auth"}`` names a ``langgraph_sdk.Auth`` (a file,
relative to the config's folder, or a module on the import path, then ``:attribute``),
which decides who is asking and what they may do (relay/auth/langgraph_auth.py). A key
whose omission would open what the user closed is never ignored: a missing file, an import
that fails, an attribute that is not an ``Auth``, an ``Auth`` without
``@auth.authenticate`` are each a :class:`relay.settings.ConfigError` (one sentence; the
server does not start).

The other keys of the entry: ``disable_studio_auth`` is accepted and has nothing to do here
(there is no LangGraph Studio to let in); ``openapi`` (``securitySchemes`` and
``security``) goes into the app's OpenAPI document (:func:`add_openapi_security`). A key
the LangGraph CLI does not define is named in one warning line.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relay.settings import ConfigError
from relay.sourcefile import import_file

log = logging.getLogger("relay")

#: the keys of langgraph.json's ``auth`` entry (the LangGraph CLI's schema)
AUTH_KEYS = ("path", "disable_studio_auth", "openapi", "cache")


@dataclass(frozen=True)
class ProjectAuth:
    """A loaded ``auth`` entry: the ``Auth`` object, where it came from, its ``openapi``."""

    auth: Any
    source: str
    openapi: Mapping[str, Any] = field(default_factory=dict)


def load_project_auth(config_path: Path) -> ProjectAuth | None:
    """The ``auth`` of the LangGraph CLI config at ``config_path`` (None: it has none)."""
    try:
        config = json.loads(config_path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{config_path}: cannot read it as JSON ({exc})") from None
    entry = config.get("auth") if isinstance(config, dict) else None
    return load_auth_entry(entry, config_path.parent)


def load_auth_entry(entry: Any, base: Path) -> ProjectAuth | None:
    """langgraph.json's ``auth`` value (``base``: the config's folder)."""
    if entry is None:
        return None
    if not isinstance(entry, dict):
        raise ConfigError('langgraph.json: \'auth\' must be an object ({"path": "./auth.py:auth"})')
    unknown = sorted(set(entry) - set(AUTH_KEYS))
    if unknown:
        log.warning("relay: langgraph.json's auth: %s not read", ", ".join(unknown))
    if "cache" in entry:
        log.warning(
            "relay: langgraph.json's auth.cache is not read: every request is authenticated"
        )
    openapi = entry.get("openapi") or {}
    if not isinstance(openapi, dict):
        raise ConfigError("langgraph.json: 'auth.openapi' must be an object")
    path = entry.get("path")
    if path is None:
        if openapi:
            log.warning("relay: langgraph.json's auth has an openapi but no path; not protected")
        return None  # as langgraph dev: no custom auth without a path
    if not isinstance(path, str):
        raise ConfigError("langgraph.json: 'auth.path' must be a string (./auth.py:auth)")
    from relay.auth.langgraph_auth import check_auth  # langgraph_sdk: only where asked

    source = f"auth {path}"
    auth = _load(path, base, source)
    try:
        check_auth(auth, source)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return ProjectAuth(auth, source, openapi)


def _load(spec: str, base: Path, source: str) -> Any:
    where, sep, attr = spec.rpartition(":")
    if not sep or not where or not attr:
        raise ConfigError(
            f"{source}: write it as path/to/auth.py:attribute or my_pkg.auth:attribute"
        )
    try:
        module = _import(where, base, source)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"{source}: importing it failed: {type(exc).__name__}: {exc}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"{source}: {where} has no attribute {attr!r}") from None


def _import(where: str, base: Path, source: str) -> Any:
    if where.endswith(".py") or "/" in where:
        path = (base / where).resolve()
        if not path.is_file():
            raise ConfigError(f"{source}: the file {path} does not exist")
        return import_file(path, "span_relay_auth")
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"{source}: cannot import {where!r}: {exc}") from None


def add_openapi_security(app: Any, openapi: Mapping[str, Any]) -> None:
    """Put ``auth.openapi``'s ``securitySchemes`` and ``security`` into ``app``'s OpenAPI
    document (a FastAPI app), as the Agent Server does for its own routes."""
    schemes = openapi.get("securitySchemes")
    security = openapi.get("security")
    if not schemes and not security:
        return
    made = app.openapi

    def document() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema: dict[str, Any] = made()
            if schemes:
                schema.setdefault("components", {}).setdefault("securitySchemes", {}).update(
                    schemes
                )
            if security:
                schema["security"] = security
            app.openapi_schema = schema
        result: dict[str, Any] = app.openapi_schema
        return result

    app.openapi = document
