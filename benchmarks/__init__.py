"""Reproducible performance measurements of agentops (``benchmarks/run.py``; see README.md)."""
