"""The real-model zoo (see README.md): a package, so tests and benchmarks import ``realworld.models``."""
