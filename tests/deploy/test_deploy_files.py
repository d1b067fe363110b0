"""Static checks of the deployment files (no Docker engine, no collector binary here)."""

from __future__ import annotations

import fnmatch
import re
import shlex
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="pip install pyyaml")

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "deploy" / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
COMPOSE = REPO / "deploy" / "compose.yaml"
CLOUDRUN = REPO / "deploy" / "cloudrun.yaml"
RUNBOOK = REPO / "deploy" / "RUNBOOK.md"
COLLECTOR = REPO / "relay" / "collector" / "collector.yaml"
LOADBALANCING = REPO / "relay" / "collector" / "loadbalancing.yaml"

SECRET_PATTERNS = (".env", ".env.*", "*.pem", "*.key", "secrets", "id_rsa*", ".netrc")
# The slowest turn the relay lets run (RELAY_TURN_TIMEOUT_S default) and the server's
# own limit above it (RELAY_SERVER_TIMEOUT_S default): the proxy must outlast both.
TURN_TIMEOUT_S = 120
SERVER_TIMEOUT_S = 300


# --------------------------------------------------------------------------- Dockerfile


def dockerfile_instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with line continuations joined, comments dropped."""
    out: list[tuple[str, str]] = []
    buf = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        buf = ""
    return out


def stages(instructions: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for ins in instructions:
        if ins[0] == "FROM":
            result.append([])
        if result:
            result[-1].append(ins)
    return result


def resolve_args(text: str, instructions: list[tuple[str, str]]) -> str:
    args = {}
    for word, rest in instructions:
        if word == "ARG" and "=" in rest:
            k, _, v = rest.partition("=")
            args[k.strip()] = v.strip()
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m[1] or m[2], m[0]), text)


def copy_sources(rest: str) -> tuple[list[str], bool]:
    """COPY's source paths and whether it copies from another stage."""
    parts = shlex.split(rest)
    from_stage = any(p.startswith("--from=") for p in parts)
    paths = [p for p in parts if not p.startswith("--")]
    return paths[:-1], from_stage


def test_dockerfile_is_multistage_on_python_311_slim():
    ins = dockerfile_instructions()
    froms = [resolve_args(rest, ins).split()[0] for word, rest in ins if word == "FROM"]
    assert len(froms) >= 2, "multi-stage: a build stage and a runtime stage"
    assert all(f == "python:3.11-slim" for f in froms), froms


def test_runtime_stage_runs_as_non_root():
    final = stages(dockerfile_instructions())[-1]
    users = [rest for word, rest in final if word == "USER"]
    assert users, "the runtime stage sets USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), user
    # the data dir belongs to that user (created and chowned before USER)
    runs = " ".join(rest for word, rest in final if word == "RUN")
    assert "/data" in runs and "chown" in runs


def test_port_expose_volume_and_data_dir():
    ins = dockerfile_instructions()
    final = stages(ins)[-1]
    assert ("EXPOSE", "8000") in final
    volumes = " ".join(rest for word, rest in final if word == "VOLUME")
    assert "/data" in volumes
    env = " ".join(rest for word, rest in final if word == "ENV")
    assert re.search(r"RELAY_DATA_DIR=/data\b", env)
    cmd = " ".join(rest for word, rest in final if word in ("CMD", "ENTRYPOINT"))
    assert "span-relay serve" in cmd
    assert "${PORT:-8000}" in cmd, "the command honours $PORT"
    assert "0.0.0.0" in cmd
    assert "exec " in cmd, "exec so that the server is PID 1 and gets SIGTERM"


def test_healthcheck_uses_python_not_curl():
    final = stages(dockerfile_instructions())[-1]
    checks = [rest for word, rest in final if word == "HEALTHCHECK"]
    assert len(checks) == 1
    assert "/healthz" in checks[0] and "urllib" in checks[0]
    assert "curl" not in checks[0] and "wget" not in checks[0]


def test_copy_sources_exist_and_carry_no_secrets():
    ignored = dockerignore_patterns()
    for word, rest in dockerfile_instructions():
        if word not in ("COPY", "ADD"):
            continue
        assert word == "COPY", "use COPY, not ADD"
        sources, from_stage = copy_sources(rest)
        if from_stage:
            continue
        for src in sources:
            assert src not in (".", "./", "*"), "copy named paths, not the whole context"
            assert (REPO / src).exists(), f"COPY source {src} is not in the repository"
            assert not any(fnmatch.fnmatch(Path(src).name, p) for p in SECRET_PATTERNS), src
            assert not is_ignored(src, ignored), f"COPY source {src} is excluded by .dockerignore"


def test_no_secret_baked_into_env_or_args():
    for word, rest in dockerfile_instructions():
        if word in ("ENV", "ARG"):
            assert not re.search(r"(TOKEN|SECRET|PASSWORD|API_KEY)\w*=", rest, re.I), rest


# --------------------------------------------------------------------------- .dockerignore


def dockerignore_patterns() -> list[str]:
    lines = DOCKERIGNORE.read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]


