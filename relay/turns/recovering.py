"""Recovery: a claimed turn (relay/turns/leases.py) goes on from its thread's last
checkpoint when that is safe, instead of ending ``interrupted``.

The instance that claimed a turn whose owner is gone asks :class:`TurnRecovery` (the
leases' ``recover`` hook) what to do with it:

- **the policy** (``RELAY_RECOVERY``, or the graph's own ``GraphAgent(recovery=...)``):
  ``safe`` (the default) recovers when the cut run's own events show no side effect in
  flight; ``always`` recovers whatever they show (the app says its tools are
  idempotent); ``off`` ends the turn at once;
- **the attempts**: the record counts every claim (``attempt``: 1 is the first run);
  past ``RELAY_RECOVERY_MAX_ATTEMPTS`` recoveries the turn ends with ``error``
  ``recovery_exhausted``: a run that kills its process every time is not run forever;
- **safe** is judged from the turn's shared event log, the cut run's part of it (the
  events after ``run_after_seq``): a tool that started inside a node that never completed
  may have done its work without the checkpoint that says so, and running that node again
  runs the tool again. Such a turn ends ``interrupted``, with ``reason`` ``tool_running``
  and the tools named (``tools``). A tool that declares itself idempotent (``metadata={"idempotent":
  True}``, ``tool_started.idempotent``) and a client-executed tool (the client runs it,
  on a resume) do not count. A turn whose cut run's log cannot be read whole (the
  in-process bus died with its process; Redis lost or trimmed it) cannot be judged, and
  ``safe`` does not recover it. A turn whose instance stopped on purpose and drained it
  at a step boundary (relay/turns/draining.py: ``handover`` ``drained``) had nothing cut,
  and is recovered whatever its log says.

A recovered turn is the same turn: its graph's :class:`Recoverable` starts a run that
goes on from the thread's last checkpoint (the nodes that completed do not run again;
the step that was cut runs again), its root linked to the cut run's and carrying
``relay.recovery.*``, from which the mapping makes ``turn_recovered`` at the turn's next
seq. ``relay.turns.recovered`` counts the outcomes (relay/turns/leases.py):
``recovered``, ``unsafe``, ``exhausted``, ``ended`` (the policy is ``off``, or no graph
here can run the turn).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Protocol

from relay import events as ev
from relay.bus.base import AdoptingBus, Bus, LogHistory
from relay.events import (
    INTERRUPTED_MESSAGE,
    RECOVERY_EXHAUSTED_MESSAGE,
    TOOL_RUNNING_MESSAGE,
    Event,
)
from relay.turns.draining import DRAINED
from relay.turns.records import TurnRecord

log = logging.getLogger("relay.recovery")

#: ``RELAY_RECOVERY``: the policies
SAFE = "safe"
ALWAYS = "always"
OFF = "off"
POLICIES = (SAFE, ALWAYS, OFF)

#: ``turn_recovered.reason``: the owner stopped renewing its lease (killed, or hung)
OWNER_LOST = "owner_lost"
#: ``turn_recovered.reason``: the owner stopped on purpose and handed the turn over
HANDED_OVER = "handed_over"

#: the ``error.code`` values of a claimed turn that is not taken up again
INTERRUPTED = "interrupted"
#: ``error.reason`` of an ``interrupted`` turn that was not taken up again: a tool not
#: declared idempotent was running in the step that was cut (``error.tools`` names them)
TOOL_RUNNING = "tool_running"
#: ``error.reason``: the cut run's log is gone, so ``safe`` could not judge it
UNJUDGED = "unjudged"
RECOVERY_EXHAUSTED = "recovery_exhausted"


@dataclasses.dataclass(frozen=True, slots=True)
class Ending:
    """How a claimed turn ends when it is not taken up again: its terminal ``error``
    event's code, words and, for ``interrupted``, why it was not taken up (``reason``,
    the ``tools`` caught in the cut step); the record says ``interrupted``."""

    code: str
    message: str
    outcome: str  # relay_turns_recovered_total{outcome}
    reason: str | None = None
    tools: tuple[str, ...] = ()

    def said(self) -> dict[str, object]:
        """What the terminal ``error`` event says: ``code``, ``message`` and, when known,
        ``reason`` and ``tools``."""
        said: dict[str, object] = {"code": self.code, "message": self.message}
        if self.reason is not None:
            said["reason"] = self.reason
        if self.tools:
            said["tools"] = list(self.tools)
        return said


#: the end of a turn nothing here takes up
ENDED = Ending(INTERRUPTED, INTERRUPTED_MESSAGE, "ended")


@dataclasses.dataclass(frozen=True, slots=True)
class Recovery:
    """What a recovered run carries on its root (``relay.recovery.*``)."""

    attempt: int
    reason: str
    resumed_from: str | None = None


class Recoverable(Protocol):
    """A served graph, as recovery uses it (:class:`relay.turns.admission.Admission`)."""

    @property
    def recovery_policy(self) -> str | None:
        """The graph's own policy (``GraphAgent(recovery=...)``), or None."""
        ...

    async def checkpoint_id(self, thread_id: str) -> str | None:
        """The id of the thread's last checkpoint, None when it has none."""
        ...

    async def recover(self, record: TurnRecord, recovery: Recovery) -> None:
        """Start the run that takes the turn up from its thread's last checkpoint;
        raises when it cannot (the thread is held elsewhere)."""
        ...


