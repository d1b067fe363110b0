"""Why a graph's run failed, as the ``error`` event says it: a code a client can act on.

:func:`failure_of` reads the exception a run raised (and what the instrumentation saw:
the nodes' outcomes, the last tool that raised) into a :class:`Failure`:

- ``recursion_limit``: LangGraph's ``GraphRecursionError`` (the graph took more steps
  than its ``recursion_limit``); no node, not retryable (the same input loops again);
- ``tool_failed``: a tool raised and its error ended the run; ``node`` is the node the
  tool ran in;
- ``node_failed``: a node raised; ``node`` names it;
- ``turn_failed``: the run failed outside any node;
- ``turn_timeout``, ``tool_timeout`` (:data:`TURN_TIMEOUT`, :func:`tool_timeout`) and the
  client-tool limits (:func:`limit_failure`).

``retryable`` is true only where sending the message again can help: the error (or one it
was raised from) is a timeout or a connection failure (:func:`transient`), or the relay's
store or bus was away. A failure that will fail the same way again is not retryable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.errors import GraphRecursionError

#: exception classes, by name, whose failure may pass: timeouts, connections, outages,
#: rate limits (the HTTP clients' and model SDKs' names; the standard library's by type)
_TRANSIENT_NAMES = frozenset(
    {
        "APIConnectionError",
        "APITimeoutError",
        "RateLimitError",
        "InternalServerError",
        "ServiceUnavailableError",
        "ConnectError",
        "ConnectTimeout",
        "ReadTimeout",
        "WriteTimeout",
        "PoolTimeout",
        "ReadError",
        "RemoteProtocolError",
        "TransportError",
        "TimeoutException",
        "ClientConnectorError",
        "ServerDisconnectedError",
        "StoreUnavailable",
        "BusUnavailable",
        "OperationalError",
    }
)


@dataclass(frozen=True, slots=True)
class Failure:
    code: str
    message: str
    node: str | None
    retryable: bool


#: the run outlived RELAY_TURN_TIMEOUT_S (the words of relay/turns/run_end.py's too)
TURN_TIMEOUT = Failure(
    "turn_timeout", "This took too long and was stopped. Please try again.", None, True
)


def tool_timeout(tool: str) -> Failure:
    """An async tool ran longer than RELAY_TOOL_TIMEOUT_S."""
    return Failure(
        "tool_timeout",
        f"The tool {tool} took too long and was stopped. Please try again.",
        None,
        True,
    )


def limit_failure(code: str, message: str) -> Failure:
    """A client-tool limit ended the turn: a client that answers late may be in time
    again; one more round than allowed is one more again."""
    return Failure(code, message, None, code == "client_tool_timeout")


def transient(error: BaseException | None) -> bool:
    """Whether ``error``, or one it was raised from, is a timeout, a connection failure
    or an outage: a failure that sending again may not meet."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, TimeoutError | ConnectionError):
            return True
        if any(cls.__name__ in _TRANSIENT_NAMES for cls in type(error).__mro__):
            return True
        error = error.__cause__ or error.__context__
    return False


def failure_of(
    error: BaseException,
    nodes: Sequence[Mapping[str, Any]],
    failed_tool: tuple[str, BaseException] | None = None,
) -> Failure:
    """The failure of a run that raised ``error``; ``nodes``: the run's node lines (name,
    status) in start order; ``failed_tool``: the last tool that raised, and its error."""
    if isinstance(error, GraphRecursionError):
        return Failure(
            "recursion_limit",
            "The agent took more steps than its recursion limit allows, and was stopped.",
            None,
            False,
        )
    node = next((str(n["name"]) for n in reversed(nodes) if n.get("status") == "error"), None)
    retryable = transient(error)
    again = " Please try again." if retryable else ""
    where = f" (in step {node})" if node else ""
    if failed_tool is not None and _raised_from(error, failed_tool[1]):
        return Failure(
            "tool_failed",
            f"Sorry, the tool {failed_tool[0]} failed while I worked on this{where}.{again}",
            node,
            retryable,
        )
    return Failure(
        "node_failed" if node else "turn_failed",
        f"Sorry, something went wrong while I worked on this{where}.{again}",
        node,
        retryable,
    )


def _raised_from(error: BaseException, cause: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if current is cause:
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
