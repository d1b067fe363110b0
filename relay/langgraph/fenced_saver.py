"""The graph's checkpointer behind its run's fence (relay/turns/fencing.py).

:class:`FencedSaver` wraps any LangGraph ``BaseCheckpointSaver`` (the relay's SQLite or
PostgreSQL saver, or the one a graph was compiled with) and hands every call to it, but
first checks the running turn's fence before each write (``aput``, ``aput_writes``): a
run whose turn another instance took over while its process hung saves no checkpoint of
the step it was in, so the claimer's recovered run stays the thread's only writer. Reads
and the synchronous methods pass through (the relay runs graphs with ``ainvoke``; a
synchronous write is not fenced).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Iterator
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from relay.turns.fencing import check_fence


class FencedSaver(BaseCheckpointSaver):
    """``inner`` with its writes fenced; everything else is ``inner``'s."""

    def __init__(self, inner: BaseCheckpointSaver) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner

    @property
    def config_specs(self) -> list[Any]:
        return list(self.inner.config_specs)

    # -- the fenced writes ------------------------------------------------------------

    async def aput(self, *args: Any, **kwargs: Any) -> Any:
        await check_fence()
        return await self.inner.aput(*args, **kwargs)

    async def aput_writes(self, *args: Any, **kwargs: Any) -> None:
        await check_fence()
        await self.inner.aput_writes(*args, **kwargs)

    # -- everything else, as it is ------------------------------------------------------

    async def aget(self, *args: Any, **kwargs: Any) -> Any:
        return await self.inner.aget(*args, **kwargs)

    async def aget_tuple(self, *args: Any, **kwargs: Any) -> Any:
        return await self.inner.aget_tuple(*args, **kwargs)

    async def alist(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async for item in self.inner.alist(*args, **kwargs):
            yield item

    async def adelete_thread(self, *args: Any, **kwargs: Any) -> None:
        await self.inner.adelete_thread(*args, **kwargs)

    async def adelete_for_runs(self, *args: Any, **kwargs: Any) -> None:
        await self.inner.adelete_for_runs(*args, **kwargs)

    async def acopy_thread(self, *args: Any, **kwargs: Any) -> None:
        await self.inner.acopy_thread(*args, **kwargs)

    async def aprune(self, *args: Any, **kwargs: Any) -> None:
        await self.inner.aprune(*args, **kwargs)

    async def aget_delta_channel_history(self, *args: Any, **kwargs: Any) -> Any:
        return await self.inner.aget_delta_channel_history(*args, **kwargs)

    def get(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.get(*args, **kwargs)

    def get_tuple(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.get_tuple(*args, **kwargs)

    def list(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        return self.inner.list(*args, **kwargs)

    def put(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.put(*args, **kwargs)

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        self.inner.put_writes(*args, **kwargs)

    def delete_thread(self, *args: Any, **kwargs: Any) -> None:
        self.inner.delete_thread(*args, **kwargs)

    def delete_for_runs(self, *args: Any, **kwargs: Any) -> None:
        self.inner.delete_for_runs(*args, **kwargs)

    def copy_thread(self, *args: Any, **kwargs: Any) -> None:
        self.inner.copy_thread(*args, **kwargs)

    def prune(self, *args: Any, **kwargs: Any) -> None:
        self.inner.prune(*args, **kwargs)

    def get_delta_channel_history(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.get_delta_channel_history(*args, **kwargs)

    def get_next_version(self, current: Any, channel: Any) -> Any:
        return self.inner.get_next_version(current, channel)

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> FencedSaver:
        return FencedSaver(self.inner.with_allowlist(extra_allowlist))


def fenced(saver: Any) -> Any:
    """``saver`` behind the run fence (once), or as it is when it is no LangGraph saver
    (None, or ``True``/``False`` in a subgraph)."""
    if isinstance(saver, BaseCheckpointSaver) and not isinstance(saver, FencedSaver):
        return FencedSaver(saver)
    return saver
