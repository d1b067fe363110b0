"""``span-relay collector-config [NAME]``: the OpenTelemetry Collector configs the wheel
carries (``relay/collector/*.yaml``, package data), printed to stdout.

- ``collector`` (the default): OTLP in, the relay's own spans kept out of the agent's
  traces, batches on to Jaeger and to the relay's OTLP receiver (deploy/compose.yaml
  mounts it);
- ``loadbalancing``: the tier in front of several relays, routing by trace id so that a
  trace's spans all reach one replica (RUNBOOK, "scaled out").
"""

from __future__ import annotations

import sys
from importlib import resources
from typing import IO

#: the configs, by the name the command takes
CONFIGS = ("collector", "loadbalancing")


def config_text(name: str) -> str:
    """The YAML of collector config ``name`` (one of :data:`CONFIGS`), from the package."""
    return resources.files("relay").joinpath("collector", f"{name}.yaml").read_text()


def print_config(name: str, out: IO[str] | None = None) -> int:
    """Print config ``name``; exit status 0, or 2 with a sentence for an unknown name."""
    if name not in CONFIGS:
        print(
            f"span-relay: no collector config {name!r}; choose one of {', '.join(CONFIGS)}",
            file=sys.stderr,
        )
        return 2
    (out or sys.stdout).write(config_text(name))
    return 0
