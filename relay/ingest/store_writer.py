"""The receiver's way into the span store: a bounded queue and one writer task.

Every span the receiver accepts goes to the store through :class:`StoreWriter`: queued on
the event loop (no I/O there), written in batches of :data:`STORE_BATCH` in a worker
thread, one batch at a time. A queue past ``backlog`` spans is back-pressure
(:meth:`StoreWriter.busy`: HTTP 429, gRPC RESOURCE_EXHAUSTED; the exporter retries
later). Spans are stored unindexed: the index entries of the runs the receiver admits
(:class:`relay.store.RunIndex`, ours and other instrumentations') go the same way, ahead
of a long span backlog since they are small, so that a refused run is stored but never
found under the turn it named.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Iterable, MutableMapping

from relay.spans import SpanRecord
from relay.store import RunIndex, SpanStore

log = logging.getLogger("relay.receiver")

#: how many spans one store write takes at most
STORE_BATCH = 2000


class StoreWriter:
    def __init__(self, store: SpanStore, backlog: int, stats: MutableMapping[str, int]) -> None:
        self.store = store
        self.backlog = backlog
        self.stats = stats  # "stored", "store_failures"
        self._spans: deque[SpanRecord] = deque()
        self._runs: deque[RunIndex] = deque()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._writing = 0

    @property
    def started(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="otlp store writer")

    async def stop(self, timeout: float) -> None:
        """Write what is queued (within ``timeout``), then stop."""
        task = self._task
        self._task = None
        if task is None:
            return
        deadline = time.monotonic() + timeout
        while (self._spans or self._runs or self._writing) and time.monotonic() < deadline:
            assert self._wake is not None
            self._wake.set()
            await asyncio.sleep(0.02)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    def busy(self, count: int) -> bool:
        """True when ``count`` more spans would overflow the queue."""
        return len(self._spans) + count > self.backlog

    def put(self, spans: Iterable[SpanRecord]) -> None:
        self._spans.extend(spans)
        self._poke()

    def index(self, run: RunIndex) -> None:
        self._runs.append(run)
        self._poke()

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _run(self) -> None:
        assert self._wake is not None
        store = self.store
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._runs:
                runs = list(self._runs)
                self._runs.clear()
                try:
                    await asyncio.to_thread(store.index_runs, runs)
                except Exception:
                    self.stats["store_failures"] += len(runs)
                    log.exception("relay: could not index %d received run(s)", len(runs))
            while self._spans:
                batch = [self._spans.popleft() for _ in range(min(STORE_BATCH, len(self._spans)))]
                self._writing = len(batch)
                try:
                    await asyncio.to_thread(store.write, batch, index=False)
                    self.stats["stored"] += len(batch)
                except Exception:
                    self.stats["store_failures"] += len(batch)
                    log.exception("relay: could not store %d received span(s)", len(batch))
                finally:
                    self._writing = 0
