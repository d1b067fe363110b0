"""Events resent per reconnect of the streaming protocol's event stream
(``POST /threads/{id}/stream/events``), span-relay against the Agent Server, with
LangGraph's own JavaScript transport (tests/interop/protocol_js/resend.mjs).

``python -m tests.bench.peer.resend [--runs 1 3 10]``: starts both servers on
langgraph.json (the ``tokens`` graph: a 70-word streamed answer), and for each number of
earlier runs on a thread, cuts one event stream (``lifecycle``, ``input``, ``values``,
``messages``) after the thread's last run and counts what its reconnect delivers again:
with the client as it is (it sends neither ``since`` nor ``Last-Event-ID`` on a
reconnect), and with a ``Last-Event-ID`` added to the reconnect. Prints a Markdown table
(the side-by-side row of docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.bench.peer import servers
from tests.node_packages import REPO, node_project

CLIENT_DIR = REPO / "tests" / "interop" / "protocol_js"
CHANNELS = "lifecycle,input,values,messages"


def measure(url: str, mode: str, runs: int) -> dict[str, Any]:
    done = subprocess.run(
        ["node", "resend.mjs", url, mode, "tokens", str(runs), CHANNELS],
        cwd=CLIENT_DIR,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1, 3, 10])
    args = parser.parse_args()
    node_project(CLIENT_DIR, "LangGraph's JavaScript client (streaming protocol)")
    logs = Path(tempfile.mkdtemp(prefix="bench-resend-"))
    exe = servers.ensure_peer_venv(logs / "install.log")
    servers.raise_fd_limit()
    relay = servers.start_relay(logs)
    try:
        peer = servers.start_peer(exe, logs)
    except BaseException:
        relay.stop()
        raise
    rows = []
    try:
        for name, server in (("span-relay", relay), ("Agent Server", peer)):
            for runs in args.runs:
                plain = measure(server.base, "plain", runs)
                cursor = measure(server.base, "cursor", runs)
                rows.append(
                    (
                        name,
                        runs,
                        plain["connections"][0]["received"],
                        plain["resent_per_reconnect"][0],
                        cursor["resent_per_reconnect"][0],
                        plain["sent_since"] or plain["sent_last_event_id"],
                    )
                )
    finally:
        peer.stop()
        relay.stop()
    print(
        "| server | runs on the thread | events before the cut | resent per reconnect "
        "(client as is) | resent with Last-Event-ID | client sent a cursor |"
    )
    print("|---|---|---|---|---|---|")
    for name, runs, before, plain_resent, cursor_resent, sent in rows:
        print(
            f"| {name} | {runs} | {before} | {plain_resent} | {cursor_resent} | "
            f"{'yes' if sent else 'no'} |"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
