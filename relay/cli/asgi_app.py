"""``span-relay serve --app MODULE:ATTR``: an ASGI app, or a factory that returns one.

As uvicorn's ``--factory`` distinction, told apart without a flag: ``ATTR`` is served as
it is when it is an app (a Starlette or FastAPI instance, or any callable taking the
ASGI ``(scope, receive, send)``), and called first when it is a function of no argument
(``create_app``). The module is imported from the working directory too, as uvicorn's
``--app-dir`` does by default. Anything else, an import that fails, or a factory that
returns no app, is a :class:`ConfigError` in one sentence (exit 2), the traceback at
DEBUG.
"""

from __future__ import annotations

import inspect
import logging
import sys
from pathlib import Path
from typing import Any

from relay.settings import ConfigError

log = logging.getLogger("relay.cli")


def load_app(spec: str) -> Any:
    """The ASGI app ``spec`` names (an app, or a factory of no argument returning one)."""
    from uvicorn.importer import ImportFromStringError, import_from_string

    if str(Path.cwd()) not in sys.path:  # as uvicorn's --app-dir (default ".")
        sys.path.insert(0, str(Path.cwd()))
    try:
        value = import_from_string(spec)
    except ImportFromStringError as exc:
        raise ConfigError(f"--app {spec}: {exc}") from None
    except Exception as exc:
        log.debug("importing --app %s failed", spec, exc_info=True)
        raise ConfigError(f"cannot load --app {spec}: {type(exc).__name__}: {exc}") from None
    if is_asgi_app(value):
        return value
    if callable(value) and _required(value) == 0:
        try:
            app = value()
        except Exception as exc:
            log.debug("--app %s: the factory failed", spec, exc_info=True)
            raise ConfigError(
                f"--app {spec}: the factory raised {type(exc).__name__}: {exc}"
            ) from None
        if is_asgi_app(app):
            return app
        raise ConfigError(
            f"--app {spec}: the factory returned a {type(app).__name__}, not an ASGI app"
        )
    raise ConfigError(
        f"--app {spec} is a {type(value).__name__}: name an ASGI app (app:app) or a "
        "function of no argument that returns one (app:create_app)"
    )


def is_asgi_app(value: Any) -> bool:
    """An ASGI application: a Starlette app, or a callable of ``(scope, receive, send)``."""
    from starlette.applications import Starlette

    if isinstance(value, Starlette):
        return True
    if not callable(value) or inspect.isclass(value):
        return False
    return _required(value) == 3


def _required(fn: Any) -> int | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return sum(
        1
        for p in params
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    )
