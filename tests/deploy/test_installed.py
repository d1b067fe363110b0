"""The installed product, as a team installs it (issue 30): the wheel alone, in a new venv
outside the repository, serving a project laid out as LangGraph's template lays it out.

One module fixture does what a new user does, and the tests check what they would see:

1. a clean export of the tree (the files git lists, uncommitted work included) is built
   with ``python -m build``: the wheel from the tree, and the sdist with the wheel built
   from it, which must be the same wheel, member for member;
2. a fresh venv under the test's temporary folder gets only that wheel (the lock as
   constraints), then the user's project (``pip install -e .``, as the template's README
   says);
3. ``span-relay serve --config langgraph.json`` of the venv runs in the project's folder,
   with no PYTHONPATH and nothing of the repository on its path, until ``/readyz``.

The project's langgraph.json also carries what a real project protects and keeps: an
``auth`` (LangGraph's own ``Auth``: bearer tokens, each user's threads their own), a
``store`` (its graph remembers what each user said last, through ``get_store()``, with a
``ttl``) and ``http.app`` (a FastAPI app of its own, mounted beside the relay's routes).

Then: the SPA comes from the installed package (the start-up log says which folder, in
site-packages), ``POST /chat`` answers only a known user, from the user's graph with its
``.env`` and its store, the project's own route answers, the user's ``agent`` package is
the one Python imports, a turn runs in headless Chromium through the SPA, and
``span-relay --version`` names the wheel's version. How long the fixture takes is printed
(``-s``) and kept in ``Installed.durations``.

Each check is a test of its own, on the one module fixture (tests/conftest.py keeps a
module with a module-scoped fixture on one xdist worker).
"""

from __future__ import annotations

import json
import shutil
import tarfile
import time
import tomllib
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.browser.conftest import CHROMIUM_ARGS, _chromium_path
from tests.conftest import free_port, service_missing
from tests.deploy.installed import (
    REPO,
    Server,
    TemplateProject,
    Venv,
    archive_differences,
    build_sdist_and_its_wheel,
    build_wheel,
    clean_env,
    export_tree,
    run,
)

pytestmark = pytest.mark.slow

VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


GRAPH_WITH_MEMORY = '''\
"""The user's own graph: answers with the greeting its .env gives, and remembers in the
store (langgraph.json's ``store``) what each user said last, on any of their threads."""

import os

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_store
from langgraph.graph import END, START, MessagesState, StateGraph


async def answer(state: MessagesState, config: RunnableConfig) -> dict:
    asked = state["messages"][-1].content
    store = get_store()
    namespace = ("last_said", config["configurable"]["langgraph_auth_user_id"])
    earlier = await store.aget(namespace, "message")
    await store.aput(namespace, "message", {"text": asked})
    text = f"{os.environ['AGENT_GREETING']} You said: {asked}"
    if earlier is not None:
        text += f" (last time: {earlier.value['text']})"
    return {"messages": [AIMessage(content=text)]}


builder = StateGraph(MessagesState)
builder.add_node("answer", answer)
builder.add_edge(START, "answer")
builder.add_edge("answer", END)
graph = builder.compile()
'''

AUTH_PY = '''\
"""Who may call: a bearer token per user; each user's threads are their own."""

from langgraph_sdk import Auth

auth = Auth()

USERS = {"alice-token": "alice", "bob-token": "bob"}


@auth.authenticate
async def authenticate(authorization: str | None) -> str:
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or token not in USERS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Unknown token.")
    return USERS[token]


@auth.on
async def owner_only(ctx: Auth.types.AuthContext, value: dict) -> dict:
    filters = {"owner": ctx.user.identity}
    value.setdefault("metadata", {}).update(filters)
    return filters


@auth.on.assistants
async def graphs_are_everyones(ctx: Auth.types.AuthContext, value: dict) -> bool:
    return True
'''

WEBAPP_PY = '''\
"""The project's own routes, beside the relay's (langgraph.json's http.app)."""

from fastapi import FastAPI

app = FastAPI()


@app.get("/hello")
async def hello() -> dict:
    return {"hello": "from the project's own app"}
'''


