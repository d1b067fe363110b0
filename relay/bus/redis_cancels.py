"""Cancel requests between instances that share the Redis bus.

``POST /turns/{id}/cancel`` lands on any instance (a replica, or a worker of
``serve --workers N``), and only the instance that runs the turn can cancel its run. An
instance that does not run it publishes the turn id on the ``relay:cancel:{db}`` channel
(``{db}``: the database number of ``RELAY_BUS``); every instance listens there and
cancels the run if it is its own (what a cancel on the owner itself does). Redis's
channels belong to the whole server, not to a database: the number in the name keeps
deployments that share one Redis on different databases (and test workers) from hearing,
and counting, each other's listeners.

Pub/sub is fire-and-forget: a request while the owner's listener is reconnecting is lost,
so the answer says ``cancelling`` and the turn's stream and record say what happened.
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

CHANNEL = "relay:cancel"


def channel_of(url: str) -> str:
    """The cancel channel of the deployment whose bus is ``url``: ``relay:cancel:{db}``."""
    from redis.connection import parse_url

    return f"{CHANNEL}:{parse_url(url).get('db', 0)}"


class CancelChannel:
    """Listens for cancel requests (``on_cancel(turn_id)``) and publishes them."""

    def __init__(
        self, url: str, on_cancel: Callable[[str], object], channel: str | None = None
    ) -> None:
        """``channel``: the one to listen and publish on; None: :func:`channel_of` ``url``."""
        self.url = url
        self.on_cancel = on_cancel
        self.channel = channel if channel is not None else channel_of(url)
        self.client: aioredis.Redis | None = None
        #: set while the listener is subscribed (tests wait on it)
        self.listening = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.client = aioredis.from_url(self.url, socket_connect_timeout=2.0, socket_timeout=10.0)
        self._task = asyncio.create_task(self._listen(), name="redis cancel listener")

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

    async def request(self, turn_id: str) -> int:
        """Ask every instance to cancel ``turn_id``'s run: how many listened (this one's
        own listener among them). BusUnavailable while Redis does not answer."""
        if self.client is None:
            raise BusUnavailable("the relay is not started")
        try:
            async with asyncio.timeout(2.0):
                return int(await self.client.publish(self.channel, turn_id))
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
                        self._cancel(data.decode() if isinstance(data, bytes) else str(data))
            except REDIS_ERRORS as exc:
                self.listening.clear()
                log.warning(
                    "relay: cancel requests not heard while Redis is away (%s)", type(exc).__name__
                )
                await asyncio.sleep(1.0)
            finally:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(2.0):
                        await pubsub.aclose()

    def _cancel(self, turn_id: str) -> None:
        try:
            self.on_cancel(turn_id)
        except Exception:  # a listener must outlive one bad request
            log.exception("relay: cancel request for turn %s failed", turn_id)
