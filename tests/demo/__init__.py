"""The demo support agent (agent/): its graph, model, retrieval, guardrails, refund ledger
and faults.
"""
