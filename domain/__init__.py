"""Nodeau's pure core: every decision over values, with no I/O.

Nothing in this package reads a clock, the environment, a file, a socket or a
card. Time, randomness and hardware readings come in as arguments; decisions
go out as values (attrs frozen classes) or as ``returns`` Results whose
failure side is a typed :class:`~nodeau.domain.refusals.Refusal`.
"""
