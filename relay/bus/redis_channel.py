"""One Redis pub/sub channel between the instances that share the Redis bus.

:class:`RedisChannel` listens on its channel (each message's text to ``on_message``) and
publishes to it; the behaviours are small classes over it: cancel requests
(:mod:`relay.bus.redis_cancels`) and turn changes (:mod:`relay.bus.redis_turn_changes`).
Redis's channels belong to the whole server, not to a database: a channel's name ends in
the database number of ``RELAY_BUS`` (:func:`channel_name`), so that deployments sharing
one Redis on different databases (and test workers) do not hear each other.

Pub/sub is fire-and-forget: what is published while a listener is reconnecting is lost
to it; each behaviour says what that costs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis

from relay.bus.base import BusUnavailable
from relay.bus.redis_health import REDIS_ERRORS, safe_url

log = logging.getLogger("relay.bus.redis")


def channel_name(prefix: str, url: str) -> str:
    """``{prefix}:{db}``: the channel of the deployment whose bus is ``url``."""
    from redis.connection import parse_url

    return f"{prefix}:{parse_url(url).get('db', 0)}"


class RedisChannel:
    """Listens on ``channel`` (``on_message(text)``) and publishes to it; ``what`` names
    what it carries, in the log."""

    def __init__(
        self, url: str, channel: str, on_message: Callable[[str], object], what: str
    ) -> None:
        self.url = url
        self.channel = channel
        self.on_message = on_message
        self.what = what
        self.client: aioredis.Redis | None = None
        #: set while the listener is subscribed (tests wait on it)
        self.listening = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.client = aioredis.from_url(self.url, socket_connect_timeout=2.0, socket_timeout=10.0)
        self._task = asyncio.create_task(self._listen(), name=f"redis listener: {self.what}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task], timeout=2.0)
            self._task = None
        if self.client is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2.0):
                    await self.client.aclose()
            self.client = None

    async def publish(self, text: str) -> int:
        """Publish ``text``: how many instances listened (this one's own listener among
        them). BusUnavailable while Redis does not answer."""
        if self.client is None:
            raise BusUnavailable("the relay is not started")
        try:
            async with asyncio.timeout(2.0):
                return int(await self.client.publish(self.channel, text))
        except REDIS_ERRORS as exc:
            raise BusUnavailable(
                f"Redis at {safe_url(self.url)} is unreachable ({type(exc).__name__})"
            ) from None

    async def _listen(self) -> None:
        while True:
            assert self.client is not None
            pubsub: Any = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.channel)
                self.listening.set()
                while True:
                    message = await pubsub.get_message(timeout=5.0)
                    if message is not None and message.get("type") == "message":
                        data = message["data"]
                        self._heard(data.decode() if isinstance(data, bytes) else str(data))
            except REDIS_ERRORS as exc:
                self.listening.clear()
                log.warning(
                    "relay: %s not heard while Redis is away (%s)", self.what, type(exc).__name__
                )
                await asyncio.sleep(1.0)
            finally:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(2.0):
                        await pubsub.aclose()

    def _heard(self, text: str) -> None:
        try:
            self.on_message(text)
        except Exception:  # a listener must outlive one bad message
            log.exception("relay: handling %s %r failed", self.what, text[:200])
