"""How one RELAY_* setting is declared, read and shown: the rows of the configuration table.

:func:`setting` declares a field of :class:`relay.settings.RelaySettings` together with its
row (:class:`Setting`): the variable it is read from, how the variable's text becomes the
field's value (the readers below, one a kind of value), the bound or the choices that
validation holds it to, and the line the README's configuration table shows. Which
settings the relay has, and how they are checked against each other, is
relay/settings.py's job.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

#: how a variable is read: ``parse(environ, name, default)`` -> the field's value
Parse = Callable[[Mapping[str, str], str, Any], Any]


class ConfigError(ValueError):
    """The configuration cannot work; the message says what to change."""


def float_value(env: Mapping[str, str], name: str, default: float) -> float:
    """A finite number; unset or empty: the default."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number") from None
    if not math.isfinite(value):
        raise ConfigError(f"{name}={raw!r} must be a finite number")
    return value


def int_value(env: Mapping[str, str], name: str, default: int) -> int:
    """A number (``1e3`` too), truncated to an integer; unset or empty: the default."""
    return int(float_value(env, name, default))


def bool_value(env: Mapping[str, str], name: str, default: bool) -> bool:
    """1/true/yes/on or 0/false/no/off, in any case; unset or empty: the default."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}={raw!r}: use true or false")


def as_is(env: Mapping[str, str], name: str, default: str) -> str:
    """The value as it is (empty stays empty, for validation to name); unset: the default."""
    return env.get(name, default)


def text(env: Mapping[str, str], name: str, default: str | None) -> str | None:
    """The value; unset or empty: the default."""
    return env.get(name) or default


def word(env: Mapping[str, str], name: str, default: str) -> str:
    """The value trimmed and in lower case; unset or empty: the default."""
    return env.get(name, default).strip().lower() or default


def path(env: Mapping[str, str], name: str, default: Path) -> Path:
    """A path; unset: the default."""
    return Path(env.get(name, default))


def optional_path(env: Mapping[str, str], name: str, default: Path | None) -> Path | None:
    """A path; unset or empty: the default."""
    raw = env.get(name)
    return Path(raw) if raw else default


def word_list(env: Mapping[str, str], name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    """Comma-separated items, trimmed, empty ones dropped; none: the default."""
    items = tuple(item.strip() for item in env.get(name, "").split(",") if item.strip())
    return items or default


def index(env: Mapping[str, str], name: str, default: int | None) -> int | None:
    """A non-negative integer; anything else: the default."""
    raw = env.get(name, "")
    return int(raw) if raw.isdigit() else default


#: PostgreSQL's longest identifier (NAMEDATALEN - 1 bytes): it cuts a longer name silently
MAX_IDENTIFIER_BYTES = 63


def check_schema_name(name: str, value: str) -> None:
    """Refuse (ConfigError) a PostgreSQL schema name that PostgreSQL would cut (two
    deployments could end up in one schema) or that it reserves for itself."""
    if len(value.encode()) > MAX_IDENTIFIER_BYTES:
        raise ConfigError(
            f"{name}={value!r} is longer than {MAX_IDENTIFIER_BYTES} bytes "
            "(PostgreSQL would cut it): choose a shorter name"
        )
    if value.lower().startswith("pg_"):
        raise ConfigError(f"{name}={value!r}: names starting with pg_ are PostgreSQL's own")


def schema_name(env: Mapping[str, str], name: str, default: str | None) -> str | None:
    """A PostgreSQL schema's name, as it is (any case, any characters: it is quoted);
    unset or empty: the default."""
    value = env.get(name) or default
    if value is not None:
        check_schema_name(name, value)
    return value


def auth_mode(env: Mapping[str, str], name: str, default: str) -> str:
    """RELAY_AUTH; unset or empty: ``token`` when RELAY_API_TOKEN is set, else the default."""
    mode = env.get(name) or ("token" if env.get("RELAY_API_TOKEN") else default)
    return mode.strip().lower()


@dataclass(frozen=True, slots=True)
class Setting:
    """One RELAY_* variable and the field of :class:`RelaySettings` it fills: a row of the
    configuration table (:data:`SETTINGS`)."""

    field: str
    default: Any
    env: str
    parse: Parse
    #: what it does: the README's configuration table shows it
    doc: str
    #: the README's default column where the value alone does not say it (``None``: the
    #: value, :meth:`shown_default`)
    shown: str | None = None
    #: validation: the value must be ``"> 0"``, ``">= 0"`` or ``">= 1"``
    bound: str | None = None
    #: what the bound's number counts, in the refusal's message
    unit: str | None = None
    #: validation: the value must be one of these
    choices: tuple[str, ...] = ()

    def read(self, env: Mapping[str, str]) -> Any:
        return self.parse(env, self.env, self.default)

    def check(self, value: Any) -> None:
        """Refuse a value outside :attr:`bound` or :attr:`choices` (ConfigError)."""
        if self.choices and value not in self.choices:
            allowed = " or ".join(repr(choice) for choice in self.choices)
            raise ConfigError(f"{self.env} must be {allowed}")
        if self.bound is None:
            return
        if not _BOUNDS[self.bound](value):  # (a NaN is outside every bound)
            unit = f" ({self.unit})" if self.unit else ""
            raise ConfigError(f"{self.env} must be {self.bound}{unit}")

    def shown_default(self) -> str:
        """The default as the README's configuration table shows it."""
        value = self.default
        if self.shown is not None:
            return self.shown
        if value is None or value is False or value == ():
            return "off"
        if value is True:
            return "`true`"
        if isinstance(value, Path):
            return f"`./{value}`"
        if isinstance(value, str):
            return f"`{value}`"
        if self.env.endswith("_BYTES") and value >= MIB and value % MIB == 0:
            return f"{value // MIB} MiB"
        if self.env.endswith("_S") and value >= DAY_S and value % DAY_S == 0:
            return f"{value // DAY_S:g} days"
        return f"`{value:g}`"


MIB = 1024 * 1024
DAY_S = 24 * 3600.0
_BOUNDS: dict[str, Callable[[Any], bool]] = {
    "> 0": lambda value: value > 0,
    ">= 0": lambda value: value >= 0,
    ">= 1": lambda value: value >= 1,
}


def setting(
    env: str,
    default: T,
    parse: Parse,
    doc: str,
    *,
    shown: str | None = None,
    bound: str | None = None,
    unit: str | None = None,
    choices: tuple[str, ...] = (),
) -> T:
    """A field of :class:`RelaySettings` read from ``env``: its default and, as the
    field's metadata, the rest of its :class:`Setting`."""
    row = {
        "env": env,
        "parse": parse,
        "doc": doc,
        "shown": shown,
        "bound": bound,
        "unit": unit,
        "choices": choices,
    }
    return dataclasses.field(default=default, metadata=row)
