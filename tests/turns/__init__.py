"""Runs and their records (relay/turns/): the run manager, start locks, turn and message
stores, idempotency.
"""
