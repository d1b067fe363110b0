"""Stray spans handed between the instances that share the Redis bus.

A run's spans should all reach one relay (a balancer that routes OTLP by trace id). When
they do not, the instance that gets a part of a run whose turn another instance
publishes (:mod:`relay.ingest.received_turns`) hands that part to it over the
``relay:handoff:{db}`` channel (:mod:`relay.bus.redis_channel`): every instance hears
the request, the one that publishes the turn takes it and answers ``taken`` on the same
channel, and the asker learns within ``wait_s`` whether anyone did
(:mod:`relay.ingest.strays` says what each side does with it).

A request is one JSON message: ``{"op": "hand", "id", "from", "turn", "trace", "body"}``
(``body``: the spans, as the asker encoded them); an answer is ``{"op": "taken", "id",
"to"}``. ``from``/``to`` are this process's own random id (never the instance id, which
two workers of one host may share): a process never takes its own request. Pub/sub is
fire-and-forget: a request or an answer lost while a listener reconnects is an answer
never heard, which the asker treats as "nobody took it".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections.abc import Callable

from relay.bus.redis_channel import RedisChannel, channel_name

log = logging.getLogger("relay.bus.redis")

CHANNEL = "relay:handoff"
#: how long an asker waits for the instance that publishes the turn to answer
WAIT_S = 5.0


def no_taker(turn_id: str, trace_id: str, body: str) -> bool:
    """The default of :attr:`HandoffChannel.on_request`: this process takes nothing."""
    return False


class HandoffChannel(RedisChannel):
    """Hands stray spans to the instance that publishes their turn (:meth:`hand`), and
    hands the other processes' requests to ``on_request(turn_id, trace_id, body)``, which
    answers whether this process takes them (then they are its to publish)."""

    def __init__(self, url: str, channel: str | None = None) -> None:
        """``channel``: the one to listen and publish on; None: ``relay:handoff:{db}``."""
        super().__init__(
            url,
            channel if channel is not None else channel_name(CHANNEL, url),
            self._on_text,
            "span handoffs",
        )
        #: set by the receiver that takes requests (relay/ingest/strays.py)
        self.on_request: Callable[[str, str, str], bool] = no_taker
        self.process_id = secrets.token_hex(8)
        self._asked: dict[str, asyncio.Future[None]] = {}
        self._answers: set[asyncio.Task[None]] = set()

    async def hand(self, turn_id: str, trace_id: str, body: str, wait_s: float = WAIT_S) -> bool:
        """Ask the instance that publishes ``turn_id`` to take ``body`` (spans of trace
        ``trace_id``): True once one answered ``taken``, False when none did within
        ``wait_s``. BusUnavailable while Redis does not answer."""
        request_id = secrets.token_hex(8)
        taken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._asked[request_id] = taken
        message = {
            "op": "hand",
            "id": request_id,
            "from": self.process_id,
            "turn": turn_id,
            "trace": trace_id,
            "body": body,
        }
        try:
            await self.publish(json.dumps(message))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_s):
                    await asyncio.shield(taken)  # (a timeout cancels the wait alone)
        finally:
            del self._asked[request_id]
        return taken.done() and not taken.cancelled()

    def _on_text(self, text: str) -> None:
        message = json.loads(text)
        if message.get("op") == "taken":
            if message.get("to") == self.process_id:
                asked = self._asked.get(str(message.get("id")))
                if asked is not None and not asked.done():
                    asked.set_result(None)
            return
        if message.get("op") != "hand" or message.get("from") == self.process_id:
            return
        turn_id, trace_id = str(message["turn"]), str(message["trace"])
        if self.on_request(turn_id, trace_id, str(message["body"])):
            answer = {"op": "taken", "id": message["id"], "to": message["from"]}
            task = asyncio.ensure_future(self._answer(json.dumps(answer), turn_id))
            self._answers.add(task)
            task.add_done_callback(self._answers.discard)

    async def _answer(self, text: str, turn_id: str) -> None:
        try:
            await self.publish(text)
        except Exception:  # the asker hears nothing: it ends the run's record itself
            log.warning("relay: could not answer a span handoff of turn %s", turn_id)

    async def stop(self) -> None:
        for task in list(self._answers):
            task.cancel()
        await super().stop()
