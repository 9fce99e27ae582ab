"""Stack room for the walks that recurse: export, through the plugins' callbacks, and the
nested (1.3) text of a document, which JSON parsers and the 1.3 reader and writer read and
write a level at a time.

A 1.3 document nests a node's object in its parent's, so a tree of the deepest depth the format
allows (512 levels) is JSON about 1,030 levels deep, which the standard library's parser (a C
recursion checked against Python's limit) refuses at the default limit of 1000; the reader and
the writer themselves take two or three frames per level. :func:`nested_room` makes room for
that, for the length of one read or write.

trama's other walks of a tree (validation, calls, import, the execution plans) are iterative, and
runtimes run a deep document without recursing per level. Export cannot be: an object exports
its children by calling ``ctx.child``, which calls the child's ``to_node`` or exporter, which
calls ``ctx.child`` again; that protocol is what lets any framework plug in, and each level of
the object tree costs a few Python frames of the exporter's. A document nests at most
:data:`~trama.format._names.MAX_NODE_DEPTH` (512) levels, which at the frames a framework's
exporter spends per level (torch's: about six) can pass Python's default limit of 1000.

:class:`StackRoom` makes room for that and nothing more: before the first level, for a walk of
the whole tree at two frames per level (``torch.fx`` lists every submodule of the root, by
recursion); then, while the export runs, it watches how many frames each level takes, and where
the levels still allowed would not fit under the recursion limit, it raises the limit, by what
they need, for the length of the export. Exports of real models, from a shallow stack, never
change it. The limit is interpreter-wide, so raisers take
turns through a lock and the last one out puts the original value back; no thread ever sees it
lowered under its feet.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from functools import wraps
from types import FrameType, TracebackType
from typing import ParamSpec, TypeVar

from trama.format._names import MAX_NODE_DEPTH

__all__ = ["StackRoom", "in_nested_room", "nested_room", "stack_depth"]

_lock = threading.Lock()
_holders = 0
_original: int | None = None

#: Frames kept free beyond what the remaining levels need (the framework's own calls at the
#: bottom: a leaf's exporter, tensor conversion).
_MARGIN = 200
#: Frames per level made room for before the first level is entered.
_FIRST_WALK = 2


def stack_depth() -> int:
    """How many Python frames are on the calling thread's stack (linear in that depth: call it
    rarely)."""
    depth = 0
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth


class StackRoom:
    """Room under the recursion limit for a walk of at most ``levels`` levels (a context manager;
    see the module doc). Call :meth:`at_level` as each level is entered: every ``check_every``
    levels it measures the stack and raises the limit if the levels left would not fit."""

    def __init__(self, levels: int, *, check_every: int = 8, first_walk: int = _FIRST_WALK) -> None:
        self._levels = levels
        self._every = check_every
        self._first_walk = first_walk
        self._base = 0

    def __enter__(self) -> StackRoom:
        global _holders, _original
        with _lock:
            if _holders == 0:
                _original = sys.getrecursionlimit()
            _holders += 1
        self._base = stack_depth()
        # Before the first level: room for a framework's walk of the whole tree (torch.fx lists
        # every submodule, a frame per level), which comes before any level can be measured.
        self._ensure(self._base + self._first_walk * self._levels + _MARGIN)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        global _holders, _original
        with _lock:
            _holders -= 1
            if _holders == 0 and _original is not None:
                sys.setrecursionlimit(_original)
                _original = None

    def at_level(self, level: int) -> None:
        """Level ``level`` (1 for the root) is being entered."""
        if level < 2 or (level != 2 and level % self._every):
            return
        depth = stack_depth()
        per_level = max(1, (depth - self._base) // (level - 1))
        self._ensure(depth + per_level * max(0, self._levels - level) + _MARGIN)

    @staticmethod
    def _ensure(needed: int) -> None:
        if needed > sys.getrecursionlimit():
            with _lock:
                if needed > sys.getrecursionlimit():
                    sys.setrecursionlimit(needed)


#: Frames (or C recursion levels) a level of a nested document takes at most: the JSON parser's
#: two (a node's object, its ``nodes`` array), the reader's and the writer's three.
NESTED_FRAMES_PER_LEVEL = 4


def nested_room() -> StackRoom:
    """Room to parse, read or write a nested document as deep as the format allows."""
    return StackRoom(MAX_NODE_DEPTH + 8, first_walk=NESTED_FRAMES_PER_LEVEL)


_P = ParamSpec("_P")
_R = TypeVar("_R")


def in_nested_room(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function`` run in :func:`nested_room`: a reader, which parses a document in the room
    and must then have it too for whatever reads what was parsed (a message that shows a value
    nested as deep as the parser allowed)."""

    @wraps(function)
    def roomy(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with nested_room():
            return function(*args, **kwargs)

    return roomy
