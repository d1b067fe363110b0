"""Env files (``.env``), read as the LangGraph Agent Server reads them.

One parser for every path that reads an env file: ``span-relay serve --config
langgraph.json`` (its ``env``), ``serve --workers N`` (the parent hands the values to its
workers) and the three-line path (``Relay.from_env(env_file=".env")``, or
:func:`load_env_file` first thing in an app module).

The file is parsed by python-dotenv (``dotenv_values``), as the Agent Server does:
``export`` prefixes, inline ``# comments``, single- and double-quoted values (the double
quoted with escapes, over several lines), and ``${VAR}`` expansion (from the file's own
earlier lines first, then the process environment). A bare ``KEY`` line (no ``=``) sets
nothing, as ``dotenv.load_dotenv`` does.

Precedence: **the file wins** over a variable already in the process environment. The
Agent Server reads the file with ``DotEnv(dotenv_path=env).dict()`` and writes every value
into ``os.environ`` (``langgraph_api/cli.py`` of langgraph-api 0.16.7, ``run_server``:
lines 226, 287-295, through ``patch_environment``, line 80: ``os.environ[key] = value``);
its "Don't overwrite" comment there only spares the server's own variables
(``DATABASE_URI``, ``LANGSERVE_GRAPHS``, ...), of which the relay has none.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path

from relay.setting import ConfigError


def read_env_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """The variables ``path`` sets (python-dotenv's reading; bare ``KEY`` lines left out).
    A missing or unreadable file is a :class:`ConfigError` naming it."""
    from dotenv import dotenv_values

    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"env file {file} does not exist")
    try:
        values = dotenv_values(file)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"env file {file}: cannot read it ({exc})") from None
    return {key: value for key, value in values.items() if value is not None}


def apply_env(
    values: dict[str, str], environ: MutableMapping[str, str] | None = None
) -> dict[str, str]:
    """Write ``values`` into ``environ`` (the process environment by default), the file's
    value winning over one already there, as the Agent Server does; returns ``values``."""
    target = os.environ if environ is None else environ
    for key, value in values.items():
        target[key] = value
    return values


def load_env_file(
    path: str | os.PathLike[str], environ: MutableMapping[str, str] | None = None
) -> dict[str, str]:
    """Read ``path`` (:func:`read_env_file`) and apply it (:func:`apply_env`): the
    three-line path's env file, before anything reads the environment::

        from relay.envfile import load_env_file

        load_env_file(".env")  # OPENAI_API_KEY=..., RELAY_STORE=..., the file winning
    """
    return apply_env(read_env_file(path), environ)
