"""langgraph.json read as ``langgraph dev`` reads it (relay/cli/langgraph_config.py), env
files read by the real python-dotenv with the Agent Server's precedence (relay/envfile.py),
the CORS policy http.cors makes, and ``--app``'s app-or-factory (relay/cli/asgi_app.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from dotenv import dotenv_values

from relay import Relay
from relay.cli import langgraph_config
from relay.cli.asgi_app import load_app
from relay.cli.langgraph_config import GraphEntry, read_config
from relay.envfile import load_env_file, read_env_file
from relay.http.middleware import cors_policy
from relay.settings import ConfigError, RelaySettings


def write(folder: Path, config: dict[str, Any]) -> Path:
    (folder / "agent.py").write_text("graph = None\n")
    path = folder / "langgraph.json"
    path.write_text(json.dumps(config))
    return path


def test_graph_entries_in_every_form(tmp_path: Path) -> None:
    config = read_config(
        write(
            tmp_path,
            {
                "graphs": {
                    "file": "./agent.py:graph",
                    "module": "my_pkg.agent:make_graph",
                    "described": {"path": "./agent.py:graph", "description": "Answers."},
                    "undescribed": {"path": "./agent.py:graph", "description": None},
                }
            },
        )
    )
    assert config.graphs == [
        GraphEntry("file", "./agent.py:graph"),
        GraphEntry("module", "my_pkg.agent:make_graph"),
        GraphEntry("described", "./agent.py:graph", "Answers."),
        GraphEntry("undescribed", "./agent.py:graph"),
    ]
    assert config.base == tmp_path
    assert str(tmp_path.resolve()) in sys.path  # the config's folder joins the import path


@pytest.mark.parametrize(
    ("graphs", "words"),
    [
        ({}, "'graphs' must map names to graphs"),
        ({"a": {"description": "no path"}}, "an object without a 'path'"),
        ({"a": 3}, "must be a path"),
        ({"a": {"path": "./a.py:g", "description": 3}}, "'description' must be a string"),
        ({"a": "./src/graph.ts:graph"}, "is a JavaScript graph"),
    ],
)
def test_wrong_graph_entries_are_refused(tmp_path: Path, graphs: Any, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        read_config(write(tmp_path, {"graphs": graphs}))


def test_one_warning_line_names_every_key_not_honoured(tmp_path: Path) -> None:
    config = read_config(
        write(
            tmp_path,
            {
                "$schema": "https://langgra.ph/schema.json",
                "dependencies": ["."],
                "python_version": "3.12",
                "image_distro": "wolfi",
                "dockerfile_lines": ["RUN true"],
                "pip_config_file": "pip.conf",
                "graphs": {"agent": "./agent.py:graph"},
                "env": {"A": "1"},
                "store": {"index": {"dims": 3, "embed": "fake"}},
                "checkpointer": {"ttl": {"default_ttl": 60}},
                "ui": {"agent": "./ui.tsx"},
                "webhooks": {"env_prefix": "LG_WEBHOOK_"},
                "auth": None,  # null: absent
                "grpahs": {},
                "http": {
                    "app": "./agent.py:app",
                    "cors": {"allow_origins": ["https://a.example"]},
                    "disable_mcp": True,  # the relay has no /mcp: honoured
                    "mount_prefix": "/api",
                    "configurable_headers": {"includes": ["x-*"]},
                    "disable_runs": False,  # false: nothing closed
                    "colour": "blue",
                },
            },
        )
    )
    assert config.warning() == (
        "langgraph.json: not honoured here: ui, webhooks, "
        "http.mount_prefix, http.disable_runs; unknown keys: "
        "grpahs, http.colour (see README, 'span-relay serve --config')"
    )
    assert config.store == {"index": {"dims": 3, "embed": "fake"}}  # carried for their code
    assert config.checkpointer == {"ttl": {"default_ttl": 60}}
    assert config.auth is None


def test_build_keys_are_silent(tmp_path: Path) -> None:
    config = read_config(
        write(
            tmp_path,
            {
                "dependencies": ["."],
                "python_version": "3.11",
                "node_version": "20",
                "api_version": "0.4",
                "base_image": "x",
                "pip_installer": "uv",
                "keep_pkg_tools": True,
                "graphs": {"agent": "./agent.py:graph"},
            },
        )
    )
    assert config.warning() is None


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"encryption": {"path": "./enc.py:enc"}}, "span-relay stores checkpoints"),
        ({"http": {"disable_runs": True}}, "http.disable_runs: true"),
        ({"http": {"disable_threads": True}}, "turn API"),
        ({"http": {"disable_assistants": True}}, "graph listing"),
        ({"http": {"disable_meta": True}}, "/docs"),
        ({"http": {"enable_custom_route_auth": True}}, "does not authenticate"),
    ],
)
def test_what_would_open_what_the_user_closed_refuses_to_start(
    tmp_path: Path, extra: dict[str, Any], words: str
) -> None:
    with pytest.raises(ConfigError, match=words):
        read_config(write(tmp_path, {"graphs": {"agent": "./agent.py:graph"}, **extra}))


def test_a_refused_key_refuses_unless_honoured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``auth`` is honoured (relay/cli/langgraph_auth.py loads it); were it not, the
    server would refuse to start rather than serve the graphs open."""
    config = read_config(
        write(tmp_path, {"graphs": {"agent": "./agent.py:graph"}, "auth": {"path": "a.py:x"}})
    )
    assert config.auth == {"path": "a.py:x"} and config.warning() is None
    monkeypatch.setattr(langgraph_config, "HONOURED", langgraph_config.HONOURED - {"auth"})
    with pytest.raises(ConfigError, match="'auth' is not honoured by span-relay"):
        read_config(tmp_path / "langgraph.json")


