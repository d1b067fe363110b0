"""Bytes out (relay/delivery/): SSE and NDJSON streams, AG-UI encoding, negotiation,
reconnects, fan-out, replay streams.
"""
