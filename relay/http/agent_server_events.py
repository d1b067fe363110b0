"""LangGraph's streaming protocol, the one ``@langchain/react`` v1's ``useStream`` and
``@langchain/langgraph-sdk``'s ``client.threads.stream()`` speak over HTTP (issue 34):

- ``POST /threads/{thread_id}/commands``: one command, one JSON answer
  (relay/agent_server/commands.py): ``run.start`` starts a run (or resumes the thread's
  paused turn with its input), ``input.respond`` answers an interrupt; every run a
  span-relay turn, through ``AgentServer.admit`` (relay/http/agent_server.py), its
  ``run_id`` the turn id. A refused command is a 4xx whose body is the protocol's
  ``{"type": "error", "id", "error", "message"}`` (``code``: the relay's own code).
- ``POST /threads/{thread_id}/stream/events``: the thread's events as SSE
  (relay/agent_server/thread_events.py; shapes and ids:
  relay/agent_server/protocol_events.py), body ``{"channels", "namespaces"?, "depth"?,
  "since"?}``; every event has an ``id:`` (its ``seq``), durable and ordered across the
  thread, its replicas and restarts. A reconnect with ``since`` or ``Last-Event-ID`` gets
  exactly the events after it; one with neither starts at the thread's latest turn.

What LangGraph's own JavaScript client sends (measured by tests/interop/protocol_js):
``since`` only on a stream's first connection when its caller gives one (the
``ThreadStream`` of ``client.threads.stream()`` never does), no ``Last-Event-ID``, so its
reconnects carry no cursor; the Agent Server then replays its whole buffer of the thread
(up to 10,000 events), span-relay the latest turn. A client that sends its last ``seq``
(as ``since`` or ``Last-Event-ID``, e.g. from the transport's ``fetch`` or ``onRequest``
hook) gets nothing twice. Measured (``python -m tests.bench.peer.resend``, the 70-word
``tokens`` graph, channels lifecycle/input/values/messages, a stream cut after the
thread's last run): span-relay resends 82 events (that run) whether the thread had 1, 3
or 10 runs, 0 with ``Last-Event-ID``; the Agent Server (langgraph-api 0.16.7) 78, 234,
780, with ``Last-Event-ID`` the same.

With langgraph.json's ``auth``, a command that starts or resumes a run asks
``threads.create_run`` (in ``AgentServer.admit``), the event stream ``threads.read``, as
the Agent Server does. The WebSocket transport is not served.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from relay.agent_server.commands import (
    Command,
    CommandError,
    command_of,
    respond_answer,
    resume_body,
    start_body,
    success,
)
from relay.agent_server.protocol_events import cursor_of, stream_request
from relay.agent_server.requests import run_request
from relay.agent_server.thread_events import ThreadEvents
from relay.errors import ApiError
from relay.events import Event
from relay.http.agent_server import AgentServer
from relay.http.agent_server_openapi import AGENT_SERVER_OPENAPI
from relay.http.errors import error_responses
from relay.http.identity import user_of
from relay.http.replay import load_turn_events
from relay.http.requests import read_json_object
from relay.turns.records import PAUSED
from relay.turns.refusals import STATUS as REFUSAL_STATUS
from relay.turns.refusals import Refused

STREAM_HEADERS = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}


class EventRoutes:
    """What the routes do, over one :class:`AgentServer`'s graphs and relay."""

    def __init__(self, server: AgentServer) -> None:
        self.server = server
        self.relay = server.relay

    # -- commands ---------------------------------------------------------------------------

    async def command(self, request: Request, thread_id: str) -> Response:
        body = await read_json_object(request, self.relay.settings.max_body_bytes)
        try:
            command = command_of(body)
            try:
                result = await self._run(request, thread_id, command)
            except ApiError as exc:
                raise command.refuse(_code_of(exc.status), exc.message, exc.status) from None
            except Refused as exc:
                raise command.refuse(
                    "invalid_argument", exc.message, REFUSAL_STATUS[exc.kind]
                ) from None
        except CommandError as exc:
            error = exc.body()
            error["code"] = exc.code
            return JSONResponse(error, status_code=exc.status)
        return JSONResponse(success(command, result))

    async def _run(self, request: Request, thread_id: str, command: Command) -> dict[str, Any]:
        server = self.server
        user = user_of(request)
        paused = None
        if await self.relay.turns.thread_owner(thread_id) is not None:
            await server.thread_record(thread_id, user)  # a 404 for another user's
            latest = await self.relay.turns.list(thread_id, 1)
            paused = latest[0] if latest and latest[0].status == PAUSED else None
        if command.method == "run.start":
            body = start_body(command)
            if paused is not None:  # the protocol's "run interrupted -> resume"
                body = resume_body(body["assistant_id"], body["input"], body.get("config"))
        else:  # input.respond
            if paused is None:
                raise command.refuse("no_such_run", "The thread has no run waiting for input.", 404)
            record = await server.thread_record(thread_id, user)
            _, interrupts = await server.thread_values(record)
            pending = {str(i.get("id")) for found in interrupts.values() for i in found}
            answer, config = respond_answer(command, pending)
            body = resume_body(paused.graph, answer, config)
        run = run_request(body)
        admitted = await server.admit(request, thread_id, run, server.served(run.assistant_id))
        return {"run_id": admitted.record.turn_id}

    # -- the event stream -------------------------------------------------------------------

    async def events(self, request: Request, thread_id: str) -> Response:
        body = await read_json_object(request, self.relay.settings.max_body_bytes)
        asked = stream_request(body)
        if asked.since is None:
            since = cursor_of(request.headers.get("last-event-id") or None)
            asked = type(asked)(asked.filter, since)
        await self.server.authorized_thread(request, thread_id, "read")
        relay = self.relay
        events = ThreadEvents(
            relay.turns,
            relay.bus,
            relay.feed,
            {name: served.agent.graph for name, served in self.server.graphs.items()},
            self.stored,
            relay.settings.heartbeat_s,
            relay.closing,
        )
        cursor = await events.cursor_of(thread_id, asked.since)
        return StreamingResponse(
            events.stream(thread_id, asked, cursor),
            media_type="text/event-stream",
            headers=STREAM_HEADERS,
        )

    async def stored(self, turn_id: str) -> list[Event] | None:
        """The turn's whole log from its stored spans (None: they do not give it)."""
        try:
            derived = await load_turn_events(self.relay, turn_id)
        except ApiError:
            return None
        while not derived.done:
            await derived.until(len(derived.events))
        if derived.failure is not None:
            return None
        return list(derived.events)


