"""Replicas as real processes (``span-relay serve --graph``), to kill -9, SIGSTOP and SIGCONT.

:func:`write_gated_graph` writes a LangGraph graph of one node, ``hold``, that a test
drives through files: on entry it appends ``{message} {instance}`` to the ``ledger``
and makes ``{message}.started``; it returns (answering ``done {message}``) once
``{message}.go`` exists. So a test knows a turn is inside its node, holds it there as long
as it likes, and counts how many times the node ran, without timing anything."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

from tests.conftest import free_port
from tests.interop.conftest import wait_until

ROOT = Path(__file__).resolve().parents[2]

GATED_GRAPH = '''\
"""One node that waits on a file (tests/replicas/processes.py)."""

import asyncio
import os
from pathlib import Path

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph

GATES = Path(os.environ["LEASE_TEST_GATES"])


async def hold(state: MessagesState) -> dict:
    asked = str(state["messages"][-1].content)
    with (GATES / "ledger").open("a") as ledger:
        ledger.write(f"{asked} {os.environ['RELAY_INSTANCE_ID']}\\n")
    (GATES / f"{asked}.started").touch()
    while not (GATES / f"{asked}.go").exists():
        await asyncio.sleep(0.05)
    return {"messages": [AIMessage(content=f"done {asked}")]}


builder = StateGraph(MessagesState)
builder.add_node("hold", hold)
builder.add_edge(START, "hold")
builder.add_edge("hold", END)
graph = builder.compile()
'''


RECOVERY_GRAPH = '''\
"""Two nodes and two tools for recovery (tests/replicas/processes.py)."""

import asyncio
import os
from pathlib import Path

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph

GATES = Path(os.environ["LEASE_TEST_GATES"])


def note(asked: str, what: str) -> None:
    with (GATES / "ledger").open("a") as ledger:
        ledger.write(f"{asked} {what} {os.environ['RELAY_INSTANCE_ID']}\\n")


async def gate(asked: str) -> None:
    (GATES / f"{asked}.started").touch()
    while not (GATES / f"{asked}.go").exists():
        await asyncio.sleep(0.05)


@tool
async def charge(order: str) -> str:
    """Charge an order: a side effect, written to the ledger."""
    note(order, "charge")
    await gate(order)
    return "charged"


@tool
async def lookup(order: str) -> str:
    """Look an order up: safe to run again."""
    note(order, "lookup")
    await gate(order)
    return "found"


lookup.metadata = {"idempotent": True}


async def prepare(state: MessagesState) -> dict:
    note(str(state["messages"][-1].content), "prepare")
    return {}


async def hold(state: MessagesState, config) -> dict:
    asked = str(state["messages"][-1].content)
    note(asked, "hold")
    user = (config.get("configurable") or {}).get("user")
    if user:  # the user the run acts for (RELAY_AUTH)
        note(asked, f"user={user['id']}")
    if asked.startswith("tool"):
        await charge.ainvoke({"order": asked}, config)
    elif asked.startswith("idem"):
        await lookup.ainvoke({"order": asked}, config)
    else:
        await gate(asked)
    return {}


async def finish(state: MessagesState) -> dict:
    asked = str(state["messages"][-1].content)
    note(asked, "finish")
    return {"messages": [AIMessage(content=f"done {asked}")]}


builder = StateGraph(MessagesState)
builder.add_node("prepare", prepare)
builder.add_node("hold", hold)
builder.add_node("finish", finish)
builder.add_edge(START, "prepare")
builder.add_edge("prepare", "hold")
builder.add_edge("hold", "finish")
builder.add_edge("finish", END)
graph = builder.compile()
'''


def write_recovery_graph(folder: Path) -> tuple[Path, Path]:
    """:data:`RECOVERY_GRAPH`: ``prepare``, ``hold``, which waits on the gate of its
    message, and ``finish``, which answers; a message ``tool...`` makes ``hold`` call the
    side-effecting tool ``charge`` and one ``idem...`` the idempotent ``lookup``, each
    waiting on the gate inside the tool. The ledger has a line ``{message}
    {prepare|hold|charge|lookup|finish} {instance}`` for each run of each, and, when the
    run acts for a user (``RELAY_AUTH``), ``{message} user={id} {instance}`` in hold."""
    gates = folder / "gates"
    gates.mkdir(parents=True, exist_ok=True)
    graph = folder / "recovery_graph.py"
    graph.write_text(RECOVERY_GRAPH)
    return graph, gates


def write_gated_graph(folder: Path) -> tuple[Path, Path]:
    """The graph file and its gates folder."""
    gates = folder / "gates"
    gates.mkdir(parents=True, exist_ok=True)
    graph = folder / "gated_graph.py"
    graph.write_text(GATED_GRAPH)
    return graph, gates


class Gates:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def started(self, message: str) -> bool:
        return (self.folder / f"{message}.started").exists()

    def release(self, message: str) -> None:
        (self.folder / f"{message}.go").touch()

    def runs(self, message: str) -> list[str]:
        """The instances that ran the node for ``message``, in order."""
        return [line.split(" ", 1)[1] for line in self._lines() if line.split(" ", 1)[0] == message]

    def ran(self, message: str) -> list[tuple[str, str]]:
        """The recovery graph's ledger for ``message``: (what ran, on which instance)."""
        rows = [line.split(" ") for line in self._lines()]
        return [(row[1], row[2]) for row in rows if len(row) == 3 and row[0] == message]

    def _lines(self) -> list[str]:
        ledger = self.folder / "ledger"
        return ledger.read_text().splitlines() if ledger.exists() else []


class Replica:
    """``span-relay serve --graph`` in a process of its own."""

    def __init__(self, name: str, env: dict[str, str], cwd: Path, graph: Path) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = cwd / f"{name}.log"
        self._out = self.log.open("ab")
        self.paused = False
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "relay.cli",
                "serve",
                "--graph",
                f"{graph}:graph",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
            ],
            env={**env, "RELAY_INSTANCE_ID": name},
            cwd=cwd,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self) -> Replica:
        def answers() -> bool:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                return httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(answers, timeout=180, what=f"replica {self.name} ready")
        return self

    def logged(self, text: str) -> bool:
        return text in self.log.read_text(errors="replace")

    def kill(self) -> None:
        """kill -9: nothing of the process runs again."""
        self.proc.kill()
        self.proc.wait(30)

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def stop(self) -> None:
        if self.proc.poll() is None:
            if self.paused:
                self.resume()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        with contextlib.suppress(Exception):
            self._out.close()


def replica_env(tmp_path: Path, gates: Path, **overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
    env.update(
        PYTHONPATH=str(ROOT),
        RELAY_DATA_DIR=str(tmp_path / "data"),
        OTEL_TRACES_EXPORTER="none",
        RELAY_METRICS="prometheus",
        LEASE_TEST_GATES=str(gates),
        **overrides,
    )
    return env


@contextlib.contextmanager
def replicas_of(
    folder: Path, graph: Path, gates: Path
) -> Iterator[tuple[Callable[..., Replica], Gates]]:
    """``start(name, **env)`` makes a replica of ``graph`` in ``folder`` (ready when it
    returns), and the gates its nodes wait on; every replica started is stopped at the
    end."""
    started: list[Replica] = []

    def start(name: str, **env: str) -> Replica:
        replica = Replica(name, replica_env(folder, gates, **env), folder, graph)
        started.append(replica)
        return replica.wait_ready()

    try:
        yield start, Gates(gates)
    finally:
        for replica in started:
            replica.stop()
