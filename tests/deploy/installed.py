"""span-relay as a team installs it: the parts tests/deploy/test_installed.py is made of.

- :func:`export_tree`: the files git would commit (``git ls-files --cached --others
  --exclude-standard``: tracked and new, never ignored), copied to a folder of their own,
  so that what is built is the tree, uncommitted work included, and nothing else (no
  ``build/``, no ``*.egg-info``, no ``.venv``).
- :func:`build_wheel` and :func:`build_sdist_and_its_wheel`: ``python -m build`` on that
  export, in isolated build environments whose build backend is the locked one
  (``PIP_CONSTRAINT=requirements/lock.txt``); :func:`archive_differences` compares two
  wheels member by member.
- :class:`Venv`: a new virtualenv outside the repository; :meth:`Venv.pip` installs into it
  with the locked pip of the test environment (``pip --python``), always with the lock as
  constraints.
- :class:`TemplateProject`: a user's project laid out as LangGraph's project template
  (``langchain-ai/new-langgraph-project``) lays it out: ``pyproject.toml`` of a package
  ``agent`` under ``src/`` (its setuptools layout included), ``src/agent/graph.py``,
  ``langgraph.json`` with ``"dependencies": ["."]``, ``graphs``, ``"env": ".env"``, and the
  ``.env``. The other keys of langgraph.json a project may carry (``auth``, ``store``,
  ``http.app``) and the modules they name go in :attr:`TemplateProject.config` and
  :attr:`TemplateProject.modules`: see the class.
- :class:`Server`: ``span-relay serve --config langgraph.json`` of the venv, run from the
  project's folder with nothing of the repository on its path, until ``/readyz`` answers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
#: what a build or an install may take here at most (pip's cache makes it seconds)
STEP_TIMEOUT_S = 240.0


def export_tree(repo: Path, dest: Path) -> Path:
    """Copy the files git lists for ``repo`` (tracked and untracked, not ignored; a tracked
    file deleted in the work tree is left out) to ``dest``; return ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in sorted(set(filter(None, listed.split("\0")))):
        source = repo / name
        if not source.is_file():
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return dest


def clean_env(**more: str) -> dict[str, str]:
    """The test process's environment without what would let the repository or the test
    settings leak in: PYTHONPATH, a venv's VIRTUAL_ENV, RELAY_* and OTEL_*."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_CONSTRAINT")
        and not k.startswith(("RELAY_", "OTEL_"))
    }
    env.update(more)
    return env


def run(args: list[str | Path], cwd: Path, env: dict[str, str]) -> str:
    """Run ``args``; its stdout, or an AssertionError with what it printed."""
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_S,
    )
    assert done.returncode == 0, (
        f"{' '.join(map(str, args))} exited {done.returncode}:\n"
        f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


def _build_command(src: Path, out: Path, *what: str) -> tuple[list[str | Path], dict[str, str]]:
    env = clean_env(PIP_CONSTRAINT=str(src / "requirements" / "lock.txt"))
    return [sys.executable, "-m", "build", *what, "--outdir", out, src], env


def build_wheel(src: Path, out: Path) -> Path:
    """The wheel ``python -m build --wheel`` makes of the tree ``src``."""
    args, env = _build_command(src, out, "--wheel")
    run(args, src, env)
    [wheel] = out.glob("*.whl")
    return wheel


def build_sdist_and_its_wheel(src: Path, out: Path) -> subprocess.Popen[bytes]:
    """Start ``python -m build`` on ``src``: the sdist, then the wheel built from the sdist
    (build's default), into ``out``. The caller waits for the process (it runs while the
    venv installs)."""
    args, env = _build_command(src, out)
    with open(out.parent / f"{out.name}.log", "wb") as log:  # the process keeps its own copy
        return subprocess.Popen(
            [str(a) for a in args], cwd=src, env=env, stdout=log, stderr=subprocess.STDOUT
        )


def archive_differences(a: Path, b: Path) -> list[str]:
    """The members two zip archives (wheels) do not share, or share with other bytes."""
    with zipfile.ZipFile(a) as first, zipfile.ZipFile(b) as second:
        names_a, names_b = set(first.namelist()), set(second.namelist())
        differ = [f"only in {a.name} ({a.parent.name}): {n}" for n in sorted(names_a - names_b)]
        differ += [f"only in {b.name} ({b.parent.name}): {n}" for n in sorted(names_b - names_a)]
        differ += [
            f"differs: {n}" for n in sorted(names_a & names_b) if first.read(n) != second.read(n)
        ]
    return differ


@dataclass
class Venv:
    """A virtualenv at ``path`` (outside the repository), its packages installed by the
    test environment's pip (the locked one: ``pip --python``), always under ``lock``."""

    path: Path
    lock: Path

    @classmethod
    def create(cls, path: Path, lock: Path) -> Venv:
        run([sys.executable, "-m", "venv", "--without-pip", path], path.parent, clean_env())
        return cls(path, lock)

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def bin(self, name: str) -> Path:
        return self.path / "bin" / name

    def pip(self, *args: str | Path, cwd: Path | None = None) -> str:
        """``pip install ARGS`` into this venv, with the lock as constraints (and as build
        constraints: a project's build backend is the locked setuptools). ``--no-compile``:
        modules are compiled when first imported, not all of them at install."""
        lock = str(self.lock)
        return run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                self.python,
                "install",
                "--quiet",
                "--no-compile",
                "-c",
                lock,
                "--build-constraint",
                lock,
                *args,
            ],
            cwd or self.path.parent,
            clean_env(),
        )

    def python_says(self, code: str, cwd: Path) -> str:
        """What ``python -c code`` of the venv prints, run in ``cwd``."""
        return run([self.python, "-c", code], cwd, clean_env()).strip()