DOTENV = """\
# the project's settings
export PLAIN=plain
INLINE=value # a comment
QUOTED='single # not a comment'
EXPANDED=${PLAIN}-and-${FROM_PROCESS}
MULTI="first line
second line"
BARE
OVERRIDDEN=from-file
"""


def test_env_files_are_read_by_python_dotenv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".env").write_text(DOTENV)
    monkeypatch.setenv("FROM_PROCESS", "process")
    values = read_env_file(tmp_path / ".env")
    assert values == {
        "PLAIN": "plain",
        "INLINE": "value",
        "QUOTED": "single # not a comment",
        "EXPANDED": "plain-and-process",
        "MULTI": "first line\nsecond line",
        "OVERRIDDEN": "from-file",
    }
    # python-dotenv's own reading, bare keys (None) aside
    assert values == {k: v for k, v in dotenv_values(tmp_path / ".env").items() if v is not None}
    config = read_config(write(tmp_path, {"graphs": {"agent": "./agent.py:graph"}, "env": ".env"}))
    assert config.env == values
    # a file that is not there reads as empty, as in the Agent Server (and a container
    # whose image leaves .env out still starts); asked for by name, it is an error
    missing = read_config(write(tmp_path, {"graphs": {"agent": "./g.py:g"}, "env": ".nope"}))
    assert missing.env == {}
    with pytest.raises(ConfigError, match="does not exist"):
        read_env_file(tmp_path / ".nope")


def test_the_file_wins_over_the_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the Agent Server (langgraph_api/cli.py run_server writes the file's values into
    os.environ); and the three-line path's ``Relay.from_env(env_file=...)`` does the same."""
    (tmp_path / ".env").write_text("OVERRIDDEN=from-file\nRELAY_BUS_MAX_TURNS=77\n")
    monkeypatch.setenv("OVERRIDDEN", "from-process")
    monkeypatch.setenv("RELAY_BUS_MAX_TURNS", "5")
    monkeypatch.setenv("RELAY_DATA_DIR", str(tmp_path / "data"))
    relay = Relay.from_env(env_file=tmp_path / ".env")
    assert relay.settings.bus_max_turns == 77
    assert os.environ["OVERRIDDEN"] == "from-file"
    given = Relay.from_env(
        {"RELAY_BUS_MAX_TURNS": "5", "RELAY_DATA_DIR": str(tmp_path / "given")},
        env_file=tmp_path / ".env",
    )
    assert given.settings.bus_max_turns == 77 and given.environ["OVERRIDDEN"] == "from-file"
    monkeypatch.setenv("OVERRIDDEN", "again")
    assert load_env_file(tmp_path / ".env", env := {"OVERRIDDEN": "mine"}) == env
    assert env["OVERRIDDEN"] == "from-file"


