"""Retrieval-quality evaluations over public benchmarks: ``python -m core.eval.locomo --data FILE``."""
