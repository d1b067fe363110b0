"""The README's configuration table is the settings' table (relay.settings.SETTINGS):
every RELAY_* setting with its default and its line, and no setting of RelaySettings
documented anywhere else in the README's configuration."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from relay.settings import SETTINGS, RelaySettings, configuration_table

README = Path(__file__).resolve().parents[2] / "README.md"


def _configuration() -> str:
    text = README.read_text()
    return text[text.index("\n## Configuration\n") : text.index("\n## Client-executed tools")]


def _tables(section: str) -> list[str]:
    """The markdown tables of the section, each as its lines (a line break after each)."""
    tables: list[list[str]] = []
    previous = ""
    for line in section.splitlines():
        if line.startswith("|"):
            if not previous.startswith("|"):
                tables.append([])
            tables[-1].append(line)
        previous = line
    return ["".join(f"{line}\n" for line in table) for table in tables]


def test_every_field_is_one_setting() -> None:
    fields = [f.name for f in dataclasses.fields(RelaySettings)]
    assert [row.field for row in SETTINGS] == fields
    names = [row.env for row in SETTINGS]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"RELAY_[A-Z_]+", name) for name in names)
    assert RelaySettings.from_env({}) == RelaySettings(**{r.field: r.default for r in SETTINGS})


def test_readme_table_is_the_settings_table() -> None:
    first, *_ = _tables(_configuration())
    assert first == configuration_table(), (
        "README.md's configuration table differs from relay/settings.py: paste "
        "relay.settings.configuration_table() into it"
    )


def test_each_setting_in_the_readme_with_its_default() -> None:
    first, *_ = _tables(_configuration())
    cells = [line.split(" | ") for line in first.splitlines() if line.startswith("| `")]
    rows = {cell[0].strip("| `"): cell[1] for cell in cells}
    assert set(rows) == {row.env for row in SETTINGS}
    for row in SETTINGS:
        assert rows[row.env] == row.shown_default()


def test_no_setting_is_documented_outside_the_table() -> None:
    """The other tables hold what RelaySettings does not read (serve, the checkpointer, the
    demo, OpenTelemetry), so no default is written in the README twice."""
    _, *others = _tables(_configuration())
    assert others
    settings = {row.env for row in SETTINGS}
    first_column = {
        name
        for table in others
        for line in table.splitlines()
        for name in re.findall(r"`(RELAY_[A-Z_]+)`", line.split(" | ")[0])
    }
    assert first_column  # RELAY_GRAPH, RELAY_CHECKPOINTER, the demo's
    assert not first_column & settings
