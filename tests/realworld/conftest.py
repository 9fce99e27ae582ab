"""One capture of each zoo model per test run, shared by every test that looks at it.

``zoo_capture`` is a session-scoped fixture parametrized over the zoo: pytest groups the tests
that take it by model, so each model is built and exported once, every test of that model runs
on the same document, and the model is released before the next one is built (a parametrized
fixture of a wide scope keeps one instance alive at a time), which keeps the memory of the run
at one model's.
"""

from __future__ import annotations

import pytest

from realworld.captures import ZooCapture, capture
from realworld.models import ZOO


@pytest.fixture(scope="session", params=ZOO, ids=lambda entry: entry.name)
def zoo_capture(request: pytest.FixtureRequest) -> ZooCapture:
    return capture(request.param)
