"""The turn's life below HTTP: every run of a graph starts and resumes here.

``POST /chat``, ``POST /chat/resume`` and ``POST /agui`` read their bodies and answer in
their own formats; what a request may start, and the start itself, is
:class:`Admission`'s, once for all of them:

- **idempotent turn ids**: a new turn naming a known turn id with the same request
  attaches to it (:attr:`Admitted.attached`); with another request it is the caller's
  ``conflict``;
- **threads**: a thread is one thread in every spelling of its id, belongs to the graph
  it began on and to the user of its first turn (relay/turns/threads.py), takes one
  running turn at a time (``thread_busy``, across instances) and, while a turn of it
  waits on an interrupt, a resume and not a new message (``thread_paused``);
- **resumes**: the same resume again attaches to the run it started; a resume answers
  a paused turn only (``turn_running``, ``not_paused``), with answers the graph's
  client-executed tools check (:class:`RunTools`);
- **recoveries**: a turn whose owner is gone, taken up again from its checkpoint
  (relay/turns/recovering.py decides when);
- **the start**: one check-and-start at a time per turn and per thread
  (:class:`relay.turns.starting.StartLocks`), the run started by the run manager with
  the client-tool timer around it.

Refusals are :class:`relay.turns.refusals.Refused` (``relay/http`` answers them); the
user, LangGraph's ``Auth`` and the request's own shape are the caller's, checked before
(or, for a resume, through :attr:`Resume.authorize`, once the turn is found).
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from relay.auth import User
from relay.turns.access import may_see, may_use
from relay.turns.records import PAUSED, TurnRecord, TurnStore, id_key
from relay.turns.recovering import Recovery
from relay.turns.refusals import Refused
from relay.turns.response import ChatResponse
from relay.turns.runs import RunManager, ThreadBusy
from relay.turns.starting import StartLocks


class Pending(Protocol):
    """An open interrupt of a thread (:class:`relay.langgraph.agent.PendingInterrupt`)."""

    @property
    def id(self) -> str: ...

    @property
    def value(self) -> Any: ...


class Graph(Protocol):
    """What admission uses of a served graph (:class:`relay.langgraph.agent.GraphAgent`)."""

    @property
    def name(self) -> str: ...

    async def pending_interrupts(self, thread_id: str) -> Sequence[Pending] | None: ...

    def input_of(self, message: str, record: TurnRecord) -> Any: ...

    def chat(
        self, record: TurnRecord, graph_input: Any, configurable: Mapping[str, Any] | None = None
    ) -> Awaitable[ChatResponse]: ...

    def resume(
        self,
        record: TurnRecord,
        answers: dict[str, Any],
        configurable: Mapping[str, Any] | None = None,
    ) -> Awaitable[ChatResponse]: ...

    @property
    def recovery(self) -> str | None: ...

    async def checkpoint_id(self, thread_id: str) -> str | None: ...

    def recover(
        self,
        record: TurnRecord,
        recovery: Recovery,
        configurable: Mapping[str, Any] | None = None,
    ) -> Awaitable[ChatResponse]: ...


class RunTools(Protocol):
    """The graph's client-executed tools
    (:class:`relay.langgraph.client_tool_limits.ClientTools`): a run's ``configurable``, a
    resume's checked answers, the timer around a run."""

    def configure(
        self,
        configurable: Mapping[str, Any],
        *,
        record: TurnRecord | None = None,
        pending: Sequence[Any] = (),
        answers: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]: ...

    async def answers(
        self,
        record: TurnRecord,
        resume: Any,
        pending: Sequence[Any],
        configurable: Mapping[str, Any],
    ) -> dict[str, Any]: ...

    def refuse_spent_token(
        self, record: TurnRecord, resume: Any, pending: Sequence[Any] | None
    ) -> None: ...

    def watched(
        self, record: TurnRecord, run: Awaitable[ChatResponse], configurable: Mapping[str, Any]
    ) -> Awaitable[ChatResponse]: ...


@dataclasses.dataclass(slots=True)
class Admitted:
    """A run that started, or the one a retried request attaches to (``attached``):
    its turn's record, the cursor its events follow (``after``) and, on a resume, the
    interrupts it answers (``pending``)."""

    record: TurnRecord
    after: int
    attached: bool = False
    pending: list[Any] | None = None


@dataclasses.dataclass(slots=True)
class NewTurn:
    """A request for a new turn: its user's ``message`` (or the graph's own ``input``),
    the request's digest (what makes a retry the same request), the run's
    ``configurable``, and the ids the client chose, if any. ``conflict``: what a known
    ``turn_id`` with another request is; ``resume_hint``: how this client answers an
    interrupt (said when the thread waits on one)."""

    message: str
    request_hash: str
    configurable: dict[str, Any]
    user: User | None
    conflict: Refused
    resume_hint: str
    graph_input: Any | None = None
    turn_id: str | None = None
    thread_id: str | None = None


