"""LangChain's agent-chat-ui, unchanged, against span-relay, in headless Chromium, beside
span-relay's own SPA on the same turn. Opt-in, not part of ``make test``:

    python -m tests.interop.agent_chat_ui --source DIR [--out DIR] [--against langgraph-dev]

``DIR`` is a checkout of github.com/langchain-ai/agent-chat-ui (the app is not on the npm
registry). The first run installs its packages from its own ``pnpm-lock.yaml``
(``npx pnpm@<its packageManager> install --frozen-lockfile``) and builds it (``next build``,
Google Fonts read offline through Next.js's ``NEXT_FONT_GOOGLE_MOCKED_RESPONSES``:
google-fonts-offline.cjs); later runs reuse both. Then it serves this folder's
langgraph.json with ``span-relay serve --config`` (the ``chat`` graph of
tests/interop/langgraph_js and the ``review`` graph of graphs.py, with
``RELAY_CORS_ORIGINS`` naming the app's origin), starts the app with ``next start`` and
points it at span-relay by its own URL parameters (``?apiUrl=...&assistantId=...``), then:

1. sends a message to ``chat`` and waits for the streamed answer; opens the thread list
   (``?chatHistoryOpen=true``) and finds the thread; reloads and sees the thread again;
2. sends one to ``review``, whose interrupt agent-chat-ui draws as its review card, opens
   the same turn (the run's id, from ``Content-Location``) in span-relay's SPA while it
   waits, approves it in agent-chat-ui and sees both pages finish it;
3. prints every HTTP call the app made to span-relay (method, path, status, the stream
   modes it asked for) and the relay's access log (CORS preflights too), and writes the
   screenshots (each page, and both side by side) to ``--out``.

With ``--against langgraph-dev`` the same steps (without the SPA) run against LangGraph's
own Agent Server serving the same graphs (the peer: tests/interop/langgraph_dev.py), which
shows the app's calls and what it draws are the same. It exits 1 when a step fails or a
call the app made was refused. Why it is not in the
suite: its source is on GitHub only, its packages take about 870 MB and its build 450 MB
and one to two minutes of two cores (docs: README, "Your LangGraph frontend")."""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
CONFIG = HERE / "langgraph.json"
FONTS = HERE / "google-fonts-offline.cjs"
ANSWER = "Hello there, friend of LangGraph"  # tests/interop/langgraph_js/graphs.py
SENT = "The refund email is sent to ana@example.com."  # graphs.py
TIMEOUT_MS = 60_000


@dataclass
class Call:
    """One request agent-chat-ui sent to span-relay, as the browser saw it."""

    method: str
    path: str
    status: int | None = None
    stream_mode: list[str] | None = None
    failure: str | None = None
    #: the request's body and the answer's, kept for a refused call only
    body: str | None = None
    answer: str | None = None

    def line(self) -> str:
        status = str(self.status) if self.status is not None else f"failed ({self.failure})"
        modes = f"  stream_mode={self.stream_mode}" if self.stream_mode else ""
        sent = ""
        with contextlib.suppress(ValueError, TypeError):
            body = json.loads(self.body or "null")
            if isinstance(body, dict):
                fields = [k for k in body if k != "stream_mode" and body[k] is not None]
                sent = f"  fields={fields}"
        return f"{self.method:6} {self.path}  -> {status}{modes}{sent}"


@dataclass
class Report:
    calls: list[Call] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    screenshots: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> None:
    with log.open("ab") as out:
        done = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:]
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{tail}")


def prepare(source: Path, logs: Path, report: Report) -> None:
    """Install agent-chat-ui's packages as its lock pins them and build it, each only when
    it has not been done yet."""
    if not (source / "package.json").exists():
        raise SystemExit(
            f"{source}: no agent-chat-ui checkout here (git clone "
            "https://github.com/langchain-ai/agent-chat-ui, then --source that folder)"
        )
    env = dict(os.environ, NEXT_TELEMETRY_DISABLED="1", CI="1")
    if not (source / "node_modules" / ".modules.yaml").exists():
        manager = json.loads((source / "package.json").read_text()).get("packageManager", "")
        pnpm = manager if manager.startswith("pnpm@") else "pnpm"
        started = time.monotonic()
        run(["npx", "-y", pnpm, "install", "--frozen-lockfile"], source, env, logs / "install.log")
        report.timings["install (pnpm, frozen lock)"] = time.monotonic() - started
    if not (source / ".next" / "BUILD_ID").exists():
        env["NEXT_FONT_GOOGLE_MOCKED_RESPONSES"] = str(FONTS)
        started = time.monotonic()
        run(["node_modules/.bin/next", "build"], source, env, logs / "build.log")
        report.timings["next build"] = time.monotonic() - started


