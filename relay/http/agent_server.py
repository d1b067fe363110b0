"""LangGraph's Agent Server API (issue 34; DESIGN.md §5): what LangGraph's clients call to
list assistants, make and read threads, and stream or wait for runs. This module is the
service (:class:`AgentServer`); its routes are relay/http/agent_server_routes.py.

- ``GET /info``; ``POST /assistants/search``, ``GET /assistants/{assistant_id}``,
  ``GET /assistants/{assistant_id}/graph``, ``GET /assistants/{assistant_id}/schemas``:
  the served graphs, one assistant each (relay/agent_server/assistants.py);
- ``POST /threads``, ``GET /threads/{thread_id}``, ``GET /threads/{thread_id}/state``,
  ``POST /threads/{thread_id}/history``: a thread is claimed for its user as a turn's is,
  with its metadata and times in the turn store's thread table (relay/turns/threads.py),
  and read from the checkpointer of the graph its turns ran on; a run adds its graph's
  ``graph_id`` and ``assistant_id`` to the thread's metadata (the search, update and
  delete of threads: relay/http/agent_server_threads.py; the store routes:
  relay/http/agent_server_store.py);
- ``POST /threads/{thread_id}/runs/stream`` and ``/runs/wait``: every run is a span-relay
  turn, started (``input``) or resumed (``command.resume``) through the graph's
  :class:`relay.turns.admission.Admission`; the run id is the turn id (a resume's is the
  paused turn's), so ``/turns/{run_id}`` and its events are the run's; a ``checkpoint``
  the run names must be the thread's latest (:meth:`AgentServer.check_from_latest`);

With langgraph.json's ``auth``, each route calls the ``@auth.on`` handler the Agent
Server calls (relay/http/agent_server_auth.py): ``assistants.search``/``read``,
``threads.create``/``read``/``create_run``; a route added here calls
:meth:`AgentServer.authorize` (or :meth:`AgentServer.authorized_thread`) before it acts.

The other runs routes (background runs, get, list, cancel, join, the join stream with
``Last-Event-ID``): relay/http/agent_server_runs.py; the stateless runs (``POST /runs``,
``/runs/stream``, ``/runs/wait``): relay/http/agent_server_stateless.py.

Not served yet (a 404 or a 422 that says so): thread copy, subgraph streams, a run from
an earlier checkpoint (a branch: agent-chat-ui's "edit" and "regenerate" of an earlier
message), ``multitask_strategy`` other than ``reject``, a cancel's ``action=rollback``,
deleting a run. The ``commands`` + ``stream/events`` protocol:
relay/http/agent_server_events.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import uuid
from typing import Any

from fastapi import Request
from starlette.responses import JSONResponse, Response

from relay.agent_server.assistants import (
    assistant_of,
    find,
)
from relay.agent_server.jsonable import interrupt_json, jsonable
from relay.agent_server.requests import RunRequest, count_of, run_request, turn_message
from relay.agent_server.state import checkpoint_of, thread_state
from relay.agent_server.stream import RunStreamEncoder, ThreadCheckpoints
from relay.agent_server.threads import ran_on, thread_json
from relay.auth import User
from relay.bus.base import BusLost, BusUnavailable, CursorExpired
from relay.delivery.streaming import MAX_BATCH
from relay.errors import ApiError
from relay.events import ERROR, RUN_TERMINAL
from relay.http.agent_server_auth import AgentServerAuth, run_value
from relay.http.agent_server_streams import join_location, run_location, run_stream
from relay.http.chat import configurable_of
from relay.http.chat_input import ID, digest
from relay.http.identity import user_of
from relay.http.parts import RelayParts
from relay.http.requests import read_json_object
from relay.langgraph.agent import GraphAgent
from relay.langgraph.checkpoints import read_checkpoints
from relay.langgraph.client_tool_limits import ClientTools
from relay.turns.access import may_use
from relay.turns.admission import Admission, Admitted, NewTurn, Resume
from relay.turns.records import RUNNING, TurnRecord, id_key
from relay.turns.refusals import Refused
from relay.turns.response import ChatResponse
from relay.turns.threads import ThreadRecord

#: how long a join waits on a turn's log before it looks at the turn's record again
JOIN_RECHECK_S = 5.0
#: what ``/info`` says this server serves (langgraph_sdk reads ``flags``)
FLAGS = {"assistants": True, "crons": False, "langsmith": False, "store": True}


@dataclasses.dataclass(slots=True)
class Served:
    """A graph served through the Agent Server API: its agent, admission and tools."""

    agent: GraphAgent
    admission: Admission
    tools: ClientTools


class AgentServer:
    """The Agent Server routes of one app, over every graph mounted on it."""

    def __init__(self, relay: RelayParts) -> None:
        self.relay = relay
        self.graphs: dict[str, Served] = {}
        #: when the assistants were registered (they are the graphs this process serves)
        self.created_at = datetime.datetime.now(datetime.UTC)
        #: langgraph.json's ``auth`` on these routes (allows everything without one)
        self.auth = AgentServerAuth(relay.langgraph_auth)

    def add(self, agent: GraphAgent, admission: Admission, tools: ClientTools) -> None:
        self.graphs[agent.name] = Served(agent, admission, tools)

    # -- lookups --------------------------------------------------------------------------

    async def authorize(
        self, request: Request, resource: str, action: str, value: dict[str, Any]
    ) -> dict[str, Any] | None:
        """LangGraph's handler of ``resource.action`` (``threads.read``, ``store.put``, ...)
        on ``value``, the Agent Server's value dict of that action, which the handler may
        change (a create's ``metadata``, a store's ``namespace``): its filter (a dict the
        caller matches against what it acts on: :meth:`authorized_thread`), None (allowed,
        unfiltered; always None without langgraph.json's ``auth``), or its refusal (an
        ApiError: ``403``, or the status it raised)."""
        return await self.auth.authorize(request, resource, action, value)

    async def authorized_thread(
        self,
        request: Request,
        thread_id: str,
        action: str,
        value: dict[str, Any] | None = None,
    ) -> ThreadRecord:
        """``threads.<action>``'s handler (``value``: by default ``{"thread_id": ...}``),
        then the thread's row: a ``404`` for a thread that does not exist, was deleted, is
        another user's, or whose metadata the handler's filter does not match."""
        filters = await self.authorize(
            request, "threads", action, value if value is not None else {"thread_id": thread_id}
        )
        record = await self.thread_record(thread_id, user_of(request))
        if not self.auth.thread_passes(filters, record):
            raise ApiError(404, "unknown_thread", f"There is no thread {thread_id} of yours.")
        return record

    async def authorized_assistant(self, request: Request, assistant_id: str) -> Served:
        """``assistants.read``'s handler, then the assistant: a ``404`` when its filter
        does not match the assistant's metadata."""
        value: dict[str, Any] = {"assistant_id": assistant_id}
        filters = await self.authorize(request, "assistants", "read", value)
        served = self.served(assistant_id)
        listed = assistant_of(served.agent, self.created_at)
        if not self.auth.passes(filters, listed["metadata"]):
            raise ApiError(404, "unknown_assistant", f"No assistant {assistant_id!r} here.")
        return served

    def served(self, assistant_id: str) -> Served:
        agent = find([s.agent for s in self.graphs.values()], assistant_id)
        if agent is None:
            raise ApiError(404, "unknown_assistant", f"No assistant {assistant_id!r} here.")
        return self.graphs[agent.name]

    async def thread_turns(
        self, thread_id: str, user: User | None, limit: int = 1
    ) -> list[TurnRecord]:
        """The thread's turns (newest first), or a 404 for a thread that does not exist
        or is another user's."""
        await self.thread_record(thread_id, user)
        return await self.relay.turns.list(thread_id, limit)

    async def thread_record(self, thread_id: str, user: User | None) -> ThreadRecord:
        """The thread's row, or a 404 for a thread that does not exist, was deleted or
        is another user's."""
        if not ID.match(thread_id):
            raise ApiError(404, "unknown_thread", f"There is no thread {thread_id!r}.")
        record = await self.relay.turns.get_thread(thread_id)
        if record is None or record.deleted or not may_use(user, record.owner):
            raise ApiError(404, "unknown_thread", f"There is no thread {thread_id} of yours.")
        return record

    async def thread_values(
        self, record: ThreadRecord
    ) -> tuple[Any, dict[str, list[dict[str, Any]]]]:
        """The thread's ``values`` and ``interrupts`` (by task id) from the checkpointer
        of the graph its latest turn ran on ({} and {} before any)."""
        found = self.graphs.get(record.last_graph or "")
        if found is None:
            return {}, {}
        config = {"configurable": {"thread_id": record.thread_id}}
        snapshot = await read_checkpoints(found.agent.graph.aget_state(config))
        interrupts = {
            task.id: [interrupt_json(i) for i in task.interrupts]
            for task in snapshot.tasks
            if task.interrupts
        }
        return jsonable(snapshot.values), interrupts

    def agent_of(self, turns: list[TurnRecord]) -> GraphAgent | None:
        if not turns:
            return None
        found = self.graphs.get(turns[0].graph)
        return found.agent if found is not None else None

    # -- threads --------------------------------------------------------------------------

    async def thread(self, thread_id: str, user: User | None) -> dict[str, Any]:
        record = await self.thread_record(thread_id, user)
        values, interrupts = await self.thread_values(record)
        return thread_json(record, values, interrupts)

    async def state(self, thread_id: str, user: User | None) -> dict[str, Any]:
        turns = await self.thread_turns(thread_id, user)
        agent = self.agent_of(turns)
        if agent is None:
            return _empty_state(thread_id)
        snapshot = await read_checkpoints(agent.graph.aget_state(_config(turns[0])))
        return thread_state(snapshot)

    async def history(
        self, thread_id: str, user: User | None, body: dict[str, Any]
    ) -> list[dict[str, Any]]:
        unknown = sorted(set(body) - {"limit", "before", "metadata", "checkpoint", "select"})
        if unknown:
            raise ApiError(422, "unknown_fields", f"Unknown fields: {', '.join(unknown)}.")
        limit = count_of(body, "limit", 10, 1, 1000)
        before = body.get("before")
        if before is not None and not isinstance(before, dict):
            raise ApiError(422, "invalid_request", "'before' must be a checkpoint object.")
        metadata = body.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise ApiError(422, "invalid_request", "'metadata' must be an object.")
        unserved = sorted(k for k in ("checkpoint", "select") if body.get(k))
        if unserved:
            raise ApiError(422, "unsupported_field", f"'{unserved[0]}' is not served here yet.")
        turns = await self.thread_turns(thread_id, user)
        agent = self.agent_of(turns)
        if agent is None:
            return []
        before_config = {"configurable": dict(before)} if before else None

        async def read() -> list[dict[str, Any]]:
            return [
                thread_state(s)
                async for s in agent.graph.aget_state_history(
                    _config(turns[0]), filter=metadata or None, before=before_config, limit=limit
                )
            ]

        return await read_checkpoints(read())

    async def create_thread(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        user = user_of(request)
        unknown = sorted(set(body) - {"thread_id", "metadata", "if_exists", "supersteps", "ttl"})
        if unknown:
            raise ApiError(422, "unknown_fields", f"Unknown fields: {', '.join(unknown)}.")
        metadata = body.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise ApiError(422, "invalid_request", "'metadata' must be an object.")
        unserved = sorted(k for k in ("supersteps", "ttl") if body.get(k))
        if unserved:
            raise ApiError(422, "unsupported_field", f"'{unserved[0]}' is not served here yet.")
        if_exists = body.get("if_exists") or "raise"
        if if_exists not in ("raise", "do_nothing"):
            raise ApiError(422, "invalid_request", "'if_exists' must be 'raise' or 'do_nothing'.")
        thread_id = body.get("thread_id") or str(uuid.uuid4())
        if not isinstance(thread_id, str) or not ID.match(thread_id):
            raise ApiError(
                422,
                "invalid_thread_id",
                "'thread_id' must be 1-128 characters of letters, digits, '_', '-', '.', ':'.",
            )
        # threads.create: its handler may stamp the metadata (the documented ``owner``)
        value = {"thread_id": thread_id, "metadata": metadata, "if_exists": if_exists}
        filters = await self.authorize(request, "threads", "create", value)
        metadata = self.auth.metadata_of(value, "threads.create")
        turns = self.relay.turns
        found = await turns.get_thread(thread_id)
        owner = found.owner if found is not None else None
        if found is not None and not found.deleted and not self.auth.thread_passes(filters, found):
            # as the Agent Server answers a create its filter does not let through
            raise ApiError(409, "thread_exists", f"Thread {thread_id} already exists.")
        if owner is None:  # a concurrent claim may win: the owner is the claim's answer
            owner = await turns.claim_thread(
                thread_id, user.id if user is not None else "", metadata
            )
        if not may_use(user, owner):
            # another user's thread is one that does not exist for this one: never a 409
            raise ApiError(409, "thread_unavailable", f"Thread id {thread_id} cannot be used.")
        if found is not None and found.deleted:  # its owner makes it again
            await turns.patch_thread(thread_id, metadata, revive=True)
        elif found is not None and if_exists == "raise":
            raise ApiError(409, "thread_exists", f"Thread {thread_id} already exists.")
        return await self.thread(thread_id, user)

    # -- runs -----------------------------------------------------------------------------

    async def admit(
        self, request: Request, thread_id: str, run: RunRequest, served: Served
    ) -> Admitted:
        """The run started (or the paused turn resumed) through the graph's admission."""
        user = user_of(request)
        if not ID.match(thread_id):
            raise ApiError(404, "unknown_thread", f"There is no thread {thread_id!r}.")
        agent = served.agent
        run_id = str(uuid.uuid4())
        # threads.create_run: its handler may stamp the run's metadata, which a thread
        # the run creates starts with; its filter must let an existing thread through
        value = run_value(thread_id, run_id, agent.name, run)
        filters = await self.authorize(request, "threads", "create_run", value)
        metadata = self.auth.metadata_of(value, "threads.create_run")
        owner = await self.relay.turns.thread_owner(thread_id)
        if owner is None and not run.create_thread:
            raise ApiError(
                404,
                "unknown_thread",
                f"There is no thread {thread_id}; create it first, or send if_not_exists 'create'.",
            )
        if owner is not None and filters:
            found = await self.relay.turns.get_thread(thread_id)
            if found is None or not self.auth.thread_passes(filters, found):
                raise ApiError(404, "unknown_thread", f"There is no thread {thread_id} of yours.")
        if run.checkpoint_id is not None:
            await self.check_from_latest(thread_id, owner is not None, run.checkpoint_id, served)
        configurable = {**run.configurable, **configurable_of(agent, request, user)}
        if run.has_resume:
            answer = run.resume
            admitted = await served.admission.resume(
                Resume(
                    thread_id=thread_id,
                    turn_id=None,
                    answer=lambda pending: answer,
                    request_hash=lambda record: digest({"resume": answer, "run_id": run_id}),
                    configurable=configurable,
                    user=user,
                    authorize=_nothing,
                    raw=answer,
                )
            )
            await ran_on(self.relay.turns, admitted.record.thread_id, agent)
            return admitted
        graph_input = run.graph_input
        message = turn_message(graph_input)
        admitted = await served.admission.chat(
            NewTurn(
                message=message,
                graph_input=graph_input,
                request_hash=digest({"input": graph_input, "thread_id": id_key(thread_id)}),
                configurable=served.tools.configure(configurable),
                user=user,
                turn_id=run_id,
                thread_id=thread_id,
                conflict=Refused("conflict", "run_conflict", f"Run {run_id} exists."),
                resume_hint="answer it with command.resume",
            )
        )
        await ran_on(self.relay.turns, admitted.record.thread_id, agent)
        if owner is None and metadata:  # the run made the thread: its metadata is the run's
            await self.relay.turns.patch_thread(admitted.record.thread_id, metadata)
        return admitted

    async def check_from_latest(
        self, thread_id: str, exists: bool, checkpoint_id: str, served: Served
    ) -> None:
        """A run may name the checkpoint it starts from only when it is the thread's
        latest (what ``useStream`` sends with each run): a branch from an earlier one is a
        422."""
        latest = None
        if exists:
            latest = await read_checkpoints(
                ThreadCheckpoints(served.agent.graph, thread_id).latest_id()
            )
        if latest != checkpoint_id:
            raise ApiError(
                422,
                "unsupported_field",
                f"Checkpoint {checkpoint_id} is not the latest of thread {thread_id}: a run "
                "from an earlier checkpoint (a branch) is not served here yet; leave "
                "'checkpoint' out, or name the latest.",
            )

    async def stream(self, request: Request, thread_id: str) -> Response:
        run = run_request(await read_json_object(request, self.relay.settings.max_body_bytes))
        return (await self.run_and_stream(request, thread_id, run))[1]

    async def run_and_stream(
        self, request: Request, thread_id: str, run: RunRequest
    ) -> tuple[TurnRecord, Response]:
        """The run started, and its stream."""
        served = self.served(run.assistant_id)
        admitted = await self.admit(request, thread_id, run, served)
        record = admitted.record
        encoder = RunStreamEncoder(
            record.turn_id,
            record.thread_id,
            run.stream_modes,
            ThreadCheckpoints(served.agent.graph, record.thread_id),
            start=admitted.after,
            resumable=run.resumable,
            subgraphs=run.subgraphs,
        )
        location = run_location(record)
        join = join_location(record, run.stream_modes, run.subgraphs)
        headers = [(b"content-location", location.encode()), (b"location", join.encode())]
        response = await run_stream(
            self.relay, record, encoder, on_disconnect=run.on_disconnect, headers=headers
        )
        return record, response

    async def wait(
        self, request: Request, thread_id: str, run: RunRequest | None = None
    ) -> Response:
        """The run's result once it ended (``run``: the request read already)."""
        if run is None:
            run = run_request(await read_json_object(request, self.relay.settings.max_body_bytes))
        served = self.served(run.assistant_id)
        admitted = await self.admit(request, thread_id, run, served)
        response = await self.relay.runs.wait(admitted.record.turn_id)
        return await self.run_result(admitted.record, admitted.after, response)

    async def join(self, request: Request, record: TurnRecord) -> Response:
        """``GET .../runs/{run_id}/join``: the result of the turn's latest run once it has
        ended, wherever it runs (this instance, or another: read from the shared log)."""
        turn_id = record.turn_id
        if self.relay.runs.running(turn_id):
            return await self.run_result(
                record, record.run_after_seq, await self.relay.runs.wait(turn_id)
            )
        while record.status == RUNNING and not await self.run_ended(turn_id, record.run_after_seq):
            record = await self.relay.turns.get(turn_id) or record
        return await self.run_result(record, record.run_after_seq, None)

    async def run_ended(self, turn_id: str, after: int) -> bool:
        """Whether the turn's log after ``after`` holds its run's end, waiting up to
        :data:`JOIN_RECHECK_S` for it (False: not yet, or no log to read: look at the
        record again, which recovery settles)."""
        reader = self.relay.bus.reader(turn_id, after)
        try:
            while True:
                batch = reader.take(MAX_BATCH)
                if any(event.type in RUN_TERMINAL for event in batch):
                    return True
                if batch:
                    continue
                if reader.exhausted or not await reader.wait(JOIN_RECHECK_S):
                    return False
        except (BusLost, BusUnavailable, CursorExpired):
            await asyncio.sleep(JOIN_RECHECK_S)
            return False
        finally:
            reader.close()

    async def run_result(
        self, record: TurnRecord, after: int, response: ChatResponse | None
    ) -> Response:
        """What ``/runs/wait`` and a join answer: the thread's values at the run's end
        (``__interrupt__`` when it paused), or ``{"__error__": {error, message}}``."""
        latest = await self.relay.turns.get(record.turn_id) or record
        status = response.status if response is not None else latest.status
        headers = {"Content-Location": run_location(record)}
        ended: dict[str, Any] | None = None
        if response is None and status == RUNNING:
            # the log holds the run's end, its record (another replica's) not yet: an
            # error event there is the run's end
            ended = await self.run_error(record.turn_id, after)
            if ended:
                status = "error"
        if status in ("error", "cancelled", "interrupted"):
            if ended is None:
                ended = await self.run_error(record.turn_id, after)
            message = response.answer if response is not None else f"The run ended: {status}."
            error = {
                "error": ended.get("code", status),
                "message": ended.get("message", message),
            }
            return JSONResponse({"__error__": error}, headers=headers)
        served = self.graphs.get(record.graph)
        if served is None:
            return JSONResponse({}, headers=headers)
        snapshot = await read_checkpoints(served.agent.graph.aget_state(_config(record)))
        values = jsonable(snapshot.values)
        if not isinstance(values, dict):
            values = {"__root__": values}
        if snapshot.interrupts:
            values["__interrupt__"] = [interrupt_json(i) for i in snapshot.interrupts]
        return JSONResponse(values, headers=headers)

    async def run_error(self, turn_id: str, after: int) -> dict[str, Any]:
        """The fields of the run's ``error`` event (its ``code`` and ``message``), read
        from the turn's log after ``after``; {} when the log no longer holds it."""
        reader = self.relay.bus.reader(turn_id, after)
        found: dict[str, Any] = {}
        try:
            while batch := reader.take(MAX_BATCH) or (
                reader.take(MAX_BATCH) if await reader.wait(0) else []
            ):
                for event in batch:
                    if event.type == ERROR:
                        found = event.fields
                if any(event.type in RUN_TERMINAL for event in batch):
                    break
        except (BusLost, BusUnavailable, CursorExpired):
            return {}
        finally:
            reader.close()
        return found


async def _nothing(record: TurnRecord) -> None:
    """No further check of a resumed turn: its user was checked by the admission."""


def _config(record: TurnRecord) -> dict[str, Any]:
    return {"configurable": {"thread_id": record.thread_id}}


def _empty_state(thread_id: str) -> dict[str, Any]:
    """The state of a thread no run has written yet."""
    return {
        "values": {},
        "next": [],
        "checkpoint": checkpoint_of({"configurable": {"thread_id": thread_id}}),
        "metadata": {},
        "created_at": None,
        "parent_checkpoint": None,
        "tasks": [],
        "interrupts": [],
    }
