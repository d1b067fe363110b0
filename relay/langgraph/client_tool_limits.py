"""The turns' side of client-executed tools (relay/langgraph/client_tools.py): their
limits on a run, below HTTP.

:class:`ClientTools` is what admission (relay/turns/admission.py, its ``RunTools``) and
the run routes (``/chat``, ``/chat/resume``, ``/agui``) call, a line each:

- :meth:`configure`: the run's ``configurable`` with the limits, the AG-UI client's tools
  and, on a resume, the round it answers;
- :meth:`answers`: a resume's answers, checked. A client-tool call is answered with
  ``{"result": <any JSON>, "token": "..."}`` or ``{"error": "...", "token": "..."}``; a
  token that answers no pending call of this turn (another turn's, another call's, or
  one already used) is ``409 client_tool_token_stale``; a result over
  ``RELAY_CLIENT_TOOL_MAX_RESULT_BYTES`` is ``413 client_tool_result_too_large``; an
  answer after ``RELAY_CLIENT_TOOL_TIMEOUT_S`` is ``409 client_tool_timeout`` (the turn
  is ended). The token is checked against the pending interrupt in the thread's
  checkpoint, which every replica shares, and is stripped before the graph sees it;
- :meth:`watched`: a run that pauses on a client tool is ended when nobody answers in
  ``RELAY_CLIENT_TOOL_TIMEOUT_S`` (a timer on the instance that ran it);
- :meth:`sweep`, when the relay starts: the graph's turns that a stopped instance left
  waiting on a client tool get their timer again, for the time they have left, and those
  past it are ended, one at a time (a resume that comes too late ends its turn too).

An AG-UI run whose tool messages answer the thread's pending client-tool calls is that
turn's resume: relay/http/agui_tools.py reads them.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Protocol

from relay.bus.base import Bus
from relay.errors import ApiError
from relay.langgraph.agent import GraphAgent, PendingInterrupt
from relay.langgraph.client_tools import (
    ANSWERED_KEY,
    MAX_ROUNDS_KEY,
    ROUND_KEY,
    TOOLS_KEY,
    is_client_tool_call,
    stop_answers,
)
from relay.langgraph.resume_answers import match_interrupts
from relay.settings import RelaySettings
from relay.turns.records import PAUSED, TurnRecord, TurnStore
from relay.turns.response import ChatResponse, client_tool_calls, round_of
from relay.turns.runs import RunManager, ThreadBusy
from relay.turns.starting import StartLocks

log = logging.getLogger("relay.client_tools")


class ToolParts(Protocol):
    """What :class:`ClientTools` uses of a relay (:class:`relay.core.Relay` has them)."""

    settings: RelaySettings
    bus: Bus
    turns: TurnStore
    runs: RunManager


class ClientTools:
    """The client-executed tools of one served graph ``agent``, over ``relay``'s parts:
    a run's limits, a resume's answers checked, the time to answer (see the module);
    ``starting``: the start locks its expiries take, as admission's starts do."""

    def __init__(self, relay: ToolParts, agent: GraphAgent, starting: StartLocks) -> None:
        self.relay = relay
        self.agent = agent
        self.starting = starting
        self.settings = relay.settings
        self._timers: set[asyncio.TimerHandle] = set()
        self._ending: set[asyncio.Task[None]] = set()
        self._closed = False  # the relay stopped: no timer is set any more

    # -- a run's configurable -------------------------------------------------------------

    def configure(
        self,
        configurable: Mapping[str, Any],
        *,
        record: TurnRecord | None = None,
        pending: Sequence[PendingInterrupt] = (),
        answers: Mapping[str, Any] | None = None,
        tools: Sequence[Any] = (),
    ) -> dict[str, Any]:
        """The run's ``configurable``: the limits, the AG-UI client's ``tools``, and on a
        resume of ``record`` the rounds the turn has had (the calls it answers, and the
        record's count: a resume that answers only an approval goes on counting)."""
        out = {**configurable, MAX_ROUNDS_KEY: self.settings.client_tool_max_rounds}
        if tools:  # AG-UI's RunAgentInput.tools
            out[TOOLS_KEY] = [
                t.model_dump(mode="json", exclude_none=True)
                if hasattr(t, "model_dump")
                else dict(t)
                for t in tools
            ]
        calls = [
            p.value
            for p in pending
            if answers is not None and p.id in answers and is_client_tool_call(p.value)
        ]
        rounds = [round_of(c) for c in calls]
        if record is not None:  # the turn's count (its pauses' rounds, relay/turns/run_end.py)
            rounds.append(record.client_tool_round)
        if round_ := max(rounds, default=0):
            out[ROUND_KEY] = round_
        if calls:
            out[ANSWERED_KEY] = [str(c.get("call_id")) for c in calls]
        return out

    # -- a resume's answers ---------------------------------------------------------------

    async def answers(
        self,
        record: TurnRecord,
        resume: Any,
        pending: Sequence[PendingInterrupt],
        configurable: Mapping[str, Any],
    ) -> dict[str, Any]:
        """``match_interrupts`` with the client-tool answers checked (see the module)."""
        calls = {p.id: p.value for p in pending if is_client_tool_call(p.value)}
        if not calls:
            return match_interrupts(resume, pending)
        _check_tokens(resume, calls)
        if self._expired(record):
            await self._end(record, list(calls), configurable)
            raise ApiError(
                409,
                "client_tool_timeout",
                f"Turn {record.turn_id} waited longer "
                "than RELAY_CLIENT_TOOL_TIMEOUT_S "
                f"({self.settings.client_tool_timeout_s:g} s) for the client's "
                "tool result and was ended.",
            )
        answers = match_interrupts(resume, pending)
        for interrupt_id, value in calls.items():
            if interrupt_id in answers:  # a call left unanswered stays pending
                answers[interrupt_id] = self._answer(value, answers[interrupt_id])
        return answers

    def refuse_spent_token(
        self, record: TurnRecord, resume: Any, pending: Sequence[PendingInterrupt] | None
    ) -> None:
        """A resume that carries a client-tool token to a turn waiting on no client-tool
        call (it finished, or waits on something else): ``409 client_tool_token_stale``."""
        calls = {p.id: p.value for p in pending or () if is_client_tool_call(p.value)}
        if record.status != PAUSED:
            calls = {}
        if _tokens(resume) and not calls:
            raise ApiError(409, "client_tool_token_stale", _STALE)

    def _answer(self, value: Mapping[str, Any], answer: Any) -> dict[str, Any]:
        name = value.get("name")
        if (
            not isinstance(answer, dict)
            or not isinstance(answer.get("token"), str)
            or ("result" in answer) == ("error" in answer)
        ):
            raise ApiError(
                422,
                "invalid_resume",
                f"The call of client tool {name} is "
                'answered with {"result": <any JSON>, "token": "..."} or '
                '{"error": "...", "token": "..."}, the token from its interrupt.',
            )
        if "error" in answer:
            if not isinstance(answer["error"], str):
                raise ApiError(422, "invalid_resume", "'error' must be a string.")
            return {"error": answer["error"][:2000]}
        size = len(json.dumps(answer["result"], ensure_ascii=False).encode())
        limit = self.settings.client_tool_max_result_bytes
        if size > limit:
            raise ApiError(
                413,
                "client_tool_result_too_large",
                f"The result of client tool "
                f"{name} is {size} bytes; RELAY_CLIENT_TOOL_MAX_RESULT_BYTES "
                f"allows {limit}.",
            )
        return {"result": answer["result"]}

    def _expired(self, record: TurnRecord) -> bool:
        return (
            bool(record.paused_at)
            and time.time() * 1000 - (record.paused_at or 0)
            > self.settings.client_tool_timeout_s * 1000
        )

    # -- the time to answer ---------------------------------------------------------------

    async def watched(
        self, record: TurnRecord, run: Awaitable[ChatResponse], configurable: Mapping[str, Any]
    ) -> ChatResponse:
        """The run; when it pauses on a client tool, a timer ends the turn if nobody
        answers in time."""
        response = await run
        if response.status == PAUSED and client_tool_calls(response.interrupts):
            self._later(self.settings.client_tool_timeout_s, record.turn_id, configurable)
        return response

    async def sweep(self) -> None:
        """At start-up (the relay's :attr:`lifecycles`): this graph's paused turns whose
        latest run paused on a client tool (its recorded answer says so) get their timer
        again for the time they have left; those past it are ended now, one at a time, as
        their timer would have. The ending run has no request behind it: its
        ``configurable`` carries the relay's limits only (only the tool's node runs, and
        its client tool returns the timeout)."""
        before: float | None = None
        configurable = self.configure({})
        while not self._closed:
            page = await self.relay.turns.list(
                None, _SWEEP_PAGE, before, graph=self.agent.name, status=PAUSED
            )
            for record in page:
                if self._closed:
                    return
                if not record.paused_at or not _waits_on_client_tool(record):
                    continue
                left = record.paused_at / 1000 + self.settings.client_tool_timeout_s - time.time()
                if left > 0:
                    self._later(left, record.turn_id, configurable)
                else:
                    await self._expire(record.turn_id, configurable)
            if len(page) < _SWEEP_PAGE:
                return
            before = page[-1].started_at

    def close(self) -> None:
        """The relay stops: its timers are cancelled, and none is set from now on."""
        self._closed = True
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()

    def _later(self, delay_s: float, turn_id: str, configurable: Mapping[str, Any]) -> None:
        if self._closed:
            return
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._timers.discard(handle)
            self._spawn(self._expire(turn_id, configurable))

        handle = loop.call_later(max(delay_s, 0.01), fire)
        self._timers.add(handle)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._ending.add(task)
        task.add_done_callback(self._ending.discard)

    async def _expire(self, turn_id: str, configurable: Mapping[str, Any]) -> None:
        try:
            record = await self.relay.turns.get(turn_id)
            if record is None or record.status != PAUSED or not record.paused_at:
                return
            if not self._expired(record):  # recorded a moment after the run returned
                left = (record.paused_at or 0) / 1000 + self.settings.client_tool_timeout_s
                self._later(left - time.time(), turn_id, configurable)
                return
            async with self.starting.hold(StartLocks.keys(turn=turn_id, thread=record.thread_id)):
                record = await self.relay.turns.get(turn_id)
                if (
                    record is None
                    or record.status != PAUSED
                    or self.relay.runs.running(record.turn_id)
                ):
                    return  # answered (here or on another instance) meanwhile
                pending = await self.agent.pending_interrupts(record.thread_id) or []
                ids = [p.id for p in pending if is_client_tool_call(p.value)]
                if ids:
                    await self._end(record, ids, configurable)
        except Exception:
            log.exception("relay: could not end turn %s past RELAY_CLIENT_TOOL_TIMEOUT_S", turn_id)

    async def _end(
        self, record: TurnRecord, ids: list[str], configurable: Mapping[str, Any]
    ) -> None:
        """End the turn past its time: a resume run that stops the calls ``ids`` and ends
        with the ``error`` event ``client_tool_timeout`` (the caller holds the start
        locks of the turn and its thread)."""
        answers = stop_answers(ids, "client_tool_timeout")
        agent = self.agent
        try:
            await self.relay.runs.check_thread_settled(record.thread_id)
            await self.relay.runs.start(
                record, "resume", lambda: agent.resume(record, answers, dict(configurable))
            )
        except ThreadBusy:
            log.info(
                "turn %s: its thread is busy; its expiry waits for the next resume", record.turn_id
            )


