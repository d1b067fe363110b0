"""Start-up cost: how long a fresh process takes to ``import relay`` and to print
``span-relay --help``, each the wall time of a whole subprocess (interpreter start
included), beside the same for ``import langgraph.graph`` alone: the price a process
would pay if the relay imported LangGraph (and through LangChain, LangSmith) where it
serves no graph. The three run interleaved, round by round, so a busy moment of the
machine weighs on all of them; each figure is the median over rounds. A bare interpreter
(``python -c pass``) is in each figure's params, the floor under all three.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.bench.harness import ROOT, Figure, rounds, summary

#: what each figure runs, in a fresh interpreter
COMMANDS = {
    "floor": ["-c", "pass"],
    "langgraph": ["-c", "import langgraph.graph"],
    "import_relay": ["-c", "import relay"],
    "cli_help": ["-m", "relay.cli", "--help"],
}


def _wall_s(args: list[str]) -> float:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, check=True, capture_output=True, timeout=120
    )
    return time.perf_counter() - t0


def run_startup(quick: bool) -> list[Figure]:
    count, budget = (1, 20.0) if quick else (9, 90.0)  # --quick: each command runs once
    samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in rounds(count, budget):
        for name, args in COMMANDS.items():
            samples[name].append(_wall_s(args))
    floor = summary("floor", "python -c pass", samples["floor"], "s")
    langgraph = summary("langgraph", "import langgraph.graph", samples["langgraph"], "s")
    params = {
        "floor_s": floor.value,
        "langgraph_s": langgraph.value,
        "samples_s": {k: [round(v, 4) for v in vs] for k, vs in samples.items()},
    }
    common = {
        "anchor": "import langgraph.graph alone",
        "anchor_value": langgraph.value,
        "anchor_unit": "s",
        "note": f"python -c pass = {floor.value:.2f} s",
        "params": params,
    }
    return [
        summary(
            "startup.import_relay_s",
            "python -c 'import relay' (a fresh process)",
            samples["import_relay"],
            "s",
            **common,
        ),
        summary(
            "startup.cli_help_s",
            "span-relay --help (a fresh process)",
            samples["cli_help"],
            "s",
            **common,
        ),
    ]
