"""Tests of the benchmark suite (benchmarks/: python -m benchmarks)."""