def wait_for(url: str, proc: subprocess.Popen[bytes], what: str, log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited: {log.read_text(errors='replace')[-2000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=5).status_code < 500:
                return
        time.sleep(0.3)
    raise SystemExit(f"{what} did not answer at {url}")


@contextlib.contextmanager
def started(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> Iterator[Any]:
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextlib.contextmanager
def agent_server(ui: str, logs: Path, against: str) -> Iterator[str]:
    """The server agent-chat-ui talks to, serving CONFIG's graphs: span-relay
    (``serve --config``, the app's origin in RELAY_CORS_ORIGINS), or LangGraph's own
    ``langgraph dev`` (tests/interop/langgraph_dev.py; its CORS allows any origin) on a
    copy of them; its base URL."""
    if against == "langgraph-dev":
        from tests.interop.langgraph_dev import langgraph_dev

        project = logs / "project"
        project.mkdir()
        shutil.copy(HERE / "graphs.py", project / "graphs.py")
        shutil.copy(HERE.parent / "langgraph_js" / "graphs.py", project / "chat_graphs.py")
        config = json.loads(CONFIG.read_text())
        config["graphs"]["chat"] = "./chat_graphs.py:chat"
        (project / "langgraph.json").write_text(json.dumps(config))
        with langgraph_dev(project, logs) as url:
            yield url
        return
    port = free_port()
    relay = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
    env.update(
        PYTHONPATH=str(REPO),
        RELAY_DATA_DIR=str(logs / "relay-data"),
        RELAY_CORS_ORIGINS=ui,
        OTEL_TRACES_EXPORTER="none",
    )
    cmd = [sys.executable, "-m", "relay.cli", "serve", "--config", str(CONFIG)]
    cmd += ["--host", "127.0.0.1", "--port", str(port)]
    with started(cmd, REPO, env, logs / "server.log") as proc:
        wait_for(f"{relay}/info", proc, "span-relay", logs / "server.log")
        yield relay


@contextlib.contextmanager
def servers(source: Path, logs: Path, against: str) -> Iterator[tuple[str, str]]:
    """The Agent Server (:func:`agent_server`) and agent-chat-ui's ``next start``: their
    base URLs."""
    ui = f"http://127.0.0.1:{free_port()}"
    ui_env = dict(os.environ, NEXT_TELEMETRY_DISABLED="1")
    ui_cmd = ["node_modules/.bin/next", "start", "-H", "127.0.0.1", "-p", ui.rsplit(":", 1)[1]]
    with (
        agent_server(ui, logs, against) as server,
        started(ui_cmd, source, ui_env, logs / "next.log") as ui_proc,
    ):
        wait_for(ui, ui_proc, "next start", logs / "next.log")
        yield server, ui


def record_calls(page: Any, relay: str, report: Report) -> None:
    """Every request of ``page`` to ``relay`` into report.calls (CORS preflights are not
    shown to pages: the relay's access log has them)."""
    pending: dict[int, Call] = {}

    def on_request(request: Any) -> None:
        if not request.url.startswith(relay):
            return
        call = Call(request.method, request.url[len(relay) :], body=request.post_data)
        with contextlib.suppress(ValueError, TypeError):
            body = json.loads(request.post_data or "null")
            if isinstance(body, dict) and "stream_mode" in body:
                modes = body["stream_mode"]
                call.stream_mode = modes if isinstance(modes, list) else [modes]
        pending[id(request)] = call
        report.calls.append(call)

    def on_response(response: Any) -> None:
        call = pending.get(id(response.request))
        if call is not None:
            call.status = response.status
            if response.status >= 400:
                with contextlib.suppress(Exception):
                    call.answer = response.text()

    def on_failed(request: Any) -> None:
        call = pending.get(id(request))
        if call is not None and call.status is None:
            call.failure = request.failure

    page.on("request", on_request)
    page.on("response", on_response)
    page.on("requestfailed", on_failed)


def side_by_side(browser: Any, left: Path, right: Path, out: Path, title: str) -> None:
    """One picture of two screenshots, drawn by the browser itself (no image library)."""
    images = "".join(
        f'<figure><figcaption>{caption}</figcaption><img src="data:image/png;base64,'
        f'{base64.b64encode(path.read_bytes()).decode()}"></figure>'
        for caption, path in ((f"agent-chat-ui: {title}", left), ("span-relay SPA", right))
    )
    page = browser.new_page(viewport={"width": 2600, "height": 900})
    page.set_content(
        "<style>body{margin:0;display:flex;gap:16px;padding:12px;background:#ddd;"
        "font:15px sans-serif}figure{margin:0}img{width:1280px;border:1px solid #999}"
        f"figcaption{{padding:4px 0}}</style>{images}"
    )
    page.screenshot(path=str(out), full_page=True)
    page.close()


def spa_on_turn(browser: Any, relay: str, run_id: str, report: Report) -> Any:
    """span-relay's SPA with the turn ``run_id`` opened by its id (the panel of Turns),
    once it shows the turn waiting for its review."""
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.set_default_timeout(TIMEOUT_MS)
    page.on("pageerror", lambda e: report.problems.append(f"SPA: {e}"))
    page.goto(f"{relay}/?graph=review")
    page.locator("#history-open").click()
    page.locator("#open-turn-id").fill(run_id)
    page.locator("#open-turn-go").click()
    expect(page.locator("#outcome-text")).to_contain_text("wait", ignore_case=True)
    return page


def drive(relay: str, ui: str, chromium: str, out: Path, report: Report, spa: bool = True) -> None:
    """The steps of the module docstring; ``spa``: the relay's SPA beside it (span-relay
    only)."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)

    def ui_url(assistant: str, **more: str) -> str:
        return f"{ui}/?" + urlencode({"apiUrl": relay, "assistantId": assistant, **more})

    def shot(page: Any, name: str) -> Path:
        path = out / name
        page.screenshot(path=str(path))
        report.screenshots.append(path)
        return path

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        viewport = {"width": 1280, "height": 800}
        chat = browser.new_page(viewport=viewport)
        chat.set_default_timeout(TIMEOUT_MS)
        record_calls(chat, relay, report)
        chat.on("pageerror", lambda e: report.problems.append(f"agent-chat-ui: {e}"))

        # 1. a message to `chat`: the streamed answer, the thread list, a reload
        started_at = time.monotonic()
        chat.goto(ui_url("chat", chatHistoryOpen="true"))
        box = chat.get_by_placeholder("Type your message...")
        box.fill("Hi there")
        box.press("Enter")
        expect(chat.get_by_text(ANSWER)).to_be_visible()
        report.timings["chat: message to answer shown"] = time.monotonic() - started_at
        expect(chat).to_have_url(re.compile(r"threadId="))
        thread_id = dict(
            part.split("=", 1) for part in urlsplit(chat.url).query.split("&") if "=" in part
        )["threadId"]
        # the list reads POST /threads/search a few seconds after the thread's creation
        expect(chat.get_by_role("button", name="Hi there")).to_be_visible()
        shot(chat, "agent-chat-ui-chat.png")
        chat.reload()
        expect(chat.get_by_text(ANSWER)).to_be_visible()
        expect(chat.get_by_role("button", name="Hi there")).to_be_visible()
        # a second message on the same thread: useStream sends the thread's head checkpoint
        box.fill("And once more?")
        box.press("Enter")
        expect(chat.get_by_text(ANSWER)).to_have_count(2)
        expect(chat.get_by_role("button", name="Cancel")).to_have_count(0)  # the run ended
        shot(chat, "agent-chat-ui-chat-reloaded.png")
        print(f"chat thread {thread_id}: answered, listed, shown after a reload, answered again")

        # 2. a message to `review`: its interrupt, the same turn in the SPA, the approval
        review = browser.new_page(viewport=viewport)
        review.set_default_timeout(TIMEOUT_MS)
        record_calls(review, relay, report)
        review.on("pageerror", lambda e: report.problems.append(f"agent-chat-ui: {e}"))
        review.goto(ui_url("review"))
        box = review.get_by_placeholder("Type your message...")
        box.fill("Please refund Ana")
        with review.expect_response(
            lambda r: r.url.startswith(relay) and r.url.endswith("/runs/stream")
        ) as streamed:
            box.press("Enter")
        location = streamed.value.headers.get("content-location", "")
        run_id = location.rstrip("/").rsplit("/", 1)[-1]
        if not run_id:
            raise AssertionError(f"runs/stream answered without Content-Location: {location!r}")
        approve = review.get_by_role("button", name="Approve")
        expect(approve).to_be_visible()
        expect(review.get_by_text("send_email").first).to_be_visible()
        waiting = shot(review, "agent-chat-ui-interrupt.png")

        if spa:
            page = spa_on_turn(browser, relay, run_id, report)
            spa_waiting = shot(page, "spa-interrupt.png")
            pair = out / "side-by-side-interrupt.png"
            side_by_side(browser, waiting, spa_waiting, pair, "the review waits")
            report.screenshots.append(pair)

        approve.click()
        expect(review.get_by_text(SENT)).to_be_visible()
        done = shot(review, "agent-chat-ui-approved.png")
        if spa:
            expect(page.get_by_text(SENT).first).to_be_visible()
            spa_done = shot(page, "spa-approved.png")
            pair = out / "side-by-side-approved.png"
            side_by_side(browser, done, spa_done, pair, "approved")
            report.screenshots.append(pair)
        print(f"review turn {run_id}: interrupt shown, approved, answered")
        browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.interop.agent_chat_ui")
    parser.add_argument(
        "--source",
        type=Path,
        default=Path(os.environ.get("AGENT_CHAT_UI_DIR", REPO / ".span-relay" / "agent-chat-ui")),
        help="a checkout of github.com/langchain-ai/agent-chat-ui ($AGENT_CHAT_UI_DIR)",
    )
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img" / "agent-chat-ui")
    parser.add_argument(
        "--against",
        choices=["span-relay", "langgraph-dev"],
        default="span-relay",
        help="the server: span-relay, or LangGraph's own langgraph dev (the peer)",
    )
    parser.add_argument(
        "--chromium", default=os.environ.get("CHROMIUM_PATH") or shutil.which("chromium")
    )
    args = parser.parse_args(argv)
    if not args.chromium:
        raise SystemExit("no chromium (apt-get install chromium, or --chromium PATH)")
    if args.against == "langgraph-dev":
        args.out = args.out / "langgraph-dev"
    args.out.mkdir(parents=True, exist_ok=True)
    report = Report()
    logs = Path(tempfile.mkdtemp(prefix="agent-chat-ui-"))
    source = args.source.resolve()
    prepare(source, logs, report)
    failed: BaseException | None = None
    with servers(source, logs, args.against) as (relay, ui):
        print(f"{args.against} {relay}, agent-chat-ui {ui} (logs: {logs})")
        try:
            drive(relay, ui, args.chromium, args.out, report, spa=args.against == "span-relay")
        except Exception as exc:  # the calls so far are printed below all the same
            failed = exc
    print(f"\nagent-chat-ui's calls to {args.against} (as the browser saw them):")
    for call in report.calls:
        print("  " + call.line())
    if args.against == "span-relay":  # langgraph dev logs each request its own way
        print("\nspan-relay's access log (CORS preflights too):")
        for line in (logs / "server.log").read_text(errors="replace").splitlines():
            if "uvicorn.access" in line:
                print("  " + line.split("uvicorn.access: ", 1)[-1])
    print("\ntimings:")
    for what, seconds in report.timings.items():
        print(f"  {what}: {seconds:.1f} s")
    print("\nscreenshots:")
    for path in report.screenshots:
        print(f"  {path}")
    refused = [c for c in report.calls if c.status is None or c.status >= 400]
    for call in refused:
        report.problems.append(
            f"refused or failed: {call.line()}\n  sent: {call.body}\n  answer: {call.answer}"
        )
    if failed is not None:
        report.problems.append(f"a step failed: {failed!r}")
    for problem in report.problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
