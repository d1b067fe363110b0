"""``span-relay --version`` and the apps' OpenAPI version: the installed distribution's
version (importlib.metadata), never a number written in the code."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest

import relay
from relay.cli import main
from relay.cli.graph_app import create_graph_app
from relay.cli.relay_only import create_relay_app

INSTALLED = metadata.version("span-relay")


def test_version_prints_the_distributions_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"span-relay {INSTALLED}\n"
    assert relay.__version__ == INSTALLED


def test_the_apps_say_the_same_version(tmp_path: Path) -> None:
    from span_relay_demo.app import create_app

    env = {"RELAY_DATA_DIR": str(tmp_path), "OTEL_TRACES_EXPORTER": "none"}
    graph = tmp_path / "graph.py"
    graph.write_text(
        "from langgraph.graph import START, MessagesState, StateGraph\n"
        "builder = StateGraph(MessagesState)\n"
        "builder.add_node('answer', lambda state: {'messages': []})\n"
        "builder.add_edge(START, 'answer')\n"
        "graph = builder.compile()\n"
    )
    apps = [
        create_relay_app(env),
        create_graph_app([("mine", f"{graph}:graph")], env),
        create_app(env),
    ]
    assert [app.openapi()["info"]["version"] for app in apps] == [INSTALLED] * 3


def test_no_version_number_is_written_in_the_code() -> None:
    root = Path(__file__).resolve().parents[2]
    written = re.compile(r"""version\s*=\s*["']\d""")
    found = [
        f"{path.relative_to(root)}:{number}"
        for package in ("relay", "span_relay_demo")
        for path in sorted((root / package).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if written.search(line)
    ]
    assert found == []
