"""Benchmarks of speed and scale: ``python -m core.bench`` (see the README's "Benchmarks" section)."""
