"""Spans in (relay/ingest/): the live span processor, its reading of SDK spans, trace files."""
