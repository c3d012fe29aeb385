"""Reliability tools run as scripts: ``python -m memlens.tools.stress`` (concurrent writers) and
``python -m memlens.tools.crash`` (kill -9 in the middle of operations). Each prints its figures and exits non-zero
when a promise was broken (a write lost, a lock error reaching a caller, a damaged or half-written store)."""
