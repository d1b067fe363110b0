"""Fixtures for the browser tests: a real span-relay server and a real Chromium.

The server runs as a subprocess (``span-relay serve``) on a free port of 127.0.0.1 with a
temporary data dir and fault injection on; the browser is Debian's Chromium, driven by
Playwright (never ``playwright install``: no browser download happens here).

Without Chromium the tests are skipped, naming the package to install; with ``CI=true``
they fail instead, so that CI cannot go green without running them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import free_port, service_missing

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
TRACE_URL = "http://127.0.0.1:16686"  # a trace viewer base URL, only used to build links

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Records what a person would have seen change, as it changed: every data-state of every
# graph node, the outcome, and the activity line (tool labels). Installed before app.js runs.
RECORDER_JS = """
(() => {
  window.__transitions = [];
  window.__outcomes = [];
  window.__activity = [];
  window.__announcements = [];
  window.__dialogs = 0;
  const t0 = performance.now();
  const seen = new Map();
  const record = (el) => {
    if (!(el instanceof Element)) return;
    if (el.dataset && el.dataset.node !== undefined && el.dataset.state) {
      const key = el.dataset.node;
      if (seen.get(key) !== el.dataset.state) {
        seen.set(key, el.dataset.state);
        window.__transitions.push({node: key, state: el.dataset.state, t: performance.now() - t0});
      }
    }
    if (el.id === 'outcome' && el.dataset.outcome) {
      const last = window.__outcomes[window.__outcomes.length - 1];
      if (last !== el.dataset.outcome) window.__outcomes.push(el.dataset.outcome);
    }
  };
  const textOf = (node) => {
    const el = node.nodeType === 3 ? node.parentElement : node;
    if (!el) return;
    if (el.id === 'activity-text' && !el.closest('[hidden]'))
      window.__activity.push(el.textContent);
    if (el.id === 'announcer' && el.textContent) window.__announcements.push(el.textContent);
  };
  const obs = new MutationObserver((records) => {
    for (const r of records) {
      if (r.type === 'attributes') {
        record(r.target);
        if (r.target.id === 'activity' && !r.target.hidden) {
          const t = document.getElementById('activity-text');
          if (t) window.__activity.push(t.textContent);
        }
      } else {
        textOf(r.target);
        for (const n of r.addedNodes) {
          if (n instanceof Element) {
            record(n);
            n.querySelectorAll && n.querySelectorAll('[data-node]').forEach(record);
          }
        }
      }
    }
  });
  obs.observe(document, {subtree: true, attributes: true,
                         attributeFilter: ['data-state', 'data-outcome', 'hidden'],
                         childList: true, characterData: true});
})();
"""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "browser: drives a real Chromium against a real span-relay server"
    )


def _chromium_path() -> str | None:
    """$CHROMIUM_PATH when set (and only it), else Debian's /usr/bin/chromium or one on PATH."""
    if os.environ.get("CHROMIUM_PATH"):
        candidates = [os.environ["CHROMIUM_PATH"]]
    else:
        candidates = [
            "/usr/bin/chromium",
            shutil.which("chromium"),
            shutil.which("chromium-browser"),
        ]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = _chromium_path()
    if not path:
        where = os.environ.get("CHROMIUM_PATH") or "/usr/bin/chromium"
        service_missing(f"Chromium at {where}", "apt-get install chromium (or set CHROMIUM_PATH)")
    return path


def _server_command(port: int, args: tuple[str, ...] = ()) -> list[str]:
    exe = Path(sys.executable).parent / "span-relay"
    if exe.exists():
        cmd = [str(exe)]
    elif shutil.which("span-relay"):
        cmd = [shutil.which("span-relay")]
    else:
        cmd = [sys.executable, "-m", "relay.cli"]
    return [*cmd, "serve", "--host", "127.0.0.1", "--port", str(port), *args]


