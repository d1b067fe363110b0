"""Spans to events (relay/mapping/): rules, the one feed loop, order, foreign runs, answers."""
