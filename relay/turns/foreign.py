"""Turn records for runs this relay did not start: turns received over OTLP (event by
event, :meth:`relay.ingest.receiver.OTLPReceiver.deliver`) and turns of imported trace
files (a whole turn at once, :mod:`relay.http.imports`). The runs this relay starts write
their own (:mod:`relay.turns.run_end`).

Both create a record only for a turn the store does not know yet; a create that loses a
race to another writer is no error.
Neither lets what the spans say decide who owns what (relay/turns/threads.py): a new turn
joins its thread only as the thread's owner, else it is kept apart (:func:`placed`,
counted in ``stats["kept_apart"]`` and logged at WARNING with its turn and thread), and a
received run of a turn the store knows changes its record only when it names that turn's
user (or the turn has none).
:class:`NotedRuns` reads what the mapping noted of the runs it mapped (their messages,
the store's index of foreign runs), :class:`RecordWriter` writes the records in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from typing import Any

from relay import conventions as c
from relay import events as ev
from relay.events import Event
from relay.mapping.answers import message_of
from relay.mapping.feed import TurnSpans, replay_events
from relay.mapping.state import Run
from relay.spans import SpanRecord
from relay.store import RunIndex
from relay.turns.records import PAUSED, RUNNING, TurnExists, TurnRecord, TurnStore
from relay.turns.response import STATUSES
from relay.turns.threads import apart_thread, apart_user, joins

log = logging.getLogger("relay.receiver")


async def placed(
    turns: TurnStore,
    record: TurnRecord,
    stats: dict[str, int] | None = None,
    what: str = "received",
) -> TurnRecord:
    """``record`` (a turn this relay did not run, of the user it names, '' for none) as
    its thread's owner lets it be recorded: on its thread when it joins it (claiming a new
    thread for its user), else kept apart (relay/turns/threads.py), counted in
    ``stats["kept_apart"]`` and logged (the turn and the thread, never the turn's words)."""
    owner = await turns.claim_thread(record.thread_id, record.user_id)
    if joins(owner, record.user_id):
        return record
    if stats is not None:
        stats["kept_apart"] = stats.get("kept_apart", 0) + 1
    log.warning(
        "relay: %s turn %s names %s, not the owner of thread %s: kept apart on a thread of "
        "its own (a credential that sends spans cannot add turns to a user's thread)",
        what,
        record.turn_id,
        "another user in enduser.id" if record.user_id else "no user (no enduser.id)",
        record.thread_id,
    )
    return dataclasses.replace(
        record,
        thread_id=apart_thread(record.turn_id),
        thread_key="",  # the new thread's key, made from its id
        user_id=apart_user(owner, record.user_id),
    )


async def record_received_events(
    turns: TurnStore,
    events: Sequence[Event],
    messages: Mapping[str, str] | None = None,
    users: Mapping[str, str] | None = None,
    stats: dict[str, int] | None = None,
) -> None:
    """Keep GET /turns/{id} in step with turns received over OTLP: a run's start (its
    topology) creates or reopens the record, its terminal event ends it. ``messages``:
    the user's message of a turn whose spans carry no ``relay.turn.message`` (another
    instrumentation's, read from its input by the mapping); ``users``: the user each run's
    root named in ``enduser.id``, by trace id, whose turn it then is, on a thread of that user or of
    none (:func:`placed`; README "Security"). ``stats``: where kept-apart turns are
    counted (the receiver's)."""
    messages = messages or {}
    users = users or {}
    for event in events:
        try:
            if event.type == ev.GRAPH_TOPOLOGY:
                user = users.get(event.trace_id, "")
                known = await turns.get(event.turn_id)
                if known is None:
                    record = TurnRecord(
                        turn_id=event.turn_id,
                        thread_id=event.thread_id,
                        status=RUNNING,
                        started_at=event.ts,
                        last_seq=event.seq,
                        root_trace_id=event.trace_id,
                        message=messages.get(event.turn_id, ""),
                        user_id=user,
                    )
                    with contextlib.suppress(TurnExists):  # another writer won the race
                        await turns.create(await placed(turns, record, stats))
                elif not may_change(known, user):
                    if stats is not None:
                        stats["kept_apart"] = stats.get("kept_apart", 0) + 1
                    log.warning(
                        "relay: received run of turn %s (thread %s) names another user than "
                        "its own, or it is a turn this relay ran: its record is left as it was",
                        known.turn_id,
                        known.thread_id,
                    )
                else:
                    await turns.update(
                        event.turn_id, status=RUNNING, ended_at=None, root_trace_id=event.trace_id
                    )
            elif event.is_run_terminal:
                known = await turns.get(event.turn_id)
                if known is None or not may_change(known, users.get(event.trace_id, "")):
                    continue  # refused at its start (counted and logged there)
                changes = end_changes(event)
                if messages.get(event.turn_id):  # known only at its root, maybe
                    changes["message"] = messages[event.turn_id]
                await turns.update(event.turn_id, **changes)
        except Exception:
            log.exception("relay: could not record received turn %s", event.turn_id)


def end_changes(event: Event) -> dict[str, Any]:
    """The record of a turn whose run's terminal event is ``event`` (a received run's, or
    the event a run published before its process died: relay/turns/leases.py)."""
    changes: dict[str, Any] = {"last_seq": event.seq}
    if event.type == ev.TURN_COMPLETED:
        response = event.fields.get("response") or {}
        changes["status"] = str(response.get("status", "answered"))
        changes["response"] = ev.dumps(response)
    elif event.type == ev.PAUSED:
        changes["status"] = PAUSED
        changes["paused_at"] = event.ts
    else:
        code = event.fields.get("code")
        changes["status"] = "cancelled" if code == "cancelled" else "error"
    if changes["status"] != PAUSED:
        changes["ended_at"] = event.ts
    return changes


def may_change(known: TurnRecord, user: str) -> bool:
    """Whether a received run naming ``user`` may change the record of a turn the store
    knows: a turn this relay did not run itself, of no user or of that user, or one kept
    apart already (on a thread of its own, nobody else's)."""
    return not known.graph and (
        joins(known.user_id, user) or known.thread_id == apart_thread(known.turn_id)
    )


async def record_imported_turn(
    turns: TurnStore, turn: TurnSpans, user_id: str = "", last_seq: int | None = None
) -> None:
    """List an imported turn in GET /turns (past turns), unless this relay knows it; the
    importer's (``user_id``) when requests have users, on its thread only when that
    thread is the importer's or no user's (else kept apart: :func:`placed`).
    ``last_seq``: the number of its replay's events, when the caller has derived them."""
    if await turns.get(turn.turn_id) is not None:
        return
    record = _imported_record(turn, last_seq)
    record.user_id = user_id
    with contextlib.suppress(TurnExists):  # another writer won the race
        await turns.create(await placed(turns, record, what="imported"))


def imported_runs(turn: TurnSpans) -> list[RunIndex]:
    """The store's index of an imported foreign turn's runs (ours index themselves)."""
    runs: dict[str, list[Event]] = {}
    for event in turn.events:
        runs.setdefault(event.trace_id, []).append(event)
    entries = []
    for trace_id, events in runs.items():
        start = next((e for e in events if e.type == ev.GRAPH_TOPOLOGY), events[0])
        end = next((e for e in events if e.is_run_terminal), None)
        root = next((r for r in turn.roots if r.trace_id == trace_id), None)
        entries.append(
            RunIndex(
                turn_id=turn.turn_id,
                trace_id=trace_id,
                root_span_id=root.span_id if root is not None else None,
                run_kind=str(start.fields.get("run_kind", "chat")),
                thread_id=turn.thread_id,
                message="",
                start_ns=int(start.ts * 1e6),
                end_ns=int(end.ts * 1e6) if end is not None else None,
                outcome=_outcome(end) if end is not None else None,
            )
        )
    return entries


def _outcome(event: Event) -> str:
    if event.type == ev.PAUSED:
        return PAUSED
    if event.type == ev.TURN_COMPLETED:
        return str((event.fields.get("response") or {}).get("status", "answered"))
    return "cancelled" if event.fields.get("code") == "cancelled" else "error"


def _imported_record(turn: TurnSpans, last_seq: int | None = None) -> TurnRecord:
    if turn.foreign:
        return _imported_foreign(turn)
    chat = next(
        (r for r in sorted(turn.roots, key=lambda r: r.start_ns) if c.TURN_MESSAGE in r.attributes),
        None,
    )
    last = turn.last_root
    outcome = str(last.attributes.get(c.TURN_OUTCOME, "error"))
    status = outcome if outcome in STATUSES else "error"
    response = last.attributes.get(c.TURN_RESPONSE)
    ended = max((r.end_ns or r.start_ns) for r in turn.roots) / 1e6
    return TurnRecord(
        turn_id=turn.turn_id,
        thread_id=turn.thread_id,
        status=status,
        message=str(chat.attributes[c.TURN_MESSAGE]) if chat is not None else "",
        started_at=turn.started_ns / 1e6,
        ended_at=None if status == PAUSED else ended,
        paused_at=ended if status == PAUSED else None,
        response=response if isinstance(response, str) else None,
        root_trace_id=last.trace_id,
        root_span_id=last.span_id,
        # the replay's seqs, 1..last_seq
        last_seq=len(replay_events(turn.spans)) if last_seq is None else last_seq,
    )


# -- runs the mapping noted (MappingState.notes) ------------------------------------------


class NotedRuns:
    """What the mapping noted of the runs it began and ended (``MappingState.notes``),
    for the store's index and the turn records: the user's message of each turn, the user
    each run's root names (``enduser.id``, by trace id: one turn's runs may come from
    different senders), the turns of other instrumentations (``foreign``),
    and their :class:`RunIndex` entries. Bounded: past ``max_turns`` the oldest are
    forgotten.

    ``own_runs``: whether the message and the user of our own instrumentation's runs are
    kept too. A receiver needs them (it writes the record of every turn it receives); the
    relay in-process does not (a run it started writes its own record) and keeps only
    the foreign runs', so that what it keeps here grows with those alone."""

    def __init__(self, max_turns: int = 10_000, *, own_runs: bool = True) -> None:
        self.max_turns = max_turns
        self.own_runs = own_runs
        self.messages: OrderedDict[str, str] = OrderedDict()
        self.users: OrderedDict[str, str] = OrderedDict()
        self.foreign: OrderedDict[str, None] = OrderedDict()

    def take(self, notes: list[tuple[str, Run, SpanRecord]]) -> list[RunIndex]:
        """Empty ``notes``; the index entries of the foreign runs among them."""
        entries = []
        for what, run, record in notes:
            if not (run.foreign or self.own_runs):
                continue
            if run.message:
                self._remember(self.messages, run.turn_id, run.message)
            user = record.attributes.get(c.ENDUSER_ID) if what == "start" else None
            if isinstance(user, str) and user:
                self._remember(self.users, run.trace_id, user)
            if not run.foreign:  # our roots say it themselves: indexed as they are stored
                continue
            self._remember(self.foreign, run.turn_id, None)
            ended = what == "end"
            outcome = None
            if ended:
                outcome = (
                    "paused" if run.paused else "error" if record.status == "error" else "answered"
                )
            entries.append(
                RunIndex(
                    turn_id=run.turn_id,
                    trace_id=run.trace_id,
                    root_span_id=run.root_span_id,
                    run_kind=run.kind,
                    thread_id=run.thread_id,
                    message=run.message,
                    start_ns=run.started_ns or record.start_ns,
                    end_ns=(record.end_ns or record.start_ns) if ended else None,
                    outcome=outcome,
                )
            )
        notes.clear()
        return entries

    def _remember(self, items: OrderedDict[str, Any], key: str, value: Any) -> None:
        items[key] = value
        items.move_to_end(key)
        while len(items) > self.max_turns:
            items.popitem(last=False)


class RecordWriter:
    """Turn records of received (or in-process foreign) turns, written in order by one
    task: a run's start before its end, whatever the loop does meanwhile."""

    def __init__(
        self,
        turns: TurnStore,
        messages: Mapping[str, str],
        users: Mapping[str, str] | None = None,
        stats: dict[str, int] | None = None,
    ) -> None:
        self.turns = turns
        self.messages = messages
        self.users = users
        self.stats = stats
        self._queue: deque[Sequence[Event]] = deque()
        self.task: asyncio.Task[None] | None = None

    def put(self, events: Sequence[Event]) -> None:
        if not events:
            return
        self._queue.append(events)
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run(), name="turn records")

    async def _run(self) -> None:
        try:
            while self._queue:
                await record_received_events(
                    self.turns, self._queue.popleft(), self.messages, self.users, self.stats
                )
        finally:
            self.task = None

    async def drain(self, timeout: float) -> None:
        """Wait (up to ``timeout``) for what is queued to be written."""
        if self.task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self.task), timeout)


def _imported_foreign(turn: TurnSpans) -> TurnRecord:
    """A foreign turn's record, from its events (its spans carry no relay.turn.*)."""
    events = turn.events
    last = next((e for e in reversed(events) if e.is_run_terminal), None)
    status = _outcome(last) if last is not None else "error"
    response = last.fields.get("response") if last is not None else None
    ended = last.ts if last is not None else turn.started_ns / 1e6
    message = next((m for m in (message_of(r.attributes) for r in turn.roots) if m), "")
    return TurnRecord(
        turn_id=turn.turn_id,
        thread_id=turn.thread_id,
        status=status,
        message=message,
        started_at=turn.started_ns / 1e6,
        ended_at=None if status == PAUSED else ended,
        paused_at=ended if status == PAUSED else None,
        response=ev.dumps(response) if isinstance(response, dict) else None,
        root_trace_id=turn.trace_ids[-1] if turn.trace_ids else None,
        last_seq=len(events),
    )