def _wait_healthy(base: str, proc: subprocess.Popen, timeout: float = 45.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as r:
                if r.status == 200:
                    return True
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        time.sleep(0.2)
    return False


@contextlib.contextmanager
def running_server(tmp_path_factory, extra_env=None, log_name="server.log", args=()):
    """Start ``span-relay serve [args]`` on a free port of 127.0.0.1; yield its base URL;
    stop it."""
    last_log = ""
    for _attempt in range(3):  # a free port can be taken between probing and binding
        data = tmp_path_factory.mktemp("relay-data")
        port = free_port()
        env = dict(os.environ)
        for name in (
            "RELAY_API_TOKEN",
            "RELAY_AUTH",
            "RELAY_BUS",
            "RELAY_STORE",
            "RELAY_OTLP_GRPC",
            "RELAY_TRACE_URL",
        ):
            env.pop(name, None)
        env.update(
            RELAY_DATA_DIR=str(data),
            RELAY_FAULTS="1",
            RELAY_HEARTBEAT_S="1",
            RELAY_TRACE_URL=TRACE_URL,
            PYTHONUNBUFFERED="1",
        )
        env.update(extra_env or {})
        log_path = data / "server.log"
        log = open(log_path, "w+b")
        proc = subprocess.Popen(
            _server_command(port, tuple(args)),
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        base = f"http://127.0.0.1:{port}"
        if _wait_healthy(base, proc):
            try:
                yield base
            finally:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
                log.close()
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(log_path, ARTIFACTS / log_name)
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=5)
        log.close()
        last_log = log_path.read_text(errors="replace")
        if "address already in use" not in last_log.lower():
            break
    pytest.fail(
        f"span-relay did not become healthy; its output:\n{last_log[-4000:]}", pytrace=False
    )


@pytest.fixture(scope="session")
def relay_server(tmp_path_factory, chromium_path):
    """Base URL of a real span-relay server (faults on, a trace URL for links), for the session."""
    with running_server(tmp_path_factory) as base:
        yield base


API_TOKEN = "browser-test-token"


@pytest.fixture(scope="module")
def token_server(tmp_path_factory, chromium_path):
    """A second real server that requires ``Authorization: Bearer <API_TOKEN>``."""
    with running_server(
        tmp_path_factory, {"RELAY_API_TOKEN": API_TOKEN}, log_name="server-token.log"
    ) as base:
        yield base


@pytest.fixture(scope="session")
def api_token() -> str:
    return API_TOKEN


#: how long an ``expect`` waits for the page (tests/browser/*), at most
EXPECT_TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def browser(chromium_path):
    # module scope, not session: sync Playwright runs an event loop in this thread while it
    # is open, and the asyncio tests collected after the browser tests need it gone
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:  # pragma: no cover - the venv has it
        service_missing(
            f"Python Playwright ({exc})",
            "pip install playwright (the browser itself: apt-get install chromium)",
        )
    from playwright.sync_api import expect

    # an assertion waits for the page as long as a loaded 2-core machine may need (a bound
    # on a hang, not a measure: Playwright's own 5 s is too short for Swagger UI or ReDoc
    # rendering while the rest of the suite runs beside it)
    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


class PageProblems:
    def __init__(self):
        self.errors: list[str] = []
        self.csp: list[str] = []
        self.dialogs: list[str] = []
        self.failed_requests: list[str] = []


def _new_page(browser, base_url, viewport, color_scheme="light"):
    context = browser.new_context(
        base_url=base_url, viewport=viewport, reduced_motion="reduce", color_scheme=color_scheme
    )
    page = context.new_page()
    page.set_default_timeout(15_000)
    problems = PageProblems()

    def on_console(msg):
        text = msg.text
        if "Content Security Policy" in text or "Refused to" in text:
            problems.csp.append(text)
        elif msg.type == "error" and "Failed to load resource" not in text:
            problems.errors.append(text)

    def on_dialog(dialog):
        problems.dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("console", on_console)
    page.on("pageerror", lambda exc: problems.errors.append(f"pageerror: {exc}"))
    page.on("dialog", on_dialog)
    page.add_init_script(RECORDER_JS)
    page.problems = problems
    return context, page


@pytest.fixture
def make_page(browser, relay_server):
    """Factory: make_page(viewport=, base_url=, color_scheme=) -> a fresh page on a real server."""
    made = []

    def factory(viewport=None, base_url=None, color_scheme="light"):
        context, page = _new_page(
            browser,
            base_url or relay_server,
            viewport or {"width": 1280, "height": 800},
            color_scheme,
        )
        made.append((context, page))
        return page

    yield factory
    for context, page in made:
        problems = page.problems
        context.close()
        assert not problems.csp, f"CSP violations: {problems.csp}"
        assert not problems.errors, f"page errors: {problems.errors}"
        assert not problems.dialogs, f"dialogs opened (script ran?): {problems.dialogs}"


@pytest.fixture
def page(make_page):
    return make_page()


@pytest.fixture(scope="session")
def trace_url() -> str:
    """The RELAY_TRACE_URL the test server runs with (links only; nothing listens there)."""
    return TRACE_URL


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def shot(artifacts):
    """shot(page, name, full_page=False): save a screenshot under tests/browser/artifacts/."""

    def take(page, name, full_page=False):
        path = artifacts / f"{name}.png"
        page.screenshot(path=str(path), full_page=full_page, animations="disabled")
        return path

    return take
