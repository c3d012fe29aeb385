"""Reliability tools run as scripts: ``python -m core.tools.stress`` (concurrent writers) and
``python -m core.tools.crash`` (kill -9 in the middle of operations). Each prints its figures and exits non-zero
when a promise was broken (a write lost, a lock error reaching a caller, a damaged or half-written store)."""
