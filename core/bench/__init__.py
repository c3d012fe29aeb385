"""Benchmarks of speed and scale: ``python -m memlens.bench`` (see the README's "Benchmarks" section)."""
