"""``span-relay collector-config``: the collector configs come from the package (as the
wheel carries them), byte for byte the files of relay/collector/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from relay.cli import main

COLLECTOR = Path(__file__).resolve().parents[2] / "relay" / "collector"


@pytest.mark.parametrize("name", ["collector", "loadbalancing"])
def test_each_config_is_printed_as_the_package_holds_it(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["collector-config", name]) == 0
    printed = capsys.readouterr().out
    assert printed == (COLLECTOR / f"{name}.yaml").read_text()
    assert "receivers" in yaml.safe_load(printed)


def test_the_default_is_the_collector_of_the_compose_file() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "relay.cli", "collector-config"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == (COLLECTOR / "collector.yaml").read_text()


def test_an_unknown_name_is_one_sentence_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["collector-config", "jaeger"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "span-relay: no collector config 'jaeger'; choose one of collector, loadbalancing\n"
    )