def post_chat(url: str, body: dict, token: str | None) -> tuple[int, dict]:
    """``POST /chat`` as JSON; the status and the JSON answer (an error's too)."""
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url + "/chat", data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@dataclass
class Installed:
    """What the fixture made: the distributions, the venv, the project, the server."""

    wheel: Path
    sdist: Path
    sdist_wheel: Path
    venv: Venv
    project: TemplateProject
    server: Server
    durations: dict[str, float] = field(default_factory=dict)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        service_missing("a git checkout of span-relay", "run the suite from a git clone")
    root = tmp_path_factory.mktemp("installed")
    durations: dict[str, float] = {}
    began = step = time.monotonic()

    def took(what: str) -> None:
        nonlocal step
        now = time.monotonic()
        durations[what] = round(now - step, 1)
        step = now

    src = export_tree(REPO, root / "export")
    shutil.copytree(src, root / "export-sdist")  # its own copy: the two builds run at once
    (root / "dist-sdist").mkdir()
    sdist_build = build_sdist_and_its_wheel(root / "export-sdist", root / "dist-sdist")
    took("export")
    try:
        wheel = build_wheel(src, root / "dist-tree")
        took("wheel")
        venv = Venv.create(root / "venv", lock=src / "requirements" / "lock.txt")
        venv.pip(wheel)
        took("venv with the wheel")
    finally:
        code = sdist_build.wait(timeout=240)
    assert code == 0, (root / "dist-sdist.log").read_text()[-3000:]
    took("sdist and its wheel (the rest of)")
    [sdist] = (root / "dist-sdist").glob("*.tar.gz")
    [sdist_wheel] = (root / "dist-sdist").glob("*.whl")
    project = TemplateProject(
        root / "my-agent",
        graph_module=GRAPH_WITH_MEMORY,
        config={
            "auth": {"path": "./src/agent/auth.py:auth"},
            "store": {"ttl": {"refresh_on_read": True, "default_ttl": 1440}},
            "http": {"app": "./src/agent/webapp.py:app"},
        },
        modules={"auth.py": AUTH_PY, "webapp.py": WEBAPP_PY},
    ).write()
    venv.pip("-e", ".", cwd=project.root)
    took("the user's project")
    server = Server(venv, project, free_port(), root / "data", root / "server.log")
    try:
        server.start()
        took("serve until /readyz")
        durations["fixture"] = round(time.monotonic() - began, 1)
        print(f"\ninstalled-product fixture, seconds: {json.dumps(durations)}")
        yield Installed(wheel, sdist, sdist_wheel, venv, project, server, durations)
    finally:
        server.stop()


def test_the_sdist_builds_the_same_wheel(installed: Installed) -> None:
    assert installed.wheel.name == installed.sdist_wheel.name
    assert archive_differences(installed.wheel, installed.sdist_wheel) == []


def test_the_wheel_holds_the_packages_the_spa_the_corpus_and_the_license(
    installed: Installed,
) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = wheel.namelist()
        metadata = wheel.read(f"span_relay-{VERSION}.dist-info/METADATA").decode()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"relay", "span_relay_demo", f"span_relay-{VERSION}.dist-info"}
    spa = {Path(n).name for n in names if n.startswith("relay/spa/")}
    assert {p.name for p in (REPO / "relay" / "spa").iterdir() if p.is_file()} == spa
    assert len([n for n in names if n.startswith("span_relay_demo/corpus/")]) >= 30
    assert f"span_relay-{VERSION}.dist-info/licenses/LICENSE" in names
    assert {"relay/collector/collector.yaml", "relay/collector/loadbalancing.yaml"} <= set(names)
    docs = {"relay/http/docs_assets/relay-docs.js", "relay/http/docs_assets/relay-docs.css"}
    assert docs <= set(names)  # /docs' own start-up script and styles
    assert "License-Expression: Apache-2.0" in metadata
    assert "License-File: LICENSE" in metadata
    assert "Classifier: Programming Language :: Python :: 3.11" in metadata


