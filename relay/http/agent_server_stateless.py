"""LangGraph's stateless runs (issue 34): ``POST /runs`` (a background run),
``POST /runs/stream`` and ``POST /runs/wait``: a run without a thread of the caller's.

As LangGraph's Agent Server does, each gets a new thread made for it (the run's request
as a thread run's: relay/agent_server/requests.py, with ``if_not_exists`` ``create``), and
``on_completion`` says what becomes of that thread once the run ended: ``delete`` (the
default, as LangGraph's) deletes its checkpoints and the thread (as
``DELETE /threads/{thread_id}``; the run's turn, its record and spans, stays: its trace),
``keep`` keeps it, to be read and run on again as any thread. The run's ``Run`` (a
background run's answer) and its ``Content-Location`` name the thread.

When the thread is deleted: ``/runs/wait`` after reading the run's result, before it
answers; ``/runs/stream`` once both the run ended and the stream closed (its last frames
read the thread's checkpoints; a reader that left with ``on_disconnect`` ``continue``
leaves the run to end on its own); ``/runs`` once the run ended. The deletion waits on
this process: a thread whose process stopped before its run ended is kept.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import JSONResponse, Response

from relay.agent_server.requests import RunRequest, run_request
from relay.agent_server.runs import run_json
from relay.delivery.streaming import EventStream
from relay.errors import ApiError
from relay.http.agent_server import AgentServer
from relay.http.agent_server_openapi import AGENT_SERVER_OPENAPI
from relay.http.agent_server_streams import run_location
from relay.http.agent_server_threads import ThreadRoutes
from relay.http.errors import error_responses
from relay.http.requests import read_json_object
from relay.turns.records import RUNNING, TurnRecord

#: what becomes of a stateless run's thread, LangGraph's default first
ON_COMPLETION = ("delete", "keep")
#: how often a deletion looks again at a thread its run still holds (its record is
#: written a moment after the run's end)
_RETRY_S = 0.1
#: how many times it looks before it keeps the thread
_RETRIES = 100


class StatelessRuns:
    """The stateless runs (see the module docstring) over ``server``'s graphs; the
    deletions waiting on a run's end are held here, one task a run."""

    def __init__(self, server: AgentServer) -> None:
        self.server = server
        self.relay = server.relay
        self.threads = ThreadRoutes(server)
        self._deleting: set[asyncio.Task[None]] = set()

    async def request_of(self, request: Request) -> tuple[RunRequest, bool]:
        """The run's request, and whether its thread is kept (``on_completion``)."""
        body = await read_json_object(request, self.relay.settings.max_body_bytes)
        keep = on_completion_of(body) == "keep"
        body = {k: v for k, v in body.items() if k != "on_completion"}
        if body.get("if_not_exists") not in (None, "create"):
            raise ApiError(
                422,
                "invalid_run",
                "A stateless run makes its own thread: 'if_not_exists' may only be 'create'.",
            )
        run = run_request(body)
        run.create_thread = True
        return run, keep

    async def create(self, request: Request) -> Response:
        run, keep = await self.request_of(request)
        served = self.server.served(run.assistant_id)
        admitted = await self.server.admit(request, str(uuid.uuid4()), run, served)
        record = await self.relay.turns.get(admitted.record.turn_id) or admitted.record
        if not keep:
            self._delete_after(record, None)
        return JSONResponse(run_json(record), headers={"Content-Location": run_location(record)})

    async def stream(self, request: Request) -> Response:
        run, keep = await self.request_of(request)
        record, response = await self.server.run_and_stream(request, str(uuid.uuid4()), run)
        if keep:
            return response
        closed = asyncio.Event()
        if isinstance(response, EventStream):
            before = response.on_close

            def on_close(completed: bool) -> Any:
                closed.set()
                return before(completed) if before is not None else None

            response.on_close = on_close
        else:  # a fixed stream (the run ended already): nothing reads the thread after
            closed.set()
        self._delete_after(record, closed)
        return response

    async def wait(self, request: Request) -> Response:
        run, keep = await self.request_of(request)
        thread_id = str(uuid.uuid4())
        response = await self.server.wait(request, thread_id, run)
        if not keep:
            found = await self.relay.turns.get_thread(thread_id)
            if found is not None:
                await self._delete(thread_id)
        return response

    def _delete_after(self, record: TurnRecord, closed: asyncio.Event | None) -> None:
        task = asyncio.create_task(self._delete_when_ended(record, closed))
        self._deleting.add(task)
        task.add_done_callback(self._deleting.discard)

    async def _delete_when_ended(self, record: TurnRecord, closed: asyncio.Event | None) -> None:
        turn_id = record.turn_id
        if self.relay.runs.running(turn_id):
            await self.relay.runs.wait(turn_id)
        while record.status == RUNNING and not await self.server.run_ended(
            turn_id, record.run_after_seq
        ):
            record = await self.relay.turns.get(turn_id) or record
        if closed is not None:
            await closed.wait()
        await self._delete(record.thread_id)

    async def _delete(self, thread_id: str) -> None:
        """Delete the thread once its run's end is written (a 409 until then)."""
        for _ in range(_RETRIES):
            found = await self.relay.turns.get_thread(thread_id)
            if found is None:
                return
            try:
                await self.threads.remove(found)
                return
            except ApiError as exc:
                if exc.status != 409:
                    raise
            await asyncio.sleep(_RETRY_S)


def on_completion_of(body: Mapping[str, Any]) -> str:
    """``on_completion``: ``delete`` (the default) or ``keep``; else a 422."""
    value = body.get("on_completion")
    if value is None:
        return "delete"
    if value not in ON_COMPLETION:
        raise ApiError(422, "invalid_run", "'on_completion' must be one of delete, keep.")
    return str(value)


def stateless_router(server: AgentServer, dependencies: list[Any]) -> APIRouter:
    """The stateless runs routes (see the module docstring) over ``server``'s graphs."""
    router = APIRouter(tags=["langgraph"])
    runs = StatelessRuns(server)
    starts = [Depends(d) for d in dependencies]

    @router.post(
        "/runs",
        dependencies=starts,
        responses=error_responses(401, 403, 404, 409, 422),
        openapi_extra=AGENT_SERVER_OPENAPI["stateless_create"],
    )
    async def create_run(request: Request) -> Response:
        """A background run on a thread made for it: its ``Run`` at once."""
        return await runs.create(request)

    @router.post(
        "/runs/stream",
        dependencies=starts,
        responses=error_responses(401, 403, 404, 409, 422),
        openapi_extra=AGENT_SERVER_OPENAPI["stateless_stream"],
    )
    async def stream_run(request: Request) -> Response:
        """A run on a thread made for it, streamed."""
        return await runs.stream(request)

    @router.post(
        "/runs/wait",
        dependencies=starts,
        responses=error_responses(401, 403, 404, 409, 422),
        openapi_extra=AGENT_SERVER_OPENAPI["stateless_wait"],
    )
    async def wait_run(request: Request) -> Response:
        """A run on a thread made for it: its result once it ended."""
        return await runs.wait(request)

    return router
