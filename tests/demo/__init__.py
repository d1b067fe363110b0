"""The demo support agent (span_relay_demo/): its graph, model, retrieval, guardrails, refund ledger
and faults.
"""
