"""The version of span-relay: the installed distribution's metadata (pyproject.toml's
``version``), for ``span-relay --version``, the apps' OpenAPI documents and the start-up
log. Read once, at import."""

from __future__ import annotations

from importlib import metadata

#: the distribution's name on a package index (``pip install span-relay``)
DISTRIBUTION = "span-relay"


def installed_version() -> str:
    """The installed distribution's version; ``0+unknown`` for a source tree that was never
    installed (``import relay`` from a checkout without ``pip install``)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0+unknown"


__version__ = installed_version()
