"""Fault injection (DESIGN.md §8), honoured only when RELAY_FAULTS=1.

``X-Relay-Fault: <node>=error`` makes that node raise; ``<node>=delay:<seconds>`` makes it
sleep first; ``generate=transient:<n>`` makes its first n model calls fail with a
transient error (to show the retry rule); ``generate=cut:<n>`` breaks the model's stream
after n chunks (to show the partial answer). Several faults are separated by commas. It
exists so that the error, cancel, retry and heartbeat paths can be shown and tested on
the real app.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig

HEADER = "X-Relay-Fault"
MAX_DELAY_S = 600.0


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str  # error | delay | transient | cut
    seconds: float = 0.0
    count: int = 0  # transient: how many model calls fail before one succeeds


class InjectedFault(RuntimeError):
    """The error a node raises when told to by the fault header."""


def parse_faults(header: str | None) -> dict[str, Fault]:
    """``generate=error,retrieve_context=delay:2`` -> {node: Fault}. ValueError if malformed."""
    faults: dict[str, Fault] = {}
    if not header:
        return faults
    for item in header.split(","):
        node, sep, spec = item.strip().partition("=")
        if not sep or not node:
            raise ValueError(
                f"{HEADER} entry {item.strip()!r} is not <node>=error or <node>=delay:<seconds>"
            )
        if spec == "error":
            faults[node] = Fault("error")
        elif spec.startswith(("transient:", "cut:")):
            kind, _, raw = spec.partition(":")
            most = 10 if kind == "transient" else 1000
            if not raw.isdigit() or not 0 < int(raw) <= most:
                raise ValueError(f"{HEADER}: {kind}:<n> needs n between 1 and {most}")
            faults[node] = Fault(kind, count=int(raw))
        elif spec.startswith("delay:"):
            try:
                seconds = float(spec[len("delay:") :])
            except ValueError:
                raise ValueError(f"{HEADER}: {spec!r} needs a number of seconds") from None
            if not 0 <= seconds <= MAX_DELAY_S:
                raise ValueError(f"{HEADER}: delay must be between 0 and {MAX_DELAY_S:g} s")
            faults[node] = Fault("delay", seconds)
        else:
            raise ValueError(
                f"{HEADER}: {spec!r} is not 'error', 'delay:<seconds>', "
                "'transient:<n>' or 'cut:<n>'"
            )
    return faults


class TransientModelError(ConnectionError):
    """What a model call raises under ``transient:<n>``: like a dropped connection."""


def fault_for(name: str, config: RunnableConfig | None) -> Fault | None:
    return _fault(name, config)


def _fault(name: str, config: RunnableConfig | None) -> Fault | None:
    faults = ((config or {}).get("configurable") or {}).get("relay_faults") or {}
    return faults.get(name)


def with_faults(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a node so that the run's faults (in ``config['configurable']``) apply to it."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_node(state: Any, config: RunnableConfig) -> Any:
            fault = _fault(name, config)
            if fault is not None and fault.kind == "delay":
                await asyncio.sleep(fault.seconds)
            if fault is not None and fault.kind == "error":
                raise InjectedFault(f"fault injected into {name}")
            return await fn(state, config)

        return async_node

    @functools.wraps(fn)
    def sync_node(state: Any, config: RunnableConfig) -> Any:
        fault = _fault(name, config)
        if fault is not None and fault.kind == "delay":
            time.sleep(fault.seconds)
        if fault is not None and fault.kind == "error":
            raise InjectedFault(f"fault injected into {name}")
        return fn(state, config)

    return sync_node
