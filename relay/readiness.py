"""Readiness (``GET /readyz``): every store a request needs must answer, now.

The relay checks its own stores (turn records and, with PostgreSQL, the thread locks'
pool; the span store); an app adds what it owns (the LangGraph checkpointer) with
:meth:`relay.core.Relay.add_readiness_check`. The checks run together, each bounded by
:data:`READINESS_TIMEOUT_S`, so a database that hangs rather than refuses makes /readyz
say so in seconds instead of hanging the probe with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from relay.errors import StoreUnavailable

if TYPE_CHECKING:
    from relay.store import SpanStore
    from relay.turns.records import TurnStore

#: a readiness check that has not answered after this long is a problem
READINESS_TIMEOUT_S = 3.0

#: an async callable that returns when its dependency works and raises when it does not
Check = Callable[[], Awaitable[object]]


def store_checks(turns: TurnStore, store: SpanStore) -> list[tuple[str, Check]]:
    """The relay's own checks: each store's ``ping`` (the PostgreSQL stores: one round
    trip through each pool, with a short wait; SQLite: one cheap read)."""

    async def turn_store() -> None:
        await turns.ping()

    async def span_store() -> None:
        await asyncio.to_thread(store.ping)

    return [("turn store", turn_store), ("span store", span_store)]


async def problems(
    checks: Sequence[tuple[str, Check]], timeout_s: float = READINESS_TIMEOUT_S
) -> list[str]:
    """One line per failing check, in the checks' order."""
    found = await asyncio.gather(*(_probe(name, check, timeout_s) for name, check in checks))
    return [p for p in found if p is not None]


async def _probe(name: str, check: Check, timeout_s: float) -> str | None:
    try:
        async with asyncio.timeout(timeout_s):
            await check()
    except StoreUnavailable as exc:  # it names the part itself ("thread locks: ...")
        return str(exc)
    except TimeoutError:
        return f"{name}: no answer within {timeout_s:g} s"
    except Exception as exc:
        return f"{name}: {exc}"
    return None