def is_ignored(path: str, patterns: list[str]) -> bool:
    path = path.strip("/").removeprefix("./")
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern[1:] if negate else pattern
        pat = pat.strip("/")
        candidates = [path, *(str(p) for p in Path(path).parents if str(p) != ".")]
        hit = any(
            fnmatch.fnmatch(c, pat) or fnmatch.fnmatch(c, pat.removeprefix("**/"))
            for c in candidates
        )
        if hit:
            ignored = not negate
    return ignored


@pytest.mark.parametrize(
    "path",
    [
        ".git",
        ".venv",
        ".span-relay",
        "node_modules",
        "relay/spa/node_modules",
        ".env",
        ".env.local",
        "tests",
        "relay/__pycache__",
        "secrets",
        "server.key",
        "data.sqlite",
    ],
)
def test_dockerignore_excludes(path):
    assert is_ignored(path, dockerignore_patterns()), path


@pytest.mark.parametrize(
    "path",
    [
        "pyproject.toml",
        "README.md",
        "LICENSE",
        "relay",
        "span_relay_demo",
        "relay/spa",
    ],
)
def test_dockerignore_keeps_what_the_image_needs(path):
    assert not is_ignored(path, dockerignore_patterns()), path


# --------------------------------------------------------------------------- compose


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def env_of(service: dict) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def pinned(image: str) -> bool:
    name, _, tag = image.rpartition(":")
    return bool(name) and "/" not in tag and tag not in ("", "latest")


def test_compose_services_and_pins():
    services = compose()["services"]
    assert {"app", "collector", "jaeger"} <= set(services)
    collector_image = services["collector"]["image"]
    assert collector_image.startswith("otel/opentelemetry-collector-contrib:")
    assert pinned(collector_image), collector_image
    jaeger_image = services["jaeger"]["image"]
    assert jaeger_image.split(":")[0].endswith("jaegertracing/jaeger"), jaeger_image
    assert pinned(jaeger_image) and jaeger_image.rpartition(":")[2].startswith("2."), jaeger_image


def test_compose_app_build_and_wiring():
    services = compose()["services"]
    app = services["app"]
    assert app["build"]["context"] == ".."
    assert app["build"]["dockerfile"] == "deploy/Dockerfile"
    context = COMPOSE.parent / app["build"]["context"]
    assert (context / app["build"]["dockerfile"]).resolve() == DOCKERFILE
    env = env_of(app)
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://collector:4317"
    assert env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc") == "grpc"
    assert env["RELAY_TRACE_URL"] == "http://localhost:16686"
    assert env["RELAY_DATA_DIR"] == "/data"
    assert any(str(v).endswith(":/data") for v in app.get("volumes", []))
    assert any(str(p).endswith(":8000") for p in app.get("ports", []))
    jaeger_ports = [str(p) for p in services["jaeger"].get("ports", [])]
    assert any(p.endswith("16686") for p in jaeger_ports)


def test_compose_collector_mounts_the_config_that_points_at_jaeger_and_the_relay():
    services = compose()["services"]
    mounts = [str(v).split(":") for v in services["collector"]["volumes"]]
    configs = [(COMPOSE.parent / host).resolve() for host, *_ in mounts]
    assert COLLECTOR.resolve() in configs
    container_path = mounts[configs.index(COLLECTOR.resolve())][1]
    command = " ".join(services["collector"].get("command", []))
    assert container_path in command or container_path == "/etc/otelcol-contrib/config.yaml"
    exporters = yaml.safe_load(COLLECTOR.read_text())["exporters"]
    endpoints = {name: cfg.get("endpoint", "") for name, cfg in exporters.items()}
    grpc = [e for n, e in endpoints.items() if n.split("/")[0] == "otlp_grpc"]
    http = [e for n, e in endpoints.items() if n.split("/")[0] == "otlp_http"]
    assert "jaeger:4317" in grpc
    assert any(e.rstrip("/") == "http://app:8000" for e in http)


# --------------------------------------------------------------------------- collector


KINDS = ("receivers", "processors", "exporters", "connectors", "extensions")
DEPRECATED_TYPES = {"otlp": "otlp_grpc", "otlphttp": "otlp_http", "loadbalancing": "load_balancing"}


def component_type(name: str) -> str:
    return name.split("/", 1)[0]


@pytest.fixture(params=[COLLECTOR, LOADBALANCING], ids=lambda p: p.name)
def collector_config(request) -> dict:
    return yaml.safe_load(request.param.read_text())


def test_pipelines_reference_defined_components(collector_config):
    cfg = collector_config
    pipelines = cfg["service"]["pipelines"]
    assert pipelines
    connectors = set(cfg.get("connectors") or {})
    for name, pipe in pipelines.items():
        assert pipe.get("receivers") and pipe.get("exporters"), name
        for r in pipe["receivers"]:
            assert r in (cfg.get("receivers") or {}) or r in connectors, (name, r)
        for p in pipe.get("processors", []):
            assert p in (cfg.get("processors") or {}), (name, p)
        for e in pipe["exporters"]:
            assert e in (cfg.get("exporters") or {}) or e in connectors, (name, e)
    for ext in cfg["service"].get("extensions", []):
        assert ext in (cfg.get("extensions") or {}), ext