@dataclasses.dataclass(slots=True)
class Resume:
    """A resume of a paused turn: the turn ``turn_id`` of ``thread_id``, or (None) the
    thread's latest. ``answer``: the resume's value given what is pending (the
    client's answer, or its AG-UI entries matched to the interrupts); ``request_hash``:
    its digest once the turn is known; ``authorize``: the caller's check of the found
    turn (LangGraph's ``Auth``); ``raw``: the body's resume, checked for spent
    client-tool tokens (None: not checked)."""

    thread_id: str
    turn_id: str | None
    answer: Callable[[Sequence[Pending]], Any]
    request_hash: Callable[[TurnRecord], str]
    configurable: dict[str, Any]
    user: User | None
    authorize: Callable[[TurnRecord], Awaitable[None]]
    raw: Any = None


def check_graph(record: TurnRecord, graph: str) -> None:
    """A turn is found only through the graph it ran on."""
    if record.graph and record.graph != graph:
        raise Refused(
            "not_found",
            "unknown_turn",
            f"There is no such turn in graph {graph} (it ran on graph {record.graph}).",
        )


class Admission:
    """Starts and resumes the runs of one graph (:mod:`relay.turns.admission`)."""

    def __init__(
        self,
        graph: Graph,
        turns: TurnStore,
        runs: RunManager,
        starting: StartLocks,
        tools: RunTools,
    ) -> None:
        self.graph = graph
        self.turns = turns
        self.runs = runs
        self.starting = starting
        self.tools = tools

    # -- a new turn -----------------------------------------------------------------------

    async def chat(self, new: NewTurn) -> Admitted:
        """Start a new turn's run, or attach to the turn a retry names."""
        graph = self.graph
        # one check-and-start at a time for this turn and thread: duplicates attach, never
        # rerun; requests that name neither the same turn nor the same thread do not wait
        async with self.starting.hold(StartLocks.keys(turn=new.turn_id, thread=new.thread_id)):
            if new.turn_id is not None:
                existing = await self._known_turn(new)
                if existing is not None:
                    return Admitted(existing, 0, attached=True)
            spelled = await self._thread_spelling(new.thread_id, new.user)
            # a thread id made here is new: it has no checkpoint, so nothing to look up
            thread_id = spelled or secrets.token_hex(16)
            if spelled is not None and await graph.pending_interrupts(thread_id):
                raise Refused(
                    "conflict",
                    "thread_paused",
                    f"Thread {thread_id} has a turn waiting for an answer; {new.resume_hint}.",
                )
            record = TurnRecord(
                turn_id=new.turn_id or secrets.token_hex(16),
                thread_id=thread_id,
                status="running",
                message=new.message,
                request_hash=new.request_hash,
                started_at=time.time() * 1000,
                graph=graph.name,
                user_id=new.user.id if new.user else "",
            )
            run_input = (
                new.graph_input
                if new.graph_input is not None
                else graph.input_of(new.message, record)
            )
            configurable = new.configurable
            after = await self._start(
                record,
                "chat",
                lambda: self.tools.watched(
                    record, graph.chat(record, run_input, configurable), configurable
                ),
                create=True,
            )
        return Admitted(record, after)

    async def _known_turn(self, new: NewTurn) -> TurnRecord | None:
        """The turn a retried request names, when it exists: the same request (same
        body, same graph, same user) attaches to it; another one is the caller's
        ``conflict`` (whoever's the turn is: the answer says nothing of its owner)."""
        assert new.turn_id is not None
        existing = await self.turns.get(new.turn_id)
        if existing is not None and (
            existing.request_hash != new.request_hash
            or (existing.graph and existing.graph != self.graph.name)
            or not may_see(new.user, existing)
        ):
            raise new.conflict
        return existing

    async def _thread_spelling(self, thread_id: str | None, user: User | None) -> str | None:
        """A thread is one thread in every spelling of its id (a UUID with or without
        hyphens, any case): its turns run under the spelling it began with, which is the
        key of its checkpoints and of its lock. A thread belongs to the graph it began on
        (the checkpoints of one graph are not another's state): elsewhere it is a
        conflict. It belongs to the user of its first turn, for good (a thread with no
        turn yet is claimed here for the asker): for another user it does not exist."""
        if thread_id is None:
            return None
        owner = await self.turns.claim_thread(thread_id, user.id if user is not None else "")
        latest = await self.turns.list(thread_id, 1)
        if not may_use(user, owner):
            raise Refused(
                "not_found",
                "unknown_thread",
                f"There is no thread {thread_id} of yours; send no thread_id to start a new one.",
            )
        if latest and latest[0].graph and latest[0].graph != self.graph.name:
            raise Refused(
                "conflict",
                "thread_conflict",
                f"Thread {latest[0].thread_id} belongs to "
                f"graph {latest[0].graph}; send its turns to /graphs/"
                f"{latest[0].graph}/chat, or start a new thread here.",
            )
        return latest[0].thread_id if latest else thread_id

    # -- a resume -------------------------------------------------------------------------

    async def resume(self, resume: Resume) -> Admitted:
        """Resume a paused turn with the client's answers, or attach to the run the same
        resume started."""
        if resume.turn_id is not None:
            known = await self.turns.get(resume.turn_id)  # any spelling: the turn's own
            if known is not None and may_see(resume.user, known):
                await self.runs.settle(known.turn_id)  # a run that just paused: let it record
        keys = StartLocks.keys(turn=resume.turn_id, thread=resume.thread_id)
        async with self.starting.hold(keys):
            record = await self._paused_turn(resume)
            request_hash = resume.request_hash(record)
            if record.resume_hash == request_hash and record.status != PAUSED:
                # the same resume again: attach to that run (running or over), never rerun
                return Admitted(record, record.run_after_seq, attached=True)
            if self.runs.running(record.turn_id):
                raise Refused(
                    "conflict", "turn_running", f"Turn {record.turn_id} is running, not paused."
                )
            pending = list(await self.graph.pending_interrupts(record.thread_id) or [])
            if resume.raw is not None:
                self.tools.refuse_spent_token(record, resume.raw, pending)
            if record.status != PAUSED or not pending:
                raise Refused(
                    "conflict",
                    "not_paused",
                    f"Turn {record.turn_id} is {record.status}, not paused (or this resume "
                    "was already sent with another body); nothing to resume.",
                )
            answers = await self.tools.answers(
                record, resume.answer(pending), pending, resume.configurable
            )
            configurable = self.tools.configure(
                resume.configurable, record=record, pending=pending, answers=answers
            )
            try:  # busy: refused before the resume is written down as sent
                await self.runs.check_thread_settled(record.thread_id)
            except ThreadBusy as exc:
                raise _busy(record, exc) from None
            record.resume_hash = request_hash
            await self.turns.update(record.turn_id, resume_hash=request_hash)
            graph = self.graph
            after = await self._start(
                record,
                "resume",
                lambda: self.tools.watched(
                    record, graph.resume(record, answers, configurable), configurable
                ),
            )
        return Admitted(record, after, pending=pending)

    async def _paused_turn(self, resume: Resume) -> TurnRecord:
        """The turn a resume answers, as its user may see it, on this graph and
        authorized; by its id, or the thread's latest."""
        user = resume.user
        if resume.turn_id is not None:
            record = await self.turns.get(resume.turn_id)
            if (
                record is None
                or record.thread_key != id_key(resume.thread_id)
                or not may_see(user, record)
            ):
                raise Refused("not_found", "unknown_turn", "There is no such turn in that thread.")
        else:
            latest = await self.turns.list(resume.thread_id, 1)
            owner = await self.turns.thread_owner(resume.thread_id)
            if not latest or not may_see(user, latest[0]) or not may_use(user, owner):
                raise Refused(
                    "not_found",
                    "unknown_thread",
                    f"Thread {resume.thread_id} has no run to resume.",
                )
            record = latest[0]
        check_graph(record, self.graph.name)
        await resume.authorize(record)
        if resume.turn_id is None and self.runs.running(record.turn_id):
            # a run that has just paused: its record can already say "paused" while its
            # task still holds the thread; let it finish recording its end
            await self.runs.settle(record.turn_id)
            record = await self.turns.get(record.turn_id) or record
        return record

    # -- a recovery (relay/turns/recovering.py) ------------------------------------------

    @property
    def recovery_policy(self) -> str | None:
        """The graph's own recovery policy (``GraphAgent(recovery=...)``), or None."""
        return self.graph.recovery

    async def checkpoint_id(self, thread_id: str) -> str | None:
        return await self.graph.checkpoint_id(thread_id)

    async def recover(self, record: TurnRecord, recovery: Recovery) -> None:
        """Take up a claimed turn from its thread's last checkpoint: a run of the same
        turn, after the seq its log has reached (``record.last_seq``). Its
        ``configurable`` carries the relay's limits and the turn's user (its id, from the
        record; the token's claims are gone with the request that started the turn, as
        is whatever else that request added)."""
        known = User(record.user_id).configurable() if record.user_id else {}
        configurable = self.tools.configure(known, record=record)
        graph = self.graph
        async with self.starting.hold(
            StartLocks.keys(turn=record.turn_id, thread=record.thread_id)
        ):
            await self._start(
                record,
                "recover",
                lambda: self.tools.watched(
                    record, graph.recover(record, recovery, configurable), configurable
                ),
            )

    # -- the start ------------------------------------------------------------------------

    async def _start(
        self,
        record: TurnRecord,
        kind: str,
        runner: Callable[[], Awaitable[ChatResponse]],
        create: bool = False,
    ) -> int:
        """Start the run; another turn running on the thread (here or on another
        instance) is ``thread_busy``."""
        try:
            await self.runs.check_thread_settled(record.thread_id)
            return await self.runs.start(record, kind, runner, create=create)
        except ThreadBusy as exc:
            raise _busy(record, exc) from None


def _busy(record: TurnRecord, exc: ThreadBusy) -> Refused:
    return Refused(
        "conflict",
        "thread_busy",
        f"Thread {record.thread_id} is already running turn {exc.turn_id}; wait for it to finish.",
    )
