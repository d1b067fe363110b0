"""Cancel requests between instances that share the Redis bus.

``POST /turns/{id}/cancel`` lands on any instance (a replica, or a worker of
``serve --workers N``), and only the instance that runs the turn can cancel its run. An
instance that does not run it publishes the turn id on the ``relay:cancel:{db}`` channel
(:mod:`relay.bus.redis_channel`); every instance listens there and cancels the run if it
is its own (what a cancel on the owner itself does).

A request while the owner's listener is reconnecting is lost, so the answer says
``cancelling`` and the turn's stream and record say what happened.
"""

from __future__ import annotations

from collections.abc import Callable

from relay.bus.redis_channel import RedisChannel, channel_name

CHANNEL = "relay:cancel"


def channel_of(url: str) -> str:
    """The cancel channel of the deployment whose bus is ``url``: ``relay:cancel:{db}``."""
    return channel_name(CHANNEL, url)


class CancelChannel(RedisChannel):
    """Listens for cancel requests (``on_cancel(turn_id)``) and publishes them."""

    def __init__(
        self, url: str, on_cancel: Callable[[str], object], channel: str | None = None
    ) -> None:
        """``channel``: the one to listen and publish on; None: :func:`channel_of` ``url``."""
        super().__init__(
            url, channel if channel is not None else channel_of(url), on_cancel, "cancel requests"
        )

    async def request(self, turn_id: str) -> int:
        """Ask every instance to cancel ``turn_id``'s run: how many listened (this one's
        own listener among them). BusUnavailable while Redis does not answer."""
        return await self.publish(turn_id)
