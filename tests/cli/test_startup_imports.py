"""Start-up cost: LangGraph and LangChain (with LangSmith, half a second and more) are
imported only where a graph is served. ``import relay``, ``span-relay --help`` and the
``--relay-only`` app (made, its OpenAPI document built, started and stopped) import none
of them; serving a graph does (the control that the check can see them at all).

Each case runs in a fresh interpreter (a subprocess): this test process has long imported
them all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("langchain_core", "langsmith", "langgraph")

_REPORT = f"""
import json, sys
print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})))
"""

CASES = {
    "import relay": "import relay\nimport relay.events, relay.conventions",
    "span-relay --help": (
        "import contextlib, io\n"
        "from relay.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['serve', '--help'])\n"
    ),
    "--relay-only app": (
        "import asyncio\n"
        "from relay.cli import RELAY_ONLY_APP\n"
        "from uvicorn.importer import import_from_string\n"
        "app = import_from_string(RELAY_ONLY_APP)()\n"
        "assert app.openapi()['paths']\n"
        "async def started_and_stopped():\n"
        "    async with app.router.lifespan_context(app):\n"
        "        assert app.state.relay.receiver is not None\n"
        "asyncio.run(started_and_stopped())\n"
    ),
}


def _imported(code: str, tmp_path: Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
    env.update(RELAY_DATA_DIR=str(tmp_path), PYTHONPATH=str(ROOT), OTEL_TRACES_EXPORTER="none")
    done = subprocess.run(
        [sys.executable, "-c", code + _REPORT],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_graph_no_langgraph(case: str, tmp_path: Path) -> None:
    assert _imported(CASES[case], tmp_path) == []


def test_a_served_graph_imports_them(tmp_path: Path) -> None:
    """The control: the same check sees them once a graph is served (and the lazy names
    of ``relay`` resolve to the real objects)."""
    code = (
        "import relay\n"
        "from relay import GraphAgent\n"
        "from relay.langgraph.agent import GraphAgent as Real\n"
        "assert GraphAgent is Real and relay.traced_node is not None\n"
    )
    assert _imported(code, tmp_path) == sorted(HEAVY)


def test_an_unknown_name_is_an_attribute_error() -> None:
    import relay

    with pytest.raises(AttributeError, match="no attribute 'GraphAgnet'"):
        relay.GraphAgnet  # noqa: B018
    assert "GraphAgent" in dir(relay)
