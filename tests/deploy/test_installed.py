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

Then: the SPA comes from the installed package (the start-up log says which folder, in
site-packages), ``POST /chat`` answers from the user's graph with its ``.env``, the user's
``agent`` package is the one Python imports, a turn runs in headless Chromium through
the SPA, and ``span-relay --version`` names the wheel's version. How long the fixture takes
is printed (``-s``) and kept in ``Installed.durations``.

The checks are subtests of one test function, not test functions of their own: with
pytest 9.2 and pytest-xdist 3.8, ``--dist loadgroup`` no longer keeps a module's tests on
one worker (pytest-dev/pytest-xdist#1386), so every worker that got one of them would
build, install and serve all over again. A check added later (langgraph.json's ``auth``,
``store``, ``http.app``: tests/deploy/installed.py) is one more ``check_*`` function,
listed in :data:`CHECKS`.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import time
import tomllib
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
    project = TemplateProject(root / "my-agent").write()
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


def check_the_sdist_builds_the_same_wheel(installed: Installed) -> None:
    assert installed.wheel.name == installed.sdist_wheel.name
    assert archive_differences(installed.wheel, installed.sdist_wheel) == []


def check_the_wheel_holds_the_packages_the_spa_the_corpus_and_the_license(
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
    assert "License-Expression: Apache-2.0" in metadata
    assert "License-File: LICENSE" in metadata
    assert "Classifier: Programming Language :: Python :: 3.11" in metadata


def check_the_sdist_carries_the_spa_the_corpus_the_license_and_the_lock(
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
        "collector-config/collector.yaml",
    } <= names
    assert not any(name.startswith("tests/") for name in names)


def check_the_spa_comes_from_the_installed_package(installed: Installed) -> None:
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


def check_chat_answers_from_the_users_graph_and_env(installed: Installed) -> None:
    request = urllib.request.Request(
        installed.server.url + "/chat",
        data=json.dumps({"message": "hi"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        body = json.loads(answer.read())
    assert body["status"] == "answered"
    assert body["answer"] == "Hello from the project's .env. You said: hi"


def check_the_users_agent_package_is_the_one_imported(installed: Installed) -> None:
    printed = installed.venv.python_says(
        "import agent.graph; print(agent.graph.__file__)", cwd=installed.venv.path.parent
    )
    assert Path(printed) == installed.project.package / "graph.py"


def check_a_turn_runs_through_the_spa_in_chromium(installed: Installed) -> None:
    chromium = _chromium_path()
    if chromium is None:
        service_missing("Chromium at /usr/bin/chromium", "apt-get install chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(installed.server.url + "/")
            page.wait_for_selector("body[data-ready='true']")
            page.wait_for_selector("[data-node='answer']")  # the user's graph, drawn
            page.fill("#message", "from the browser")
            page.press("#message", "Enter")
            page.wait_for_selector("#outcome[data-outcome='answered']")
            answer = page.locator(".msg-agent .msg-body").last.inner_text()
            assert answer == "Hello from the project's .env. You said: from the browser"
            assert errors == []
        finally:
            browser.close()


def check_version(installed: Installed) -> None:
    printed = run(
        [installed.venv.bin("span-relay"), "--version"], installed.project.root, clean_env()
    )
    assert printed == f"span-relay {VERSION}\n"


#: what the installed product must do, each a subtest of the one test below
CHECKS = (
    check_the_sdist_builds_the_same_wheel,
    check_the_wheel_holds_the_packages_the_spa_the_corpus_and_the_license,
    check_the_sdist_carries_the_spa_the_corpus_the_license_and_the_lock,
    check_the_spa_comes_from_the_installed_package,
    check_chat_answers_from_the_users_graph_and_env,
    check_the_users_agent_package_is_the_one_imported,
    check_a_turn_runs_through_the_spa_in_chromium,
    check_version,
)


def test_the_installed_product(installed: Installed, subtests: pytest.Subtests) -> None:
    for check in CHECKS:
        with subtests.test(check.__name__.removeprefix("check_")):
            check(installed)
