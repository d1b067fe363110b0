"""``local_time``: the demo's browser-side tool (a client-executed tool, relay.client_tool).

The server cannot know the person's clock: the SPA answers it from the browser (its date,
time and time zone), and the turn goes on with that result (span_relay_demo/nodes/browser.py).
"""

from __future__ import annotations

from relay import client_tool

local_time = client_tool(
    "local_time",
    "The person's local date and time and time zone, read from their browser.",
    {"type": "object", "properties": {}},
)
