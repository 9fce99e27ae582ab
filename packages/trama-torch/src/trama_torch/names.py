"""Node names from torch attribute names: valid, stable, readable, and restorable.

torch accepts any attribute name without a dot (``add_module("block1-0", ...)`` in RegNet, a
``ModuleDict`` key with a space), while a node id segment is ``[A-Za-z0-9_]+``
(``docs/format.md``, "Names from other frameworks"). The rule:

* a name that already is a valid segment is kept as it is (``fc1``, ``0``, ``layers_3``);
* otherwise every character outside ``[A-Za-z0-9_]`` becomes ``_`` (``block1-0`` → ``block1_0``);
* if the result is taken in the scope (by a sibling whose name it already was, or an earlier
  escaped one), ``_1``, ``_2``, … is appended, the first that is free.

The escaped node keeps the original in its metadata, ``{"torch_name": "block1-0"}``, and the
torch importer registers the module under that name again, so ``state_dict`` keys are the
original's. Names are reserved in a fixed order (a scope's module attributes first, in the order
the model calls them, then function nodes), so the same model always gets the same ids.
"""

from __future__ import annotations

import re

__all__ = ["TORCH_NAME", "Names", "escape", "is_segment", "local_name"]

#: The node metadata key that keeps a torch attribute name the node id had to change.
TORCH_NAME = "torch_name"

_SEGMENT = re.compile(r"[A-Za-z0-9_]+")
_OUTSIDE = re.compile(r"[^A-Za-z0-9_]")


def is_segment(name: str) -> bool:
    """Whether ``name`` is a valid node id segment (or port name) as it is."""
    return _SEGMENT.fullmatch(name) is not None


def escape(name: str) -> str:
    """``name`` with every character outside ``[A-Za-z0-9_]`` replaced by ``_`` (``"_"`` if empty)."""
    return _OUTSIDE.sub("_", name) or "_"


class Names:
    """The names taken in one scope (node names, or the ports and outputs of one node)."""

    def __init__(self, taken: set[str] | None = None) -> None:
        self.taken: set[str] = set(taken or ())

    def fresh(self, name: str) -> str:
        """``name`` escaped, made unique in the scope, and taken."""
        base = escape(name)
        candidate, n = base, 1
        while candidate in self.taken:
            candidate, n = f"{base}_{n}", n + 1
        self.taken.add(candidate)
        return candidate


#: torch.export's count at the end of a node's name (``pow_5``: the program's sixth ``pow``).
_COUNT = re.compile(r"_[0-9]+\Z")


def local_name(name: str) -> str:
    """A node's name without torch.export's program-wide count (``pow_5`` -> ``pow``): the
    scope counts its own (``pow``, ``pow_1``… through :class:`~trama_torch.names.Names`), so
    the second ``view`` of an attention block is ``view_1`` whatever ran before it, and adding a
    layer renames nothing after it."""
    return _COUNT.sub("", name) or name
