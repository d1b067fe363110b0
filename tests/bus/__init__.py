"""Per-turn logs (relay/bus/): the in-process bus. The Redis bus is tested with replicas
(tests/replicas).
"""