GRAPH_PY = '''\
"""The user's own graph: answers with the greeting its .env gives, without any network."""

import os

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph


def answer(state: MessagesState) -> dict:
    asked = state["messages"][-1].content
    return {"messages": [AIMessage(content=f"{os.environ['AGENT_GREETING']} You said: {asked}")]}


builder = StateGraph(MessagesState)
builder.add_node("answer", answer)
builder.add_edge(START, "answer")
builder.add_edge("answer", END)
graph = builder.compile()
'''

PYPROJECT = """\
[project]
name = "agent"
version = "0.0.1"
description = "A project made from LangGraph's template."
requires-python = ">=3.11"
dependencies = ["langgraph>=1.0"]

[build-system]
requires = ["setuptools>=73.0.0"]
build-backend = "setuptools.build_meta"

# the template's own layout: the package `agent` (and its alias under langgraph.templates)
# from src/agent
[tool.setuptools]
packages = ["langgraph.templates.agent", "agent"]
[tool.setuptools.package-dir]
"langgraph.templates.agent" = "src/agent"
"agent" = "src/agent"
"""


@dataclass
class TemplateProject:
    """A user's project as LangGraph's template lays it out, written by :meth:`write`.

    ``graphs``, ``env`` (the ``.env`` file's lines, as ``{KEY: value}``) and the graph's
    module are the template's. Features that need more of langgraph.json add to the two
    fields below, and the test checks what the server does with them:

    - :attr:`config`: more top-level keys of langgraph.json, beside ``dependencies``,
      ``graphs`` and ``env``: e.g. ``{"auth": {"path": "./src/agent/auth.py:auth"}}``,
      ``{"store": {"ttl": {...}}}``, ``{"http": {"app": "./src/agent/webapp.py:app"}}``;
    - :attr:`modules`: more files of the package, by name under ``src/agent/`` (e.g.
      ``{"auth.py": "...", "webapp.py": "..."}``).
    """

    root: Path
    graphs: dict[str, str] = field(default_factory=lambda: {"agent": "./src/agent/graph.py:graph"})
    env: dict[str, str] = field(
        default_factory=lambda: {"AGENT_GREETING": "Hello from the project's .env."}
    )
    graph_module: str = GRAPH_PY
    #: langgraph.json keys beyond the template's (auth, store, http, ...): see the class
    config: dict[str, Any] = field(default_factory=dict)
    #: more modules of src/agent/ by file name (auth.py, webapp.py, ...): see the class
    modules: dict[str, str] = field(default_factory=dict)

    @property
    def package(self) -> Path:
        return self.root / "src" / "agent"

    def langgraph_json(self) -> dict[str, Any]:
        return {"dependencies": ["."], "graphs": self.graphs, "env": ".env", **self.config}

    def write(self) -> TemplateProject:
        self.package.mkdir(parents=True, exist_ok=True)
        (self.root / "pyproject.toml").write_text(PYPROJECT)
        (self.package / "__init__.py").write_text('"""The user\'s own agent package."""\n')
        (self.package / "graph.py").write_text(self.graph_module)
        for name, text in self.modules.items():
            (self.package / name).write_text(textwrap.dedent(text))
        (self.root / "langgraph.json").write_text(json.dumps(self.langgraph_json(), indent=2))
        (self.root / ".env").write_text("".join(f"{k}={v}\n" for k, v in self.env.items()))
        return self


@dataclass
class Server:
    """``span-relay serve --config langgraph.json`` of ``venv`` on ``port``, from the
    project's folder; its output (stdout and stderr, the start-up log among it) in
    ``log``."""

    venv: Venv
    project: TemplateProject
    port: int
    data_dir: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, **env: str) -> Server:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        environ = clean_env(
            RELAY_DATA_DIR=str(self.data_dir),
            PYTHONUNBUFFERED="1",
            # as in an activated venv: its own commands first
            PATH=f"{self.venv.path / 'bin'}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
            VIRTUAL_ENV=str(self.venv.path),
            **env,
        )
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [
                    str(self.venv.bin("span-relay")),
                    "serve",
                    "--config",
                    "langgraph.json",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                ],
                cwd=self.project.root,
                env=environ,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._wait_ready()
        return self

    def _wait_ready(self, timeout_s: float = 90.0) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"span-relay exited {self.proc.returncode}:\n{self.output()}")
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.1)
        raise AssertionError(f"/readyz never answered 200 ({last}):\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