def test_memory_limiter_first_then_batch(collector_config):
    for name, pipe in collector_config["service"]["pipelines"].items():
        procs = pipe.get("processors", [])
        assert procs and component_type(procs[0]) == "memory_limiter", (name, procs)
        batches = [i for i, p in enumerate(procs) if component_type(p) == "batch"]
        assert batches and batches[0] > 0, (name, procs)


def test_no_component_defined_but_unused(collector_config):
    cfg = collector_config
    used: dict[str, set[str]] = {k: set() for k in KINDS}
    for pipe in cfg["service"]["pipelines"].values():
        for kind in ("receivers", "processors", "exporters"):
            used[kind].update(pipe.get(kind, []))
    used["extensions"].update(cfg["service"].get("extensions", []))
    for conn in cfg.get("connectors") or {}:
        used["connectors"].add(conn)
        assert conn in used["exporters"] and conn in used["receivers"], conn
    for kind in KINDS:
        defined = set(cfg.get(kind) or {})
        assert defined <= used[kind], f"{kind} defined but unused: {sorted(defined - used[kind])}"


def test_exporters_use_current_type_names(collector_config):
    for name in collector_config.get("exporters") or {}:
        t = component_type(name)
        assert t not in DEPRECATED_TYPES, f"exporter {name}: use {DEPRECATED_TYPES[t]}"


def test_otlp_receiver_on_standard_ports(collector_config):
    protocols = collector_config["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"].endswith(":4317")
    assert protocols["http"]["endpoint"].endswith(":4318")


def test_load_balancing_by_trace_id():
    cfg = yaml.safe_load(LOADBALANCING.read_text())
    lb = [v for k, v in cfg["exporters"].items() if component_type(k) == "load_balancing"]
    assert len(lb) == 1
    lb = lb[0]
    assert lb["routing_key"] == "traceID"
    resolver = lb["resolver"]
    assert set(resolver) & {"static", "dns"}
    if "static" in resolver:
        assert len(resolver["static"]["hostnames"]) >= 2
    assert "otlp" in lb["protocol"]
    assert "endpoint" not in lb["protocol"]["otlp"], "the resolver supplies the endpoints"


def test_collector_configs_say_which_version_they_need():
    assert re.search(r"v0\.144\.0 or later", COLLECTOR.read_text())
    assert re.search(r"v0\.15[3-9]\.\d+ or later", LOADBALANCING.read_text())


# --------------------------------------------------------------------------- Cloud Run


def cloudrun() -> dict:
    return yaml.safe_load(CLOUDRUN.read_text())


def test_cloudrun_service_shape():
    svc = cloudrun()
    assert svc["apiVersion"] == "serving.knative.dev/v1"
    assert svc["kind"] == "Service"
    template = svc["spec"]["template"]
    ann = template["metadata"]["annotations"]
    assert ann["autoscaling.knative.dev/minScale"] == "0"
    assert ann["autoscaling.knative.dev/maxScale"] == "1"
    assert ann["run.googleapis.com/cpu-throttling"] == "false"
    spec = template["spec"]
    assert isinstance(spec["containerConcurrency"], int) and spec["containerConcurrency"] > 1


def test_cloudrun_timeout_closes_the_chain():
    spec = cloudrun()["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in spec["containers"][0].get("env", [])}
    turn = float(env.get("RELAY_TURN_TIMEOUT_S", TURN_TIMEOUT_S))
    server = float(env.get("RELAY_SERVER_TIMEOUT_S", SERVER_TIMEOUT_S))
    assert turn < server < spec["timeoutSeconds"] <= 3600


def test_cloudrun_container_probe_and_port():
    container = cloudrun()["spec"]["template"]["spec"]["containers"][0]
    port = container["ports"][0]
    assert port["containerPort"] == 8000 and port.get("name") == "http1"
    probe = container["startupProbe"]["httpGet"]
    assert probe["path"] == "/healthz" and probe["port"] == 8000
    text = CLOUDRUN.read_text()
    assert "RELAY_BUS=redis://" in text and "RELAY_STORE=postgresql://" in text
    for e in container.get("env", []):
        assert "value" not in e or not re.search(r"TOKEN|SECRET|PASSWORD", e["name"]), e


# --------------------------------------------------------------------------- runbook


@pytest.mark.parametrize(
    "needle",
    [
        "verify-stream",
        "X-Accel-Buffering",
        "proxy_buffering",
        "RELAY_FAULTS=1",
        "Hugging Face",
        "app_port",
        "Cloud Run",
        "Cloudflare",
        "docker compose",
        "16686",
        "sqlite3",
        ".backup",
        "RELAY_HEARTBEAT_S",
        "proxy_read_timeout",
        "RELAY_TURN_TIMEOUT_S",
    ],
)
def test_runbook_covers(needle):
    assert needle in RUNBOOK.read_text()
