"""Benchmarks of the engine, the parser, the request path and memory: `python -m bench`."""
