"""The runs routes of LangGraph's Agent Server API (issue 34) beside the streamed and waited
runs of relay/http/agent_server.py (the stateless runs, ``POST /runs``, ``/runs/stream``
and ``/runs/wait``: relay/http/agent_server_stateless.py): a run is a turn
(relay/agent_server/runs.py).

- ``POST /threads/{thread_id}/runs``: a background run: started through the graph's
  admission as ``/runs/stream`` starts one, answered at once with its ``Run``
  (``Content-Location``); it runs on whether anyone reads it;
- ``GET /threads/{thread_id}/runs`` (``limit``, ``offset``, ``status``): the thread's runs,
  newest first; ``GET /threads/{thread_id}/runs/{run_id}``: one;
- ``POST /threads/{thread_id}/runs/{run_id}/cancel`` (``wait``, ``action``): the turn's
  cancel (relay/http/turn_cancel.py: here, or on the replica that runs it); ``202``, or
  with ``wait=1`` the thread's values once it stopped; a run that is not running (it
  ended, or paused on an interrupt) is a ``404``, as LangGraph's. ``action=rollback`` (LangGraph
  deletes the run and its checkpoints) is a ``422`` (the parameter's schema allows only
  ``interrupt``): a turn's record and spans are its trace, kept by their retention, and
  its checkpoints stay;
- ``DELETE /threads/{thread_id}/runs/{run_id}``: a ``422`` that says why: a run is a
  turn, its record and spans its trace, kept by their retention (``DELETE
  /threads/{thread_id}`` deletes the thread's checkpoints);
- ``GET /threads/{thread_id}/runs/{run_id}/join``: waits for the run's end and answers the
  thread's values, as ``/runs/wait``;
- ``GET /threads/{thread_id}/runs/{run_id}/stream``: the join stream, LangGraph's run
  stream of the turn's latest run (relay/agent_server/stream.py), every frame with an
  ``id:``; with ``Last-Event-ID`` only the frames after it (none missed, none twice),
  live from the bus on any replica, or replayed from the turn's stored spans after the
  run ended (and after a restart). ``stream_mode`` (repeated): the modes; without it,
  every mode served (LangGraph streams the run's own modes: the relay does not keep a
  run's request); ``stream_subgraphs=true``: the subgraphs' ``mode|ns`` frames too (the
  ``Location`` of ``/runs/stream`` names both as the run asked). ``cancel_on_disconnect=1``
  cancels the run when the reader goes.

Each route asks langgraph.json's ``auth`` handlers as the Agent Server does: a background
run ``threads.create_run`` (in :meth:`AgentServer.admit`), reading a run or its stream
``threads.read``, a cancel ``threads.update``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import JSONResponse, Response

from relay.agent_server.requests import STREAM_MODES, run_request, stream_modes_of
from relay.agent_server.runs import STATUSES, run_json, run_status
from relay.agent_server.stream import RunStreamEncoder, ThreadCheckpoints, parse_event_id
from relay.errors import ApiError
from relay.http.agent_server import AgentServer
from relay.http.agent_server_openapi import AGENT_SERVER_OPENAPI
from relay.http.agent_server_streams import join_location, run_location, run_stream
from relay.http.errors import error_responses
from relay.http.requests import read_json_object
from relay.http.turn_cancel import TurnCancel
from relay.turns.records import TurnRecord, id_key

#: the most runs one list answers
MAX_LIMIT = 1000


class RunRoutes:
    """The runs routes (see the module docstring) over ``server``'s graphs."""

    def __init__(self, server: AgentServer) -> None:
        self.server = server
        self.relay = server.relay

    async def run_record(
        self,
        request: Request,
        thread_id: str,
        run_id: str,
        action: str = "read",
        value: dict[str, Any] | None = None,
    ) -> TurnRecord:
        """The run's turn, after ``threads.<action>`` (its handler given ``value``, by
        default the thread's and the run's ids): a 404 for a run that is not the thread's,
        or a thread that is not the caller's."""
        value = value or {"thread_id": thread_id, "run_id": run_id}
        await self.server.authorized_thread(request, thread_id, action, value)
        record = await self.relay.turns.get(run_id)
        if record is None or id_key(record.thread_id) != id_key(thread_id):
            raise ApiError(404, "unknown_run", f"There is no run {run_id} on thread {thread_id}.")
        return record

    async def create(self, request: Request, thread_id: str) -> Response:
        body = await read_json_object(request, self.relay.settings.max_body_bytes)
        run = run_request(body)
        served = self.server.served(run.assistant_id)
        admitted = await self.server.admit(request, thread_id, run, served)
        record = await self.relay.turns.get(admitted.record.turn_id) or admitted.record
        return JSONResponse(run_json(record), headers={"Content-Location": run_location(record)})

    async def runs_of(
        self, request: Request, thread_id: str, limit: int, offset: int, status: str | None
    ) -> list[dict[str, Any]]:
        await self.server.authorized_thread(request, thread_id, "read")
        records = await self.relay.turns.list(thread_id, MAX_LIMIT)
        runs = [run_json(r) for r in records if status is None or run_status(r) == status]
        return runs[offset : offset + limit]

    async def cancel(
        self, request: Request, thread_id: str, run_id: str, wait: bool, action: str
    ) -> Response:
        value = {
            "thread_id": thread_id,
            "action": action,
            "metadata": {"run_ids": [run_id], "status": None},
        }
        record = await self.run_record(request, thread_id, run_id, "update", value)
        if not await TurnCancel(self.relay).cancelled(record):  # as LangGraph's: a 404
            raise ApiError(
                404,
                "no_run_to_cancel",
                f"Run {run_id} is not running (it ended, or paused on an interrupt): "
                "there is nothing to cancel.",
            )
        if not wait:
            return Response(status_code=202)
        return await self.server.join(request, record)

    async def join(self, request: Request, thread_id: str, run_id: str) -> Response:
        record = await self.run_record(request, thread_id, run_id)
        return await self.server.join(request, record)

    async def stream(
        self,
        request: Request,
        thread_id: str,
        run_id: str,
        modes: list[str] | None,
        subgraphs: bool,
        cancel_on_disconnect: bool,
    ) -> Response:
        record = await self.run_record(request, thread_id, run_id)
        served = self.server.graphs.get(record.graph)
        if served is None:
            raise ApiError(404, "unknown_run", f"Run {run_id} is not a run of a graph here.")
        try:
            cursor = parse_event_id(request.headers.get("last-event-id"))
        except ValueError:
            raise ApiError(
                400,
                "invalid_last_event_id",
                "Last-Event-ID must be the id of a frame of this run's stream ('S.n'), "
                "or -1 for the whole stream.",
            ) from None
        stream_modes = stream_modes_of(modes) if modes else STREAM_MODES
        encoder = RunStreamEncoder(
            record.turn_id,
            record.thread_id,
            stream_modes,
            ThreadCheckpoints(served.agent.graph, record.thread_id),
            start=record.run_after_seq,
            resumable=True,
            cursor=cursor,
            subgraphs=subgraphs,
        )
        location = run_location(record)
        join = join_location(record, stream_modes, subgraphs)
        headers = [(b"content-location", location.encode()), (b"location", join.encode())]
        on_disconnect = "cancel" if cancel_on_disconnect else "continue"
        return await run_stream(
            self.relay, record, encoder, on_disconnect=on_disconnect, headers=headers
        )


