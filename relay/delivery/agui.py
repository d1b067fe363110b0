"""Our events -> AG-UI 1.0 events: the one translation, for every AG-UI stream.

:class:`AGUIEncoder` is an encoder for :class:`relay.delivery.streaming.EventStream` (and
the replay's stream): the same writer, heartbeats, send timeout and disconnect handling as
SSE and NDJSON, with frames in AG-UI's shape (``data: {json}\\n\\n``, LF only, no
``id``/``event`` lines). It holds the per-stream translation state, because AG-UI brackets
what our contract reports as facts: a step, a text message and a tool call each open and
close. The runs (their start, outcome and order) are this module's; what one run holds open
(steps, text messages, tool calls) is :class:`relay.delivery.agui_run.Run`'s.

- a run's first event (``graph_topology``): ``RUN_STARTED`` (``protocolVersion`` "1.0"),
  then ``CUSTOM graph_topology``;
- ``node_started``: ``STEP_STARTED`` named ``{node}#{span_id}`` (unique per instance);
- ``node_completed``: ``TEXT_MESSAGE_END`` of its text messages, ``STEP_FINISHED``, then
  ``CUSTOM node_completed`` (status, duration, summary, children);
- ``tool_started``: ``TOOL_CALL_START``, ``TOOL_CALL_ARGS`` (the arguments: from the
  event, else from the approval interrupt that proposed the call), ``TOOL_CALL_END``;
- ``tool_completed``: ``TOOL_CALL_RESULT`` (``{"tool", "status", "duration_ms"}`` as JSON);
- ``text_delta``: ``TEXT_MESSAGE_START`` (a message's first delta), ``TEXT_MESSAGE_CONTENT``;
- ``custom`` (a payload a node sent): ``CUSTOM`` named ``custom``, its value the event's
  ``node``, ``namespace``, ``name``, ``data``, ``span_id`` and ``truncated`` (nulls left
  out);
- ``paused``: ``RUN_FINISHED`` with ``outcome {type: "interrupt", interrupts}``; a run
  paused only on client-executed tools (interrupts of type ``client_tool``) is a run that
  left frontend tool calls for the client: ``outcome {type: "success",
  pendingToolCallIds}``, their ``TOOL_CALL_START``/``ARGS``/``END`` without a result (the
  client answers in its next run's tool messages; the later runs of the turn do not
  repeat those calls);
- ``turn_completed``: ``RUN_FINISHED`` with ``outcome {type: "success"}`` and the
  ChatResponse as ``result``;
- ``error``: ``RUN_ERROR`` (``message``, ``code``); code ``cancelled``: ``RUN_FINISHED``
  with ``outcome {type: "cancelled"}``;
- any other type: ``CUSTOM`` named after it.

The rules a strict AG-UI client enforces hold for every stream this encoder writes:
``RUN_STARTED`` comes first, every step, text message and tool call is closed before the
run's terminal event, a run always ends with ``RUN_FINISHED`` or ``RUN_ERROR`` (a
``reconnect``/``reset`` frame of the writer becomes a ``RUN_ERROR``), and no value is
``null`` (optional fields are left out). A turn's stream that spans several runs (a chat,
then its resume) is several AG-UI runs in a row, each opened by its own ``RUN_STARTED``.

An answered or refused run whose answer is not the text it streamed last (it streamed
none: a refusal is not a model call; or a node other than the model wrote the answer
after the model's text) gets its answer as one more text message, so an AG-UI client's
conversation ends with it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from relay import events as ev
from relay.delivery.agui_run import Run, agui_event, clean, custom
from relay.delivery.negotiation import SSE
from relay.events import MESSAGE_SAVED, Event, dumps

PROTOCOL_VERSION = "1.0"
#: what ``CUSTOM custom`` carries of a ``custom`` event (a null among them is left out)
_CUSTOM_FIELDS = ("node", "namespace", "name", "data", "span_id", "truncated")

#: what an approval interrupt expects as its answer (AG-UI ``Interrupt.responseSchema``)
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["approved"],
    "properties": {"approved": {"type": "boolean"}, "comment": {"type": "string"}},
}

#: what a client-executed tool's interrupt expects (resume[] instead of a tool message)
CLIENT_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["token"],
    "properties": {"result": {}, "error": {"type": "string"}, "token": {"type": "string"}},
}


def frame(event: Mapping[str, Any]) -> bytes:
    """One AG-UI event as an SSE frame: a single ``data`` line, LF framing."""
    return f"data: {dumps(event)}\n\n".encode()


#: the ``RUN_ERROR`` of a run its server stopped in, whose turn another took up again
RECOVERED_MESSAGE = (
    "The server running this run stopped; the turn goes on in a run taken up again from "
    "its last checkpoint."
)


class AGUIEncoder:
    """Translates one stream of our events into AG-UI events (see the module docstring).

    ``thread_id``/``run_id``: the AG-UI ids of the run this stream answers (``POST
    /agui``). Without them (a turn's stream, a replay) a run's id is its trace id, and the
    thread is the events'. Each run starts (``RUN_STARTED``) at its first event.
    ``interrupts``: the interrupts a resume answers (``[{id, value}]``), where a tool
    call's arguments come from when its event has none.
    """

    media_type = SSE

    def __init__(
        self,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        interrupts: Iterable[Mapping[str, Any]] | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self._run: Run | None = None
        self._runs = 0
        self._tool_args: dict[str, Any] = {}
        self._client_calls: set[str] = set()  # client-tool calls answered: not shown again
        self._remember_interrupts(interrupts or ())
        #: a successful run's RUN_FINISHED, held for the answer's message_saved (which our
        #: streams send right after turn_completed); released by the next event or the end
        self._held: dict[str, Any] | None = None
        #: AG-UI events written so far (their dicts), for tests and metrics
        self.count = 0

    # -- the encoder interface of relay.delivery.streaming ---------------------------------

    def preamble(self) -> bytes:
        """Nothing: a run starts at its first event, with that event's time, so the same
        log always reads as the same AG-UI stream (a retry, a replay)."""
        return b""

    def heartbeat(self) -> bytes:
        return b": hb\n\n"

    def event(self, event: Event) -> bytes:
        return self._write(self.translate(event))

    def problem(self, type_: str, fields: dict[str, Any]) -> bytes:
        """An out-of-log frame of the writer (``reconnect``, ``reset``, ``error``): the run
        cannot go on in this stream, so it ends with ``RUN_ERROR`` saying why. Between runs
        (a turn's stream waiting through a pause) it is only a comment."""
        released = self._release()
        if self._run is None:
            return (
                self._write(released)
                + f": {type_} last_seq={fields.get('last_seq', '')}\n\n".encode()
            )
        now = time.time() * 1000
        code = str(fields.get("code") or fields.get("reason") or type_)
        message = str(fields.get("message") or "The stream ended before the run did.")
        metadata = clean(
            {
                k: v
                for k, v in fields.items()
                if k in ("last_seq", "oldest_seq", "reason", "retryable")
            }
        )
        out = self._close_all(now)
        out.append(
            agui_event("RUN_ERROR", now, message=message, code=code, metadata=metadata or None)
        )
        self._run = None
        return self._write(out)

    def epilogue(self) -> bytes:
        """The stream ends (its terminal event was sent, or a replay ran out): what is held
        goes out, and a run still open ends with ``RUN_ERROR`` (code ``incomplete``), so an
        AG-UI stream never stops inside a run."""
        return self._write(self.finish())

    def finish(self) -> list[dict[str, Any]]:
        out = self._release()
        if self._run is not None:
            out += self._end_with_error(
                time.time() * 1000, "incomplete", "The stream ended before the run's outcome."
            )
        return out

    # -- translation ---------------------------------------------------------------------

    def translate(self, event: Event) -> list[dict[str, Any]]:
        """The AG-UI events (dicts, camelCase, no nulls) for one of ours."""
        t = event.type
        f = event.fields
        ts = event.ts
        if self.thread_id is None:
            self.thread_id = event.thread_id
        if t == MESSAGE_SAVED and self._run is None:
            # the answer's id for feedback: inside the run it belongs to, just before its
            # RUN_FINISHED; a trailer of a run this stream did not see is left out
            if self._held is None:
                return []
            return [custom(t, ts, event.to_dict()), *self._release()]
        out = self._release()
        if t == ev.TURN_RECOVERED:  # the cut run ends here; the recovered one begins
            if self._run is not None and self._run.trace_id not in (None, event.trace_id):
                out += self._end_with_error(ts, "run_recovered", RECOVERED_MESSAGE)
            if self._run is None:
                out += self._start_run(event.trace_id, ts)
            out.append(custom(t, ts, event.to_dict()))
            return out
        if t == ev.GRAPH_TOPOLOGY:
            if self._run is not None and self._run.trace_id not in (None, event.trace_id):
                out += self._end_with_error(
                    ts, "run_incomplete", "The run ended without its outcome."
                )
            if self._run is None:
                out += self._start_run(event.trace_id, ts)
            elif self._run.trace_id is None:
                self._run.trace_id = event.trace_id
            out.append(
                custom(
                    ev.GRAPH_TOPOLOGY,
                    ts,
                    {
                        k: f[k]
                        for k in (
                            "graph_id",
                            "nodes",
                            "edges",
                            "run_kind",
                            "truncated",
                            "discovered",
                        )
                        if k in f
                    },
                )
            )
            return out
        if self._run is None:  # attached after the run started, or a rebuilt outcome
            out += self._start_run(event.trace_id, ts)
        run = self._run
        assert run is not None
        if t == ev.NODE_STARTED:
            out += run.node_started(f, ts)
        elif t == ev.NODE_COMPLETED:
            out += run.node_completed(f, ts)
        elif t == ev.TEXT_DELTA:
            out += run.text_delta(f, ts)
        elif t == ev.CUSTOM:
            out.append(custom(t, ts, {k: f[k] for k in _CUSTOM_FIELDS if k in f}))
        elif t in (ev.TOOL_STARTED, ev.TOOL_COMPLETED) and f.get("call_id") in self._client_calls:
            pass  # a client-executed call of an earlier run: the client has it and its result
        elif t == ev.TOOL_STARTED:
            out += run.tool_started(f, ts, self._tool_args)
        elif t == ev.TOOL_COMPLETED:
            out += run.tool_completed(f, ts, self._tool_args)
        elif t == ev.PAUSED:
            out += self._paused(run, f, ts)
        elif t == ev.TURN_COMPLETED:
            out += self._completed(run, event, ts)
        elif t == ev.ERROR:
            out += self._error(f, ts)
        else:  # additive types we do not translate: passed on, never dropped
            out.append(custom(t, ts, event.to_dict()))
        return out

    # -- runs ----------------------------------------------------------------------------

    def _start_run(
        self, trace_id: str | None, ts: float, run_id: str | None = None
    ) -> list[dict[str, Any]]:
        self._runs += 1
        if run_id is None:
            run_id = (
                self.run_id
                if self._runs == 1 and self.run_id
                else (trace_id or f"run-{self._runs}")
            )
        self._run = Run(run_id, trace_id)
        return [
            agui_event(
                "RUN_STARTED",
                ts,
                threadId=self.thread_id or "",
                runId=run_id,
                protocolVersion=PROTOCOL_VERSION,
            )
        ]

    def _end_with_error(self, ts: float, code: str, message: str) -> list[dict[str, Any]]:
        out = self._close_all(ts)
        out.append(agui_event("RUN_ERROR", ts, message=message, code=code))
        self._run = None
        return out

    def _close_all(self, ts: float, status: str = "cancelled") -> list[dict[str, Any]]:
        """Close what the run left open (see :meth:`Run.close_all`)."""
        return self._run.close_all(ts, status) if self._run is not None else []

    def _finish(self, ts: float, **fields: Any) -> list[dict[str, Any]]:
        assert self._run is not None
        event = agui_event(
            "RUN_FINISHED", ts, threadId=self.thread_id or "", runId=self._run.run_id, **fields
        )
        self._run = None
        return [event]

    # -- terminal events -----------------------------------------------------------------

    def _paused(self, run: Run, f: Mapping[str, Any], ts: float) -> list[dict[str, Any]]:
        raw = f.get("interrupts")
        pending = [i for i in raw if isinstance(i, Mapping)] if isinstance(raw, list) else []
        self._remember_interrupts(pending)
        calls = [
            str(v.get("call_id"))
            for v in (i.get("value") for i in pending)
            if isinstance(v, Mapping) and v.get("type") == "client_tool"
        ]
        for call_id in calls:  # the client's to answer: no result from us
            run.paused_results.pop(call_id, None)
        out = self._close_all(ts, status="paused")
        if not pending:
            out.append(
                agui_event(
                    "RUN_ERROR",
                    ts,
                    code="invalid_pause",
                    message="The run paused without saying what it waits for.",
                )
            )
            self._run = None
            return out
        if len(calls) == len(pending):  # frontend tool calls only: AG-UI's own way
            return out + self._finish(ts, outcome={"type": "success", "pendingToolCallIds": calls})
        interrupts = [interrupt(i) for i in pending]
        return out + self._finish(ts, outcome={"type": "interrupt", "interrupts": interrupts})

    def _completed(self, run: Run, event: Event, ts: float) -> list[dict[str, Any]]:
        f = event.fields
        response = f.get("response") if isinstance(f.get("response"), Mapping) else {}
        assert isinstance(response, Mapping)
        status = response.get("status", "answered")
        if status == "paused":
            return self._paused(run, {"interrupts": response.get("interrupts", [])}, ts)
        if status in ("error", "interrupted"):
            return self._error({"code": status, "message": response.get("answer")}, ts)
        out = self._close_all(ts)
        answer = response.get("answer")
        if (
            status in ("answered", "refused")
            and isinstance(answer, str)
            and answer
            and answer != run.streamed_last()
        ):
            message_id = f"msg_{event.trace_id}"
            out += [
                agui_event("TEXT_MESSAGE_START", ts, messageId=message_id, role="assistant"),
                agui_event("TEXT_MESSAGE_CONTENT", ts, messageId=message_id, delta=answer),
                agui_event("TEXT_MESSAGE_END", ts, messageId=message_id),
            ]
        if status == "cancelled":
            return out + self._finish(ts, outcome={"type": "cancelled"})
        metadata = clean({"human_wait_ms": f.get("human_wait_ms")})
        self._held = self._finish(
            ts, outcome={"type": "success"}, result=clean(response), metadata=metadata or None
        )[0]
        return out

    def _error(self, f: Mapping[str, Any], ts: float) -> list[dict[str, Any]]:
        code = str(f.get("code") or "turn_failed")
        out = self._close_all(ts, status="cancelled" if code == "cancelled" else "error")
        metadata = clean({"node": f.get("node"), "retryable": f.get("retryable")})
        if code == "cancelled":
            return out + self._finish(ts, outcome={"type": "cancelled"}, metadata=metadata or None)
        out.append(
            agui_event(
                "RUN_ERROR",
                ts,
                code=code,
                message=str(f.get("message") or "The agent could not finish."),
                metadata=metadata or None,
            )
        )
        self._run = None
        return out

    # -- helpers -------------------------------------------------------------------------

    def _remember_interrupts(self, interrupts: Iterable[Mapping[str, Any]]) -> None:
        for item in interrupts:
            value = item.get("value")
            if isinstance(value, Mapping) and value.get("tool") and "args" in value:
                self._tool_args[str(value["tool"])] = value["args"]
            if isinstance(value, Mapping) and value.get("type") == "client_tool":
                self._client_calls.add(str(value.get("call_id")))

    def _release(self) -> list[dict[str, Any]]:
        held = self._held
        self._held = None
        return [held] if held is not None else []

    def _write(self, events: list[dict[str, Any]]) -> bytes:
        self.count += len(events)
        return b"".join(frame(e) for e in events)


def interrupt(item: Mapping[str, Any]) -> dict[str, Any]:
    """One of our interrupts (``{id, value}``) as an AG-UI ``Interrupt``."""
    value = item.get("value")
    out: dict[str, Any] = {"id": str(item.get("id", "")), "reason": "input"}
    if isinstance(value, Mapping):
        out["reason"] = str(value.get("type") or "input")
        if value.get("type") == "client_tool":
            out["toolCallId"] = str(value.get("call_id", ""))
            out["message"] = f"Run the tool {value.get('name')} on the client."
            out["responseSchema"] = CLIENT_TOOL_SCHEMA
        if value.get("type") == "approval":
            out["responseSchema"] = APPROVAL_SCHEMA
            tool = value.get("tool")
            args = value.get("args")
            if tool:
                shown = (
                    ", ".join(f"{k}={v}" for k, v in args.items())
                    if isinstance(args, Mapping)
                    else ""
                )
                out["message"] = f"The agent wants to run {tool}({shown}). Approve or reject it."
    if value is not None:
        out["metadata"] = {"value": clean(value)}
    return out


# -- GET /turns/{turn_id}/events?format=agui[&source=spans] ------------------------------


def agui_query(request: Any) -> bool:
    """Whether a turn's stream is asked for in AG-UI (``?format=agui``); 400 for a format
    this relay does not speak."""
    fmt = request.query_params.get("format")
    if fmt in (None, "", "relay"):
        return False
    if fmt != "agui":
        from relay.errors import ApiError

        raise ApiError(
            400,
            "invalid_format",
            f"format={fmt!r}: use format=agui (AG-UI 1.0 "
            "events) or leave it out (the relay's own events).",
        )
    return True
