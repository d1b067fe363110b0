"""The commands of LangGraph's streaming protocol (``POST /threads/{thread_id}/commands``,
``@langchain/protocol``), read and checked, and their answers.

A command is ``{"id": <int>, "method": <str>, "params": {...}}``; its answer is
``{"type": "success", "id", "result": {...}}`` or
``{"type": "error", "id", "error": <code>, "message"}`` (codes: ``invalid_argument``,
``unknown_command``, ``not_supported``, ``no_such_run``, ``no_such_interrupt``, ...).

Served, each a span-relay turn through the graph's admission
(relay/http/agent_server.py ``AgentServer.admit``):

- ``run.start`` ``{"assistant_id", "input", "config"?, "metadata"?}``: a new run on the
  thread (made if it does not exist), or, when the thread's latest turn is paused on an
  interrupt, that turn resumed with ``input`` as the answer (the protocol's "run
  interrupted -> resume"); ``result`` ``{"run_id"}``, the turn id;
- ``input.respond`` ``{"namespace", "interrupt_id", "response"}`` (or ``{"responses":
  [{"namespace", "interrupt_id", "response"}, ...]}``): the paused turn resumed, the
  answer the response (several: ``{interrupt_id: response}``); ``result`` ``{"run_id"}``.

Not served (``not_supported``): ``input.inject``, ``state.*``, ``agent.getTree``, the
WebSocket-only ``subscription.*``; ``run.start``'s ``langsmith_tracer``, ``update`` and
``goto`` of ``input.respond``. An unknown method is ``unknown_command``. There is no
cancel command in the protocol: ``POST /threads/{thread_id}/runs/{run_id}/cancel`` and
the turn API's cancel stop a run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from relay.agent_server.protocol_events import whole_number

#: the methods of the protocol (version 0.0.21 of ``@langchain/protocol``)
KNOWN = frozenset(
    {
        "run.start",
        "input.respond",
        "input.inject",
        "subscription.subscribe",
        "subscription.unsubscribe",
        "subscription.reconnect",
        "agent.getTree",
        "state.get",
        "state.listCheckpoints",
        "state.fork",
    }
)
SERVED = frozenset({"run.start", "input.respond"})
#: the largest command id (a JavaScript safe integer)
MAX_ID = 2**53 - 1


class CommandError(Exception):
    """A command refused: its id (None when unreadable), protocol error code, message
    and the HTTP status the route answers with."""

    def __init__(self, command_id: int | None, code: str, message: str, status: int) -> None:
        super().__init__(message)
        self.command_id = command_id
        self.code = code
        self.message = message
        self.status = status

    def body(self) -> dict[str, Any]:
        return {"type": "error", "id": self.command_id, "error": self.code, "message": self.message}


@dataclasses.dataclass(frozen=True, slots=True)
class Command:
    """A command read: its id, method and params."""

    id: int
    method: str
    params: Mapping[str, Any]

    def refuse(self, code: str, message: str, status: int = 422) -> CommandError:
        return CommandError(self.id, code, message, status)


def command_of(payload: Any) -> Command:
    """The command a body is, or a :class:`CommandError` that says what is wrong."""
    if not isinstance(payload, dict):
        raise CommandError(None, "invalid_argument", "A command is a JSON object.", 422)
    command_id = whole_number(payload.get("id"))
    if command_id is None or not 0 <= command_id <= MAX_ID:
        raise CommandError(
            None, "invalid_argument", "A command needs an 'id': a whole number, 0 or more.", 422
        )
    method = payload.get("method")
    if not isinstance(method, str) or not method:
        raise CommandError(command_id, "invalid_argument", "A command needs a 'method'.", 422)
    params = payload.get("params", {})
    if not isinstance(params, dict):
        raise CommandError(command_id, "invalid_argument", "'params' must be an object.", 422)
    command = Command(command_id, method, params)
    if method not in KNOWN:
        raise command.refuse("unknown_command", f"Unknown command {method!r}.")
    if method not in SERVED:
        raise command.refuse(
            "not_supported",
            f"{method!r} is not served here; served: {', '.join(sorted(SERVED))}.",
        )
    return command


def start_body(command: Command) -> dict[str, Any]:
    """``run.start``'s params as a run's request body (relay/agent_server/requests.py),
    the thread made when it does not exist; ``input`` is checked there."""
    params = command.params
    unknown = sorted(set(params) - {"assistant_id", "input", "config", "metadata"})
    if unknown:
        raise command.refuse("invalid_argument", f"Unknown params: {', '.join(unknown)}.")
    assistant_id = params.get("assistant_id")
    if not isinstance(assistant_id, str) or not assistant_id:
        raise command.refuse("invalid_argument", "run.start needs an 'assistant_id'.")
    if "input" not in params:
        raise command.refuse("invalid_argument", "run.start needs an 'input'.")
    body: dict[str, Any] = {
        "assistant_id": assistant_id,
        "input": params["input"],
        "if_not_exists": "create",
    }
    for key in ("config", "metadata"):
        if params.get(key) is not None:
            body[key] = params[key]
    return body


def resume_body(assistant_id: str, answer: Any, config: Any = None) -> dict[str, Any]:
    """A run's request body that resumes the thread's paused turn with ``answer``."""
    body: dict[str, Any] = {"assistant_id": assistant_id, "command": {"resume": answer}}
    if config is not None:
        body["config"] = config
    return body


def respond_answer(command: Command, pending: set[str]) -> tuple[Any, Any]:
    """``input.respond``'s answer for the paused turn (one response, or ``{interrupt_id:
    response}`` for several) and its ``config``; each interrupt id must be one of
    ``pending`` (the thread's open interrupts)."""
    params = command.params
    unknown = sorted(
        set(params) - {"namespace", "interrupt_id", "response", "responses", "config", "metadata"}
    )
    if unknown:
        raise command.refuse("not_supported", f"Not served: {', '.join(unknown)}.")
    if "responses" in params:
        entries = params["responses"]
        if not isinstance(entries, list) or not entries:
            raise command.refuse("invalid_argument", "'responses' must be a non-empty list.")
    else:
        entries = [params]
    answers: dict[str, Any] = {}
    for entry in entries:
        if not isinstance(entry, dict) or "response" not in entry:
            raise command.refuse("invalid_argument", "Each response needs a 'response'.")
        interrupt_id = entry.get("interrupt_id")
        if not isinstance(interrupt_id, str) or not interrupt_id:
            raise command.refuse("invalid_argument", "Each response needs an 'interrupt_id'.")
        namespace = entry.get("namespace", [])
        if namespace not in ([], None):
            raise command.refuse(
                "no_such_namespace", "Only the root namespace ([]) is served.", 404
            )
        if interrupt_id not in pending:
            raise command.refuse(
                "no_such_interrupt", f"The thread has no open interrupt {interrupt_id}.", 404
            )
        answers[interrupt_id] = entry["response"]
    answer = next(iter(answers.values())) if len(answers) == 1 else answers
    return answer, params.get("config")


def success(command: Command, result: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "success", "id": command.id, "result": dict(result)}
