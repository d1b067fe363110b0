"""Benchmarks of span-relay (GitHub issue 8): python -m tests.bench --help."""
