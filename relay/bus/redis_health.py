"""The Redis bus's connection and its health: one client for the writer, the readers and
the look-ups, a monitor that pings it, and the one problem string everything reports
(readiness, the 503s, the readers' error frames).

Redis unreachable is a state, not an exception that escapes: whoever meets it (a ping, a
write, a read) calls :meth:`RedisHealth.down`; the monitor's next successful ping clears
it and tells the writer (``on_back``) to write what waited.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable

import redis.asyncio as aioredis
from redis.exceptions import RedisError

log = logging.getLogger("relay.bus.redis")

#: the longest one XREAD BLOCK waits (a reader's wait is cut into these); the client's
#: socket timeout is longer than that
MAX_BLOCK_S = 5.0
#: what a failed Redis call can raise: the bus is then unavailable, never broken
REDIS_ERRORS = (RedisError, OSError, TimeoutError)


class RedisHealth:
    def __init__(
        self,
        url: str,
        *,
        max_connections: int = 1000,
        on_back: Callable[[], None] = lambda: None,
        epoch_key: str = "relay:epoch",
    ) -> None:
        self.url = url
        self.max_connections = max_connections
        self.on_back = on_back
        #: called when Redis is found to have lost its data (a restart without
        #: persistence): the writer writes again what the local logs hold
        self.on_lost: Callable[[], None] = lambda: None
        #: a key holding a token set once per Redis dataset: a new token means the data
        #: this instance saw is gone
        self.epoch_key = epoch_key
        self.epoch: bytes | str | None = None
        #: how many times Redis was found to have lost its data (relay_bus_lost_total)
        self.losses = 0
        self._epoch_lock = asyncio.Lock()  # the monitor and the writer both check
        self.client: aioredis.Redis | None = None
        self.problem: str | None = "not connected to Redis yet"
        self._was_down = False

    def connect(self) -> None:
        self.client = aioredis.from_url(
            self.url,
            socket_connect_timeout=2.0,
            socket_timeout=MAX_BLOCK_S + 5.0,
            max_connections=self.max_connections,
            retry_on_timeout=False,
        )

    async def close(self) -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2.0):
                    await self.client.aclose()
            self.client = None

    async def check(self) -> None:
        """Ping now: a problem while Redis does not answer, none once it does again."""
        client = self.client
        if client is None:
            self.problem = "not started"
            return
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancel
            # that lands as the ping completes, and the monitor would outlive stop()
            async with asyncio.timeout(2.0):
                await client.ping()
                await self._check_epoch(client)
        except REDIS_ERRORS as exc:
            self.down(exc)
        else:
            if self.problem is not None:
                if self._was_down:
                    log.warning("relay: the Redis bus is reachable again")
                self.problem = None
                self._was_down = False
                self.on_back()

    async def _check_epoch(self, client: aioredis.Redis) -> None:
        """Has Redis lost its data since this instance last looked (a restart without
        persistence)? Then count it and tell the writer, before anything is written."""
        async with self._epoch_lock:
            await self._compare_epoch(client)

    async def _compare_epoch(self, client: aioredis.Redis) -> None:
        epoch = await client.get(self.epoch_key)
        if epoch is None:  # a new dataset: the first instance to see it marks it
            await client.set(self.epoch_key, uuid.uuid4().hex, nx=True)
            epoch = await client.get(self.epoch_key)
        if self.epoch is not None and epoch != self.epoch:
            self.losses += 1
            log.error(
                "relay: Redis at %s lost its data (restarted without persistence?): "
                "the turns this instance holds are written again",
                safe_url(self.url),
            )
            self.epoch = epoch
            self.on_lost()
        self.epoch = epoch

    def down(self, exc: BaseException) -> None:
        """A Redis call failed: the bus is unavailable until a ping answers again."""
        problem = f"Redis at {safe_url(self.url)} is unreachable ({type(exc).__name__}: {exc})"
        if self.problem is None:
            log.error("relay: %s", problem)
        self.problem = problem
        self._was_down = True

    async def monitor(self) -> None:
        while True:
            await asyncio.sleep(0.5 if self.problem else 2.0)
            await self.check()


def safe_url(url: str) -> str:
    """The URL without a password."""
    if "@" in url:
        scheme, _, rest = url.partition("://")
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url