def cut_tools(events: Sequence[Event]) -> list[str]:
    """The tools of a cut run that make running its cut step again unsafe: each one that
    started inside a node that did not complete (in flight, or done without the
    checkpoint of its node), unless it is idempotent or the client's. ``events``: the
    run's events in order."""
    open_nodes: dict[str, str] = {}  # node span id -> node name, while it runs
    touched: dict[str, list[str]] = {}  # node span id -> its unsafe tools
    for event in events:
        fields = event.fields
        span_id = str(fields.get("span_id") or "")
        if event.type == ev.NODE_STARTED:
            open_nodes[span_id] = str(fields.get("node", ""))
        elif event.type == ev.NODE_COMPLETED:
            open_nodes.pop(span_id, None)
            touched.pop(span_id, None)
        elif event.type == ev.TOOL_STARTED and not (
            fields.get("idempotent") is True or fields.get("client") is True
        ):
            tool = str(fields.get("tool") or "tool")
            owner = _owning_node(open_nodes, fields.get("node"))
            if owner is None:  # no node of it runs: it counts for every one that does
                for node in open_nodes:
                    touched.setdefault(node, []).append(tool)
            else:
                touched.setdefault(owner, []).append(tool)
    return [tool for node in open_nodes for tool in touched.get(node, [])]


def _owning_node(open_nodes: Mapping[str, str], name: object) -> str | None:
    """The span id of the latest running instance of node ``name`` (a tool's event
    names its node, not the node's span)."""
    matches = [span_id for span_id, node in open_nodes.items() if node == name]
    return matches[-1] if matches else None


class TurnRecovery:
    """The leases' ``recover`` hook (:mod:`relay.turns.recovering`)."""

    def __init__(
        self,
        graphs: Mapping[str, Recoverable],
        bus: Bus,
        *,
        policy: str = SAFE,
        max_attempts: int = 3,
    ) -> None:
        """``graphs``: the served graphs by name (filled as they are mounted)."""
        if policy not in POLICIES:
            raise ValueError(f"recovery policy must be one of {POLICIES}, not {policy!r}")
        if max_attempts < 0:
            raise ValueError(f"max_attempts must be 0 or more, not {max_attempts}")
        self.graphs = graphs
        self.bus = bus
        self.policy = policy
        self.max_attempts = max_attempts

    async def __call__(self, record: TurnRecord) -> Ending | None:
        """None when the turn was taken up again (its run started here); else how it
        ends."""
        ending = await self._judge(record)
        if ending is not None:
            return ending
        if not await self._take_log(record):
            return ENDED  # the run ended, and its process died before recording it
        graph = self.graphs[record.graph]
        reason = HANDED_OVER if record.handover else OWNER_LOST
        recovery = Recovery(record.attempt - 1, reason, await graph.checkpoint_id(record.thread_id))
        await graph.recover(record, recovery)
        log.warning(
            "relay: turn %s taken up again from checkpoint %s (recovery %d, %s)",
            record.turn_id,
            recovery.resumed_from,
            recovery.attempt,
            reason,
        )
        return None

    async def _judge(self, record: TurnRecord) -> Ending | None:
        """Why the turn is not taken up again, or None when it is."""
        graph = self.graphs.get(record.graph)
        if graph is None:  # received over OTLP, or a graph this instance does not serve
            return ENDED
        policy = graph.recovery_policy or self.policy
        if policy == OFF:
            return ENDED
        recoveries = record.attempt - 1
        if recoveries > self.max_attempts:
            return Ending(
                RECOVERY_EXHAUSTED,
                RECOVERY_EXHAUSTED_MESSAGE.format(attempts=recoveries),
                "exhausted",
            )
        if policy == ALWAYS or record.handover == DRAINED:
            return None  # the app's word, or nothing was cut: stopped at a step boundary
        events = await self._cut_run(record)
        if events is None:
            log.warning(
                "relay: turn %s cannot be judged safe to take up again: its cut run's "
                "events are gone (RELAY_RECOVERY=always recovers such turns)",
                record.turn_id,
            )
            return Ending(INTERRUPTED, INTERRUPTED_MESSAGE, "unsafe", UNJUDGED)
        if any(e.type in ev.RUN_TERMINAL for e in events):
            return ENDED  # the run ended, and its process died before recording it
        tools = tuple(dict.fromkeys(cut_tools(events)))
        if tools:
            message = TOOL_RUNNING_MESSAGE.format(tool=", ".join(tools))
            return Ending(INTERRUPTED, message, "unsafe", TOOL_RUNNING, tools)
        return None

    async def _take_log(self, record: TurnRecord) -> bool:
        """Take up the turn's shared log (what this instance held of it is stale): the
        recovered run's events follow its last seq (``record.last_seq``). False when the
        log already ends the run."""
        bus = self.bus
        if not (bus.shared and isinstance(bus, AdoptingBus)):
            return True  # the log died with its process: the record says where it stood
        last, terminal = await bus.adopt(record.turn_id)
        if terminal is not None and terminal.seq > record.run_after_seq:
            return False
        record.last_seq = max(last, record.last_seq, record.run_after_seq)
        return True

    async def _cut_run(self, record: TurnRecord) -> list[Event] | None:
        """The cut run's events, from the shared log; None when it cannot be read whole."""
        bus = self.bus
        if not (bus.shared and isinstance(bus, LogHistory)):
            return None
        try:
            return await bus.history(record.turn_id, record.run_after_seq)
        except Exception:  # the bus is away: unknown, so not safe
            log.exception("relay: could not read the log of turn %s", record.turn_id)
            return None