def test_the_sdist_carries_the_spa_the_corpus_the_license_and_the_lock(
    installed: Installed,
) -> None:
    with tarfile.open(installed.sdist) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {
        "LICENSE",
        "README.md",
        "pyproject.toml",
        "requirements/lock.txt",
        "relay/spa/index.html",
        "span_relay_demo/corpus/refund-policy.md",
        "docs/library.md",
        "deploy/RUNBOOK.md",
        "deploy/Dockerfile",
        "relay/collector/collector.yaml",
    } <= names
    assert not any(name.startswith("tests/") for name in names)


def test_the_spa_comes_from_the_installed_package(installed: Installed) -> None:
    site_spa = (
        Path(
            installed.venv.python_says(
                "import importlib.util; "
                "print(importlib.util.find_spec('relay').submodule_search_locations[0])",
                cwd=installed.project.root,
            )
        )
        / "spa"
    )
    assert installed.venv.path in site_spa.parents and "site-packages" in site_spa.parts
    log = installed.server.output()
    assert f"SPA: GET / from {site_spa} (the package's own)" in log, log
    assert "graph agent: /graphs/agent/chat" in log and "as the first graph, /chat" in log
    with urllib.request.urlopen(installed.server.url + "/", timeout=10) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/html")
        assert answer.read() == (site_spa / "index.html").read_bytes()


def test_chat_answers_only_a_user_its_auth_knows(installed: Installed) -> None:
    for token in (None, "mallory-token"):
        status, body = post_chat(installed.server.url, {"message": "hi"}, token)
        assert status == 401, body
        assert body["error"]["message"] == "Unknown token."


def test_chat_answers_from_the_users_graph_env_and_store(installed: Installed) -> None:
    url = installed.server.url
    status, first = post_chat(url, {"message": "hi"}, "bob-token")
    assert status == 200, first
    assert first["status"] == "answered"
    assert first["answer"] == "Hello from the project's .env. You said: hi"
    # another thread of the same user: the store remembers across threads
    status, second = post_chat(url, {"message": "again"}, "bob-token")
    assert status == 200 and second["thread_id"] != first["thread_id"]
    assert second["answer"] == "Hello from the project's .env. You said: again (last time: hi)"
    # another user's thread is not theirs to continue (404, as for no thread at all)
    status, refused = post_chat(
        url, {"message": "mine now", "thread_id": second["thread_id"]}, "alice-token"
    )
    assert status == 404, refused


def test_the_projects_own_app_is_served_beside_the_relay(installed: Installed) -> None:
    with urllib.request.urlopen(installed.server.url + "/hello", timeout=10) as answer:
        assert json.loads(answer.read()) == {"hello": "from the project's own app"}
    log = installed.server.output()
    assert "not honoured" not in log, log  # auth, store and http.app are all honoured
    data = (installed.server.data_dir).resolve()
    assert f"  graphs' store: SQLite {data / 'store.db'}" in log.splitlines(), log
    assert "  who may call: users langgraph.json's auth authenticates" in log, log


def test_the_users_agent_package_is_the_one_imported(installed: Installed) -> None:
    printed = installed.venv.python_says(
        "import agent.graph; print(agent.graph.__file__)", cwd=installed.venv.path.parent
    )
    assert Path(printed) == installed.project.package / "graph.py"


def test_a_turn_runs_through_the_spa_in_chromium(installed: Installed) -> None:
    chromium = _chromium_path()
    if chromium is None:
        service_missing("Chromium at /usr/bin/chromium", "apt-get install chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            # the token the SPA's token form keeps for this tab (relay/spa/token.js)
            page.add_init_script("sessionStorage.setItem('span-relay-token', 'alice-token')")
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(installed.server.url + "/")
            page.wait_for_selector("body[data-ready='true']")
            page.wait_for_selector("[data-node='answer']")  # the user's graph, drawn
            page.fill("#message", "from the browser")
            page.press("#message", "Enter")
            page.wait_for_selector("#outcome[data-outcome='answered']")
            answer = page.locator(".msg-agent .msg-body").last.inner_text()
            assert answer.startswith("Hello from the project's .env. You said: from the browser")
            assert errors == []
        finally:
            browser.close()


def test_version(installed: Installed) -> None:
    printed = run(
        [installed.venv.bin("span-relay"), "--version"], installed.project.root, clean_env()
    )
    assert printed == f"span-relay {VERSION}\n"
