"""SupportAgent: one run of the graph (a chat or a resume) inside its root span.

The relay starts these coroutines as the turn's task (:class:`relay.runs.RunManager`);
what they return is the ChatResponse, and what their spans say is the stream.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any

from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode, Tracer

from agent.faults import Fault
from agent.graph import GRAPH_ID
from agent.state import fresh_turn
from agent.tracing import RunSpan, run_span
from relay import (
    ChatResponse,
    Message,
    SQLiteMessageStore,
    TurnRecord,
    TurnStore,
    read_checkpoints,
)
from relay import conventions as c

AGENT_NAME = "support_agent"

log = logging.getLogger("agent.service")


@dataclass(frozen=True, slots=True)
class PendingInterrupt:
    id: str
    value: Any


class SupportAgent:
    def __init__(self, graph: CompiledStateGraph, tracer: Tracer, topology: dict[str, Any],
                 turns: TurnStore, turn_timeout_s: float,
                 messages: SQLiteMessageStore | None = None) -> None:
        self.graph = graph
        self.tracer = tracer
        self.topology = topology
        self.turns = turns
        self.turn_timeout_s = turn_timeout_s
        self.messages = messages

    @staticmethod
    def _config(thread_id: str, faults: dict[str, Fault]) -> dict[str, Any]:
        return {"configurable": {"thread_id": thread_id, "relay_faults": faults}}

    async def pending_interrupts(self, thread_id: str) -> list[PendingInterrupt] | None:
        """The thread's open interrupts; None when the thread has no checkpoint at all.
        StoreUnavailable (503) while the checkpointer's database is away."""
        snapshot = await read_checkpoints(self.graph.aget_state(self._config(thread_id, {})))
        if not snapshot.created_at and not snapshot.values:
            return None
        return [PendingInterrupt(i.id, i.value) for i in snapshot.interrupts]

    async def chat(self, record: TurnRecord, faults: dict[str, Fault]) -> ChatResponse:
        with self._run_span(record, "chat", message=record.message) as run:
            await self._remember_root(record, run)
            graph_input = fresh_turn(record.turn_id, record.message)
            response = await self._invoke(record, run, graph_input, faults)
        await self._save_message(record, run, response)
        return response

    async def resume(self, record: TurnRecord, resume: dict[str, Any],
                     faults: dict[str, Fault]) -> ChatResponse:
        """Resume a paused turn; ``resume`` maps interrupt ids to the person's answers."""
        link = (record.root_trace_id, record.root_span_id)
        human_wait_ms = round(time.time() * 1000 - record.paused_at, 3) \
            if record.paused_at else None
        with self._run_span(record, "resume",
                            link_to=link if all(link) else None) as run:  # type: ignore[arg-type]
            await self._remember_root(record, run)
            if human_wait_ms is not None:
                run.end_attributes[c.TURN_HUMAN_WAIT_MS] = human_wait_ms
            response = await self._invoke(record, run, Command(resume=resume), faults)
        await self._save_message(record, run, response)
        return response

    async def _save_message(self, record: TurnRecord, run: RunSpan,
                            response: ChatResponse) -> None:
        """Save the answer, after the run's root span has ended (so ``turn_completed`` is
        already on its way), in a ``save_message`` span under that root: its end is the
        ``message_saved`` event. A failed save is logged and leaves no event; the answer
        stands."""
        if self.messages is None or response.status not in ("answered", "refused"):
            return
        message_id = secrets.token_hex(16)
        with self.tracer.start_as_current_span(
                "save_message", context=trace.set_span_in_context(run.span),
                record_exception=False, set_status_on_exception=False, attributes={
                    c.OPERATION: c.OP_SAVE_MESSAGE, c.MESSAGE_ID: message_id,
                    c.MESSAGE_TURN_ID: record.turn_id, c.CONVERSATION_ID: record.thread_id,
                }) as span:
            try:
                await self.messages.save(Message(message_id, record.turn_id, record.thread_id,
                                                 response.answer, time.time() * 1000))
            except Exception as exc:
                log.exception("could not save the answer of turn %s", record.turn_id)
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))

    def _run_span(self, record: TurnRecord, kind: str, **kwargs: Any):
        return run_span(self.tracer, agent=AGENT_NAME, thread_id=record.thread_id,
                        turn_id=record.turn_id, run_kind=kind, graph_id=GRAPH_ID,
                        topology=self.topology, **kwargs)

    async def _remember_root(self, record: TurnRecord, run: RunSpan) -> None:
        """The paused run's root is what a resume links to."""
        log.info("run started", extra={"thread_id": record.thread_id})
        record.root_trace_id, record.root_span_id = run.trace_id, run.span_id
        await self.turns.update(record.turn_id, root_trace_id=run.trace_id,
                                root_span_id=run.span_id)

    async def _invoke(self, record: TurnRecord, run: RunSpan, graph_input: Any,
                      faults: dict[str, Fault]) -> ChatResponse:
        config = self._config(record.thread_id, faults)
        try:
            async with asyncio.timeout(self.turn_timeout_s):
                values = await self.graph.ainvoke(graph_input, config)
        except TimeoutError:
            return self._failed(record, run, "turn_timeout",
                                "This took too long and was stopped. Please try again.")
        except Exception:
            return self._failed(record, run, "node_failed", None)
        return self._finished(record, run, values)

    def _finished(self, record: TurnRecord, run: RunSpan, values: dict[str, Any]) -> ChatResponse:
        interrupts = [{"id": i.id, "value": i.value} for i in values.get("__interrupt__", [])]
        if interrupts:
            status, answer = "paused", self._waiting_sentence(interrupts)
        elif values.get("refused"):
            status, answer = "refused", values.get("answer", "")
        else:
            status, answer = "answered", values.get("answer", "")
        response = ChatResponse(
            thread_id=record.thread_id, turn_id=record.turn_id, trace_id=run.trace_id,
            status=status, answer=answer,
            citations=[] if interrupts else list(values.get("citations") or []),
            interrupts=interrupts, nodes=run.node_log.snapshot(),
        )
        attributes: dict[str, Any] = {c.TURN_RESPONSE: response.to_dict()}
        if interrupts:
            attributes[c.TURN_INTERRUPTS] = interrupts
        run.finish(status, **attributes)
        return response

    @staticmethod
    def _waiting_sentence(interrupts: list[dict[str, Any]]) -> str:
        value = interrupts[0]["value"]
        if isinstance(value, dict) and value.get("tool") == "issue_refund":
            args = value.get("args", {})
            return (f"I can refund ${float(args.get('amount', 0)):.2f} on order "
                    f"{args.get('order_id')}. A person needs to approve it first.")
        return "Waiting for a person to answer."

    def _failed(self, record: TurnRecord, run: RunSpan, code: str,
                message: str | None) -> ChatResponse:
        nodes = run.node_log.snapshot()
        failed = next((n["name"] for n in reversed(nodes) if n["status"] == "error"), None)
        if code == "node_failed" and failed is None:
            code = "turn_failed"
        if message is None:
            where = f" (in step {failed})" if failed else ""
            message = f"Sorry, something went wrong while I worked on this{where}. " \
                      "Please try again."
        response = ChatResponse(thread_id=record.thread_id, turn_id=record.turn_id,
                                trace_id=run.trace_id, status="error", answer=message,
                                nodes=nodes)
        run.finish("error", **{c.ERROR_CODE: code, c.ERROR_MESSAGE: message,
                               c.ERROR_NODE: failed, c.ERROR_RETRYABLE: True,
                               c.TURN_RESPONSE: response.to_dict()})
        return response
