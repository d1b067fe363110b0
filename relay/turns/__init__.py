"""Turns: the runs (:mod:`relay.turns.runs`), their records (:mod:`relay.turns.records`,
:mod:`relay.turns.sqlite`, :mod:`relay.turns.postgres`), what a run answers
(:mod:`relay.turns.response`), how a turn whose log is gone says how it ended
(:mod:`relay.turns.recovery`), the leases that end a turn whose instance is gone
(:mod:`relay.turns.leases`), who a thread belongs to (:mod:`relay.turns.threads`), saved
answers (:mod:`relay.turns.messages`) and the thread locks of replicas
(:mod:`relay.turns.locks`)."""
