"""Random edits of a parsed JSON document, for the tests that hold two judges of one document
(the JSON Schema run whole and part by part, the proof and the schema) to the same verdict."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any


def paths_in(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path into ``doc`` (keys and indexes), the document's own first."""
    yield prefix
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from paths_in(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from paths_in(value, (*prefix, index))


def random_edit(
    doc: Any,
    rng: random.Random,
    values: Sequence[Any],
    extra_key: Callable[[random.Random], str] = lambda rng: "extra",
) -> None:
    """One edit of ``doc`` in place, somewhere below its top: a value replaced by one of
    ``values`` (7 in 10), a member removed, or a member ``extra_key(rng)`` added to an object."""
    path = rng.choice(list(paths_in(doc))[1:])
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    roll = rng.random()
    if roll < 0.7:
        parent[path[-1]] = copy.deepcopy(rng.choice(values))
    elif roll < 0.85 and isinstance(parent, dict):
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[extra_key(rng)] = 1