def _code_of(status: int) -> str:
    return {404: "no_such_run", 409: "invalid_argument", 422: "invalid_argument"}.get(
        status, "unknown_error"
    )


def events_router(server: AgentServer, dependencies: list[Any]) -> APIRouter:
    """The routes (see the module docstring) over ``server``'s graphs."""
    router = APIRouter(tags=["langgraph"])
    routes = EventRoutes(server)
    runs = [Depends(d) for d in dependencies]

    @router.post(
        "/threads/{thread_id}/commands",
        dependencies=runs,
        responses=error_responses(401, 403),
        openapi_extra=AGENT_SERVER_OPENAPI["commands"],
    )
    async def commands(request: Request, thread_id: str) -> Response:
        """One command of LangGraph's streaming protocol (``run.start``,
        ``input.respond``)."""
        return await routes.command(request, thread_id)

    @router.post(
        "/threads/{thread_id}/stream/events",
        dependencies=[Depends(server.relay.identify)],
        responses=error_responses(400, 401, 403, 404, 422),
        openapi_extra=AGENT_SERVER_OPENAPI["stream_events"],
    )
    async def stream_events(request: Request, thread_id: str) -> Response:
        """The thread's events (SSE), from a cursor (``since`` or ``Last-Event-ID``)."""
        return await routes.events(request, thread_id)

    return router