def test_http_cors_is_the_cors_policy() -> None:
    plain = RelaySettings.from_env({"RELAY_DATA_DIR": "/tmp/x"})
    listed = RelaySettings.from_env({"RELAY_CORS_ORIGINS": "https://relay.example"})
    assert cors_policy(plain, None) is None  # off by default
    assert cors_policy(listed, None)["allow_origins"] == ["https://relay.example"]
    given = {"allow_origins": ["https://a.example"], "allow_methods": ["POST"], "max_age": 5}
    assert cors_policy(listed, given) == given  # http.cors replaces the relay's policy
    assert cors_policy(listed, {"allow_credentials": True}) == {
        "allow_credentials": True,
        "allow_origins": ["https://relay.example"],  # RELAY_CORS_ORIGINS fills the origins
    }
    for bad, words in (
        ({"allow_origin": ["x"]}, "not a CORS setting"),
        ({"max_age": "600"}, "must be a whole number"),
        ({"allow_headers": [1]}, "list of strings"),
    ):
        with pytest.raises(ConfigError, match=words):
            cors_policy(plain, bad)
    token = RelaySettings.from_env({"RELAY_API_TOKEN": "t" * 32})
    with pytest.raises(ConfigError, match="any site use the token"):
        cors_policy(token, {"allow_origins": ["*"]})


APP = """\
from fastapi import FastAPI

app = FastAPI()

def create_app():
    return app

async def raw(scope, receive, send):
    pass

number = 3

def needs(a):
    return app

def broken():
    raise RuntimeError("no settings")
"""


def test_app_takes_an_app_or_a_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "asgi_app_forms.py").write_text(APP)
    monkeypatch.syspath_prepend(str(tmp_path))
    app = load_app("asgi_app_forms:app")
    assert load_app("asgi_app_forms:create_app") is app
    assert load_app("asgi_app_forms:raw").__name__ == "raw"
    for spec, words in (
        ("asgi_app_forms:number", "is a int: name an ASGI app"),
        ("asgi_app_forms:needs", "is a function: name an ASGI app"),
        ("asgi_app_forms:broken", "the factory raised RuntimeError: no settings"),
        ("asgi_app_forms:nothing", 'Attribute "nothing" not found'),
        ("no_such_module_anywhere:app", "Could not import module"),
    ):
        with pytest.raises(ConfigError, match=words):
            load_app(spec)


def test_configurable_headers_pick_what_a_run_sees() -> None:
    from relay.cli.configurable_headers import header_filter

    assert header_filter(None) is None  # no header reaches the run, as in the Agent Server
    config_of = header_filter({"includes": ["x-*", "user-agent"], "excludes": ["x-secret-*"]})
    assert config_of is not None
    headers = {
        "X-Tenant-Name": "acme",
        "user-agent": "curl",
        "x-secret-key": "no",
        "authorization": "Bearer no",
        "x-api-key": "no",
        "cookie": "no",
        "accept": "no",
    }
    assert config_of(headers) == {"x-tenant-name": "acme", "user-agent": "curl"}
    everything = header_filter({"includes": ["*"]})
    assert everything is not None
    assert everything({"user": "no", "thread_id": "no", "x-api-key": "no", "a": "1"}) == {"a": "1"}
    with pytest.raises(ConfigError, match="must be a list of header names"):
        header_filter({"includes": "x-*"})
