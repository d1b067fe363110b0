"""One client for both servers: the same httpx code, the same raw SSE parsing; a
:class:`Dialect` says only which URL starts, joins, resumes and cancels a run, and which
event is a token.

span-relay: ``POST /graphs/{graph}/chat`` (``Accept: text/event-stream``), the run's own
stream; joins and resumes read ``GET /turns/{turn_id}/events`` (``Last-Event-ID``). A token
is a ``text_delta`` event.

The peer: ``POST /threads/{thread_id}/runs/stream`` on a thread id the client makes
(``if_not_exists: create``: one request per turn, as for span-relay), with
``stream_mode: ["updates", "messages-tuple"]``: node progress and the model's tokens, what
a chat UI draws (span-relay sends both, and the graph's topology and the final answer);
``stream_resumable: true`` (its resumable streams) and ``on_disconnect: continue`` (a cut
client does not cancel the run; span-relay keeps a run through a grace period). Joins and
resumes read ``GET /threads/{thread_id}/runs/{run_id}/stream`` (``Last-Event-ID``; ``-1``:
from the start). A token is a ``messages`` event whose message has content.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx

from tests.bench.peer.sse import SSEEvent, SSEParser

SSE_ACCEPT = {"Accept": "text/event-stream"}


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None


@dataclass
class Reading:
    status: int
    first_byte_s: float | None
    first_token_s: float | None
    first_event_s: float | None  # the first whole SSE frame with data
    total_s: float
    nbytes: int
    events: list[SSEEvent]
    headers: dict[str, str]
    cut: bool = False  # the reader stopped after ``stop_after`` events

    @property
    def last_id(self) -> str | None:
        return next((e.id for e in reversed(self.events) if e.id is not None), None)


def message_input(text: str, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], **extra}


class Dialect:
    name = ""

    def start(self, graph: str, graph_input: dict[str, Any]) -> tuple[Request, Any]:
        """The request that starts a streamed run, and the run's handle (what joins it)."""
        raise NotImplementedError

    def handle_of(self, handle: Any, reading: Reading) -> Any:
        return handle

    def is_token(self, event: SSEEvent) -> bool:
        raise NotImplementedError

    def join(self, handle: Any, last_id: str | None) -> Request:
        """A reader of the run: from the start (``last_id`` None) or after ``last_id``."""
        raise NotImplementedError

    async def start_waiting(
        self, client: httpx.AsyncClient, graph: str, graph_input: dict[str, Any]
    ) -> Any:
        """Starts a run with no reader; its handle."""
        raise NotImplementedError

    def cancel(self, handle: Any) -> Request:
        raise NotImplementedError


class Relay(Dialect):
    name = "span-relay"

    def start(self, graph: str, graph_input: dict[str, Any]) -> tuple[Request, Any]:
        turn_id = uuid.uuid4().hex
        return Request(
            "POST", f"/graphs/{graph}/chat", SSE_ACCEPT, {"input": graph_input, "turn_id": turn_id}
        ), turn_id

    def is_token(self, event: SSEEvent) -> bool:
        return event.event == "text_delta"

    def join(self, handle: Any, last_id: str | None) -> Request:
        headers = dict(SSE_ACCEPT)
        if last_id is not None:
            headers["Last-Event-ID"] = last_id
        return Request("GET", f"/turns/{handle}/events", headers)

    async def start_waiting(
        self, client: httpx.AsyncClient, graph: str, graph_input: dict[str, Any]
    ) -> Any:
        turn_id = uuid.uuid4().hex
        r = await client.post(
            f"/graphs/{graph}/chat",
            json={"input": graph_input, "turn_id": turn_id},
            headers={"Prefer": "respond-async"},
        )
        if r.status_code != 202:
            raise RuntimeError(f"span-relay: respond-async answered {r.status_code} {r.text}")
        return turn_id

    def cancel(self, handle: Any) -> Request:
        return Request("POST", f"/turns/{handle}/cancel")


