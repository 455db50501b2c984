"""Benchmark scripts; run them as files (see each docstring)."""