#: paused turns read per query of the start-up sweep
_SWEEP_PAGE = 200


def _waits_on_client_tool(record: TurnRecord) -> bool:
    """Whether the turn's latest run paused on a client-tool call (its recorded answer)."""
    try:
        response = json.loads(record.response or "null")
    except ValueError:
        return False
    interrupts = response.get("interrupts") if isinstance(response, dict) else None
    return isinstance(interrupts, list) and bool(client_tool_calls(interrupts))


_STALE = (
    "This client-tool token answers no pending call of this turn: it belongs to "
    "another turn or call, was already used, or its turn has ended (GET /turns/{id} "
    "says how). Answer the turn's latest paused event."
)


def _tokens(resume: Any) -> list[str]:
    """The client-tool tokens a resume carries (a bare answer, or one per interrupt)."""
    answers = (
        list(resume.values()) if isinstance(resume, dict) and "token" not in resume else [resume]
    )
    return [a["token"] for a in answers if isinstance(a, dict) and isinstance(a.get("token"), str)]


def _check_tokens(resume: Any, calls: Mapping[str, Mapping[str, Any]]) -> None:
    """Every token the resume carries answers a pending call: 409 otherwise."""
    valid = [str(v.get("token") or "") for v in calls.values()]
    for token in _tokens(resume):
        if not any(hmac.compare_digest(token.encode(), v.encode()) for v in valid if v):
            raise ApiError(409, "client_tool_token_stale", _STALE)


__all__ = ["ClientTools"]
