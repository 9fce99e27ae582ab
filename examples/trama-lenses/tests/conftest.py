"""Shared setup for the trama-lenses tests.

They exercise the pack as users meet it — installed, and found through trama's discovery — so
the distribution must be installed (``pip install -e examples/trama-lenses``). Discovery is
cached per process; ``fresh_discovery`` forgets it around every test, so a plugin host that some
other test (in the repository-wide run) installed by hand cannot leak into these.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from trama.extension import reset_plugins


@pytest.fixture(autouse=True)
def fresh_discovery() -> Iterator[None]:
    reset_plugins()
    yield
    reset_plugins()