class Peer(Dialect):
    """The Agent Server API's client. ``name`` and ``stream_mode`` default to the peer's
    side of the side-by-side table; tests/bench/peer/same_client.py points the same class
    at span-relay too (its Agent Server routes) with another name and other modes."""

    name = "peer"
    STREAM_MODE: ClassVar[list[str]] = ["updates", "messages-tuple"]

    def __init__(self, name: str = "peer", stream_mode: list[str] | None = None) -> None:
        self.name = name
        self.stream_mode = list(stream_mode or self.STREAM_MODE)

    def _run_body(self, graph: str, graph_input: dict[str, Any]) -> dict[str, Any]:
        return {
            "assistant_id": graph,
            "input": graph_input,
            "stream_mode": self.stream_mode,
            "stream_resumable": True,
            "on_disconnect": "continue",
            "if_not_exists": "create",
        }

    def start(self, graph: str, graph_input: dict[str, Any]) -> tuple[Request, Any]:
        thread_id = str(uuid.uuid4())
        return Request(
            "POST",
            f"/threads/{thread_id}/runs/stream",
            SSE_ACCEPT,
            self._run_body(graph, graph_input),
        ), [thread_id, None]

    def handle_of(self, handle: Any, reading: Reading) -> Any:
        where = reading.headers.get("content-location", "")
        run_id = where.rstrip("/").rsplit("/", 1)[-1] if "/runs/" in where else None
        if run_id is None:  # the first event says it too
            meta = next((e for e in reading.events if e.event == "metadata"), None)
            run_id = json.loads(meta.data)["run_id"] if meta else None
        return [handle[0], run_id]

    def is_token(self, event: SSEEvent) -> bool:
        if event.event != "messages":
            return False
        try:
            message = json.loads(event.data)[0]
        except (ValueError, IndexError, KeyError):
            return False
        return bool(isinstance(message, dict) and message.get("content"))

    def join(self, handle: Any, last_id: str | None) -> Request:
        thread_id, run_id = handle
        return Request(
            "GET",
            f"/threads/{thread_id}/runs/{run_id}/stream",
            {**SSE_ACCEPT, "Last-Event-ID": last_id or "-1"},
        )

    async def start_waiting(
        self, client: httpx.AsyncClient, graph: str, graph_input: dict[str, Any]
    ) -> Any:
        thread_id = str(uuid.uuid4())
        r = await client.post(f"/threads/{thread_id}/runs", json=self._run_body(graph, graph_input))
        if r.status_code != 200:
            raise RuntimeError(f"{self.name}: run create answered {r.status_code} {r.text}")
        return [thread_id, r.json()["run_id"]]

    def cancel(self, handle: Any) -> Request:
        thread_id, run_id = handle
        return Request("POST", f"/threads/{thread_id}/runs/{run_id}/cancel")


async def read(
    client: httpx.AsyncClient,
    request: Request,
    dialect: Dialect,
    stop_after: int | None = None,
    timeout_s: float = 60.0,
) -> Reading:
    """One SSE response, read raw: first byte, first event and first token (seconds after
    the request was sent), body bytes, events. ``stop_after``: close the connection after that many
    events (the rest of the chunk that completed the last one is dropped, as a client
    cut there would never have seen it)."""
    events: list[SSEEvent] = []
    first_byte = first_token = first_event = None
    nbytes = 0
    parser = SSEParser()
    cut = False
    t0 = time.perf_counter()
    async with client.stream(
        request.method, request.path, headers=request.headers, json=request.body, timeout=timeout_s
    ) as response:
        async for chunk in response.aiter_raw():
            now = time.perf_counter() - t0
            if first_byte is None:
                first_byte = now
            nbytes += len(chunk)
            for event in parser.feed(chunk):
                events.append(event)
                if first_event is None:
                    first_event = now
                if first_token is None and dialect.is_token(event):
                    first_token = now
                if stop_after is not None and len(events) >= stop_after:
                    cut = True
                    break
            if cut:
                break
            if now > timeout_s:
                break
        status = response.status_code
        headers = dict(response.headers)
    return Reading(
        status=status,
        first_byte_s=first_byte,
        first_token_s=first_token,
        first_event_s=first_event,
        total_s=time.perf_counter() - t0,
        nbytes=nbytes,
        events=events,
        headers=headers,
        cut=cut,
    )