def runs_router(server: AgentServer, dependencies: list[Any]) -> APIRouter:
    """The runs routes (see the module docstring) over ``server``'s graphs."""
    router = APIRouter(tags=["langgraph"])
    routes = RunRoutes(server)
    reads = [Depends(server.relay.identify)]
    starts = [Depends(d) for d in dependencies]
    flag = "^(0|1|true|false|yes|no)$"

    @router.post(
        "/threads/{thread_id}/runs",
        dependencies=starts,
        responses=error_responses(401, 403, 404, 409, 422),
        openapi_extra=AGENT_SERVER_OPENAPI["run_wait"],
    )
    async def create_run(request: Request, thread_id: str) -> Response:
        """A background run: its ``Run`` at once; it runs on, read or not."""
        return await routes.create(request, thread_id)

    @router.get(
        "/threads/{thread_id}/runs",
        dependencies=reads,
        responses=error_responses(401, 403, 404, 422),
    )
    async def list_runs(
        request: Request,
        thread_id: str,
        limit: int = Query(10, ge=1, le=MAX_LIMIT),
        offset: int = Query(0, ge=0, le=MAX_LIMIT),
        status: str | None = Query(None, pattern=f"^({'|'.join(STATUSES)})$"),
    ) -> list[dict[str, Any]]:
        """The thread's runs (its turns), newest first."""
        return await routes.runs_of(request, thread_id, limit, offset, status)

    @router.get(
        "/threads/{thread_id}/runs/{run_id}",
        dependencies=reads,
        responses=error_responses(401, 403, 404),
    )
    async def get_run(request: Request, thread_id: str, run_id: str) -> dict[str, Any]:
        """One run of the thread."""
        return run_json(await routes.run_record(request, thread_id, run_id))

    @router.delete(
        "/threads/{thread_id}/runs/{run_id}",
        dependencies=reads,
        responses=error_responses(401, 403, 404, 422),
    )
    async def delete_run(request: Request, thread_id: str, run_id: str) -> Response:
        """Not served: a 422 that says why (the module docstring)."""
        await routes.run_record(request, thread_id, run_id, "delete")
        raise ApiError(
            422,
            "unsupported_operation",
            f"Run {run_id} is not deleted: a run is a span-relay turn, its record and spans "
            "its trace, kept until the relay's retention removes them. Delete the thread "
            "(DELETE /threads/{thread_id}) to delete its checkpoints.",
        )

    @router.post(
        "/threads/{thread_id}/runs/{run_id}/cancel",
        dependencies=reads,
        responses=error_responses(401, 403, 404, 422, 503),
    )
    async def cancel_run(
        request: Request,
        thread_id: str,
        run_id: str,
        wait: str = Query("false", pattern=flag),
        # rollback (LangGraph deletes the run and its checkpoints) is not served: a 422
        action: str = Query("interrupt", pattern="^interrupt$"),
    ) -> Response:
        """Cancel the run (here, or on the replica that runs it)."""
        return await routes.cancel(request, thread_id, run_id, _flag(wait), action)

    @router.get(
        "/threads/{thread_id}/runs/{run_id}/join",
        dependencies=reads,
        responses=error_responses(401, 403, 404),
    )
    async def join_run(request: Request, thread_id: str, run_id: str) -> Response:
        """Wait for the run's end: the thread's values, as ``/runs/wait``."""
        return await routes.join(request, thread_id, run_id)

    @router.get(
        "/threads/{thread_id}/runs/{run_id}/stream",
        dependencies=reads,
        responses=error_responses(400, 401, 403, 404, 422, 503),
    )
    async def join_stream(
        request: Request,
        thread_id: str,
        run_id: str,
        stream_subgraphs: str = Query("false", pattern=flag),
        cancel_on_disconnect: str = Query("false", pattern=flag),
    ) -> Response:
        """The run's stream, after ``Last-Event-ID`` (``stream_mode``: repeated)."""
        modes = request.query_params.getlist("stream_mode")
        subgraphs = _flag(stream_subgraphs)
        return await routes.stream(
            request, thread_id, run_id, modes, subgraphs, _flag(cancel_on_disconnect)
        )

    return router


def _flag(value: str) -> bool:
    return value in ("1", "true", "yes")
