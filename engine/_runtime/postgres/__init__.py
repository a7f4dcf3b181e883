"""Coordination of several processes on one PostgreSQL database.

Each piece implements a protocol of ``engine._runtime.ports`` with rows every process sees:
the process's lease (:mod:`.lease`), Attribute lock rows (:mod:`.locks`) and Step claims
(:mod:`.claims`). Commits claim the Steps they queue for the committing process (see
``unit_statements.CLAIMANT``), so a process runs what it queued without another round trip; the
claims of a process whose lease expired are taken over by the others.
"""
