"""Retrieval-quality evaluations over public benchmarks: ``python -m memlens.eval.locomo --data FILE``."""
